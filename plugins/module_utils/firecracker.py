# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Firecracker micro-VMs (the ``mvm`` platform): the VM configuration file, the jailer's command line, the
vCPU threads' pinning, the cell's tap network, the kernel Firecracker boots, and whether a host can run one.

Pure Python, no Ansible: ``platbench.lab.firecracker_vm`` runs what this plans, ``platbench.lab.platform_status``
asks ``probe`` whether the host can, and the unit tests check every piece without KVM.

The configuration schema is written here from the field names and types Firecracker's API documents (its swagger
definitions BootSource, Drive, MachineConfiguration, NetworkInterface and Vsock); a field it does not document is an
error before Firecracker is started, not a VM that refuses to boot.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import ipaddress
import lzma
import os
import re
import zlib
from dataclasses import dataclass

# Where platbench.lab.firecracker installs the binaries, and the chroots the jailer makes.
BINARY = "/usr/local/bin/firecracker"
JAILER = "/usr/local/bin/jailer"
CHROOT_BASE = "/srv/platbench-jailer"
KVM = "/dev/kvm"
ROLE_FIX = "run site.yml with the host in platbench_mvm_hosts (role platbench.lab.firecracker)"
KVM_FIX = (
    "Firecracker needs KVM: enable virtualization in the firmware and load kvm_intel or kvm_amd, "
    "or use a host (or a VM with nested virtualization) that has a usable /dev/kvm"
)
IMAGE_FIX = (
    "run site.yml with the host in platbench_mvm_hosts (role platbench.lab.guest_image with "
    "guest_image_firecracker: true writes the uncompressed kernel and the raw root file system)"
)
# Firecracker names its vCPU threads so (fc_vcpu 0, fc_vcpu 1, ...).
VCPU_COMM = re.compile(r"^fc_vcpu (\d+)$")
MAX_VCPUS = 32
# The cells' taps: one /30 each (the host's end, the guest's end), inside the lab's benchmarking range.
NETWORK = ipaddress.ip_network("198.18.0.0/15")
TAP_PREFIX = 30
# Every tap a cell makes (guest_network), and nothing else: what teardown removes of a stopped cell's network.
TAP_NAME = re.compile(r"^pbfc[0-9a-f]{8}$")
# The jailer ids of the cells' micro-VMs: their guest names, plugin_utils/cells/cellplan.py's NAME_PREFIX and a hash (a
# cell's instance adds -<i>). Teardown stops the Firecracker processes and removes the cgroups of these ids only.
CELL_VM_ID = re.compile(r"^platbench-[0-9a-f]+(-[0-9]+)?$")
# Paths inside the jail (the jailer chroots Firecracker into <base>/firecracker/<id>/root).
IN_JAIL = {"kernel": "vmlinux", "initrd": "initrd", "rootfs": "rootfs.raw", "config": "vm-config.json"}
# The guest's console on the serial port; the kernel's own ip= configuration of the tap (systemd-network-generator
# turns it into a .network file in the guest image's Firecracker variant); no PCI bus in a micro-VM.
BASE_BOOT_ARGS = ("console=ttyS0", "reboot=k", "panic=1", "pci=off")


class FirecrackerError(ValueError):
    """A micro-VM that cannot be configured or started as asked; the message says why and what to change."""


@dataclass(frozen=True)
class Field:
    """One documented field: its JSON type, whether it is required, and what values it allows."""

    type: type
    required: bool = False
    choices: tuple = ()
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None


_MAC = r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$"
# Each section of the configuration file: whether it is one object or a list of them, and its fields.
SCHEMA = {
    "boot-source": (
        "object",
        {
            "kernel_image_path": Field(str, required=True),
            "boot_args": Field(str),
            "initrd_path": Field(str),
        },
    ),
    "drives": (
        "list",
        {
            "drive_id": Field(str, required=True),
            "path_on_host": Field(str),
            "is_root_device": Field(bool, required=True),
            "is_read_only": Field(bool),
            "partuuid": Field(str),
            "cache_type": Field(str, choices=("Unsafe", "Writeback")),
            "io_engine": Field(str, choices=("Sync", "Async")),
        },
    ),
    "machine-config": (
        "object",
        {
            "vcpu_count": Field(int, required=True, minimum=1, maximum=MAX_VCPUS),
            "mem_size_mib": Field(int, required=True, minimum=1),
            "smt": Field(bool),
            "track_dirty_pages": Field(bool),
            "huge_pages": Field(str, choices=("None", "2M")),
        },
    ),
    "network-interfaces": (
        "list",
        {
            "iface_id": Field(str, required=True),
            "host_dev_name": Field(str, required=True),
            "guest_mac": Field(str, pattern=_MAC),
        },
    ),
    "vsock": (
        "object",
        {
            "guest_cid": Field(int, required=True, minimum=3),
            "uds_path": Field(str, required=True),
        },
    ),
}
REQUIRED_SECTIONS = ("boot-source", "drives", "machine-config")


