# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""LXC system containers (the ``lxc`` kind, platform ``lx``): where platbench.lab.lxc puts the container's root and
configuration, what a cell's ``lxc-execute`` is told, and whether a host can run one.

The root is the workload image's file system (the lab's Debian root and the workload venv), exported from Docker
once per image id into ROOTFS; CONFIG holds what every cell shares (no network, /proc, /sys read-only, a /tmp of its
own). Each cell runs ``lxc-execute`` with a name of its own and its CPU set, CPU quota and memory limit as cgroup
keys (``-s``), which LXC applies when the container starts, or refuses to start it.
"""

from __future__ import annotations

import os

DIR = "/var/lib/platbench/lxc"
ROOTFS = f"{DIR}/rootfs"
CONFIG = f"{DIR}/platbench.conf"
IMAGE_ID_FILE = f"{DIR}/rootfs.image-id"  # the workload image id ROOTFS was exported from
EXECUTE = "lxc-execute"
STOP = "lxc-stop"
PREFIX = "/opt/platbench"  # the workload image's: its venv and its code
ROLE = "platbench.lab.lxc"
PERIOD_US = 100000
FIX = f"run site.yml with lx in platbench_platforms (role {ROLE})"


def cgroup_settings(cpus="", quota=None, memory_mb=None, cgroup_version="v1"):
    """The ``lxc.cgroup*`` keys of a cell, as ``KEY=VALUE``: its CPU set, its CPU quota (CPUs of time), its memory
    limit (MiB). ``cgroup_version``: the host's, ``v1`` or ``v2`` (host_facts' cpu_cgroup): LXC's v1 keys name the
    controller files, v2's (``lxc.cgroup2``) the unified ones."""
    prefix = "lxc.cgroup2" if cgroup_version == "v2" else "lxc.cgroup"
    settings = []
    if cpus:
        settings.append(f"{prefix}.cpuset.cpus={cpus}")
    if quota:
        quota_us = int(round(float(quota) * PERIOD_US))
        if cgroup_version == "v2":
            settings.append(f"{prefix}.cpu.max={quota_us} {PERIOD_US}")
        else:
            settings += [f"{prefix}.cpu.cfs_period_us={PERIOD_US}", f"{prefix}.cpu.cfs_quota_us={quota_us}"]
    if memory_mb:
        limit = int(memory_mb) * 1024 * 1024
        settings.append(
            f"{prefix}.memory.max={limit}" if cgroup_version == "v2" else f"{prefix}.memory.limit_in_bytes={limit}"
        )
    return settings


def mount_entry(source, target, mode):
    """An ``lxc.mount.entry`` binding the host's ``source`` at ``target`` in the container (``ro`` or ``rw``)."""
    return f"lxc.mount.entry={source} {target.lstrip('/')} none bind,{mode},create=dir 0 0"


def execute_argv(name, settings, argv, lxcpath=DIR, config=CONFIG):
    """``lxc-execute`` of ``argv`` in a container called ``name``, with the cell's ``settings`` (KEY=VALUE)."""
    line = [EXECUTE, "--name", name, "--lxcpath", lxcpath, "--rcfile", config]
    for setting in settings:
        line += ["--define", setting]
    return line + ["--"] + list(argv)


def probe(execute_path, image_id_file=IMAGE_ID_FILE, rootfs=ROOTFS):
    """``{"installed", "rootfs_image_id"}``: whether ``lxc-execute`` is at ``execute_path`` (None: not found), and
    the workload image id the container root was exported from (None: no root)."""
    found = None
    if os.path.isdir(rootfs) and os.path.isfile(image_id_file):
        with open(image_id_file, encoding="utf-8") as stream:
            found = stream.read().strip() or None
    return {"installed": bool(execute_path), "rootfs_image_id": found}


def host_problem(found, image_id):
    """Why this host cannot run an LXC cell of the current workload image ``image_id``, or None."""
    found = found or {}
    if not found.get("installed"):
        return f"LXC is not installed on this host (no {EXECUTE}): {FIX}"
    if not found.get("rootfs_image_id"):
        return f"no LXC container root at {ROOTFS}: {FIX}"
    if not image_id:
        return f"the workload image is not built in Docker, so the LXC container root cannot be checked: {FIX}"
    if found["rootfs_image_id"] != image_id:
        return (
            f"the LXC container root holds workload image {found['rootfs_image_id'][:19]}, not the current "
            f"{image_id[:19]}: run site.yml (role {ROLE}) to refresh it"
        )
    return None
