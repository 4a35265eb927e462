#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Remove the guest images of earlier builds, and scratch directories of killed builds, from the image directory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: guest_image_prune
short_description: Remove guest images that no longer serve the lab
description:
  - Every distinct set of inputs builds the guest image anew under a new id (C(rootfs-<id>.*), C(docker-<id>.qcow2),
    C(sif-<name>.img)), several GB each. This removes those whose id is neither among O(keep) nor the base of a
    VM overlay under O(state_dirs), so that a lab rebuilt many times does not fill its disk.
  - Also removes scratch directories of builds that were killed (C(platbench-guest-*), C(platbench-docker-*),
    C(platbench-sif-*)) once they are older than O(scratch_age_hours).
  - Files of any other name are left alone.
version_added: "0.9.0"
author: platbench developers (@platbench)
options:
  path:
    description: The guest image directory.
    type: path
    required: true
  keep:
    description: Files of the image in use (those C(current.json) names); every file with the same id stays.
    type: list
    elements: path
    required: true
  state_dirs:
    description: Directories holding one directory per VM with its qcow2 overlays; their backing files stay.
    type: list
    elements: path
    default: []
  scratch_age_hours:
    description: A scratch directory is removed once it has not changed for this long (a build takes less).
    type: float
    default: 6
attributes:
  check_mode:
    description: Lists what it would remove, removes nothing.
    support: full
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Remove the images of earlier builds
  platbench.lab.guest_image_prune:
    path: /var/lib/platbench/guest
    keep:
      - /var/lib/platbench/guest/rootfs-0123456789ab.qcow2
      - /var/lib/platbench/guest/docker-ba9876543210.qcow2
    state_dirs: [/var/lib/platbench/vms]
"""

RETURN = r"""
removed:
  description: Names removed from O(path) (in check mode, those that would be).
  returned: success
  type: list
  elements: str
freed_bytes:
  description: Disk space they held.
  returned: success
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils.guest_images import prune


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "keep": {"type": "list", "elements": "path", "required": True},
            "state_dirs": {"type": "list", "elements": "path", "default": []},
            "scratch_age_hours": {"type": "float", "default": 6},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.isdir(params["path"]):
        module.fail_json(msg=f"{params['path']}: no such directory; guest_image_dir names where images are kept")
    state_dirs = [path for path in params["state_dirs"] if os.path.isdir(path)]
    try:
        removed, freed = prune(
            params["path"], params["keep"], state_dirs, params["scratch_age_hours"] * 3600, dry_run=module.check_mode
        )
    except OSError as exc:
        module.fail_json(msg=f"{params['path']}: could not remove an old image: {exc}")
    module.exit_json(changed=bool(removed), removed=removed, freed_bytes=freed)


if __name__ == "__main__":
    main()
