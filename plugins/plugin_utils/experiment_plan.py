# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An experiment planned on the controller: loaded, validated, its workload parameters checked, expanded.

One function for the two ways in: the ``platbench.lab.experiment`` lookup (``playbooks/experiment.yml``) and
``platbench run``, which plans in-process before it starts the playbook, so that the same input is refused with
the same message either way.
"""

from __future__ import annotations

import os

from ansible_collections.platbench.lab.plugins.module_utils.workload_needs import tools_for
from ansible_collections.platbench.lab.plugins.plugin_utils import schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment_spec import load_experiment, workloads_of
from ansible_collections.platbench.lab.plugins.plugin_utils.matrix import dropped_cells, expand, schedule_fallbacks
from ansible_collections.platbench.lab.plugins.plugin_utils.params_check import checked_params

# plugins/plugin_utils/experiment_plan.py -> the collection root, which holds the workloads package
COLLECTION_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
COLLECTION_EXPERIMENTS = os.path.join(COLLECTION_ROOT, "experiments")


def plan_experiment(experiments_dir, name, overrides=None, size=None, root=COLLECTION_ROOT, campaign=None):
    """``(plan, warnings)``: experiment ``name`` of ``experiments_dir`` with its ``size`` and ``overrides``
    merged in, validated (experiment_spec.load_experiment) and its workload parameters checked by the workloads' own
    parsers under ``root`` (params_check.checked_params); the plan is the experiment with ``cells`` (run order),
    ``dropped``, ``tools`` and ``as_run`` (the size and overrides given, which run.json keeps beside the merged
    experiment). Raises experiment_spec.ExperimentError naming the file, every problem listed once."""
    source = os.path.join(experiments_dir, f"{name}.yml")
    if size:
        source += f" (size {size})"
    if overrides:
        source += f" (with overrides {overrides!r})"
    experiment = load_experiment(experiments_dir, name, overrides, size or None)
    warnings = checked_params(experiment, source, root)
    if experiment["schedule"] in ("rounds", "duet") and experiment["schedule_seed"] is None:
        experiment["schedule_seed"] = schedule.seed_for(campaign or experiment["name"])
    plan = {
        **experiment,
        "cells": expand(experiment),
        "dropped": dropped_cells(experiment),
        "schedule_fallbacks": schedule_fallbacks(experiment),
        "tools": tools_for(workloads_of(experiment)),
        "as_run": {"size": size or None, "overrides": overrides or {}},
    }
    return plan, warnings
