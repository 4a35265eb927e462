"""What backs a directory: the mount that holds it (from /proc/self/mountinfo) and its block device (from sysfs).

``describe_disk(directory, mountinfo_text, sysfs_root)`` is a pure function of its inputs (the mountinfo
text and the files under ``sysfs_root``), so the tests feed it saved mountinfo samples and a small sysfs
tree of their own. The ``kind`` it gives is what the report compares platforms by:

- overlayfs: a container's writable layer (Docker's overlay2, fuse-overlayfs);
- tmpfs: memory, not a disk;
- network: a file protocol to another machine or to the VM's host (nfs, cifs, 9p, virtiofs...);
- bind-mount: a subdirectory of another filesystem mounted here (``docker run -v``): mountinfo's root is not "/";
- virtio-blk: a paravirtual disk of a VM guest (driver virtio_blk, or a "vd*" disk);
- local-disk: any other block device (sda, nvme0n1, dm-0...);
- unknown: none of these could be told.
"""

import os
from typing import NamedTuple

KINDS = ("overlayfs", "virtio-blk", "bind-mount", "local-disk", "tmpfs", "network", "unknown")
OVERLAY_TYPES = {"overlay", "fuse.fuse-overlayfs"}
MEMORY_TYPES = {"tmpfs", "ramfs"}
# 9p and virtiofs share a folder of the VM's host with the guest: a file protocol, not a block device.
NETWORK_TYPES = {"nfs", "nfs4", "cifs", "smb3", "9p", "virtiofs", "ceph", "glusterfs", "lustre", "fuse.sshfs"}


class Mount(NamedTuple):
    """One line of /proc/self/mountinfo (see proc(5))."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str  # the directory of the filesystem mounted here ("/" unless a bind mount or btrfs subvolume)
    mount_point: str
    options: str
    fstype: str
    source: str
    super_options: str


def _unescape(field):
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040...)."""
    for escaped, plain in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, plain)
    return field


def parse_mountinfo(text):
    """Every well-formed line of mountinfo text -> [Mount], in the file's order (later mounts last)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)  # optional fields (shared:N, master:N) come before the "-"
        if len(fields) < separator + 3 or ":" not in fields[2]:
            continue
        major, minor = fields[2].split(":", 1)
        mounts.append(
            Mount(
                int(fields[0]),
                int(fields[1]),
                int(major),
                int(minor),
                _unescape(fields[3]),
                _unescape(fields[4]),
                fields[5],
                fields[separator + 1],
                _unescape(fields[separator + 2]),
                fields[separator + 3] if len(fields) > separator + 3 else "",
            )
        )
    return mounts


def _under(path, mount_point):
    return mount_point == "/" or path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def mount_of(path, mounts):
    """The mount that holds absolute ``path``: the longest mount point prefix; of mounts stacked on one
    mount point, the last mounted (it hides the others)."""
    best = None
    for mount in mounts:
        if _under(path, mount.mount_point) and (best is None or len(mount.mount_point) >= len(best.mount_point)):
            best = mount
    return best


class BlockDevice(NamedTuple):
    device: str  # the device the mount names (a partition, or the whole disk)
    disk: str  # its whole disk
    driver: str | None  # the disk's driver in sysfs (virtio_blk, sd, nvme), None for virtual devices (dm-0, loop0)

    @property
    def is_virtio(self):
        return self.driver == "virtio_blk" or self.disk.startswith("vd")


def _block_device_at(sysfs_path, sysfs_root):
    if not os.path.exists(sysfs_path):
        return None
    real = os.path.realpath(sysfs_path)
    device = os.path.basename(real)
    disk = os.path.basename(os.path.dirname(real)) if os.path.exists(os.path.join(real, "partition")) else device
    driver_link = os.path.join(sysfs_root, "block", disk, "device", "driver")
    driver = os.path.basename(os.path.realpath(driver_link)) if os.path.exists(driver_link) else None
    return BlockDevice(device, disk, driver)


def block_device(mount, sysfs_root="/sys"):
    """The block device behind a mount, through /sys/dev/block/MAJ:MIN; btrfs reports an anonymous device
    number there, so a /dev/NAME mount source is tried next. None when the mount has no block device."""
    found = _block_device_at(os.path.join(sysfs_root, "dev", "block", f"{mount.major}:{mount.minor}"), sysfs_root)
    if found is None and mount.source.startswith("/dev/"):
        found = _block_device_at(os.path.join(sysfs_root, "class", "block", os.path.basename(mount.source)), sysfs_root)
    return found


def _is_bind_mount(mount):
    if mount.root == "/":
        return False
    # A btrfs subvolume mounted by name (subvol=/@) shows the subvolume as its root without being a bind mount.
    subvolume = next(
        (opt[len("subvol=") :] for opt in mount.super_options.split(",") if opt.startswith("subvol=")), None
    )
    return not (mount.fstype == "btrfs" and subvolume == mount.root)


def classify(mount, device):
    """One of KINDS for a mount and its BlockDevice (or None)."""
    if mount is None:
        return "unknown"
    if mount.fstype in OVERLAY_TYPES:
        return "overlayfs"
    if mount.fstype in MEMORY_TYPES:
        return "tmpfs"
    if mount.fstype in NETWORK_TYPES:
        return "network"
    if _is_bind_mount(mount):
        return "bind-mount"
    if device is not None:
        return "virtio-blk" if device.is_virtio else "local-disk"
    return "unknown"


def describe_disk(directory, mountinfo_text, sysfs_root="/sys"):
    """metadata["disk"]: the directory, its mount (filesystem type, source, root) and block device, and kind."""
    mount = mount_of(directory, parse_mountinfo(mountinfo_text))
    device = block_device(mount, sysfs_root) if mount is not None else None
    return {
        "dir": directory,
        "filesystem": mount.fstype if mount else None,
        "mount_point": mount.mount_point if mount else None,
        "mount_root": mount.root if mount else None,
        "mount_source": mount.source if mount else None,
        "device": device.device if device else None,
        "disk": device.disk if device else None,
        "driver": device.driver if device else None,
        "kind": classify(mount, device),
    }


def describe_this_disk(directory):
    """describe_disk for this process: its own mountinfo and /sys. ``directory`` must exist. Metadata only:
    an unreadable mountinfo gives kind "unknown" and the reason, not a failed run."""
    directory = os.path.realpath(directory)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as file:
            return describe_disk(directory, file.read())
    except OSError as error:
        return {"dir": directory, "kind": "unknown", "error": f"/proc/self/mountinfo: {error.strerror}"}
