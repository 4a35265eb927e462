#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Describe the storage classes an experiment uses on a runner host: the device behind each and whether it spins."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_classes
short_description: Describe the storage classes an experiment's cells put their data on
description:
  - For each class of O(wanted), finds its directory in O(classes) (the inventory's C(platbench_storage_classes)),
    the mount that holds it (C(/proc/self/mountinfo)), the block device behind that mount (C(/sys/dev/block)) and
    its rotational flag (C(/sys/block/DEVICE/queue/rotational)). A tmpfs or another mount without a block device
    is described as such, with no device and no flag.
  - Returns the problems that stop the experiment before any cell (a class the inventory does not name, a
    directory that does not exist on the host) instead of failing, so the prechecks report them with the others.
version_added: "0.5.0"
author: platbench developers (@platbench)
options:
  classes:
    description: Class name to directory on this host (C(platbench_storage_classes)).
    type: dict
    default: {}
  wanted:
    description: The classes the experiment's C(storage) names.
    type: list
    elements: str
    default: []
  host:
    description: The inventory host, named in the problems; empty = this machine's node name.
    type: str
    default: ""
attributes:
  check_mode:
    description: Reads only; the answer is the same as in a real run.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Describe the experiment's storage classes
  platbench.lab.storage_classes:
    classes: {ssd: /mnt/nvme/platbench, hdd: /mnt/hdd/platbench}
    wanted: [ssd, hdd]
  register: storage
"""

RETURN = r"""
storage:
  description:
    - Class name to its description (C(class), C(path), C(exists), C(mount_point), C(fstype), C(device),
      C(partition), C(rotational), C(medium)), for every wanted class the inventory names.
  returned: always
  type: dict
  sample: {"hdd": {"class": "hdd", "path": "/mnt/hdd/platbench", "exists": true, "mount_point": "/mnt/hdd",
           "fstype": "ext4", "device": "sdb", "partition": "sdb1", "rotational": true,
           "medium": "/dev/sdb (rotational)"}}
problems:
  description: What stops the experiment on this host, each message naming the setting to change; empty when none.
  returned: always
  type: list
  elements: str
"""

import platform as _platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import storage


def main():
    module = AnsibleModule(
        argument_spec={
            "classes": {"type": "dict", "default": {}},
            "wanted": {"type": "list", "elements": "str", "default": []},
            "host": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    classes, wanted = module.params["classes"] or {}, list(dict.fromkeys(module.params["wanted"]))
    described = {}
    try:
        for name in wanted:
            if name in classes:
                described[name] = storage.describe(name, classes[name])
    except storage.StorageError as exc:
        module.fail_json(msg=f"{exc}; set platbench_storage_classes in the inventory's group_vars")
    problems = storage.classes_problems(wanted, classes, described, module.params["host"] or _platform.node())
    module.exit_json(changed=False, storage=described, problems=problems)


if __name__ == "__main__":
    main()
