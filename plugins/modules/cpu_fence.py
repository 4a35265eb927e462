#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Keep the host's other work on a cell's cores (idle_cores: none), and restore it afterwards."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpu_fence
short_description: Fence the host's other work onto a cell's cores, or restore it
description:
  - With O(state=present), sets C(cpuset.cpus) of every top-level cgroup of the host's cpuset hierarchy (cgroup v2,
    or v1's cpuset mount) to O(cpus), so that no core is left idle or set aside for the host's other work while a
    cell that has every core runs (an experiment's C(idle_cores) V(none)). On cgroup v2 it enables the cpuset
    controller for the top-level groups where it is not.
  - Every change is written to O(state_file) before it is made; O(state=absent) restores exactly those values
    (a group removed since is left alone), disables what it enabled, and removes the file.
  - A write that fails while the fence goes up restores what was changed before the module fails.
  - Idempotent - a fence on the same CPUs already in place changes nothing; one on other CPUs is refused.
version_added: "0.5.0"
author: platbench developers (@platbench)
options:
  state:
    description: V(present) puts the fence up, V(absent) restores what it changed.
    type: str
    choices: [present, absent]
    default: present
  cpus:
    description: The cell's CPUs (a cpuset list such as V(0-3), or numbers); required with O(state=present).
    type: raw
  state_file:
    description: Where the changes are recorded, so that they can be restored (also by a later run).
    type: path
    default: /run/platbench/cpu_fence.json
  cgroup_root:
    description: Where the cgroup file systems are mounted.
    type: path
    default: /sys/fs/cgroup
attributes:
  check_mode:
    description: Says what it would change and writes nothing.
    support: full
  diff_mode:
    description: No diff is returned; C(fence) says what changes.
    support: none
"""

EXAMPLES = r"""
- name: Fence the host's other work onto the cell's cores
  platbench.lab.cpu_fence:
    cpus: "0-15"
  register: fence

- name: Restore the host's cgroups
  platbench.lab.cpu_fence:
    state: absent
"""

RETURN = r"""
fence:
  description:
    - The fence (C(cgroup) v1 or v2, C(directory), C(cpus), C(groups) changed with their values before,
      C(unchanged) groups already on those CPUs, C(enable_cpuset)); with O(state=absent), the one restored, or
      null where none was in place.
  returned: always
  type: dict
runtime:
  description: What the cell's record says of it (C(fence), C(fence_groups), C(fence_changed_groups)); empty for absent.
  returned: always
  type: dict
  sample: {"fence": "cgroup v1 cpuset 0-1 on 3 groups", "fence_groups": ["docker", "libpod_parent", "machine"],
           "fence_changed_groups": []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "cpus": {"type": "raw"},
            "state_file": {"type": "path", "default": "/run/platbench/cpu_fence.json"},
            "cgroup_root": {"type": "path", "default": "/sys/fs/cgroup"},
        },
        required_if=[("state", "present", ["cpus"])],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["state"] == "present":
            changed, state = cpu_fence.put_up(
                params["cpus"], params["state_file"], params["cgroup_root"], check=module.check_mode
            )
            module.exit_json(changed=changed, fence=state, runtime=cpu_fence.runtime(state))
        changed, state, problems = cpu_fence.take_down(params["state_file"], check=module.check_mode)
    except cpu_fence.FenceError as exc:
        module.fail_json(msg=f"cpu_fence: {exc}")
    if problems:
        module.fail_json(
            msg=f"cpu_fence: could not restore every cgroup ({'; '.join(problems)}); {params['state_file']} keeps "
            "what is left to restore: fix the cause and run platbench.lab.cpu_fence state=absent again",
            fence=state,
        )
    module.exit_json(changed=changed, fence=state, runtime={})


if __name__ == "__main__":
    main()
