"""The domain XML of a guest cell on a host with injected GPU facts, rendered in check mode (guest_domain.py): a GPU
cell passes exactly the GPU assigned to guests through, a cpu cell none."""

from __future__ import annotations

import guest_domain
import pytest
from plan_options import plan_options

GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"},
    {"pci_address": "0000:af:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "40"},
]
# A 4-CPU KVM host with two GPUs (host_facts's names): the first stays with the host, the second goes to guests.
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
    "gpus": GPUS,
    "gpu_count": 2,
    "vm_accelerator": "kvm",
    "qemu_binary": "/usr/bin/qemu-system-x86_64",
}
OPTIONS = plan_options(host="gpu1", campaign="c1", gpu_assignment={"0000:af:00.0": "guests"})


def render(playbook, tmp_path, platform, processor):
    return guest_domain.render(playbook, tmp_path, platform, processor, FACTS, OPTIONS)


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
    # A cell without data files gets no data disk (one with them: test_guest_data.py).
    files = [disk.find("./source").get("file") for disk in domain.findall("./devices/disk")]
    assert [path.rsplit("/", 1)[-1] for path in files] == ["root.qcow2", "workloads.img"]
