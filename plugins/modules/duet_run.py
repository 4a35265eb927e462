#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Run both sides of a duet pair at the same time (schedule: duet)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: duet_run
short_description: Run both sides of a duet pair at the same time and wait for both
description:
  - Starts every side of O(sides) before waiting for any, so that the two cells of a duet pair (an experiment's
    C(schedule) V(duet), C(plugin_utils/experiment/schedule.py)) run at the same time on their disjoint CPU sets, then
    waits for each, and stops a side still running after O(timeout) seconds (its process group, and its container
    through the engine).
  - A side is a process cell's shell line (its plan's C(process.command), run by C(/bin/sh)), or a container the
    engine has created but not started (V(docker) or V(podman) C(start --attach)).
  - A side may name its record file (O(sides[].record_file)), where the workload writes its record line too; what
    it holds once the side ended is returned in RV(sides[].record_text), so that a line the side's output lost
    (C(start --attach) once lost a container's) is not lost. A file an earlier try left is removed before the sides
    start, and the file once it is read.
  - The pair's start-line folder (O(duet_dir)) is removed before the sides start and once they ended, and each
    container side is inspected through its engine once both ended (RV(sides[].inspect)), for its record.
  - A process side's cgroup of its own (O(sides[].cgroup), which its shell line enters) is created before the sides
    start, as M(platbench.lab.cpu_quota_cgroup) creates it, and removed once they ended; one that cannot be created
    fails the module before any side starts.
  - The module's process waits at the SCHED_IDLE policy (RV(waiter_policy)), so that it never takes a CPU from the
    sides. A process side's shell line sets its own policy back; a V(podman) side's C(podman start) runs under
    C(chrt --other 0), since conmon and the container inherit the CLI's policy (Docker's containers are started
    by containerd, which does not).
  - The cells are recorded by C(platbench.lab.record_cell) from RV(sides), as the kinds' own tasks' results are.
version_added: "0.10.0"
author: platbench developers (@platbench)
options:
  sides:
    description: The sides of the pair, in order; each has O(sides[].command) or O(sides[].container).
    type: list
    elements: dict
    required: true
    suboptions:
      command:
        description: A process cell's shell line.
        type: str
      record_file:
        description:
          - The file the side's workload writes its record line to (its plan's C(record_file), given to it as
            C(PLATBENCH_RECORD_FILE)), on this host.
        type: path
      cgroup:
        description:
          - The process side's cgroup of its own (its plan's C(process.cgroup)), made before the sides start with its
            CPU quota and removed, with what is still in it, once they ended.
        type: dict
        version_added: "0.12.0"
        suboptions:
          path:
            description: The cgroup, in the host's cpu controller hierarchy.
            type: path
            required: true
          version:
            description: The cgroup version of that hierarchy.
            type: str
            choices: [v1, v2]
            required: true
          quota_us:
            description: Microseconds of CPU time it may use every period, or V(-1) for no quota.
            type: int
            required: true
          period_us:
            description: The CFS period, in microseconds.
            type: int
            default: 100000
      container:
        description: A created container to start and attach to.
        type: dict
        suboptions:
          engine:
            description: The engine that created it.
            type: str
            choices: [docker, podman]
            required: true
          name:
            description: The container's name.
            type: str
            required: true
  timeout:
    description: Seconds after the start at which a side still running is stopped.
    type: int
    required: true
  duet_dir:
    description:
      - The folder where the sides meet at their start line (their plans' C(duet_dir), given to them as
        C(PLATBENCH_DUET_DIR)), removed with what it holds before the sides start, so that an earlier try's marks
        cannot let one side start its window alone, and again once they ended.
    type: path
    version_added: "0.12.0"
attributes:
  check_mode:
    description: Runs nothing, and says so.
    support: full
  diff_mode:
    description: Nothing to diff.
    support: none
