"""The domain XML of a guest cell on a host with injected GPU facts, as platbench.lab.vm renders it when the cell
goes through platbench.lab.platform_run's guest kind (tasks/guest.yml) in check mode: the plan from
platbench.lab.cell_plan, guest.yml's mapping of it to the vm role's variables, the role's template. A GPU cell
passes exactly the GPU assigned to guests through, a cpu cell none."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from plan_options import plan_options
from playbook_run import REPO

PLAYBOOK = REPO / "tests/roles/platform_run/guest_check.yml"
RENDER = "Render the domain XML"
GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"},
    {"pci_address": "0000:af:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "40"},
]
# A 4-CPU KVM host with two GPUs (host_facts's names): the first stays with the host, the second goes to guests.
FACTS = {
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
    "gpus": GPUS,
    "gpu_count": 2,
    "vm_accelerator": "kvm",
    "qemu_binary": "/usr/bin/qemu-system-x86_64",
}
OPTIONS = plan_options(host="gpu1", campaign="c1", gpu_assignment={"0000:af:00.0": "guests"})


def guest_image(tmp_path):
    """A guest image description as platbench.lab.guest_image writes it (the files need not exist in check mode)."""
    image = tmp_path / "guest"
    description = {
        "kernel": f"{image}/vmlinuz",
        "initrd": f"{image}/initrd.img",
        "cmdline": "root=/dev/vda console=ttyS0",
        "rootfs": f"{image}/rootfs.qcow2",
        "rootfs_id": "r1",
        "container_disk": f"{image}/docker.qcow2",
        "workloads_disk": f"{image}/workloads.img",
        "ssh_key": f"{image}/id_ed25519",
        "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAtest",
    }
    path = tmp_path / "current.json"
    path.write_text(json.dumps(description))
    return path


def render(playbook, tmp_path, platform, processor):
    """The domain XML platbench.lab.vm rendered for the cell PLATFORM/2/pin/PROCESSOR, and the run's PlaybookRun."""
    scenario = f"{platform}/2/pin/{processor}"
    labels = {"platform": platform, "scaleup": 2, "cpu_config": "pin", "processor": processor, "workload": "w"}
    variables = {
        "host_facts": FACTS,
        "cell": {"id": scenario + "|r0", "scenario": scenario, "params": {}, "labels": labels},
        "plan_options": OPTIONS,
        "vm_image_description": str(guest_image(tmp_path)),
        "vm_state_dir": str(tmp_path / "vms"),
        # libvirt's own test driver, in the process: the system's libvirtd (if any) is never asked.
        "vm_libvirt_uri": "test:///default",
    }
    run = playbook(PLAYBOOK, variables, "--check")
    rendered = run.results(RENDER)
    assert len(rendered) == 1, run.failed_messages() or run.output[-5000:]
    # Nothing failed on the way: what stopped the run (libvirt, or a guest that cannot boot in check mode) came after.
    failed = [event for event in run.events if event.get("event") == "runner_on_failed"]
    render_event = next(event for event in run.events if event["event_data"].get("task") == RENDER)
    assert all(event["counter"] > render_event["counter"] for event in failed), run.failed_messages()
    assert not (tmp_path / "vms").exists()  # check mode wrote nothing
    return ET.fromstring(rendered[0]["ansible_facts"]["vm_domain_xml"]), run


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_a_gpu_guest_cell_passes_the_guest_gpu_through(playbook, tmp_path, platform):
    domain, _ = render(playbook, tmp_path, platform, "gpu")
    hostdevs = domain.findall("./devices/hostdev")
    assert [(h.get("mode"), h.get("type"), h.get("managed")) for h in hostdevs] == [("subsystem", "pci", "yes")]
    assert hostdevs[0].find("./source/address").attrib == {
        "domain": "0x0000",
        "bus": "0xaf",
        "slot": "0x00",
        "function": "0x0",
    }
    assert domain.get("type") == "kvm"
    assert domain.findtext("./vcpu") == "2"
    assert [pin.get("cpuset") for pin in domain.findall("./cputune/vcpupin")] == ["2", "3"]
    assert domain.find("./cputune/emulatorpin").get("cpuset") == "2,3"
    disks = [disk.find("./source").get("file") for disk in domain.findall("./devices/disk")]
    assert disks[0].endswith("/root.qcow2") and disks[1] == str(tmp_path / "guest/workloads.img")
    # vmcn's guest carries its Docker store; vm's does not.
    assert any(disk.endswith("/docker.qcow2") for disk in disks) is (platform == "vmcn")


def test_a_cpu_guest_cell_gets_no_gpu(playbook, tmp_path):
    domain, _ = render(playbook, tmp_path, "vm", "cpu")
    assert domain.findall("./devices/hostdev") == []
    assert [pin.get("cpuset") for pin in domain.findall("./cputune/vcpupin")] == ["2", "3"]
