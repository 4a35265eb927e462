#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Run the instances of one cell side by side, in rounds, and stop every one of them afterwards."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_instances
short_description: Run a cell's instances (ranks, a foreground beside a background job) side by side
description:
  - Runs the instances of one platbench cell on the host, in O(rounds). A round starts its background instances,
    confirms after O(settle) seconds that each still runs, starts its foreground instances together and waits
    until every one has exited; then it stops its background instances.
  - The first foreground instance to fail ends the cell at once, with that instance's own error (its role,
    index and the end of its output); the others are stopped. So does a background instance that ends before
    its round's foregrounds, and the O(timeout).
  - Every instance runs in a session of its own and is stopped with its children (SIGTERM, then SIGKILL after
    O(grace) seconds), then with its C(stop) command where killing the local process is not enough (C(docker rm -f
    NAME) for a container). The module stops everything the same way when it is sent SIGTERM, SIGINT
    or SIGHUP.
  - The module waits at C(SCHED_IDLE), as the rest of the harness does. An instance with a C(place) (a process
    instance on the runner host) is put into a cgroup of its own, which the module makes and removes, at the normal
    policy, with a fixed base environment, before it execs.
  - The cell plan (C(platbench.lab.cell_plan)) writes the rounds; the module only runs them.
version_added: "0.9.0"
author: platbench developers (@platbench)
options:
  rounds:
    description:
      - The rounds, run one after the other; each a list of instances.
      - 'An instance: C(name), C(role), C(index), C(argv) (a list; no shell), C(env), C(chdir), C(background)
        (a boolean), C(stop) (an argv run after the instance is stopped, or null), C(stop_timeout) (seconds
        the stop argv may take; default the larger of O(grace) and 10) and C(place) (C(cgroup) with C(path),
        C(version) and C(leave); C(normal_policy); C(base_env); or null).'
      - An instance on another runner host is an C(ssh) client with an C(ssh) stop line (see
        C(plugins/module_utils/remote_instance.py)); the module runs it like any other argv.
    type: list
    elements: list
    required: true
  timeout:
    description: Seconds all rounds together may take; the cell's timeout.
    type: int
    required: true
  settle:
    description: Seconds a background instance must keep running before the round's foregrounds start.
    type: float
    default: 5.0
  grace:
    description: Seconds between SIGTERM and SIGKILL when an instance is stopped.
    type: float
    default: 5.0
attributes:
  check_mode:
    description: Runs nothing in check mode and says so.
    support: full
  diff_mode:
    description: Instances are processes that end with the task; nothing stays to compare.
    support: none
"""

EXAMPLES = r"""
- name: Run a foreground job alone, then beside a background job
  platbench.lab.run_instances:
    timeout: 600
    settle: 10
    rounds:
      - - {name: fg, role: foreground, index: 0, argv: [python, -m, workloads.cnn_train, --model, tiny]}
      - - {name: bg, role: background, index: 1, background: true,
           argv: [python, -m, workloads.cnn_train, --model, alexnet, --steps, "1000000"]}
        - {name: fg, role: foreground, index: 0, argv: [python, -m, workloads.cnn_train, --model, tiny]}
"""

RETURN = r"""
instances:
  description:
    - One entry per instance started, in start order, each with C(name), C(role), C(index), C(round),
      C(background), C(rc) (negative for a signal), C(stopped) (the supervisor ended it), C(seconds),
      C(stdout) and C(stderr).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import quiet
from ansible_collections.platbench.lab.plugins.module_utils.supervisor import run_rounds


def main():
    module = AnsibleModule(
        argument_spec={
            "rounds": {"type": "list", "elements": "list", "required": True},
            "timeout": {"type": "int", "required": True},
            "settle": {"type": "float", "default": 5.0},
            "grace": {"type": "float", "default": 5.0},
        },
        supports_check_mode=True,
    )
    rounds = module.params["rounds"]
    for number, instances in enumerate(rounds):
        for instance in instances:
            if not isinstance(instance, dict) or not instance.get("name") or not instance.get("argv"):
                module.fail_json(msg=f"rounds[{number}]: every instance needs a name and an argv, got {instance!r}")
    if module.check_mode:
        module.exit_json(changed=False, instances=[], msg="check mode: no instance was started")
    # The supervisor is the harness's, on a runner host of its own too: it waits at SCHED_IDLE (a local lab's
    # inherits it from platbench run), and puts each process instance back at the normal policy (supervisor.py).
    quiet.lower_policy()
    results, error = run_rounds(rounds, module.params["timeout"], module.params["settle"], module.params["grace"])
    if error:
        module.fail_json(msg=error, instances=results, changed=True)
    module.exit_json(changed=True, instances=results)


if __name__ == "__main__":
    main()
