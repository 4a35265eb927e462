"""What the process really runs on: CPUs, cgroup limits, container or VM.

Every probe is best effort: an unreadable source gives None, never an exception.
"""

import os
import platform
import re
import socket
import subprocess

CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "amx_tile", "amx_bf16", "vmx", "svm", "hypervisor")
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
# cgroup v1 reports "no limit" as a huge page-aligned number rather than a keyword.
_V1_UNLIMITED_BYTES = 2**62
_CONTAINER_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
# /proc/*/cgroup path fragments, most specific first.
_CGROUP_CONTAINER_PATTERNS = (
    (re.compile(r"/docker[/-][0-9a-f]{64}"), "docker"),
    (re.compile(r"libpod[-_]"), "podman"),
    (re.compile(r"kubepods|/lxc[/.]|lxc\.payload|cri-containerd-|crio-"), "container-other"),
)
# Files a container runtime bind-mounts into every container it starts.
_RUNTIME_BIND_MOUNTS = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")


def format_cpuset(cpus):
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (the kernel's cpu list format)."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def parse_cpuset(text):
    """Kernel cpu list to sorted cpus: "0-3,6" -> [0, 1, 2, 3, 6]; "" is the empty set."""
    cpus = set()
    for part in text.strip().split(","):
        if not part.strip():
            continue
        lo, sep, hi = part.strip().partition("-")
        first, last = int(lo), int(hi) if sep else int(lo)
        if first < 0 or last < first:
            raise ValueError(f"bad cpu range {part!r} in cpuset {text!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def set_thread_env(threads, interop_threads=1):
    """Size the math libraries' thread pools; only effective before the framework is imported."""
    for name in THREAD_ENV_VARS:
        os.environ[name] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = str(interop_threads)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _unescape_mountinfo(field):
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def _mountinfo():
    """(root, mount_point, fstype, super_options) for each mount this process sees."""
    mounts = []
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        fields, _, tail = line.partition(" - ")
        fields, tail = fields.split(), tail.split()
        if len(fields) >= 5 and len(tail) >= 3:
            mounts.append((_unescape_mountinfo(fields[3]), _unescape_mountinfo(fields[4]), tail[0], tail[2]))
    return mounts


def _cgroup_membership():
    """Controller -> this process's cgroup path; "" is the cgroup v2 unified hierarchy."""
    membership = {}
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            membership[controller] = path
    return membership


def _cgroup_dirs(controller):
    """This process's cgroup directories for `controller`, innermost first, up to the mount point."""
    membership = _cgroup_membership()
    for root, mount_point, fstype, options in _mountinfo():
        if fstype == "cgroup" and controller in options.split(","):
            path = membership.get(controller)
        elif fstype == "cgroup2" and controller in (_read(f"{mount_point}/cgroup.controllers") or "").split():
            path = membership.get("")
        else:
            continue
        if path is None:
            continue
        # Without a cgroup namespace the mount's root is our own cgroup (e.g. /docker/<id>).
        relative = path[len(root) :] if path.startswith(root) else ""
        directory = os.path.normpath(mount_point + "/" + relative.strip("/"))
        dirs = []
        while directory.startswith(mount_point):
            if os.path.isdir(directory):
                dirs.append(directory)
            if directory == mount_point:
                break
            directory = os.path.dirname(directory)
        return dirs
    return []


def _cpu_quota_of(directory):
    v2 = _read(f"{directory}/cpu.max")
    if v2 is not None:
        quota, period = v2.split()
        return None if quota == "max" else int(quota) / int(period)
    quota = _read(f"{directory}/cpu.cfs_quota_us")
    if quota is None or int(quota) < 0:
        return None
    return int(quota) / int(_read(f"{directory}/cpu.cfs_period_us"))


def _cgroup_cpu_quota():
    """Cores allowed by the tightest CFS quota on the way to the root; None if unlimited."""
    quotas = [q for q in map(_cpu_quota_of, _cgroup_dirs("cpu")) if q is not None]
    return min(quotas) if quotas else None


def _cgroup_cpuset():
    for directory in _cgroup_dirs("cpuset"):
        for name in ("cpuset.cpus.effective", "cpuset.effective_cpus", "cpuset.cpus"):
            cpus = _read(f"{directory}/{name}")
            if cpus:
                return format_cpuset(parse_cpuset(cpus))
    return None


def _memory_limit_of(directory):
    value = _read(f"{directory}/memory.max") or _read(f"{directory}/memory.limit_in_bytes")
    if value is None or value == "max" or int(value) >= _V1_UNLIMITED_BYTES:
        return None
    return int(value)


def _memory_limit_bytes():
    limits = [m for m in map(_memory_limit_of, _cgroup_dirs("memory")) if m is not None]
    return min(limits) if limits else None


def _memory_total_bytes():
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def _cpuinfo_value(key):
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return None


def _cpu_flags():
    return set((_cpuinfo_value("flags") or "").split())


def _runtime_mount_roots():
    """Where the bind-mounted /etc/hostname & co come from, when something bind-mounted them."""
    return [root for root, mount_point, _, _ in _mountinfo() if mount_point in _RUNTIME_BIND_MOUNTS]


def _container_kind():
    # Evidence first: the cgroup path, then the runtime's bind mounts. Marker files like
    # /.dockerenv are a last resort, because VM images made from container images keep them.
    cgroups = (_read("/proc/1/cgroup") or "") + "\n" + (_read("/proc/self/cgroup") or "")
    for pattern, kind in _CGROUP_CONTAINER_PATTERNS:
        if pattern.search(cgroups):
            return kind
    for root in _runtime_mount_roots():
        if "overlay-containers/" in root:
            return "podman"
        if re.search(r"(^|/)containers/[0-9a-f]{64}/", root):
            return "docker"
        return "container-other"
    if not _mountinfo():
        if os.path.exists("/.dockerenv"):
            return "docker"
        if os.path.exists("/run/.containerenv"):
            return "podman"
    return None


def _hypervisor_kind(cpu_flags):
    dmi = " ".join(filter(None, (_read("/sys/class/dmi/id/sys_vendor"), _read("/sys/class/dmi/id/product_name"))))
    dmi = dmi.lower()
    clocksources = (_read("/sys/devices/system/clocksource/clocksource0/available_clocksource") or "").split()
    if _read("/sys/hypervisor/type") == "xen" or "xen" in dmi:
        return "xen"
    # kvm-clock exists only in KVM guests (QEMU/KVM, Firecracker, cloud-hypervisor...).
    if "kvm-clock" in clocksources or "kvm" in dmi:
        return "kvm"
    if "qemu" in dmi:
        return "qemu"
    if "vmware" in dmi:
        return "vmware"
    if "microsoft" in dmi and "virtual machine" in dmi:
        return "hyperv"
    if "hypervisor" in cpu_flags:
        return "vm-other"
    return "none"


def _systemd_detect_virt():
    """systemd's own verdict (qemu, kvm, docker, none...), where systemd is installed."""
    try:
        done = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _container_id():
    match = _CONTAINER_ID.search(_read("/proc/self/cgroup") or "")
    if match:
        return match.group(0)
    for root in _runtime_mount_roots():
        match = re.search(r"containers/([0-9a-f]{64})/", root)
        if match:
            return match.group(1)
    return None


def _numa_nodes():
    names = os.listdir("/sys/devices/system/node")
    return sum(1 for name in names if re.fullmatch(r"node\d+", name))


def _best_effort(probe):
    try:
        return probe()
    except Exception:  # noqa: BLE001 - a probe must never break a benchmark run
        return None


def probe_environment():
    """Facts about the environment this process runs in; None where unknown."""
    cpu_flags = _best_effort(_cpu_flags) or set()
    hypervisor = _best_effort(lambda: _hypervisor_kind(cpu_flags))
    container = _best_effort(_container_kind)
    probes = {
        "hostname": socket.gethostname,
        "kernel": lambda: os.uname().release,
        "cpu_model": lambda: _cpuinfo_value("model name"),
        "cpu_flags_of_interest": lambda: [flag for flag in CPU_FLAGS_OF_INTEREST if flag in cpu_flags],
        "cpuset": lambda: format_cpuset(os.sched_getaffinity(0)),
        "cpus_allowed_count": lambda: len(os.sched_getaffinity(0)),
        "cgroup_cpu_quota": _cgroup_cpu_quota,
        "cgroup_cpuset": _cgroup_cpuset,
        "memory_limit_bytes": _memory_limit_bytes,
        "memory_total_bytes": _memory_total_bytes,
        # A container inside a VM reports the container; `hypervisor` still names the VM.
        "virt": lambda: container or hypervisor,
        "hypervisor": lambda: hypervisor,
        "systemd_detect_virt": _systemd_detect_virt,
        "container_id": _container_id,
        "python_version": platform.python_version,
        "pid": os.getpid,
        "numa_nodes": _numa_nodes,
    }
    return {name: _best_effort(probe) for name, probe in probes.items()}
