"""The mvm platform without KVM: the Firecracker VM configuration against the documented API fields, the jailer's
and Firecracker's command lines, the vCPU threads' pinning, the cell's tap, the kernel unpacking, readiness with and
without the binaries and /dev/kvm, and the micro_vm placement of a cell."""

from __future__ import annotations

import gzip
import ipaddress
import lzma

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import firecracker
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options
from test_cellplan import ONE_NODE, make_cell

NETWORK = firecracker.guest_network("c1/runner/cell")
IMAGE = {
    "ssh_key": "/keys/guest",
    "host_key": "ssh-ed25519 AAAAkey",
    "workloads_disk": "/var/lib/platbench/guest/workloads.img",
    "firecracker": {"kernel": "/g/r.vmlinux", "rootfs": "/g/r.raw", "initrd": "/g/r.initrd"},
}


def test_the_vm_configuration_has_the_documented_sections_and_passes_the_schema():
    config = firecracker.vm_config(4, 2048, NETWORK, read_only_drives=[("workloads", "workloads.img")], vsock_cid=3)
    assert firecracker.config_problems(config) == []
    assert config["machine-config"] == {"vcpu_count": 4, "mem_size_mib": 2048, "smt": False}
    assert config["boot-source"]["kernel_image_path"] == "vmlinux" and config["boot-source"]["initrd_path"] == "initrd"
    assert (
        f"ip={NETWORK['guest_address']}::{NETWORK['host_address']}:255.255.255.252::eth0:off"
        in (config["boot-source"]["boot_args"])
    )
    assert [(d["drive_id"], d["is_root_device"], d["is_read_only"]) for d in config["drives"]] == [
        ("rootfs", True, False),
        ("workloads", False, True),
    ]
    assert config["network-interfaces"] == [
        {"iface_id": "eth0", "host_dev_name": NETWORK["tap"], "guest_mac": NETWORK["guest_mac"]}
    ]
    assert config["vsock"] == {"guest_cid": 3, "uds_path": "vsock.sock"}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["machine-config"].update(vcpus=2), "machine-config: unknown field 'vcpus'; Firecracker documents"),
        (lambda c: c["machine-config"].update(vcpu_count="2"), "machine-config.vcpu_count: must be int, got '2'"),
        (lambda c: c["machine-config"].update(vcpu_count=33), "machine-config.vcpu_count: 33 is above 32"),
        (lambda c: c["machine-config"].update(smt=True, vcpu_count=3), "vcpu_count: 3 with smt must be 1 or even"),
        (lambda c: c["drives"][0].update(is_root_device=1), "drives[0].is_root_device: must be bool, got 1"),
        (lambda c: c["drives"][0].update(is_root_device=False), "exactly one must be the root device"),
        (lambda c: c["drives"][0].pop("drive_id"), "drives[0]: drive_id is required"),
        (lambda c: c["drives"][0].update(cache_type="None"), "cache_type: 'None' is not one of Unsafe, Writeback"),
        (lambda c: c["network-interfaces"][0].update(guest_mac="06:00"), "guest_mac: '06:00' does not match"),
        (lambda c: c.update(vsock={"guest_cid": 2, "uds_path": "v"}), "vsock.guest_cid: 2 is below 3"),
        (lambda c: c.pop("boot-source"), "section 'boot-source' is required"),
        (lambda c: c.update(balloons={}), "unknown section 'balloons'"),
    ],
)
def test_an_undocumented_or_mistyped_field_is_refused_with_where_it_is(change, message):
    config = firecracker.vm_config(2, 1024, NETWORK)
    change(config)
    with pytest.raises(firecracker.FirecrackerError, match="invalid Firecracker VM configuration") as error:
        firecracker.check_config(config)
    assert message in str(error.value)


def test_the_jailer_command_line_then_firecrackers_own():
    cgroups = firecracker.cgroup_settings([2, 3], None, ["0"])
    argv = firecracker.jailer_argv("pb-c1-cell", 990, 991, cgroups)
    assert argv == [
        "/usr/local/bin/jailer", "--id", "pb-c1-cell", "--exec-file", "/usr/local/bin/firecracker",
        "--uid", "990", "--gid", "991", "--chroot-base-dir", "/srv/platbench-jailer", "--cgroup-version", "2",
        "--cgroup", "cpuset.cpus=2,3", "--cgroup", "cpuset.mems=0",
        "--", "--config-file", "vm-config.json", "--no-api",
    ]  # fmt: skip
    assert firecracker.cgroup_settings([], 1.5) == ["cpu.max=150000 100000"]
    quota_v1 = ["cpu.cfs_period_us=100000", "cpu.cfs_quota_us=200000"]
    assert firecracker.cgroup_settings([], 2, cgroup_version=1) == quota_v1
    with pytest.raises(firecracker.FirecrackerError, match="uid must be a non-negative integer"):
        firecracker.jailer_argv("x", -1, 0)
    assert firecracker.jail_root("pb-1") == "/srv/platbench-jailer/firecracker/pb-1/root"
    assert firecracker.jail_id("c1/runner:cell|r0") == "c1-runner-cell-r0"


def fake_proc(tmp_path, pid, comms):
    for tid, comm in comms.items():
        (tmp_path / str(pid) / "task" / str(tid)).mkdir(parents=True)
        (tmp_path / str(pid) / "task" / str(tid) / "comm").write_text(comm + "\n")
    return tmp_path


