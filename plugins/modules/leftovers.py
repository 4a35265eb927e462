#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What an earlier run, or a campaign running now, left on a runner host: the cells' network paths, an idle_cores
fence, the process cells' cgroups and workload processes. Reads only."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: leftovers
short_description: Find what an earlier run of platbench left on a runner host, changing nothing
description:
  - Reads, in one module run, the four things a run that could not clean up (killed, its controller crashed) or a
    campaign running on the host now leaves behind, and that would distort the cells measured beside them
    - the cells' network paths (links, namespaces and FORWARD rules named as M(platbench.lab.network_path) names
      them), as the commands that would remove them;
    - an idle_cores fence M(platbench.lab.cpu_fence) put up, as its state file O(fence_state_file) records it;
    - the process cells' cgroups (C(platbench-cell-) and 12 hex digits) in the cpu hierarchy under O(cgroup_root);
    - the workload processes of the host's environment under O(prefix) (C(PREFIX/venv/bin/python -m workloads.)).
  - The run's precheck (role C(platbench.lab.platform_run)) stops on any of them with the filter
    C(platbench.lab.leftover_problems); C(playbooks/teardown.yml) removes them. The removing modules
    (M(platbench.lab.network_path), M(platbench.lab.cpu_fence), M(platbench.lab.cpu_quota_cgroup)) read the same
    state the same way; this module saves the precheck three module runs.
version_added: "0.13.0"
author: platbench developers (@platbench)
options:
  prefix:
    description: Where the lab's workload environment is installed (its C(venv/bin/python) runs the workloads).
    type: path
    default: /opt/platbench
  fence_state_file:
    description: Where M(platbench.lab.cpu_fence) records a fence it put up.
    type: path
    default: /run/platbench/cpu_fence.json
  cgroup_root:
    description: Where the cgroup file systems are mounted.
    type: path
    default: /sys/fs/cgroup
attributes:
  check_mode:
    description: Reads only, in check mode too.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: Find what an earlier run left
  platbench.lab.leftovers:
  register: left

- name: Stop on any of it
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | first | default('') }}"
  vars:
    problems: >-
      {{ left.paths | platbench.lab.leftover_problems(left.fence, left.processes, inventory_hostname,
         cgroups=left.cgroups) }}
"""

RETURN = r"""
paths:
  description: The cells' network paths, as M(platbench.lab.network_path) gives them with
    O(platbench.lab.network_path#module:cleanup_all) in check mode.
  returned: always
  type: dict
  contains:
    commands:
      description: The commands that would remove them, each an argv; empty when there are none.
      type: list
      elements: list
    removed_tags:
      description: The tags (cells) whose paths are there.
      type: list
      elements: str
fence:
  description: The fence in place, as M(platbench.lab.cpu_fence) in check mode gives it.
  returned: always
  type: dict
  contains:
    fence:
      description: The fence's state (its C(cpus), the groups it changed), or null when there is none.
      type: dict
cgroups:
  description: The process cells' cgroups, as paths.
  returned: always
  type: list
  elements: str
processes:
  description: The workload processes running, as C(pgrep --list-full) prints them (PID and command line).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence, cpu_quota, network_state, platforms


def workload_processes(module, prefix):
    """``pgrep --list-full`` lines of the processes that run a workload module with the environment's Python."""
    pattern = platforms.workload_process_pattern(prefix)
    rc, stdout, stderr = module.run_command(["pgrep", "--list-full", "--full", pattern])
    if rc not in (0, 1):  # 1: none found
        module.fail_json(msg=f"pgrep could not list the workload processes: {(stderr or stdout).strip()}")
    return [line for line in stdout.splitlines() if line.strip()]


def main():
    module = AnsibleModule(
        argument_spec={
            "prefix": {"type": "path", "default": "/opt/platbench"},
            "fence_state_file": {"type": "path", "default": "/run/platbench/cpu_fence.json"},
            "cgroup_root": {"type": "path", "default": "/sys/fs/cgroup"},
        },
        supports_check_mode=True,
    )
    params = module.params
    state = network_state.PathCommands(module).state()
    tags = network_state.tags_in(state)
    try:
        fence = cpu_fence.load_state(params["fence_state_file"])
    except cpu_fence.FenceError as exc:
        module.fail_json(msg=f"leftovers: {exc}")
    module.exit_json(
        changed=False,
        paths={"commands": network_state.removal_commands(state, tags), "removed_tags": tags},
        fence={"fence": fence},
        cgroups=cpu_quota.leftovers(params["cgroup_root"]),
        processes=workload_processes(module, params["prefix"]),
    )


if __name__ == "__main__":
    main()
