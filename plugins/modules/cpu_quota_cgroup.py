#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The cgroup of a process cell's injected CPU quota (an experiment's inject: {cpu_quota: Q}): create, remove."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpu_quota_cgroup
short_description: Create or remove the CPU quota cgroup of a process cell with an injected overhead
description:
  - With O(state=present), creates the cgroup at O(path) in the host's C(cpu) controller hierarchy and gives it a CFS
    quota of O(quota_us) every O(period_us) (cgroup v2 C(cpu.max); v1 C(cpu.cfs_period_us) and C(cpu.cfs_quota_us)),
    then reads the values back; one that does not read back as written fails the module. On cgroup v2 it enables the
    C(cpu) controller for the parent's children where it is not, and says so.
  - The cell's shell line moves itself into the cgroup (C(cgroup.procs)) before it execs the workload
    (C(plugins/plugin_utils/placements/process/) plans both).
  - With O(state=absent), kills what is still in the cgroup at O(path) (the cell's own processes; nothing else enters
    it), waits up to O(grace) seconds for them to go, and removes it. With O(cleanup_all), every cell's cgroup
    (C(platbench-cell-) and 12 hex digits, or an earlier release's C(platbench-inject-)) in the hierarchy under
    O(cgroup_root) goes; in check mode it only lists them, which is how the precheck finds those a stopped run left.
  - Idempotent - a cgroup already there with the same quota, or already gone, changes nothing.
version_added: "0.10.0"
author: platbench developers (@platbench)
options:
  state:
    description: V(present) creates the cgroup with its quota, V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The cell's cgroup (the cell plan's C(process.cgroup.path)); required unless O(cleanup_all).
    type: path
  version:
    description: The cgroup version of the hierarchy O(path) is in; required with O(state=present).
    type: str
    choices: [v1, v2]
  quota_us:
    description: Microseconds of CPU time the cgroup may use every period, or V(-1) for no quota (a cgroup of its own
      without a cap); required with O(state=present).
    type: int
  period_us:
    description: The CFS period, in microseconds.
    type: int
    default: 100000
  cleanup_all:
    description: With O(state=absent), every cell's cgroup of the host's cpu hierarchy, not only O(path).
    type: bool
    default: false
  cgroup_root:
    description: Where the cgroup file systems are mounted (O(cleanup_all) finds the cpu hierarchy there).
    type: path
    default: /sys/fs/cgroup
  grace:
    description: Seconds to wait, after the SIGKILL, for the processes still in a cgroup to go.
    type: float
    default: 10
attributes:
  check_mode:
    description: Says what it would create or remove, and changes nothing.
    support: full
  diff_mode:
    description: No diff is returned; C(applied) and C(removed) say what changes.
    support: none
"""

EXAMPLES = r"""
- name: Create the cell's CPU quota cgroup (95% of one CPU)
  platbench.lab.cpu_quota_cgroup:
    path: /sys/fs/cgroup/cpu/platbench-cell-0123456789ab
    version: v1
    quota_us: 95000

- name: List the cells' cgroups a stopped run left
  platbench.lab.cpu_quota_cgroup:
    state: absent
    cleanup_all: true
  check_mode: true
  register: left
"""

RETURN = r"""
cgroup:
  description: The cgroup created (O(state=present)).
  returned: when state is present
  type: str
  sample: /sys/fs/cgroup/cpu/platbench-cell-0123456789ab
applied:
  description: Each quota file of the cgroup with the value it reads back (in check mode, the value it would get).
  returned: when state is present
  type: dict
  sample: {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "95000"}
enabled_cpu:
  description: cgroup v2 - the cpu controller was (or would be) enabled for the parent's children.
  returned: when state is present
  type: bool
removed:
  description: The cgroups removed (in check mode, those that would be), as paths.
  returned: when state is absent
  type: list
  elements: str
killed:
  description: The pids that were still in them and were killed (in check mode, those that would be).
  returned: when state is absent
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path"},
            "version": {"type": "str", "choices": ["v1", "v2"]},
            "quota_us": {"type": "int"},
            "period_us": {"type": "int", "default": cpu_quota.PERIOD_US},
            "cleanup_all": {"type": "bool", "default": False},
            "cgroup_root": {"type": "path", "default": "/sys/fs/cgroup"},
            "grace": {"type": "float", "default": 10.0},
        },
        required_if=[
            ("state", "present", ["path", "version", "quota_us"]),
            ("cleanup_all", False, ["path"]),
        ],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["state"] == "present":
            changed, result = cpu_quota.create(
                params["path"], params["version"], params["quota_us"], params["period_us"], check=module.check_mode
            )
            module.exit_json(changed=changed, **result)
        paths = cpu_quota.leftovers(params["cgroup_root"]) if params["cleanup_all"] else []
        if params["path"] and params["path"] not in paths:
            paths.append(params["path"])
        removed, killed = [], []
        for path in paths:
            changed, pids = cpu_quota.remove(path, params["grace"], check=module.check_mode)
            if changed:
                removed.append(path)
                killed += pids
    except cpu_quota.QuotaError as exc:
        module.fail_json(msg=f"cpu_quota_cgroup: {exc}")
    module.exit_json(changed=bool(removed), removed=removed, killed=killed)


if __name__ == "__main__":
    main()