def test_the_vcpu_threads_are_found_by_name_and_pinned_one_to_one(tmp_path):
    proc = fake_proc(tmp_path, 40, {40: "firecracker", 41: "fc_api", 42: "fc_vcpu 1", 43: "fc_vcpu 0"})
    threads = firecracker.read_vcpu_threads(40, str(proc))
    assert threads == {0: 43, 1: 42}
    plan = firecracker.pin_plan(threads, [6, 7])
    assert plan == {43: 6, 42: 7}
    calls = []
    assert firecracker.apply_pins(plan, setter=lambda tid, cpus: calls.append((tid, cpus))) == {"43": "6", "42": "7"}
    assert calls == [(43, {6}), (42, {7})]
    with pytest.raises(firecracker.FirecrackerError, match=r"runs vCPU threads \[0, 1\] but the plan pins 3"):
        firecracker.pin_plan(threads, [1, 2, 3])
    with pytest.raises(firecracker.FirecrackerError, match="cannot list the threads of Firecracker process 9"):
        firecracker.read_vcpu_threads(9, str(proc))


def test_each_cell_gets_its_own_tap_and_slash_30_in_the_benchmarking_range():
    other = firecracker.guest_network("c1/runner/other")
    for network in (NETWORK, other):
        subnet = ipaddress.ip_network(network["subnet"])
        assert subnet.prefixlen == 30 and subnet.subnet_of(ipaddress.ip_network("198.18.0.0/15"))
        assert ipaddress.ip_address(network["guest_address"]) in subnet
        assert len(network["tap"]) <= 15 and network["tap"].startswith("pbfc")
    assert other["tap"] != NETWORK["tap"] and firecracker.guest_network("c1/runner/cell") == NETWORK


ELF = b"\x7fELF" + bytes(range(256)) * 8


@pytest.mark.parametrize("pack", [gzip.compress, lambda data: lzma.compress(data, format=lzma.FORMAT_XZ)])
def test_the_elf_kernel_is_unpacked_from_a_compressed_image(pack):
    bzimage = b"MZ setup code \x1f\x8b\x08 not a payload " + pack(ELF) + b"trailing bytes"
    assert firecracker.extract_vmlinux(bzimage) == ELF
    assert firecracker.extract_vmlinux(ELF) == ELF
    with pytest.raises(firecracker.FirecrackerError, match="unpacks to an ELF vmlinux"):
        firecracker.extract_vmlinux(b"MZ" + gzip.compress(b"not elf"))


def executable(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def mvm_status(found):
    facts = {"docker_engine": True, "vm_accelerator": "kvm", "libvirt_daemon": True}
    status = platform_status(facts, "/opt/platbench", True, "img", None, "/g/x.json", IMAGE, firecracker_found=found)
    return status["mvm"]


def test_readiness_with_the_binaries_and_an_openable_kvm(tmp_path):
    kvm = tmp_path / "kvm"
    kvm.write_text("")
    found = firecracker.probe(executable(tmp_path / "firecracker"), executable(tmp_path / "jailer"), str(kvm))
    assert mvm_status(found) == {"ready": True, "reason": "", "skip": False}


def test_readiness_without_kvm_or_the_binary_says_why_and_which_role_to_run(tmp_path):
    binaries = executable(tmp_path / "firecracker"), executable(tmp_path / "jailer")
    no_kvm = firecracker.probe(*binaries, "/nonexistent/kvm")
    status = mvm_status(no_kvm)
    assert status["skip"] and not status["ready"]
    assert status["reason"].startswith("/nonexistent/kvm does not exist: Firecracker needs KVM")
    no_binary = firecracker.probe(str(tmp_path / "none"), executable(tmp_path / "jailer"), str(tmp_path / "jailer"))
    status = mvm_status(no_binary)
    assert status["skip"] and status["reason"] == (
        f"no Firecracker binary at {tmp_path / 'none'}: run site.yml with the host in platbench_mvm_hosts "
        "(role platbench.lab.firecracker)"
    )
    assert "role platbench.lab.firecracker" in mvm_status(None)["reason"]


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_a_cell_is_planned_as_a_jailed_micro_vm(cpu_config):
    plan = cell_plan(make_cell("mvm", cpu_config=cpu_config), ONE_NODE, plan_options(guest_image=IMAGE))
    assert_plan_matches_its_specs(plan)
    vm = plan["micro_vm"]
    assert plan["kind"] == "micro_vm" and plan["process"]["host"] == plan["name"] == vm["name"]
    assert firecracker.config_problems(vm["config"]) == []
    assert vm["config"]["machine-config"]["vcpu_count"] == 2
    assert [f["name"] for f in vm["files"]] == ["vmlinux", "rootfs.raw", "initrd", "workloads.img"]
    if cpu_config == "pin":
        assert vm["cpus"] == plan["cpus"] == [6, 7]
        assert vm["cgroups"] == ["cpuset.cpus=6,7", "cpuset.mems=0"]
    else:
        assert vm["cpus"] == [] and vm["cgroups"] == ["cpu.max=200000 100000"]


def test_a_gpu_cell_or_an_image_without_the_variant_is_refused():
    with pytest.raises(CellPlanError, match="Firecracker passes no GPU through"):
        cell_plan(make_cell("mvm", processor="gpu"), ONE_NODE, plan_options(guest_image=IMAGE, gpus_per_cell=1))
    with pytest.raises(CellPlanError, match="guest_image_firecracker: true"):
        cell_plan(make_cell("mvm"), ONE_NODE, plan_options(guest_image={"rootfs": "/g/r.qcow2"}))
