# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters that turn an experiment into cells and a cell into a placed, runnable workload.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.platbench.lab.plugins.module_utils.records import done_cells as _done_cells
from ansible_collections.platbench.lab.plugins.module_utils.matrix import (
    ExperimentError,
    emulated_subset as _emulated_subset,
    expand,
    scenario_name,
    validate_experiment,
)


def expand_matrix(experiment):
    """The cells of an experiment (a loaded experiment, or the experiment lookup's result)."""
    if not isinstance(experiment, dict):
        raise AnsibleFilterError(f"expand_matrix: expected an experiment mapping, got {type(experiment).__name__}")
    # The experiment lookup adds its own expansion under 'cells'; recompute from the definition.
    definition = {key: value for key, value in experiment.items() if key != "cells"}
    try:
        return expand(validate_experiment(definition, source="expand_matrix input"))
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc)) from None


def emulated_subset(cells, emulated, platforms=None):
    """The cells to run when ``platforms`` (default: none) have emulated guests."""
    if not isinstance(cells, list):
        raise AnsibleFilterError(f"emulated_subset: expected a list of cells, got {type(cells).__name__}")
    return _emulated_subset(cells, emulated, platforms or ())


def _cpu_number(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"cpuset_for: {what} must list CPU numbers, got {value!r}") from None


def cpuset_for(topology_cpus, count, reserved=None):
    """``count`` CPUs of ``topology_cpus`` not in ``reserved``, highest-numbered first.

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
            f"({len(cpus)} on the host, {len(cpus & excluded)} reserved: {sorted(cpus & excluded)})")
    return sorted(allowed[:count])


def workload_argv(params, workload):
    """The ``python`` arguments that run ``workloads.<workload>`` with ``params``.

    ``batch_size: 32`` becomes ``--batch-size 32``; a true boolean becomes a bare flag and a
    false one is left out.
    """
    argv = ["-m", f"workloads.{workload}"]
    for key, value in params.items():
        flag = "--" + str(key).replace("_", "-")
        if isinstance(value, bool):
            if value:
                argv.append(flag)
        elif isinstance(value, (str, int, float)):
            argv.extend([flag, str(value)])
        else:
            raise AnsibleFilterError(f"workload_argv: parameter {key!r} must be a scalar, got {value!r}")
    return argv


def done_cells(campaign_dir):
    """Ids of the cells that already have samples in ``campaign_dir`` (empty for a new campaign)."""
    return sorted(_done_cells(os.path.join(str(campaign_dir), "samples.jsonl")))


class FilterModule:
    """platbench.lab filters."""

    def filters(self):
        return {
            "expand_matrix": expand_matrix,
            "scenario_name": scenario_name,
            "cpuset_for": cpuset_for,
            "workload_argv": workload_argv,
            "done_cells": done_cells,
            "emulated_subset": emulated_subset,
        }
