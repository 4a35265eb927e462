#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Make the read-only ext4 disk a guest reads a host data directory from, once per directory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: data_disk
short_description: Make the ext4 disk image a guest reads a host data directory from
description:
  - Writes the tree of O(src) into an ext4 file system in the file O(dest) (C(mkfs.ext4 -d), no root needed),
    labelled O(label), for a guest to attach read-only and mount by its label.
  - Made only when O(dest) is missing or the tree under O(src) changed after it was made; otherwise nothing
    changes. The disk's modification time is the newest one in the tree it holds, which is how a change shows.
  - Sized from the data (whole blocks, one inode and directory entry per entry) with a tenth more and room for
    ext4's metadata; no journal and no blocks reserved for root, as the guest mounts it read-only.
  - Written as C(DEST.part) and renamed when complete, so an interrupted run never leaves a disk that looks made;
    C(playbooks/teardown.yml) removes such leftovers by name.
version_added: "0.10.0"
author: platbench developers (@platbench)
options:
  src:
    description: The data directory (a generated dataset, or a C(params.data_dir)).
    type: path
    required: true
  dest:
    description: The disk image file; its directory is created when missing.
    type: path
    required: true
  label:
    description: The file system's label, which the guest mounts it by.
    type: str
    default: pbdata
attributes:
  check_mode:
    description: Says whether the disk would be made, and why, without writing it.
    support: full
  diff_mode:
    description: A disk image has no readable difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Make the disk a guest reads the dataset from
  platbench.lab.data_disk:
    src: /var/lib/platbench/datasets/mnist-0123456789
    dest: /var/lib/platbench/datasets/mnist-0123456789.pbdata.img
"""

RETURN = r"""
path:
  description: The disk image.
  returned: success
  type: str
  sample: /var/lib/platbench/datasets/mnist-0123456789.pbdata.img
size_bytes:
  description: The disk's size.
  returned: success
  type: int
  sample: 33554432
entries:
  description: Files, directories and links in the data directory, itself included.
  returned: success
  type: int
  sample: 1202
reason:
  description: Why the disk was made (C(missing), or that the data changed, naming its newest path); null when kept.
  returned: success
  type: str
  sample: missing
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import data_disk


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "label": {"type": "str", "default": data_disk.LABEL},
        },
        supports_check_mode=True,
    )
    src, dest, label = module.params["src"], module.params["dest"], module.params["label"]
    if not os.path.isdir(src):
        module.fail_json(
            msg=f"data directory {src} does not exist on this host: a guest reads the data from a disk made of it. "
            "Point params.data_dir at a directory of the runner host, or generate the data with the experiment's "
            "dataset:."
        )
    found = data_disk.survey(src)
    reason = data_disk.rebuild_reason(dest, found)
    result = {"path": dest, "entries": found["entries"], "reason": reason}
    if reason is None:
        module.exit_json(changed=False, size_bytes=os.path.getsize(dest), **result)
    size, inodes = data_disk.disk_size(found["bytes"], found["entries"])
    if module.check_mode:
        module.exit_json(changed=True, size_bytes=size, **result)
    mkfs = module.get_bin_path("mkfs.ext4", opt_dirs=["/usr/sbin", "/sbin"])
    if not mkfs:
        module.fail_json(msg="mkfs.ext4 is not installed on this host: install e2fsprogs (platbench.lab.kvm_host does)")
    os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
    partial = dest + data_disk.PARTIAL_SUFFIX
    if os.path.lexists(partial):
        os.remove(partial)
    argv = data_disk.mkfs_argv(mkfs, src, partial, size, inodes, label)
    rc, stdout, stderr = module.run_command(argv)
    if rc != 0:
        if os.path.lexists(partial):
            os.remove(partial)
        module.fail_json(
            msg=f"mkfs.ext4 could not make the data disk {dest} from {src} ({size} bytes, {inodes} inodes): "
            f"{(stderr or stdout).strip()}",
            cmd=argv,
            rc=rc,
        )
    os.chmod(partial, 0o644)
    data_disk.mark(partial, found)
    os.replace(partial, dest)
    module.exit_json(changed=True, size_bytes=size, **result)


if __name__ == "__main__":
    main()
