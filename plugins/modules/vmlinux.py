#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Write the uncompressed ELF kernel (vmlinux) of a compressed vmlinuz, for Firecracker (mvm)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vmlinux
short_description: Unpack a compressed kernel image into the ELF vmlinux Firecracker boots
description:
  - Firecracker boots an uncompressed ELF kernel on x86_64; distributions ship a compressed bzImage (vmlinuz). This
    finds the gzip, xz or lzma payload of O(src) that unpacks to an ELF file and writes it to O(dest).
  - Writes only when O(dest) is missing or differs.
version_added: "0.12.0"
author: platbench developers (@platbench)
options:
  src:
    description: The compressed kernel (vmlinuz), or an ELF kernel (copied as it is).
    type: path
    required: true
  dest:
    description: Where the ELF kernel goes.
    type: path
    required: true
attributes:
  check_mode:
    description: Unpacks and compares, writes nothing.
    support: full
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Unpack the guest kernel for Firecracker
  platbench.lab.vmlinux:
    src: /var/lib/platbench/guest/rootfs-0123.kernel
    dest: /var/lib/platbench/guest/rootfs-0123.vmlinux
"""

RETURN = r"""
size:
  description: Bytes of the ELF kernel.
  returned: success
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils.firecracker import FirecrackerError, extract_vmlinux


def main():
    module = AnsibleModule(
        argument_spec={"src": {"type": "path", "required": True}, "dest": {"type": "path", "required": True}},
        supports_check_mode=True,
    )
    src, dest = module.params["src"], module.params["dest"]
    try:
        with open(src, "rb") as handle:
            kernel = extract_vmlinux(handle.read())
    except (OSError, FirecrackerError) as exc:
        module.fail_json(msg=f"{src}: {exc}")
    current = None
    if os.path.exists(dest):
        with open(dest, "rb") as handle:
            current = handle.read()
    changed = current != kernel
    if changed and not module.check_mode:
        with open(dest + ".part", "wb") as handle:
            handle.write(kernel)
        os.chmod(dest + ".part", 0o644)
        os.replace(dest + ".part", dest)
    module.exit_json(changed=changed, size=len(kernel))


if __name__ == "__main__":
    main()
