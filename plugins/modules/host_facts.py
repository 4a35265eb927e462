#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Read what a host can offer to the benchmark lab, straight from /proc and /sys."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_facts
short_description: Gather CPU topology, GPU, KVM and container-engine facts for platbench
description:
  - Reads C(/proc) and C(/sys) only; changes nothing and needs no extra packages.
  - Returns the facts under C(ansible_facts.platbench) so later roles can pin CPUs,
    gate GPU tasks and decide which platforms the host can run.
version_added: "0.1.0"
author: platbench developers (@platbench)
options:
  docker_socket:
    description: Path of the Docker engine API socket probed for a running engine.
    type: path
    default: /var/run/docker.sock
  libvirt_socket:
    description: Path of the libvirt daemon socket probed for a running libvirtd.
    type: path
    default: /var/run/libvirt/libvirt-sock
  gpu_assignment:
    description:
      - Which GPUs stay with the host and which go to guests, PCI address to C(host) or C(guests).
      - Read on the controller (the action plugin); default the task's C(platbench_gpu_assignment).
    type: dict
attributes:
  check_mode:
    description: Reads the same facts as in a real run; the module never changes the host.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Read the host's CPU topology and capabilities
  platbench.lab.host_facts:

- name: Show the CPUs this host lets us pin
  ansible.builtin.debug:
    msg: "{{ ansible_facts.platbench.cpus_allowed }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the host, under the key C(platbench).
  returned: always
  type: dict
  contains:
    platbench:
      description:
        - CPU topology, GPUs, KVM, service manager and container engine state.
        - C(cpu_cgroup) is where the host's cgroup C(cpu) controller is (C(version) v1 or v2, its C(directory)), or
          null; a process cell's cgroup of its own is made there.
        - C(cpuacct_cgroup) is where cgroup v1's C(cpuacct) controller is mounted (C(directory)), or null (v2, or
          none); the harness's CPU time is counted there, and a process cell leaves it.
        - C(host_gpus) and C(guest_gpus) (sorted PCI addresses) say which GPUs stay with the host and which go
          to guests under O(gpu_assignment); C(gpu_assignment_problems) lists what is wrong with it (an entry
          with a problem is left out, so its GPU stays with the host).
      type: dict
      sample:
        cpu_model: Intel(R) Xeon(R) Platinum 8481C
        cpus_online: [0, 1]
        cpus_allowed: [0, 1]
        cpu_count: 2
        sockets: 1
        cores: [[0], [1]]
        threads_per_core: 1
        numa_nodes: {"0": [0, 1]}
        cpu_flags: [avx512f, amx_tile]
        gpus:
          - pci_address: "0000:3b:00.0"
            device_id: "0x20b0"
            driver: nvidia
            iommu_group: null
            slot_functions: ["0000:3b:00.1"]
        gpu_count: 1
        host_gpus: ["0000:3b:00.0"]
        guest_gpus: []
        gpu_assignment_problems: []
        kvm: {device: true, usable: true, hw_virt: false, iommu_groups: 0}
        iommu: {firmware_table: DMAR, enabled: false, groups: 0}
        qemu_binary: /usr/bin/qemu-system-x86_64
        vm_accelerator: tcg
        libvirt_daemon: true
        systemd_pid1: false
        docker_engine: true
        virt: vm
        cpu_cgroup: {version: v1, directory: /sys/fs/cgroup/cpu}
        cpuacct_cgroup: {directory: /sys/fs/cgroup/cpuacct}