def _field_problems(where, entry, fields):
    if not isinstance(entry, dict):
        return [f"{where}: must be an object, got {type(entry).__name__}"]
    problems = [
        f"{where}: unknown field {name!r}; Firecracker documents: {', '.join(fields)}"
        for name in entry
        if name not in fields
    ]
    for name, spec in fields.items():
        if name not in entry:
            if spec.required:
                problems.append(f"{where}: {name} is required")
            continue
        value = entry[name]
        # bool is an int in Python; Firecracker's JSON tells them apart.
        if not isinstance(value, spec.type) or (spec.type is int and isinstance(value, bool)):
            problems.append(f"{where}.{name}: must be {spec.type.__name__}, got {value!r}")
        elif spec.choices and value not in spec.choices:
            problems.append(f"{where}.{name}: {value!r} is not one of {', '.join(spec.choices)}")
        elif spec.minimum is not None and value < spec.minimum:
            problems.append(f"{where}.{name}: {value} is below {spec.minimum}")
        elif spec.maximum is not None and value > spec.maximum:
            problems.append(f"{where}.{name}: {value} is above {spec.maximum}")
        elif spec.pattern and not re.match(spec.pattern, value):
            problems.append(f"{where}.{name}: {value!r} does not match {spec.pattern}")
    return problems


def config_problems(config):
    """Everything in ``config`` (a Firecracker --config-file document) that the API would refuse: unknown sections
    and fields, wrong types and values, no root drive or several, duplicate ids, an odd vCPU count with SMT."""
    if not isinstance(config, dict):
        return [f"the VM configuration must be an object, got {type(config).__name__}"]
    problems = [
        f"unknown section {name!r}; this schema knows: {', '.join(SCHEMA)}" for name in config if name not in SCHEMA
    ]
    problems += [f"section {name!r} is required" for name in REQUIRED_SECTIONS if name not in config]
    for section, (shape, fields) in SCHEMA.items():
        if section not in config:
            continue
        if shape == "object":
            problems += _field_problems(section, config[section], fields)
            continue
        entries = config[section]
        if not isinstance(entries, list):
            problems.append(f"{section}: must be a list, got {type(entries).__name__}")
            continue
        for index, entry in enumerate(entries):
            problems += _field_problems(f"{section}[{index}]", entry, fields)
    problems += _cross_field_problems(config)
    return problems


def _cross_field_problems(config):
    problems = []
    drives = [d for d in config.get("drives") or [] if isinstance(d, dict)]
    roots = [d.get("drive_id") for d in drives if d.get("is_root_device") is True]
    if "drives" in config and len(roots) != 1:
        problems.append(f"drives: exactly one must be the root device (is_root_device), found {len(roots)}")
    for section, key in (("drives", "drive_id"), ("network-interfaces", "iface_id")):
        ids = [e.get(key) for e in config.get(section) or [] if isinstance(e, dict)]
        duplicates = sorted({i for i in ids if ids.count(i) > 1 and i is not None})
        if duplicates:
            problems.append(f"{section}: {key} {', '.join(duplicates)} used more than once")
    machine = config.get("machine-config") or {}
    vcpus = machine.get("vcpu_count") if isinstance(machine, dict) else None
    if isinstance(machine, dict) and machine.get("smt") is True and isinstance(vcpus, int) and vcpus > 1 and vcpus % 2:
        problems.append(f"machine-config.vcpu_count: {vcpus} with smt must be 1 or even")
    return problems


def check_config(config):
    """``config``, or FirecrackerError listing every problem (``config_problems``)."""
    problems = config_problems(config)
    if problems:
        raise FirecrackerError("invalid Firecracker VM configuration: " + "; ".join(problems))
    return config


