# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Which files of the guest image directory a new build leaves behind, and may go.

Every distinct set of inputs gives the guest image a new id (``rootfs-<id>.*``, ``docker-<id>.qcow2``,
``sif-<name>.img``), several GB each, and nothing removed the old ones: a lab rebuilt for a month fills its disk.
The files of the image ``current.json`` names stay, so does every base a VM's overlay still reads (a cell that
runs while the lab is rebuilt), and so do files of other names. Scratch directories of a build that was killed
(``platbench-guest-*``, ``platbench-docker-*``, ``platbench-sif-*``) go once older than a build can take.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
import time

# One image file per family and id: the stem (before the first dot) names the build it belongs to.
IMAGE_FILE = re.compile(r"^(?P<stem>(?:rootfs|docker|sif)-[A-Za-z0-9_-]+)\.[A-Za-z0-9.]+$")
SCRATCH_DIR = re.compile(r"^platbench-(?:guest|docker|sif)-[A-Za-z0-9_]+$")
QCOW2_MAGIC = b"QFI\xfb"


def qcow2_backing_file(path):
    """The backing file a qcow2 header names (absolute, or relative to the overlay's directory), or None.

    The header is documented in QEMU's docs/interop/qcow2.txt: magic, version, then the backing file's offset
    (u64) and length (u32), big-endian; reading it needs no qemu-img process per overlay."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
            if len(header) < 20 or header[:4] != QCOW2_MAGIC:
                return None
            offset, length = struct.unpack(">QI", header[8:20])
            if not offset or not length:
                return None
            handle.seek(offset)
            name = handle.read(length).decode("utf-8", "replace")
    except OSError:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(path), name))


def bases_in_use(state_dirs):
    """The backing files of every qcow2 overlay under ``state_dirs`` (two levels: <state dir>/<vm>/<disk>)."""
    bases = set()
    for state_dir in state_dirs:
        for root, dirs, files in os.walk(state_dir):
            if root[len(state_dir) :].count(os.sep) >= 1:
                dirs[:] = []
            for name in files:
                if name.endswith(".qcow2"):
                    base = qcow2_backing_file(os.path.join(root, name))
                    if base:
                        bases.add(base)
    return bases


def stale_entries(image_dir, keep, in_use, now, scratch_age_s):
    """Sorted names in ``image_dir`` that may be removed: image files whose stem is neither kept nor in use,
    and scratch directories last changed more than ``scratch_age_s`` before ``now``."""
    kept_stems = set()
    for path in [*keep, *in_use]:
        match = IMAGE_FILE.match(os.path.basename(path)) if path else None
        if match and os.path.dirname(os.path.normpath(path)) == os.path.normpath(image_dir):
            kept_stems.add(match.group("stem"))
    stale = []
    for entry in os.scandir(image_dir):
        if entry.is_symlink():
            continue
        if entry.is_file():
            match = IMAGE_FILE.match(entry.name)
            if match and match.group("stem") not in kept_stems:
                stale.append(entry.name)
        elif entry.is_dir() and SCRATCH_DIR.match(entry.name) and now - entry.stat().st_mtime > scratch_age_s:
            stale.append(entry.name)
    return sorted(stale)


def entry_size(path):
    """Bytes a file or directory holds on disk (allocated blocks: qcow2 and raw images are sparse)."""
    if not os.path.isdir(path) or os.path.islink(path):
        return os.lstat(path).st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file gone while walking holds nothing
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def prune(image_dir, keep, state_dirs, scratch_age_s, dry_run=False, now=None):
    """Remove what ``stale_entries`` names; return ``(names, bytes freed)``."""
    names = stale_entries(image_dir, keep, bases_in_use(state_dirs), time.time() if now is None else now, scratch_age_s)
    freed = 0
    for name in names:
        path = os.path.join(image_dir, name)
        freed += entry_size(path)
        if dry_run:
            continue
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return names, freed
