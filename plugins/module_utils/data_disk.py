# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The read-only disk a guest reads the runner host's data files from (a generated dataset or a
``params.data_dir``): its name on the host, its size, whether it is stale, and where the guest mounts it.

Shared by the cell plan (``plugins/plugin_utils/placements/guest/``), the module that makes the disk
(``platbench.lab.data_disk``) and ``playbooks/teardown.yml``, which finds the disks by their suffix.
"""

from __future__ import annotations

import hashlib
import os

# Where the guest mounts the disk (by its label, read-only): the cell's --data-dir in a guest.
GUEST_DATA_DIR = "/opt/platbench/data"
LABEL = "pbdata"
# <datasets dir>/<data directory's name>.pbdata.img; a disk being made is <that>.part until it is complete.
SUFFIX = ".pbdata.img"
PARTIAL_SUFFIX = ".part"
PATH_HASH_CHARS = 8
BLOCK = 4096
INODE_BYTES = 256
# A directory entry: its fixed 8 bytes and a name of typical length, rounded up.
DIRENT_BYTES = 64
MIB = 1024 * 1024
# ext4's own metadata (superblocks, group descriptors, bitmaps) beyond the inode tables, with room to spare.
FIXED_HEADROOM = 16 * MIB


class DataDiskError(ValueError):
    """The data cannot go onto a disk as asked; the message says why and what to change."""


def disk_path(data_dir, datasets_dir):
    """The disk of ``data_dir``, named after it, in ``datasets_dir``: a generated dataset's beside its directory
    (``mnist-0123456789.pbdata.img``); a directory elsewhere (a ``params.data_dir``) also gets a hash of its path,
    so two directories of the same name never share a disk."""
    data_dir = os.path.normpath(str(data_dir))
    datasets_dir = os.path.normpath(str(datasets_dir))
    if not os.path.isabs(data_dir) or data_dir == "/":
        raise DataDiskError(f"the data directory must be an absolute path below /, got {data_dir!r}")
    name = os.path.basename(data_dir)
    if os.path.dirname(data_dir) != datasets_dir:
        name += "-" + hashlib.sha1(data_dir.encode("utf-8")).hexdigest()[:PATH_HASH_CHARS]
    return f"{datasets_dir}/{name}{SUFFIX}"


def guest_disk(data_dir, datasets_dir):
    """What a guest cell does with the data: the disk made from ``data_dir`` (``source``, ``path``, ``label``), and
    how the guest attaches it (``format``, ``readonly``) and mounts it (``mount``)."""
    return {
        "source": os.path.normpath(str(data_dir)),
        "path": disk_path(data_dir, datasets_dir),
        "format": "raw",
        "readonly": True,
        "label": LABEL,
        "mount": GUEST_DATA_DIR,
    }


def survey(data_dir):
    """One walk over ``data_dir`` (links not followed): ``bytes`` its files and directories take in whole blocks,
    ``entries`` (every file, directory and link, itself included), and the newest modification time (``newest_ns``)
    with the path that has it (``newest``)."""
    top = os.lstat(data_dir)
    found = {"bytes": BLOCK, "entries": 1, "newest_ns": top.st_mtime_ns, "newest": str(data_dir)}
    pending = [str(data_dir)]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                stat = entry.stat(follow_symlinks=False)
                found["entries"] += 1
                found["bytes"] += -(-stat.st_size // BLOCK) * BLOCK if entry.is_file(follow_symlinks=False) else BLOCK
                if stat.st_mtime_ns > found["newest_ns"]:
                    found.update(newest_ns=stat.st_mtime_ns, newest=entry.path)
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
    return found


def disk_size(data_bytes, entries):
    """(bytes, inodes) of an ext4 file system that holds ``data_bytes`` in ``entries`` files and directories: a
    tenth more than the data, an inode and a directory entry per entry with a tenth more, ext4's metadata."""
    inodes = entries + entries // 10 + 64
    size = data_bytes + data_bytes // 10 + inodes * (INODE_BYTES + DIRENT_BYTES) + FIXED_HEADROOM
    return -(-size // MIB) * MIB, inodes


def rebuild_reason(disk, found):
    """Why ``disk`` must be made (again), or None: it is missing, or the data (``found``: its ``survey``) is not what
    it was made of. A disk carries the newest modification time of its data as its own (``mark``): any change in
    the tree (a file written, added, removed or renamed: its directory's time changes) shows, and a file dated in
    the future never makes every run rebuild it."""
    try:
        made_of_ns = os.stat(disk).st_mtime_ns
    except FileNotFoundError:
        return "missing"
    if found["newest_ns"] != made_of_ns:
        return f"the data changed after the disk was made (newest: {found['newest']})"
    return None


def mark(disk, found):
    """Date ``disk`` with the newest modification time of the data it was made of (see ``rebuild_reason``)."""
    os.utime(disk, ns=(found["newest_ns"], found["newest_ns"]))


def mkfs_argv(mkfs, source, disk, size, inodes, label=LABEL):
    """mkfs.ext4 writing ``source``'s tree into the file ``disk`` of ``size`` bytes. The guest mounts it read-only,
    so it has no journal, no blocks reserved for root and no room to grow (resize_inode)."""
    return [
        str(mkfs),
        "-q",
        "-t",
        "ext4",
        "-b",
        str(BLOCK),
        "-N",
        str(inodes),
        "-m",
        "0",
        "-O",
        "^has_journal,^resize_inode",
        "-E",
        "root_owner=0:0",
        "-L",
        label,
        "-d",
        str(source),
        str(disk),
        f"{size // 1024}k",
    ]
