"""End to end on this machine: a real guest per cell for vm and vmcn, booted by libvirt under
KVM where it is usable and under QEMU's emulator (TCG) elsewhere, then torn down."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_run import read_samples, run_lab_playbook

from tests import skips

pytestmark = pytest.mark.lab

GUEST_IMAGE = Path("/var/lib/platbench/guest/current.json")
VM_STATE = Path("/var/lib/platbench/vms")
# One pinned 2-vCPU cell per guest platform, a few steps (under TCG the smoke experiment's
# `emulated` subset applies on top: the same cells, 10 steps). The guests train with PyTorch: the test is
# of the guest's plumbing, not of a framework (both run on bm and cn elsewhere), and under TCG TensorFlow's
# import and graph building took about a minute more per guest.
OVERRIDES = {
    "platforms": ["vm", "vmcn"],
    "scaleup": [2],
    "cpu_config": ["pin"],
    "repeats": 1,
    "params": {"warmup_steps": 1, "steps": 5, "batch_size": 16, "framework": "torch"},
}
# The guest run trains on JPEG files the host generates: the guests read them from a read-only data disk.
DATA_OVERRIDES = {
    **OVERRIDES,
    "dataset": {"generator": "imagenet", "args": {"images": 48, "classes": 2, "image_size": 40}},
    "params": {**OVERRIDES["params"], "data": "real"},
}


def domains():
    listing = subprocess.run(
        ["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [name for name in listing.stdout.split() if name.startswith("platbench-")]


def guest_processes():
    found = subprocess.run(
        ["pgrep", "-f", "qemu-system.*guest=platbench-"], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


def port_is_closed(port):
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", int(port))) != 0


def assert_nothing_left():
    assert domains() == []
    assert guest_processes() == []
    assert not VM_STATE.exists() or list(VM_STATE.iterdir()) == []


@pytest.fixture(scope="module")
def guest_lab(lab):
    skips.require(commands=["qemu-system-x86_64"], by="the lab (platbench.lab.kvm_host, run by site.yml)")
    assert GUEST_IMAGE.is_file(), f"site.yml built no guest image ({GUEST_IMAGE}); see its platform summary"
    facts = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "platbench.lab.host_facts"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    accelerator = json.loads(facts.stdout.split("=>", 1)[1])["ansible_facts"]["platbench"]["vm_accelerator"]
    return {"accelerator": accelerator, "image": json.loads(GUEST_IMAGE.read_text())}


@pytest.fixture(scope="module")
def guest_run(guest_lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guests")
    results = tmp / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp,
        {
            "experiment": "smoke",
            "campaign": "it-guests",
            "platbench_results_dir": str(results),
            "experiment_overrides": DATA_OVERRIDES,
        },
    )
    assert runner.rc == 0, "%s\n%s" % (runner.failed_messages(), runner.output[-6000:])
    return {**guest_lab, "samples": read_samples(results / "it-guests")}


def throughput(samples, platform):
    found = [s for s in samples if s["labels"]["platform"] == platform and s["metric"] == "throughput"]
    failed = [s["metadata"].get("error") for s in samples if s["metric"] == "failed"]
    assert len(found) == 1, failed
    return found[0]


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_guest_cells_train_and_say_how_they_were_virtualized(guest_run, platform):
    sample = throughput(guest_run["samples"], platform)
    meta = sample["metadata"]
    assert sample["value"] > 0 and sample["unit"] == "images/sec"
    assert sample["labels"]["scenario"] == f"{platform}/2/pin/cpu"
    # The host's view: the accelerator, and what runs the vCPU threads.
    assert meta["accelerator"] == guest_run["accelerator"]
    assert meta["vcpu_thread_kind"] == guest_run["accelerator"].upper()
    assert sample["labels"].get("emulated", False) == (guest_run["accelerator"] == "tcg")
    # The guest's view: a virtual machine with exactly the scenario's two CPUs.
    assert meta["hypervisor"] == ("kvm" if guest_run["accelerator"] == "kvm" else "qemu")
    assert meta["cpus_allowed_count"] == 2 and meta["cpuset"] == "0-1"
    assert meta["guest_rootfs"] == guest_run["image"]["rootfs_id"]
    assert "hypervisor" in meta["cpu_flags_of_interest"]


def test_vcpus_are_pinned_one_to_one_on_the_host(guest_run):
    for platform in ("vm", "vmcn"):
        meta = throughput(guest_run["samples"], platform)["metadata"]
        assert meta["vcpu_pins_requested"] == "0,1" and meta["emulator_pins_requested"] == "0,1"
        # Each vCPU thread of QEMU, as the host kernel reports its affinity.
        assert meta["vcpu_affinity"] == {"0": "0", "1": "1"}


def test_vm_runs_a_process_and_vmcn_a_pinned_container_of_the_cn_image(guest_run):
    vm = throughput(guest_run["samples"], "vm")["metadata"]
    vmcn = throughput(guest_run["samples"], "vmcn")["metadata"]
    # virt names the container where there is one, else the hypervisor: a guest's own, as its accelerator says.
    hypervisor = "kvm" if guest_run["accelerator"] == "kvm" else "qemu"
    assert vm["launcher"] == "ssh" and vm["virt"] == hypervisor and not vm.get("container_id")
    assert vmcn["launcher"] == "docker" and vmcn["virt"] == "docker" and vmcn["container_id"]
    assert vmcn["engine_cpuset_cpus"] == "0,1" and vmcn["engine_network_mode"] == "none"
    assert vmcn["image_id"] == guest_run["image"]["container_image_id"]


def test_guests_read_the_generated_dataset_from_a_read_only_disk(guest_run):
    disks = set()
    for platform in ("vm", "vmcn"):
        sample = throughput(guest_run["samples"], platform)
        assert sample["labels"]["data"] == "real"
        disks.add(sample["metadata"]["guest_data_disk"])
    # One disk made from the host's dataset directory, shared by both guests, kept for the next campaign.
    (disk,) = disks
    assert disk.endswith(".pbdata.img") and Path(disk).is_file()
    assert Path(disk.removesuffix(".pbdata.img")).is_dir()
    label = subprocess.run(["blkid", "-o", "value", "-s", "LABEL", disk], capture_output=True, text=True, check=True)
    assert label.stdout.strip() == "pbdata"


def test_every_guest_domain_process_and_port_is_gone(guest_run):
    assert_nothing_left()
    for platform in ("vm", "vmcn"):
        assert port_is_closed(throughput(guest_run["samples"], platform)["metadata"]["ssh_port"])


def test_a_guest_that_never_answers_is_recorded_failed_with_its_console(guest_lab, tmp_path):
    results = tmp_path / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp_path,
        {
            "experiment": "smoke",
            "campaign": "it-noboot",
            "platbench_results_dir": str(results),
            "vm_boot_timeout": 3,
            "experiment_overrides": {**OVERRIDES, "platforms": ["vm"]},
        },
    )
    assert runner.rc == 0, runner.failed_messages()
    samples = read_samples(results / "it-noboot")
    assert [s["metric"] for s in samples] == ["failed"]
    error = samples[0]["metadata"]["error"]
    assert "did not answer SSH" in error and "within 3 s" in error and "Console log" in error
    assert_nothing_left()


def test_a_taken_ssh_port_is_named_and_not_waited_for(guest_lab, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        results = tmp_path / "results"
        runner = run_lab_playbook(
            "playbooks/experiment.yml",
            tmp_path,
            {
                "experiment": "smoke",
                "campaign": "it-port",
                "platbench_results_dir": str(results),
                "vm_ssh_port": port,
                "experiment_overrides": {**OVERRIDES, "platforms": ["vm"]},
            },
        )
    assert runner.rc == 0, runner.failed_messages()
    samples = read_samples(results / "it-port")
    assert [s["metric"] for s in samples] == ["failed"]
    assert f"port {port} on 127.0.0.1 is already in use" in samples[0]["metadata"]["error"]
    assert_nothing_left()
