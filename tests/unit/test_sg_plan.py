"""sg and vmsg: the exact Apptainer command lines of every CPU configuration x processor, the SIF's
name and build command, and why a host or its guest image cannot run them yet."""

from __future__ import annotations

import json
import os

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.filter import apptainer as filters
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.modules import platform_status as module
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from plan_options import cell_plan, plan_options

IMAGE = "sha256:" + "cd" * 32
OLD_IMAGE = "sha256:" + "ef" * 32
SIF = "/var/lib/platbench/sif/workload-cdcdcdcdcdcd.sif"
HOST_GPU, GUEST_GPU = "0000:3b:00.0", "0000:af:00.0"
GPUS = [
    {"pci_address": "0000:1a:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "3"},
    {"pci_address": HOST_GPU, "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "7"},
    {"pci_address": GUEST_GPU, "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "9"},
]
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpus": GPUS,
    "gpu_count": 3,
}
GUEST = {
    "rootfs_id": "r1",
    "apptainer_version": "1.4.5",
    "sif_image_id": IMAGE,
    "sif_disk": "/var/lib/platbench/guest/sif-workload-cdcdcdcdcdcd.img",
}
OPTIONS = plan_options(
    host="gpu1",
    campaign="c1",
    engines={"docker": {"answers": True, "version": "26.1.5", "image_id": IMAGE}},
    gpu_assignment={"0000:1a:00.0": "host", HOST_GPU: "host", GUEST_GPU: "guests"},
    guest_image=GUEST,
    sif={"image": "platbench/workload:abc", "image_id": IMAGE, "sif": SIF, "apptainer_version": "1.4.5"},
    apptainer_version="1.4.5",
)
ARGV = ["-m", "workloads.cnn_train", "--threads", "2", "--steps", "3"]
CACHE = "/var/cache/platbench"


def make_cell(platform, cpu_config, processor, scaleup=2):
    scenario = f"{platform}/{scaleup}/{cpu_config}/{processor}"
    labels = {"platform": platform, "scaleup": scaleup, "cpu_config": cpu_config, "processor": processor}
    return {
        "id": scenario + "|r0",
        "scenario": scenario,
        "params": {"steps": 3},
        "labels": {**labels, "workload": "cnn_train"},
    }


# --- sg: apptainer exec on the host ---------------------------------------------------------------


@pytest.mark.parametrize(
    "cpu_config, processor, argv",
    [
        (
            "pin",
            "cpu",
            ["taskset", "--cpu-list", "6,7", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--bind", f"{CACHE}:{CACHE}:rw", "--pwd", "/opt/platbench", SIF, "python"],
        ),
        (
            "vnl",
            "cpu",
            # every CPU the host allows: a harness kept on reserved CPUs would pass its affinity through apptainer
            ["taskset", "--cpu-list", "0-7", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--bind", f"{CACHE}:{CACHE}:rw", "--cpus", "2", "--pwd", "/opt/platbench", SIF, "python"],
        ),
        (
            "pin",
            "gpu",
            ["taskset", "--cpu-list", "6,7", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--bind", f"{CACHE}:{CACHE}:rw", "--nv", "--pwd", "/opt/platbench", SIF, "python"],
        ),
        (
            "vnl",
            "gpu",
            ["taskset", "--cpu-list", "0-7", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--bind", f"{CACHE}:{CACHE}:rw", "--nv", "--cpus", "2", "--pwd", "/opt/platbench", SIF, "python"],
        ),
    ],
)
def test_sg_command_lines(cpu_config, processor, argv):
    plan = cell_plan(make_cell("sg", cpu_config, processor), FACTS, OPTIONS)
    assert plan["placement"] == "process" and "container" not in plan and "guest" not in plan
    assert plan["process"]["argv"] == argv + ARGV
    # With --cleanenv only APPTAINERENV_* variables reach the workload: every one of the plan's.
    assert plan["process"]["env"] == {f"APPTAINERENV_{name}": value for name, value in plan["env"].items()}
    assert plan["runtime"]["launcher"] == "apptainer" and plan["runtime"]["sif"] == SIF
    assert plan["runtime"]["sif_image_id"] == IMAGE and plan["runtime"]["apptainer_version"] == "1.4.5"
    assert plan["runtime"]["cpu_quota_requested"] == (2.0 if cpu_config == "vnl" else None)


def test_sg_sees_the_hosts_gpus_as_bm_does_and_cn_keeps_its_own_numbering():
    options = {**OPTIONS, "gpus_per_cell": 2}
    sg, bm, cn = (cell_plan(make_cell(label, "pin", "gpu"), FACTS, options) for label in ("sg", "bm", "cn"))
    assert sg["gpus"] == ["0000:1a:00.0", HOST_GPU]
    gpu_vars = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PLATBENCH_EXPECTED_GPUS")
    assert {name: sg["env"][name] for name in gpu_vars} == {name: bm["env"][name] for name in gpu_vars}
    assert json.loads(sg["env"]["PLATBENCH_EXPECTED_GPUS"]) == {"count": 2, "pci_bus_ids": sg["gpus"]}
    assert sg["process"]["env"]["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == "0,1"
    assert cn["container"]["device_requests"][0]["device_ids"] == ["0", "1"]
    # The registry's typed field says so: sg sees the host's GPUs, cn its own.
    assert platforms.get("sg").gpu_view == platforms.get("bm").gpu_view == "host"
    assert platforms.get("cn").gpu_view == "own"


def test_a_data_dir_is_bound_read_only_before_the_cache():
    cell = make_cell("sg", "vnl", "cpu")
    cell["params"]["data_dir"] = "/data/imagenet"
    argv = cell_plan(cell, FACTS, OPTIONS)["process"]["argv"]
    assert argv[7:12] == ["--bind", "/data/imagenet:/data/imagenet:ro", "--bind", f"{CACHE}:{CACHE}:rw", "--cpus"]


def test_sg_without_a_sif_says_what_to_run():
    with pytest.raises(
        CellPlanError, match=r"no SIF of the workload image: run site\.yml with the host in platbench_apptainer_hosts"
    ):
        cell_plan(make_cell("sg", "pin", "cpu"), FACTS, {**OPTIONS, "sif": {}})


# --- vmsg: apptainer exec in the guest ------------------------------------------------------------

GUEST_SIF = "/opt/platbench/sif/workload.sif"


@pytest.mark.parametrize(
    "cpu_config, processor, argv",
    [
        (
            "pin",
            "cpu",
            ["taskset", "--cpu-list", "0,1", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--scratch", CACHE, "--pwd", "/opt/platbench", GUEST_SIF, "python"],
        ),
        (
            "vnl",
            "cpu",
            ["apptainer", "exec", "--cleanenv", "--containall", "--scratch", CACHE]
            + ["--cpus", "2", "--pwd", "/opt/platbench", GUEST_SIF, "python"],
        ),
        (
            "pin",
            "gpu",
            ["taskset", "--cpu-list", "0,1", "apptainer", "exec", "--cleanenv", "--containall"]
            + ["--scratch", CACHE, "--nv", "--pwd", "/opt/platbench", GUEST_SIF, "python"],
        ),
        (
            "vnl",
            "gpu",
            ["apptainer", "exec", "--cleanenv", "--containall", "--scratch", CACHE, "--nv"]
            + ["--cpus", "2", "--pwd", "/opt/platbench", GUEST_SIF, "python"],
        ),
    ],
)
def test_vmsg_command_lines(cpu_config, processor, argv):
    plan = cell_plan(make_cell("vmsg", cpu_config, processor), FACTS, OPTIONS)
    pinned = cpu_config == "pin"
    assert plan["placement"] == "guest" and plan["guest"]["inner"] == "process" and "container" not in plan
    assert plan["process"]["argv"] == argv + ARGV
    guest = plan["guest"]
    # The guest like vm: vCPUs pinned one to one for pin, the GPU passed through, the SIF disk read-only.
    assert guest["cpu_pins"] == ([6, 7] if pinned else []) and guest["vcpus"] == 2
    assert guest["hostdevs"] == ([GUEST_GPU] if processor == "gpu" else [])
    assert guest["extra_disks"] == [{"path": GUEST["sif_disk"], "format": "raw", "readonly": True}]
    assert not guest["with_container_disk"]
    # In the guest its GPU is number 0 and its bus id is the guest's own.
    if processor == "gpu":
        assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0"
        assert json.loads(plan["env"]["PLATBENCH_EXPECTED_GPUS"]) == {"count": 1, "pci_bus_ids": None}
    assert plan["runtime"]["in_guest_cpuset"] == ("0,1" if pinned else None)
    assert plan["runtime"]["sif_image_id"] == IMAGE and plan["runtime"]["launcher"] == "apptainer"


def test_vm_and_vmcn_guests_get_no_extra_disk():
    for label in ("vm", "vmcn"):
        assert cell_plan(make_cell(label, "pin", "cpu"), FACTS, OPTIONS)["guest"]["extra_disks"] == []


def test_vmsg_without_a_sif_disk_says_what_to_run():
    with pytest.raises(CellPlanError, match="the guest image has no SIF disk: run site.yml"):
        cell_plan(make_cell("vmsg", "pin", "cpu"), FACTS, {**OPTIONS, "guest_image": {"rootfs_id": "r1"}})


# --- the SIF: its name, its build command, the version check --------------------------------------


def test_the_sif_is_named_after_the_image_id_and_built_from_the_docker_engine():
    assert filters.apptainer_sif_path(IMAGE) == SIF
    assert filters.apptainer_sif_path(IMAGE, "/srv/sif/") == "/srv/sif/workload-cdcdcdcdcdcd.sif"
    assert filters.apptainer_sif_build_argv("platbench/workload:abc", SIF) == [
        "apptainer",
        "build",
        "--force",
        SIF + ".part",
        "docker-daemon:platbench/workload:abc",
    ]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: filters.apptainer_sif_path("platbench/workload:latest"), "not an image id"),
        (lambda: filters.apptainer_sif_build_argv("", SIF), "need an image reference"),
        (lambda: filters.apptainer_sif_build_argv("img", "/tmp/x.img"), "a .sif path"),
        (lambda: filters.apptainer_version_problem("1.4.5", "new"), "apptainer_minimum_version must be a version"),
    ],
)
def test_the_filters_reject_bad_input_naming_it(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


def test_the_version_check():
    assert filters.apptainer_version("apptainer version 1.4.5-1.el9") == "1.4.5"
    assert filters.apptainer_version("bash: apptainer: command not found") is None
    assert filters.apptainer_version_problem("apptainer version 1.1.0") == ""
    assert filters.apptainer_version_problem("1.4.5", "1.2") == ""
    old = filters.apptainer_version_problem("apptainer version 1.0.3")
    assert old.startswith("Apptainer 1.0.3 is installed, older than 1.1.0 (apptainer_minimum_version)")
    assert "apt remove apptainer" in old and "run the role again" in old
    assert "no Apptainer version could be read" in filters.apptainer_version_problem("")


# --- readiness ------------------------------------------------------------------------------------

KVM_HOST = {"docker_engine": True, "vm_accelerator": "kvm", "libvirt_daemon": True}
SIF_DESCRIPTION = {**OPTIONS["sif"], "present": True}


def status(version="1.4.5", sif=SIF_DESCRIPTION, guest=GUEST, image_id=IMAGE):
    return platform_status(
        KVM_HOST,
        "/opt/platbench",
        True,
        "platbench/workload:abc",
        image_id,
        "/var/lib/platbench/guest/current.json",
        guest,
        apptainer_version=version,
        sif=sif,
    )


def test_a_host_with_apptainer_its_sif_and_a_guest_carrying_both_runs_sg_and_vmsg():
    result = status()
    assert result["sg"] == {"ready": True, "reason": "", "skip": False}
    assert result["vmsg"] == {"ready": True, "reason": "", "skip": False, "accelerator": "kvm", "emulated": False}


FIX = "run site.yml with the host in platbench_apptainer_hosts (role platbench.lab.apptainer)"
GUEST_FIX = (
    "run site.yml with the host in platbench_apptainer_hosts and platbench_vm_hosts "
    "(roles platbench.lab.apptainer, then platbench.lab.guest_image)"
)


@pytest.mark.parametrize(
    "change, platform, reason",
    [
        ({"version": None}, "sg", f"Apptainer is not installed on this host: {FIX}"),
        (
            {"version": "1.0.3"},
            "sg",
            f"Apptainer 1.0.3 on this host is older than 1.1.0, the first with the --cpus resource limit the sg and "
            f"vmsg platforms use: {FIX} to upgrade it",
        ),
        (
            {"sif": {}},
            "sg",
            f"no SIF of the workload image is described at /var/lib/platbench/sif/current.json: {FIX}",
        ),
        ({"sif": {**SIF_DESCRIPTION, "present": False}}, "sg", f"SIF {SIF} is missing: {FIX}"),
        (
            {"sif": {**SIF_DESCRIPTION, "image_id": OLD_IMAGE}},
            "sg",
            f"SIF {SIF} built from image efefefefefef, not the current cdcdcdcdcdcd: {FIX}",
        ),
        ({"image_id": None}, "sg", "SIF " + SIF + " cannot be checked against the workload image platbench/workload"),
        ({"guest": {"rootfs_id": "r1"}}, "vmsg", f"Apptainer is not installed in the guest image: {GUEST_FIX}"),
        (
            {"guest": {**GUEST, "apptainer_version": "1.0.0"}},
            "vmsg",
            "Apptainer 1.0.0 in the guest image is older than 1.1.0",
        ),
        (
            {"guest": {**GUEST, "sif_image_id": None, "sif_disk": None}},
            "vmsg",
            f"the guest image carries no SIF of the workload image: {GUEST_FIX}",
        ),
        (
            {"guest": {**GUEST, "sif_image_id": OLD_IMAGE}},
            "vmsg",
            f"the guest's SIF built from image efefefefefef, not the current cdcdcdcdcdcd: {GUEST_FIX}",
        ),
    ],
)
def test_each_missing_piece_names_what_to_run(change, platform, reason):
    result = status(**change)
    assert not result[platform]["ready"] and result[platform]["reason"].startswith(reason)


def test_the_module_asks_apptainer_and_reads_the_sif_description(tmp_path, capsys, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text("#!/bin/sh\necho 'apptainer version 1.0.3'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sif = tmp_path / "workload-cdcdcdcdcdcd.sif"
    sif.write_bytes(b"SIF")
    description = tmp_path / "current.json"
    description.write_text(json.dumps({**OPTIONS["sif"], "sif": str(sif), "image_id": OLD_IMAGE}))
    # Docker answers and holds IMAGE (the module asks each engine on its command line).
    monkeypatch.setattr(
        module, "run", lambda _m, argv: (0, "26.1.5") if argv[:2] == ["docker", "version"] else (0, IMAGE)
    )
    args = {"facts": KVM_HOST, "sif_description": str(description)}
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["apptainer_version"] == "1.0.3" and result["sif"]["present"] is True
    assert result["platforms"]["sg"]["reason"].startswith("Apptainer 1.0.3 on this host is older than 1.1.0")
    fake.write_text("#!/bin/sh\necho 'apptainer version 1.4.5'\n")
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["platforms"]["sg"]["reason"] == (
        f"SIF {sif} built from image efefefefefef, not the current cdcdcdcdcdcd: {FIX}"
    )