def guest_network(key):
    """The cell's tap network from ``key`` (what tells the cell apart): the tap's name (pbfc + 8 hex digits, under
    the 15 characters of an interface name), its /30 in 198.18.0.0/15, the host's and the guest's addresses, and the
    guest's MAC (locally administered, its last four bytes the guest's address)."""
    digest = hashlib.sha256(str(key).encode()).hexdigest()
    subnets = NETWORK.num_addresses >> (32 - TAP_PREFIX)
    subnet = ipaddress.ip_network(
        (int(NETWORK.network_address) + (int(digest, 16) % subnets) * 4, TAP_PREFIX), strict=True
    )
    host_address, guest_address = list(subnet.hosts())
    return {
        "tap": f"pbfc{digest[:8]}",
        "subnet": str(subnet),
        "host_address": str(host_address),
        "guest_address": str(guest_address),
        "prefix": TAP_PREFIX,
        "guest_mac": "06:00:" + ":".join(f"{byte:02x}" for byte in guest_address.packed),
    }


def boot_args(network, extra=()):
    """The kernel command line: serial console, no PCI, and ``ip=`` giving eth0 the guest's end of the tap."""
    mask = ipaddress.ip_network(network["subnet"]).netmask
    ip = f"ip={network['guest_address']}::{network['host_address']}:{mask}::eth0:off"
    return " ".join((*BASE_BOOT_ARGS, ip, *extra))


def vm_config(vcpus, memory_mib, network, initrd=True, read_only_drives=(), vsock_cid=None, extra_boot_args=()):
    """The --config-file document of one micro-VM, checked against the schema. Paths are the jail's (IN_JAIL):
    the kernel, its initrd, the guest's writable root drive, and ``read_only_drives`` ((drive id, the jail's file
    name) pairs: the workloads disk, a data disk), which the guest mounts by their labels."""
    boot = {"kernel_image_path": IN_JAIL["kernel"], "boot_args": boot_args(network, extra_boot_args)}
    if initrd:
        boot["initrd_path"] = IN_JAIL["initrd"]
    drives = [{"drive_id": "rootfs", "path_on_host": IN_JAIL["rootfs"], "is_root_device": True, "is_read_only": False}]
    for drive_id, path in read_only_drives:
        drives.append({"drive_id": drive_id, "path_on_host": path, "is_root_device": False, "is_read_only": True})
    config = {
        "boot-source": boot,
        "drives": drives,
        # SMT off: each vCPU is one thread the plan pins to one host CPU.
        "machine-config": {"vcpu_count": vcpus, "mem_size_mib": memory_mib, "smt": False},
        "network-interfaces": [
            {"iface_id": "eth0", "host_dev_name": network["tap"], "guest_mac": network["guest_mac"]}
        ],
    }
    if vsock_cid is not None:
        config["vsock"] = {"guest_cid": vsock_cid, "uds_path": "vsock.sock"}
    return check_config(config)


def jail_id(name):
    """The jailer's --id: the guest's name, cut to the 64 alphanumerics and dashes the jailer takes."""
    cleaned = re.sub(r"[^A-Za-z0-9-]", "-", str(name))[:64]
    if not cleaned:
        raise FirecrackerError(f"no jailer id can be made of {name!r}")
    return cleaned


def jail_root(vm_id, chroot_base=CHROOT_BASE, binary=BINARY):
    """Where the jailer chroots Firecracker: <base>/<exec file's name>/<id>/root."""
    return os.path.join(chroot_base, os.path.basename(binary), vm_id, "root")


def jail_ids(chroot_base=CHROOT_BASE, binary=BINARY):
    """The ids of every jail under the chroot base (<base>/<exec file's name>/<id>): the micro-VMs not yet removed."""
    parent = os.path.join(chroot_base, os.path.basename(binary))
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if os.path.isdir(os.path.join(parent, name)))


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except OSError:
        return None  # the process ended while we looked


def vm_processes(binary=BINARY, proc="/proc"):
    """The host's Firecracker processes by their jailer id: {id: [pid, ...]}. The jailer execs Firecracker (its
    ``comm``, the exec file's name) with ``--id ID`` first among its arguments; a process without one is left out."""
    name = os.path.basename(binary)[:15]  # the kernel keeps 15 characters of a command's name
    found = {}
    for entry in os.listdir(proc):
        if not entry.isdigit() or (_read(os.path.join(proc, entry, "comm")) or "").strip() != name:
            continue
        argv = (_read(os.path.join(proc, entry, "cmdline"), "rb") or b"").decode(errors="replace").split("\0")
        if "--id" in argv[:-1]:
            found.setdefault(argv[argv.index("--id") + 1], []).append(int(entry))
    return found


