# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Storage classes: the inventory names them (``platbench_storage_classes: {ssd: /mnt/nvme, hdd: /mnt/hdd}``), an
experiment's ``storage:`` picks the class of each cell's data directory, and the record says what backs it.

What backs a path is read from the kernel, not guessed from the class's name: the mount holding the path
(``/proc/self/mountinfo``, the longest mount point above it), the block device behind that mount
(``/sys/dev/block/MAJOR:MINOR``; a partition's disk is its parent) and whether that disk spins
(``/sys/block/DISK/queue/rotational``). A mount without a block device (tmpfs, overlay, a network file system)
says so instead. Both roots can be given, so the unit tests read fake trees.
"""

from __future__ import annotations

import os

NO_DEVICE_MEDIA = {
    "tmpfs": "memory (tmpfs)",
    "ramfs": "memory (ramfs)",
    "overlay": "an overlay file system",
    "nfs": "a network file system (NFS)",
    "nfs4": "a network file system (NFS)",
    "cifs": "a network file system (SMB)",
    "fuse": "a FUSE file system",
}


class StorageError(ValueError):
    """A storage class cannot be described; the message says which and why."""


def _unescaped(field):
    """A mountinfo path field with its octal escapes (``\\040`` for a space) decoded."""
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1 : index + 4].isdigit():
            out.append(chr(int(field[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def parse_mountinfo(text):
    """The mounts of a ``/proc/PID/mountinfo`` text, in order: ``mount_point``, ``device`` (``MAJOR:MINOR``),
    ``fstype`` and ``source``."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        if len(fields) < separator + 3:
            continue
        mounts.append(
            {
                "mount_point": _unescaped(fields[4]),
                "device": fields[2],
                "fstype": fields[separator + 1],
                "source": _unescaped(fields[separator + 2]),
            }
        )
    return mounts


def mount_of(path, mounts):
    """The mount that holds ``path`` (absolute, links resolved): the longest mount point above it; the last one
    mounted wins where several share a mount point, as the kernel shows the topmost."""
    best = None
    for mount in mounts:
        point = mount["mount_point"].rstrip("/") or "/"
        inside = path == point or path.startswith(point if point == "/" else point + "/")
        if inside and (best is None or len(point) >= len(best["mount_point"].rstrip("/") or "/")):
            best = mount
    return best


def _read(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read().strip()
    except OSError:
        return None


def block_device(device, sys_root="/sys"):
    """The disk behind ``MAJOR:MINOR`` and whether it spins: ``{"device": "sda", "partition": "sda2" or None,
    "rotational": True/False/None}``, or None where the number names no block device (a tmpfs's ``0:NN``)."""
    link = os.path.join(sys_root, "dev", "block", device)
    if not os.path.exists(link):
        return None
    node = os.path.realpath(link)
    name = os.path.basename(node)
    partition = None
    # A partition's sysfs directory sits inside its disk's and has a `partition` file; the queue is the disk's.
    if os.path.exists(os.path.join(node, "partition")):
        partition, name = name, os.path.basename(os.path.dirname(node))
    flag = _read(os.path.join(sys_root, "block", name, "queue", "rotational"))
    rotational = {"1": True, "0": False}.get(flag)
    return {"device": name, "partition": partition, "rotational": rotational}


def _blank(name, path):
    info = {"class": name, "path": path, "exists": False, "mount_point": None, "fstype": None, "device": None}
    info.update(partition=None, rotational=None, medium=None)
    return info


def describe(name, path, proc_root="/proc", sys_root="/sys"):
    """What backs storage class ``name`` at ``path`` on this machine: ``class``, ``path``, ``exists``, and where it
    exists ``mount_point``, ``fstype``, ``device`` (the disk, or None), ``partition``, ``rotational`` (True, False,
    or None where unknown or without a device) and ``medium``, the record's words for it."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise StorageError(f"storage class {name!r}: its path must be absolute, got {path!r}")
    if not os.path.isdir(path):
        return _blank(name, path)
    mountinfo = _read(os.path.join(proc_root, "self", "mountinfo"))
    if mountinfo is None:
        raise StorageError(f"storage class {name!r}: cannot read {proc_root}/self/mountinfo to find what backs {path}")
    return backing(name, path, os.path.realpath(path), mountinfo, sys_root)


def backing(name, path, resolved, mountinfo, sys_root="/sys"):
    """:func:`describe` of an existing directory ``path`` (``resolved``: its links resolved), from a mountinfo
    text and a sysfs root."""
    info = {**_blank(name, path), "exists": True}
    mount = mount_of(resolved, parse_mountinfo(mountinfo))
    if mount is None:
        info["medium"] = "unknown (no mount holds it)"
        return info
    info.update(mount_point=mount["mount_point"], fstype=mount["fstype"])
    disk = block_device(mount["device"], sys_root)
    if disk is None:
        medium = NO_DEVICE_MEDIA.get(mount["fstype"], mount["fstype"])
        info["medium"] = f"{medium}: no block device"
        return info
    info.update(disk)
    spins = {True: "rotational", False: "non-rotational", None: "rotational flag unknown"}[disk["rotational"]]
    info["medium"] = f"/dev/{disk['device']} ({spins})"
    return info


def classes_problems(wanted, classes, described, host, setting="platbench_storage_classes"):
    """Why the experiment's storage classes ``wanted`` cannot be used on ``host``: a class the inventory does not
    name, or one whose path is missing there (``described``: :func:`describe` of each named class)."""
    problems = []
    for name in wanted:
        if name not in (classes or {}):
            named = ", ".join(sorted(classes)) if classes else "none"
            problems.append(
                f"storage class {name!r} is not named by {setting} on {host} (it names {named}): add "
                f"{name}: /a/directory to {setting} in the inventory's group_vars, or drop {name!r} from the "
                "experiment's storage."
            )
        elif not (described.get(name) or {}).get("exists"):
            problems.append(
                f"storage class {name!r} is {classes[name]} on {host}, which does not exist (or is not a directory) "
                f"there: create it on the device the class stands for, or point {setting}.{name} at one that exists."
            )
    return problems


def runtime(info):
    """A cell's record of the class of its data directory: the class, the path, the device and its flag."""
    return {
        "storage_class": info["class"],
        "storage_path": info["path"],
        "storage_device": info["device"],
        "storage_rotational": info["rotational"],
        "storage_fstype": info["fstype"],
        "storage_medium": info["medium"],
    }
