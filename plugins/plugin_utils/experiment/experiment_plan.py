# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An experiment planned on the controller: loaded, validated, its workload parameters checked, expanded.

One function for the two ways in: ``platbench run``, which plans in-process before it starts the playbook and
writes the plan to the campaign's plan file (plan_file.py), which the playbook executes; and the
``platbench.lab.experiment`` lookup, which plans with it when ``playbooks/experiment.yml`` runs without a plan file.
The same input is refused with the same message either way.
"""

from __future__ import annotations

import hashlib
import os

from ansible_collections.platbench.lab.plugins.module_utils.workload_needs import tools_for
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    experiment_file,
    load_experiment,
    workloads_of,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import (
    dropped_cells,
    expand,
    schedule_fallbacks,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.params_check import checked_params

# plugins/plugin_utils/experiment/experiment_plan.py -> the collection root, which holds the workloads package
COLLECTION_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
COLLECTION_EXPERIMENTS = os.path.join(COLLECTION_ROOT, "experiments")


def plan_experiment(experiments_dir, name, overrides=None, size=None, root=COLLECTION_ROOT, campaign=None):
    """``(plan, warnings)``: experiment ``name`` (a name in ``experiments_dir``, or a file's path:
    experiment_spec.experiment_file) with its ``size`` and ``overrides`` merged in, validated
    (experiment_spec.load_experiment) and its workload parameters checked by the workloads' own parsers under ``root``
    (params_check.checked_params); the plan is the experiment with ``cells`` (run order), ``dropped``, ``tools``,
    ``as_run`` (the size and overrides given, which run.json keeps beside the merged experiment) and
    ``experiment_file`` (its path and SHA-256). Raises experiment_spec.ExperimentError naming the file, every problem
    listed once."""
    path, _ = experiment_file(experiments_dir, name)
    source = path
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
        # Which file was planned, and its bytes' digest: a campaign's plan file and run.json say what ran.
        "experiment_file": {"path": path, "sha256": file_sha256(path)},
    }
    return plan, warnings


def file_sha256(path):
    """The SHA-256 of the file's bytes, in hex."""
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()