"""

import glob
import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils.cpu_quota import hierarchy as cpu_cgroup

FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "vmx", "svm", "hypervisor")
NVIDIA_PCI_VENDOR = "0x10de"
# PCI display controllers (0x03xxxx) and 3D controllers (0x0302xx) are GPUs.
PCI_DISPLAY_CLASS_PREFIX = "0x03"


def cpuacct_cgroup(cgroup_root="/sys/fs/cgroup"):
    """cgroup v1's cpuacct mount where it is not the cpu controller's own (then a process cell's shell line must
    leave it as well), or None. systemd links cpu and cpuacct to one cpu,cpuacct mount: that is one hierarchy."""
    cpu = cpu_cgroup(cgroup_root)
    if not cpu or cpu.get("version") != "v1":
        return None
    for name in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
        directory = os.path.join(cgroup_root, name)
        if os.path.isfile(os.path.join(directory, "cpuacct.usage")):
            if os.path.realpath(directory) == os.path.realpath(cpu["directory"]):
                return None
            return {"directory": directory}
    return None


def read_text(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return default


def parse_cpu_list(text):
    """'0-3,6' -> [0, 1, 2, 3, 6]"""
    cpus = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.extend(range(int(low), int(high) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def cpu_info():
    model, flags = None, set()
    for line in read_text("/proc/cpuinfo").splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, sorted(f for f in FLAGS_OF_INTEREST if f in flags)


def cpu_topology(online):
    """Group online CPUs into physical cores (hyperthread siblings) and sockets."""
    cores, sockets = {}, set()
    for cpu in online:
        base = "/sys/devices/system/cpu/cpu%d/topology" % cpu
        package = read_text(base + "/physical_package_id", "0")
        siblings = read_text(base + "/thread_siblings_list", str(cpu))
        sockets.add(package)
        cores.setdefault(siblings, parse_cpu_list(siblings))
    core_list = sorted(cores.values())
    threads = max((len(c) for c in core_list), default=1)
    return core_list, max(len(sockets), 1), threads


def numa_nodes():
    nodes = {}
    for path in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        nodes[os.path.basename(path)[4:]] = parse_cpu_list(read_text(path + "/cpulist"))
    return nodes


def slot_functions(dev):
    """The other PCI functions of a GPU's slot (its HDMI audio, USB-C controller): they share
    its IOMMU group, so passing the GPU through takes them to vfio-pci as well."""
    own = os.path.basename(dev)
    slot = own.rsplit(".", 1)[0]
    return sorted(
        os.path.basename(path) for path in glob.glob(os.path.join(os.path.dirname(dev), slot + ".*")) if path != dev
    )


def nvidia_gpus():
    gpus = []
    for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
        if read_text(dev + "/vendor") != NVIDIA_PCI_VENDOR:
            continue
        if not read_text(dev + "/class").startswith(PCI_DISPLAY_CLASS_PREFIX):
            continue
        driver = os.path.basename(os.path.realpath(dev + "/driver")) if os.path.exists(dev + "/driver") else None
        gpus.append(
            {
                "pci_address": os.path.basename(dev),
                "device_id": read_text(dev + "/device"),
                "driver": driver,
                "iommu_group": os.path.basename(os.path.realpath(dev + "/iommu_group"))
                if os.path.exists(dev + "/iommu_group")
                else None,
                "slot_functions": slot_functions(dev),
            }
        )
    return gpus


def kvm_state(flags):
    usable = os.access("/dev/kvm", os.R_OK | os.W_OK)
    return {
        "device": os.path.exists("/dev/kvm"),
        "usable": usable,
        "hw_virt": "vmx" in flags or "svm" in flags,
        "iommu_groups": len(glob.glob("/sys/kernel/iommu_groups/*")),
    }


def iommu_state():
    """Whether the firmware describes an IOMMU (ACPI DMAR on Intel, IVRS on AMD) and the kernel uses it."""
    table = next((name for name in ("DMAR", "IVRS") if os.path.exists("/sys/firmware/acpi/tables/" + name)), None)
    groups = len(glob.glob("/sys/kernel/iommu_groups/*"))
    return {"firmware_table": table, "enabled": groups > 0, "groups": groups}


def qemu_binary():
    for directory in ("/usr/bin", "/usr/libexec", "/usr/local/bin"):
        for name in ("qemu-system-x86_64", "qemu-kvm"):
            if os.access(os.path.join(directory, name), os.X_OK):
                return os.path.join(directory, name)
    return None


def vm_accelerator(kvm, qemu):
    """kvm where hardware virtualization is really usable, tcg (QEMU's emulator) where only QEMU is."""
    if kvm["device"] and kvm["usable"] and kvm["hw_virt"]:
        return "kvm"
    return "tcg" if qemu else None


def unix_socket_answers(socket_path, request=None, expected=None):
    """True when something accepts connections on the socket and, given a request, its
    reply contains ``expected``."""
    if not os.path.exists(socket_path):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(3)
            sock.connect(socket_path)
            if request is None:
                return True
            sock.sendall(request)
            return expected in sock.recv(256)
    except OSError:
        return False


def docker_engine_answers(socket_path):
    """True when a Docker engine answers its API ping on the socket."""
    return unix_socket_answers(socket_path, b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n", b" 200 ")


def virtualization(flags_all):
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return "container"
    return "vm" if "hypervisor" in flags_all else "none"


def main():
    module = AnsibleModule(
        argument_spec={
            "docker_socket": {"type": "path", "default": "/var/run/docker.sock"},
            "libvirt_socket": {"type": "path", "default": "/var/run/libvirt/libvirt-sock"},
            # Used on the controller by the action plugin (host_gpus, guest_gpus); nothing to read here.
            "gpu_assignment": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    online = parse_cpu_list(read_text("/sys/devices/system/cpu/online", "0"))
    allowed = sorted(os.sched_getaffinity(0))
    model, flags = cpu_info()
    cores, sockets, threads = cpu_topology(online)
    gpus = nvidia_gpus()
    kvm = kvm_state(flags)
    qemu = qemu_binary()
    facts = {
        "cpu_model": model,
        "cpus_online": online,
        "cpus_allowed": allowed,
        "cpu_count": len(allowed),
        "sockets": sockets,
        "cores": cores,
        "threads_per_core": threads,
        "numa_nodes": numa_nodes(),
        "cpu_flags": flags,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "kvm": kvm,
        "iommu": iommu_state(),
        "qemu_binary": qemu,
        "vm_accelerator": vm_accelerator(kvm, qemu),
        "libvirt_daemon": unix_socket_answers(module.params["libvirt_socket"]),
        "systemd_pid1": read_text("/proc/1/comm") == "systemd",
        "docker_engine": docker_engine_answers(module.params["docker_socket"]),
        "virt": virtualization(flags),
        "cpu_cgroup": cpu_cgroup(),
        "cpuacct_cgroup": cpuacct_cgroup(),
    }
    module.exit_json(changed=False, ansible_facts={"platbench": facts})


if __name__ == "__main__":
    main()