"""

EXAMPLES = r"""
- name: Run a bm cell beside a cn cell's created container
  platbench.lab.duet_run:
    sides:
      - command: "taskset -c 1 python -m workloads.cnn_train --steps 100"
      - container:
          engine: docker
          name: platbench-0123456789ab
    timeout: 3600
  register: pair
"""

RETURN = r"""
sides:
  description: One result per side, in the order of O(sides).
  returned: success
  type: list
  elements: dict
  contains:
    rc:
      description: The side's exit code (the container's, through C(start --attach)); negative for a signal.
      type: int
    stdout:
      description: What the side wrote to its standard output.
      type: str
    stderr:
      description: What the side wrote to its standard error.
      type: str
    started:
      description: When the side was started, in seconds since the epoch.
      type: float
    ended:
      description: When it ended, in seconds since the epoch.
      type: float
    timed_out:
      description: Whether it was stopped at O(timeout).
      type: bool
    record_text:
      description: What the side's record file held once it ended; null where the side wrote none.
      returned: for a side with O(sides[].record_file)
      type: str
    record_file_error:
      description: Why the side's record file could not be read or removed.
      returned: where it could not
      type: str
    inspect:
      description:
        - The engine's inspect of a container side once both sides ended (C(docker inspect), C(podman inspect)),
          as M(community.docker.docker_container_info) and M(containers.podman.podman_container_info) return it.
      returned: for a container side the engine could inspect
      type: dict
      version_added: "0.12.0"
    inspect_error:
      description: Why a container side could not be inspected.
      returned: for a container side the engine could not inspect
      type: str
      version_added: "0.12.0"
    cgroup_error:
      description: Why the side's cgroup (O(sides[].cgroup)) could not be removed once the sides ended.
      returned: for a side whose cgroup could not go
      type: str
      version_added: "0.12.0"
cgroups_left:
  description: The sides' cgroups (O(sides[].cgroup)) that could not be removed once the sides ended; each side's
    RV(sides[].cgroup_error) says why.
  returned: where any could not
  type: list
  elements: str
  version_added: "0.12.0"
duet_dir_error:
  description: Why O(duet_dir) could not be removed once the sides ended.
  returned: where it could not
  type: str
  version_added: "0.12.0"
overlap_seconds:
  description: How long both sides ran at the same time.
  returned: success
  type: float
waiter_policy:
  description:
    - V(idle) when the module's process waited on the sides at SCHED_IDLE; C(unchanged:) and why where the kernel
      refused it (it then waited at its caller's policy).
  returned: success
  type: str
  sample: idle
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota, duet


def main():
    module = AnsibleModule(
        argument_spec={
            "sides": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "command": {"type": "str"},
                    "record_file": {"type": "path"},
                    "cgroup": {
                        "type": "dict",
                        "options": {
                            "path": {"type": "path", "required": True},
                            "version": {"type": "str", "choices": ["v1", "v2"], "required": True},
                            "quota_us": {"type": "int", "required": True},
                            "period_us": {"type": "int", "default": cpu_quota.PERIOD_US},
                        },
                    },
                    "container": {
                        "type": "dict",
                        "options": {
                            "engine": {"type": "str", "choices": list(duet.ENGINES), "required": True},
                            "name": {"type": "str", "required": True},
                        },
                    },
                },
                "mutually_exclusive": [("command", "container")],
                "required_one_of": [("command", "container")],
            },
            "timeout": {"type": "int", "required": True},
            "duet_dir": {"type": "path"},
        },
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(
            changed=False,
            sides=[],
            overlap_seconds=0.0,
            waiter_policy="unchanged: check mode",
            msg="check mode: nothing was run",
        )
    try:
        pair = duet.run_pair(module.params["sides"], module.params["timeout"], duet_dir=module.params["duet_dir"])
    except duet.DuetError as exc:
        module.fail_json(msg=f"duet_run: {exc}")
    module.exit_json(changed=True, **pair)


if __name__ == "__main__":
    main()
