# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""OCI bundles of the workload image's root run by ``runc`` with no engine (the ``oci_bundle`` kind: platforms ``ns``
and ``sc``, the rungs between ``cr`` and ``cn`` of ``platbench explain``'s ladder).

The bundles are Docker's own. platbench.lab.oci_bundle starts one throwaway container of the workload image as a
cell's is started (no network) and keeps the OCI configuration Docker wrote for it (``ENGINE_CONFIG``). From it,
``base_config`` makes one base per confinement, written once per image id:

- ``none`` (``ns``): Docker's namespaces, mounts and masked paths, with no seccomp filter, every capability the
  host's root holds (its bounding set) and no AppArmor profile;
- ``engine`` (``sc``): the same, with Docker's seccomp profile, capability set and AppArmor profile as it applied
  them.

What Docker's configuration binds from its own container directory (``/etc/hosts``, ``/etc/resolv.conf``,
``/etc/hostname``, a shareable ``/dev/shm``) is left out or made a tmpfs, and its hooks (libnetwork's) go: the
throwaway container is gone when a cell runs. The root is the one platbench.lab.lxc exported from the same image
(``lxc.ROOTFS``): the bytes ``cr`` chroots into.

A cell's line copies the base into a bundle directory of its own with the cell's part applied (``cell_patch``: its
argv, environment, mounts, CPUs and cgroup; ``APPLY`` does it with the host's python3), runs ``runc run`` in the
foreground (its output is the workload's), then deletes the container and the bundle.
"""

from __future__ import annotations

import copy
import json
import os
import shlex

from ansible_collections.platbench.lab.plugins.module_utils import lxc

DIR = "/var/lib/platbench/oci"
ENGINE_CONFIG = f"{DIR}/engine-config.json"  # the OCI configuration Docker wrote for the throwaway container
IMAGE_ID_FILE = f"{DIR}/bases.image-id"  # the workload image id the bases were made from
CONFINEMENTS = ("none", "engine")
BASES = {confinement: f"{DIR}/base-{confinement}.json" for confinement in CONFINEMENTS}
# Each cell's bundle (its config.json) under /run, so that a reboot leaves none; runc's own state directory, so that
# `runc list` there names only platbench's containers and a teardown removes nothing of another's.
BUNDLES = "/run/platbench/oci"
RUNC_ROOT = "/run/platbench/runc"
RUNC = "runc"
ROOT = lxc.ROOTFS
PREFIX = lxc.PREFIX  # the image's: its venv and its code
ROLE = "platbench.lab.oci_bundle"
FIX = f"run site.yml with ns and sc in platbench_platforms (role {ROLE})"
# The namespaces a base must hold, Docker's for a container with no network of its own to share: the rung's name.
NAMESPACES = ("pid", "network", "ipc", "uts", "mount")
# The cgroup the container gets (runc makes it and removes it): beside Docker's /docker/<id>, or, where systemd is
# PID 1, a scope in system.slice, as Docker's systemd driver makes one (runc's slice:prefix:name form).
CGROUP_PARENT = "/platbench-oci"
SYSTEMD_CGROUP = "system.slice:platbench-oci:{name}"
# Docker's files of its container directory, which a bundle run without it has none of.
ENGINE_FILES = ("/etc/hosts", "/etc/resolv.conf", "/etc/hostname")
SHM = {
    "destination": "/dev/shm",
    "type": "tmpfs",
    "source": "shm",
    "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=67108864"],
}
# The exit status of a line whose bundle could not be made: the workload never started.
BUNDLE_FAILED = 125
# Linux's capabilities by number (capability.h); a base with no confinement holds those of the host root's bounding set.
CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)
CAPABILITY_SETS = ("bounding", "effective", "permitted", "inheritable")
# Applies a cell's patch to a base: `set` puts values at dotted paths, `extend` appends to lists, `env` sets
# variables of a NAME=VALUE list by name (a second entry of a name would be shadowed by the first). Run by the host's
# python3 in the cell's line: the base is on the runner host, the patch comes from the plan.
APPLY = """import json, sys
config, patch = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
def at(path):
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    return node, last
for path, value in patch.get("set", {}).items():
    node, last = at(path)
    node[last] = value
for path, values in patch.get("extend", {}).items():
    node, last = at(path)
    node[last] = node.get(last, []) + values
for path, variables in patch.get("env", {}).items():
    node, last = at(path)
    kept = [entry for entry in node.get(last, []) if entry.split("=", 1)[0] not in variables]
    node[last] = kept + [name + "=" + value for name, value in variables.items()]
with open(sys.argv[3], "w") as stream:
    json.dump(config, stream)
"""


class BundleError(ValueError):
    """Docker's configuration cannot be made into a base; the message says what is wrong and where."""


def capabilities_in(mask):
    """The capabilities of a mask (/proc/self/status's CapBnd, hex): what a process of the host's root may hold, and
    so all runc can give a container (asking for one outside it fails the container's start)."""
    bits = int(str(mask), 16)
    return [name for number, name in enumerate(CAPABILITIES) if bits >> number & 1]


def bounding_set(status_path="/proc/self/status"):
    """This process's bounding set of capabilities (as ``capabilities_in`` names them)."""
    with open(status_path, encoding="utf-8") as stream:
        for line in stream:
            if line.startswith("CapBnd:"):
                return capabilities_in(line.split(":", 1)[1].strip())
    raise BundleError(f"{status_path} has no CapBnd line")


def _engine_mount(mount):
    """What a base keeps of one of Docker's mounts: the mount, a tmpfs in place of a shareable /dev/shm, or None
    where it is a file of Docker's container directory."""
    if mount.get("destination") in ENGINE_FILES:
        return None
    if mount.get("destination") == "/dev/shm" and mount.get("type") == "bind":
        return dict(SHM)
    return mount


def base_config(engine_config, confinement, root=ROOT, bounding=CAPABILITIES):
    """The base of ``confinement`` (CONFINEMENTS) made from Docker's OCI configuration ``engine_config`` (a dict): its
    root ``root``, no process arguments yet, no cgroup, CPU or network settings of the throwaway container's, no
    hooks. ``none`` gives the process every capability of ``bounding`` (the host root's: ``bounding_set``)."""
    if confinement not in CONFINEMENTS:
        raise BundleError(f"confinement {confinement!r}: one of {', '.join(CONFINEMENTS)}")
    linux = engine_config.get("linux")
    process = engine_config.get("process")
    if not isinstance(linux, dict) or not isinstance(process, dict):
        raise BundleError("the engine's configuration holds no `linux` or `process` section: is it an OCI config.json?")
    found = [namespace.get("type") for namespace in linux.get("namespaces") or []]
    missing = [name for name in NAMESPACES if name not in found]
    if missing:
        raise BundleError(
            f"the engine's configuration has no {', '.join(missing)} namespace(s) (it has {', '.join(found)}): "
            "the throwaway container was not started as a cell's is"
        )
    base = {
        "ociVersion": engine_config.get("ociVersion", "1.0.2"),
        "process": copy.deepcopy(process),
        "root": {"path": root, "readonly": False},
        "hostname": engine_config.get("hostname") or "platbench",
        "mounts": [kept for kept in map(_engine_mount, copy.deepcopy(engine_config.get("mounts") or [])) if kept],
        "linux": copy.deepcopy(linux),
    }
    # The image's working directory and environment stay, as Docker set them: the cell's argv is cn's.
    base["process"].update(terminal=False, args=[])
    base["process"].pop("consoleSize", None)
    # Each namespace a new one (the throwaway's were made, never joined); the cell's cgroup and CPUs are its own.
    base["linux"]["namespaces"] = [{"type": name} for name in found]
    base["linux"].pop("cgroupsPath", None)
    resources = base["linux"].get("resources") or {}
    base["linux"]["resources"] = {"devices": resources["devices"]} if "devices" in resources else {}
    if confinement == "none":
        base["linux"].pop("seccomp", None)
        base["process"].pop("apparmorProfile", None)
        base["process"]["capabilities"] = {name: list(bounding) for name in CAPABILITY_SETS}
    return base


def mechanisms(base):
    """What a base confines its process with, for the record: its namespaces, its seccomp filter (default action and
    number of rules, or None), its capabilities (how many of each set) and its AppArmor profile (or None)."""
    seccomp = (base.get("linux") or {}).get("seccomp")
    capabilities = (base.get("process") or {}).get("capabilities") or {}
    return {
        "namespaces": [namespace["type"] for namespace in (base.get("linux") or {}).get("namespaces") or []],
        "seccomp": (
            {"default_action": seccomp.get("defaultAction"), "rules": len(seccomp.get("syscalls") or [])}
            if seccomp
            else None
        ),
        "capabilities": {name: len(capabilities.get(name) or []) for name in CAPABILITY_SETS},
        "apparmor": (base.get("process") or {}).get("apparmorProfile") or None,
    }


def cgroup_path(name, systemd=False):
    """The container's cgroup (``linux.cgroupsPath``): runc's cgroupfs path, or its systemd slice:prefix:name."""
    return SYSTEMD_CGROUP.format(name=name) if systemd else f"{CGROUP_PARENT}/{name}"


def cell_patch(argv, env, mounts, cpus="", quota=None, cgroup=None):
    """The cell's part of its bundle (APPLY's patch): the workload's ``argv`` and environment (``env``, a dict set over
    the image's), the cell's ``mounts`` (source, target, mode) bound in, its ``cpus`` (a cpuset) or CPU ``quota``
    (CPUs of time every 100 ms) and its cgroup."""
    cpu = {}
    if cpus:
        cpu["cpus"] = cpus
    if quota:
        cpu.update(quota=int(round(float(quota) * 100000)), period=100000)
    binds = [
        {
            "destination": mount["target"],
            "type": "bind",
            "source": mount["source"],
            "options": ["rbind", "rprivate", "ro" if mount["mode"] == "ro" else "rw"],
        }
        for mount in mounts
    ]
    patch = {
        "set": {"process.args": list(argv), "linux.resources.cpu": cpu},
        "extend": {"mounts": binds},
        "env": {"process.env": {name: str(value) for name, value in env.items()}},
    }
    if cgroup:
        patch["set"]["linux.cgroupsPath"] = cgroup
    return patch


def runc_argv(*args, systemd=False):
    """``runc`` with platbench's own state directory (and the systemd cgroup driver where systemd is PID 1)."""
    return [RUNC, "--root", RUNC_ROOT, *(["--systemd-cgroup"] if systemd else []), *args]


def bundle_down(name, bundle, systemd=False):
    """Shell commands that delete the container ``name`` (killing what is left of it) and its bundle directory."""
    delete = shlex.join(runc_argv("delete", "--force", name, systemd=systemd))
    return f"{delete} >/dev/null 2>&1; rm -rf {shlex.quote(bundle)}"


def line(name, bundle, base, patch, workload, systemd=False):
    """The cell's whole shell line: the bundle made from ``base`` with ``patch`` (a failure removes it and exits
    BUNDLE_FAILED), ``workload`` (a line that runs ``runc run`` of it), then the container and the bundle deleted
    and the workload's status."""
    down = bundle_down(name, bundle, systemd)
    make = (
        f"mkdir -p {shlex.quote(bundle)} && python3 -c {shlex.quote(APPLY)} {shlex.quote(base)} "
        f"{shlex.quote(json.dumps(patch, sort_keys=True))} {shlex.quote(bundle + '/config.json')}"
    )
    return (
        f"{{ {make}; }} || {{ {down}; exit {BUNDLE_FAILED}; }}; "
        f"sh -c {shlex.quote(workload)}; status=$?; {down}; exit $status"
    )


def probe(runc_path, image_id_file=IMAGE_ID_FILE, bases=None):
    """``{"installed", "bases_image_id", "bases"}``: whether runc is at ``runc_path`` (None: not found), the image
    id the bases were made from (None: none made), and each base's ``mechanisms`` (None where it is missing or does
    not read)."""
    bases = bases or BASES
    found_id = None
    if os.path.isfile(image_id_file):
        with open(image_id_file, encoding="utf-8") as stream:
            found_id = stream.read().strip() or None
    read = {}
    for confinement, path in bases.items():
        try:
            with open(path, encoding="utf-8") as stream:
                read[confinement] = mechanisms(json.load(stream))
        except (OSError, ValueError):
            read[confinement] = None
    return {"installed": bool(runc_path), "bases_image_id": found_id, "bases": read}


def host_problem(found, image_id, confinement):
    """Why this host cannot run a bundle of ``confinement`` of the current workload image ``image_id``, or None."""
    found = found or {}
    if not found.get("installed"):
        return f"runc is not installed on this host: {FIX}"
    if not (found.get("bases") or {}).get(confinement):
        return f"no bundle base {BASES[confinement]} (Docker's configuration of the workload image): {FIX}"
    if not image_id:
        return f"the workload image is not built in Docker, so the bundle bases cannot be checked: {FIX}"
    if found.get("bases_image_id") != image_id:
        made = (found.get("bases_image_id") or "no image")[:19]
        return f"the bundle bases were made from {made}, not the current workload image {image_id[:19]}: {FIX}"
    return None
