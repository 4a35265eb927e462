# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters that plan a host's cells and check them before any runs: the cell plan, the prechecks, leftovers and the
workloads' tools.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import tool_checks as _tool_checks
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import (
    CellPlanError,
    choose_cpus,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import (
    cell_plan as _cell_plan,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.leftovers import (
    leftover_problems as _leftover_problems,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import (
    cells_to_run as _cells_to_run,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import (
    plan_problems as _plan_problems,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.sizing import SizingError
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import mapping as _mapping
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import runner_list as _runner_list
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import done_cells as _done_cells


def _cpu_number(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"cpuset_for: {what} must list CPU numbers, got {value!r}") from None


def cpuset_for(topology_cpus, count, reserved=None):
    """``count`` CPUs of ``topology_cpus`` not in ``reserved``, highest-numbered first
    (the cell plan's choice, without NUMA nodes).

    CPU 0 takes most interrupts and housekeeping, so it is handed out last.
    Returned in ascending order, ready for ``join(',')``.
    """
    cpus = {_cpu_number(cpu, "topology_cpus") for cpu in topology_cpus}
    excluded = {_cpu_number(cpu, "reserved") for cpu in (reserved or [])}
    allowed = sorted(cpus - excluded, reverse=True)
    if isinstance(count, str) and count.isdigit():  # e.g. from -e on the command line
        count = int(count)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise AnsibleFilterError(f"cpuset_for: count must be a positive integer, got {count!r}")
    if count > len(allowed):
        raise AnsibleFilterError(
            f"cpuset_for: asked for {count} CPUs but only {len(allowed)} are available "
            f"({len(cpus)} on the host, {len(cpus & excluded)} reserved: {sorted(cpus & excluded)})"
        )
    return choose_cpus(allowed, count)[0]


def cell_plan(cell, facts, options=None, **more):
    """Everything a placement task file needs to run ``cell`` on this host."""
    try:
        return _cell_plan(cell, facts, {**(options or {}), **more})
    except CellPlanError as exc:
        raise AnsibleFilterError(f"cell_plan: {exc}") from None


def plan_problems(
    plan,
    status,
    facts,
    host,
    reserved_cpus=None,
    skip_unavailable=False,
    gpu_assignment=None,
    guest_image=None,
    gpus_per_cell=1,
    runners=None,
    cell_timeout_seconds=3600,
):
    """What stops ``plan`` on ``host`` before any cell runs, the platforms skipped, and which GPUs
    its gpu scenarios use."""
    return _plan_problems(
        _mapping(plan, "the plan", "plan_problems"),
        _mapping(status, "status", "plan_problems"),
        facts,
        host,
        reserved_cpus or (),
        bool(skip_unavailable),
        gpu_assignment,
        guest_image,
        gpus_per_cell,
        _runner_list(runners, "plan_problems"),
        cell_timeout_seconds,
    )


def cells_to_run(plan, status, host, results_dir=None, runners=None, facts=None, reserved_cpus=None):
    """The cells ``host`` runs (ready platforms, emulated subset, not yet measured by ``host``, its own when spread
    over several runner hosts), each sized for ``host`` from its ``facts`` (scale-up resolved, chr, numa_nodes)."""
    done = _done_cells(os.path.join(str(results_dir), "samples.jsonl"), host) if results_dir else ()
    try:
        return _cells_to_run(
            _mapping(plan, "the plan", "cells_to_run"),
            _mapping(status, "status", "cells_to_run"),
            host,
            done,
            _runner_list(runners, "cells_to_run"),
            facts or {},
            reserved_cpus or (),
        )
    except SizingError as exc:
        raise AnsibleFilterError(f"cells_to_run: {exc}") from None


def leftover_problems(paths, fence, processes, host, fence_state_file=None, cgroups=None):
    """What an earlier run left on ``host`` (network paths, a fence, workload processes, CPU quota cgroups): [] or one
    message."""
    if not isinstance(paths, dict) or not isinstance(fence, dict):
        raise AnsibleFilterError("leftover_problems: expected the results of network_path and cpu_fence (mappings)")
    return _leftover_problems(paths, fence, list(processes or []), str(host), fence_state_file, list(cgroups or []))


def tool_checks(plan, status, image):
    """Where this runner looks for the workloads' tools: ``{where, argv, fix}`` per place."""
    return _tool_checks.checks(_mapping(plan, "the plan", "tool_checks"), status or {}, image)


def tool_problems(results, tools, host):
    """A message per place the tool check found a tool missing (the looped command's results)."""
    return _tool_checks.problems(results, tools or [], host)


class FilterModule:
    """platbench.lab cells filters."""

    def filters(self):
        return {
            "cpuset_for": cpuset_for,
            "cell_plan": cell_plan,
            "plan_problems": plan_problems,
            "cells_to_run": cells_to_run,
            "leftover_problems": leftover_problems,
            "tool_checks": tool_checks,
            "tool_problems": tool_problems,
        }