def cgroup_dirs(vm_id, cgroup_root="/sys/fs/cgroup", binary=BINARY):
    """The cgroups the jailer made for ``vm_id``: <root>/<exec file's name>/<id> under cgroup v2, and the same
    below each controller's hierarchy (<root>/cpuset/..., <root>/cpu,cpuacct/...) under v1."""
    parent = os.path.basename(binary)
    candidates = [os.path.join(cgroup_root, parent, vm_id)]
    with contextlib.suppress(FileNotFoundError):
        candidates += [os.path.join(cgroup_root, entry, parent, vm_id) for entry in sorted(os.listdir(cgroup_root))]
    return [path for path in candidates if os.path.isdir(path)]


def cell_cgroup_ids(cgroup_root="/sys/fs/cgroup", binary=BINARY):
    """The ids of the cells' micro-VMs (CELL_VM_ID) that still have a jailer cgroup on the host."""
    parent = os.path.basename(binary)
    parents = [os.path.join(cgroup_root, parent)]
    with contextlib.suppress(FileNotFoundError):
        parents += [os.path.join(cgroup_root, entry, parent) for entry in os.listdir(cgroup_root)]
    ids = set()
    for directory in parents:
        try:
            ids.update(name for name in os.listdir(directory) if CELL_VM_ID.match(name))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(ids)


def cell_taps(net="/sys/class/net"):
    """The taps of the cells' micro-VMs (TAP_NAME) present on the host."""
    try:
        return sorted(name for name in os.listdir(net) if TAP_NAME.match(name))
    except FileNotFoundError:
        return []


def firecracker_argv(config_path=IN_JAIL["config"]):
    """Firecracker's own arguments: boot from the configuration file, no API socket (nothing drives it after)."""
    return ["--config-file", config_path, "--no-api"]


def cgroup_settings(cpus=(), quota=None, numa_nodes=(), cgroup_version=2, period_us=100000):
    """The jailer's --cgroup settings: for ``pin`` the cpuset (and its memory nodes), for ``vnl`` a CFS quota of
    ``quota`` CPUs, in the cgroup version's own file names."""
    settings = []
    if cpus:
        settings.append("cpuset.cpus=" + ",".join(str(cpu) for cpu in cpus))
        settings.append("cpuset.mems=" + ",".join(str(node) for node in (numa_nodes or (0,))))
    if quota:
        microseconds = int(round(float(quota) * period_us))
        if cgroup_version == 2:
            settings.append(f"cpu.max={microseconds} {period_us}")
        else:
            settings += [f"cpu.cfs_period_us={period_us}", f"cpu.cfs_quota_us={microseconds}"]
    return settings


