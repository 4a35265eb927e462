# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: quiet_waits
type: aggregate
author: platbench developers (@platbench)
version_added: "0.12.0"
short_description: Poll a running cell's task five times a second instead of a thousand
description:
  - ansible-playbook's main process polls for its workers' results every C(internal_poll_interval) seconds (0.001
    by default). While a task runs a cell's workload, that loop runs beside the cell on the runner host's CPUs; on
    this project's hosts it took 14% of a core during a campaign, and turned a duet's cn/bm ratio of 1.01 into
    1.06-1.15.
  - While a task that runs a cell's timed part is pending (its task variable C(platbench_runs_a_cell) is true), this
    plugin sets the interval to O(wait_interval) seconds; when that task's result comes in, the interval goes back
    to what it was, so the short tasks between cells keep their pace. A cell's task therefore ends up to one
    interval later than its workload; no timed part includes that.
  - Why 0.2 s. A poll costs the main process some 0.1 ms, which at 1,000 polls a second was the 14% of a core above;
    at 5 a second it is about 0.1% of a core, at idle priority. A whole second (the first default) cost every cell
    0.5 s on average after its workload, most of a bm cell's orchestration. C(benchmarks/harness_noise.py) checks
    that the duet's reading does not move with it.
  - Changes nothing else; records nothing.
options:
  wait_interval:
    description: Seconds between polls while a cell's task runs.
    type: float
    default: 0.2
    env:
      - name: PLATBENCH_CELL_POLL_INTERVAL
requirements:
  - Enable with C(callbacks_enabled = platbench.lab.quiet_waits) in C(ansible.cfg).
"""

import ansible.constants as C
from ansible.plugins.callback import CallbackBase

CELL_TASK_VAR = "platbench_runs_a_cell"


class CallbackModule(CallbackBase):
    """Slows the strategy's result polling down while a cell's task is pending, and back once it is done."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "platbench.lab.quiet_waits"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._normal_interval = None

    def _waiting(self, task):
        value = (getattr(task, "vars", None) or {}).get(CELL_TASK_VAR)
        return value is True or str(value).lower() == "true"

    def v2_playbook_on_task_start(self, task, is_conditional):
        if self._waiting(task):
            if self._normal_interval is None:
                self._normal_interval = C.DEFAULT_INTERNAL_POLL_INTERVAL
            # The strategy reads the constant on every pass of its wait loop (StrategyBase._wait_on_pending_results).
            C.DEFAULT_INTERNAL_POLL_INTERVAL = float(self.get_option("wait_interval"))
        else:
            self._back()

    def _back(self):
        if self._normal_interval is not None:
            C.DEFAULT_INTERNAL_POLL_INTERVAL = self._normal_interval
            self._normal_interval = None

    def _done(self, result, *args, **kwargs):
        if self._waiting(result._task):
            self._back()

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_unreachable = v2_runner_on_skipped = _done

    def v2_playbook_on_stats(self, stats):
        self._back()
