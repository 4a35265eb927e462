# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over an experiment: its cells, its workloads' command lines, what a campaign has done.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import (
    dataset_dir as _dataset_dir,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import emulated_subset as _emulated_subset
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand, scenario_name
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.plan_file import definition
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import (
    WorkloadArgsError,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import (
    workload_argv as _workload_argv,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import done_cells as _done_cells


def expand_matrix(experiment):
    """The cells of an experiment (a loaded experiment, or the experiment lookup's result)."""
    if not isinstance(experiment, dict):
        raise AnsibleFilterError(f"expand_matrix: expected an experiment mapping, got {type(experiment).__name__}")
    # The experiment lookup adds its own expansion under 'cells'; recompute from the definition.
    try:
        return expand(validate_experiment(definition(experiment), source="expand_matrix input"))
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc)) from None


def experiment_definition(plan):
    """A campaign's plan (the experiment lookup's result) without its expanded cells: what record_cell keeps."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError(f"experiment_definition: expected the campaign's plan, got {type(plan).__name__}")
    return definition(plan)


def emulated_subset(cells, emulated, platforms=None):
    """The cells to run when ``platforms`` (default: none) have emulated guests."""
    if not isinstance(cells, list):
        raise AnsibleFilterError(f"emulated_subset: expected a list of cells, got {type(cells).__name__}")
    return _emulated_subset(cells, emulated, platforms or ())


def workload_argv(params, workload):
    """The ``python`` arguments that run ``workloads.<workload>`` with ``params``."""
    if not isinstance(params, dict):
        raise AnsibleFilterError(f"workload_argv: expected a mapping of parameters, got {type(params).__name__}")
    try:
        return _workload_argv(params, workload)
    except WorkloadArgsError as exc:
        raise AnsibleFilterError(str(exc)) from None


def done_cells(campaign_dir, host=None):
    """Ids of the cells that already have samples in ``campaign_dir`` (empty for a new campaign);
    with ``host``, only those that inventory host measured."""
    return sorted(_done_cells(os.path.join(str(campaign_dir), "samples.jsonl"), host))


def dataset_dir(dataset, datasets_dir):
    """The directory on the host holding an experiment's generated ``dataset``."""
    if not isinstance(dataset, dict) or "generator" not in dataset:
        raise AnsibleFilterError(f"dataset_dir: expected an experiment's dataset with a generator, got {dataset!r}")
    return _dataset_dir(datasets_dir, dataset)


class FilterModule:
    """platbench.lab experiments filters."""

    def filters(self):
        return {
            "expand_matrix": expand_matrix,
            "experiment_definition": experiment_definition,
            "emulated_subset": emulated_subset,
            "scenario_name": scenario_name,
            "workload_argv": workload_argv,
            "done_cells": done_cells,
            "dataset_dir": dataset_dir,
        }