def jailer_argv(vm_id, uid, gid, cgroups=(), cgroup_version=2, jailer=JAILER, binary=BINARY, chroot_base=CHROOT_BASE):
    """The whole command line: the jailer (its id, the binary it execs, the user it drops to, its chroot base, the
    cgroup settings), then ``--`` and Firecracker's arguments."""
    for what, value in (("uid", uid), ("gid", gid)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise FirecrackerError(f"the jailer's {what} must be a non-negative integer, got {value!r}")
    if cgroup_version not in (1, 2):
        raise FirecrackerError(f"cgroup version must be 1 or 2, got {cgroup_version!r}")
    argv = [jailer, "--id", vm_id, "--exec-file", binary, "--uid", str(uid), "--gid", str(gid)]
    argv += ["--chroot-base-dir", chroot_base, "--cgroup-version", str(cgroup_version)]
    for setting in cgroups:
        argv += ["--cgroup", setting]
    return argv + ["--", *firecracker_argv()]


def read_vcpu_threads(pid, proc="/proc"):
    """Firecracker's vCPU threads of process ``pid``: vCPU number to thread id (``fc_vcpu N`` in their comm)."""
    task_dir = os.path.join(proc, str(pid), "task")
    try:
        tids = os.listdir(task_dir)
    except OSError as exc:
        raise FirecrackerError(f"cannot list the threads of Firecracker process {pid} ({exc.strerror})") from None
    threads = {}
    for tid in tids:
        try:
            with open(os.path.join(task_dir, tid, "comm"), encoding="utf-8") as handle:
                match = VCPU_COMM.match(handle.read().strip())
        except OSError:
            continue  # the thread ended while we looked
        if match:
            threads[int(match.group(1))] = int(tid)
    return threads


def pin_plan(threads, cpus):
    """Thread id to the one host CPU it is pinned to: vCPU i to ``cpus[i]``, as the libvirt guests' vcpupin does."""
    cpus = [int(cpu) for cpu in cpus]
    if sorted(threads) != list(range(len(cpus))):
        raise FirecrackerError(
            f"Firecracker runs vCPU threads {sorted(threads)} but the plan pins {len(cpus)} vCPUs "
            f"(CPUs {cpus}): the VM did not start the vCPUs its configuration asked for"
        )
    return {threads[vcpu]: cpus[vcpu] for vcpu in sorted(threads)}


def apply_pins(plan, setter=os.sched_setaffinity):
    """Pin each thread of ``plan`` (``pin_plan``) to its CPU; returns vCPU-thread id to CPU as strings (records)."""
    for tid, cpu in plan.items():
        setter(tid, {cpu})
    return {str(tid): str(cpu) for tid, cpu in plan.items()}


# Compressed payloads of a bzImage that Python's standard library unpacks, by their magic bytes.
_PAYLOADS = (
    (b"\x1f\x8b\x08", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x5d\x00\x00", "lzma"),
)
ELF_MAGIC = b"\x7fELF"


def _unpack(kind, data):
    if kind == "gzip":
        # The payload is followed by the rest of the bzImage: decompress one member, ignore what trails it.
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    decompressor = lzma.LZMADecompressor(lzma.FORMAT_XZ if kind == "xz" else lzma.FORMAT_ALONE)
    return decompressor.decompress(data)


def extract_vmlinux(image):
    """The uncompressed ELF kernel Firecracker boots on x86_64, from a distribution's compressed ``vmlinuz``
    (a bzImage): the first payload, at any offset, that unpacks to an ELF file. An ELF file is returned as it is."""
    if image.startswith(ELF_MAGIC):
        return image
    for magic, kind in _PAYLOADS:
        start = image.find(magic)
        while start != -1:
            try:
                kernel = _unpack(kind, image[start:])
            except (OSError, EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile):
                kernel = b""
            if kernel.startswith(ELF_MAGIC):
                return kernel
            start = image.find(magic, start + 1)
    raise FirecrackerError(
        "no gzip, xz or lzma payload of the kernel image unpacks to an ELF vmlinux (a zstd or lz4 kernel needs "
        "the kernel's scripts/extract-vmlinux): unpack it with that script and put the ELF vmlinux where the guest "
        "image keeps its Firecracker kernel (rootfs-<id>.vmlinux beside the image)"
    )


def kvm_problem(kvm=KVM):
    """Why ``kvm`` cannot be opened for reading and writing (what Firecracker does first), or None."""
    try:
        descriptor = os.open(kvm, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        why = "does not exist" if exc.errno == errno.ENOENT else f"cannot be opened read-write ({exc.strerror})"
        return f"{kvm} {why}: {KVM_FIX}"
    os.close(descriptor)
    return None


def probe(binary=BINARY, jailer=JAILER, kvm=KVM):
    """What the ``firecracker`` requirement reads of a host: the binaries present and executable, KVM usable."""
    return {
        "binary": binary,
        "jailer": jailer,
        "binary_present": os.path.isfile(binary) and os.access(binary, os.X_OK),
        "jailer_present": os.path.isfile(jailer) and os.access(jailer, os.X_OK),
        "kvm": kvm,
        "kvm_problem": kvm_problem(kvm),
    }


def host_problem(found):
    """Why a host (``probe``'s answer) cannot run a micro-VM, or None: every reason, each with what to do."""
    if not found:
        return f"Firecracker was not looked for on this host: {ROLE_FIX}"
    problems = []
    if found.get("kvm_problem"):
        problems.append(found["kvm_problem"])
    missing = [found[name] for name in ("binary", "jailer") if not found.get(f"{name}_present")]
    if missing:
        problems.append(f"no Firecracker binary at {' or '.join(missing)}: {ROLE_FIX}")
    return "; ".join(problems) or None
