# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An experiment expanded into cells (its file is loaded and validated by ``experiment_spec.py``).

A cell is one run of one workload: one scenario (``PLATFORM/SCALEUP/CPUCFG/PROC``), one
combination of the list-valued workload parameters, one repeat. An experiment may list several
workloads (``workload: [micro_cpu, micro_disk]``); each cell runs one of them, with ``params``
merged with that workload's ``workload_params``. What a workload needs from a cell (a GPU, a
network peer) is plugins/module_utils/workload_needs.py's business: cells that cannot give it
are dropped from the plan and listed (``dropped_cells``), and a workload left with none stops it.
"""

from __future__ import annotations

import itertools

from ansible_collections.platbench.lab.plugins.module_utils import platforms, workload_needs
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject, schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import as_list, workloads_of
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import Scenario

DATA_PATH = "data_path"  # the cell label of the experiment's data_path dimension
GUEST_SETUP = "guest_setup"  # the cell label of a libvirt guest's set-up (placements/guest/)


def deployment_dimensions(experiment):
    """The labels the deployment knobs give a cell, one mapping per combination: ``storage`` (one per class),
    ``idle_cores`` and ``inject`` (inject.py); [{}] without them, so that the cells of other experiments keep their
    ids."""
    idle = experiment.get("idle_cores")
    idles = [{"idle_cores": value} for value in idle] if isinstance(idle, list) else [{"idle_cores": idle}]
    if idle is None:
        idles = [{}]
    classes = experiment.get("storage") or [None]
    injections = [{inject.LABEL: label} for label in inject.labels(experiment.get("inject"))] or [{}]
    paths = [{DATA_PATH: value} for value in experiment.get("data_path") or []] or [{}]
    setups = [{GUEST_SETUP: value} for value in experiment.get("guest_setup") or []] or [{}]
    return [
        {**({"storage": name} if name else {}), **each, **injected, **path, **setup}
        for name in classes
        for each in idles
        for injected in injections
        for path in paths
        for setup in setups
    ]


def _guest_setup_of(experiment, platform, extra, varies):
    """``(labels, what varies)`` of a cell of ``platform``, or None where it is left out: the guest_setup dimension
    is a libvirt guest's; another platform's cells carry no such label and are made once, with its first value."""
    if GUEST_SETUP not in extra or platforms.get(platform).guest:
        return extra, varies
    if extra[GUEST_SETUP] != experiment["guest_setup"][0]:
        return None
    return {key: value for key, value in extra.items() if key != GUEST_SETUP}, [
        (key, value) for key, value in varies if key != GUEST_SETUP
    ]


def _only_elsewhere(experiment, platform, extra):
    """Whether a cell of ``platform`` with the dimension labels ``extra`` is left out: a dimension ``only_on`` limits to
    other platforms gives this one its first value only."""
    for field, labels in (experiment.get("only_on") or {}).items():
        values = experiment.get(field) or []
        if platform not in labels and values and extra.get(field, values[0]) != values[0]:
            return True
    return False


def _injected_into(experiment, platform, extra, varies):
    """``(labels, what varies)`` of a cell of ``platform``: an injection into some platforms only (``inject_into``)
    leaves the others' cells without it, ``none``, as a dimension's uninjected cells are."""
    into = experiment.get("inject_into")
    if into is None or inject.LABEL not in extra or platform in into:
        return extra, varies
    return {**extra, inject.LABEL: inject.NONE}, [
        (key, inject.NONE if key == inject.LABEL else value) for key, value in varies
    ]


def _leaves_cores_idle(extra, scaleup, experiment):
    """Whether an idle_cores dimension's none cell of ``scaleup`` cannot be made: only ``all`` leaves no core idle.
    (A single ``idle_cores: none`` applies to every cell, and the prechecks refuse a scale-up short of the host.)"""
    return isinstance(experiment.get("idle_cores"), list) and extra.get("idle_cores") == "none" and scaleup != "all"


def scenario_name(platform, scaleup, cpu_config, processor):
    """The seed studies' scenario name, e.g. ``cn/2/pin/cpu`` (scenario.Scenario.name)."""
    return Scenario(platform, scaleup, cpu_config, processor).name


def workload_cell_params(experiment, workload):
    """A workload's parameters: the shared ``params`` merged with its ``workload_params``."""
    return {**experiment["params"], **(experiment.get("workload_params") or {}).get(workload, {})}


def _all_cells(experiment):
    """Every cell of the matrix, ``(cell, why it is dropped or None)``, in run order.

    Repeats are outermost so that every scenario runs once before any runs twice (slow
    drift of the host spreads over all platforms); then the workload, then the parameter
    combinations; the platform is innermost so that the platforms compared with each other
    run next to each other in time.
    """
    workloads = workloads_of(experiment)
    many_workloads = len(workloads) > 1
    combinations_of = {}
    for workload in workloads:
        params = workload_cell_params(experiment, workload)
        varying = [key for key, value in params.items() if isinstance(value, list)]
        combinations_of[workload] = [
            (params, varying, combination) for combination in itertools.product(*(params[key] for key in varying))
        ]
    dimensions = [
        ({**deployment, **extra}, spec)
        for deployment in deployment_dimensions(experiment)
        for extra, spec in several.cell_dimensions(experiment)
    ]
    for repeat in range(experiment["repeats"]):
        for workload in workloads:
            for (params, varying, combination), (extra, spec) in itertools.product(
                combinations_of[workload], dimensions
            ):
                cell_params = {**params, **dict(zip(varying, combination, strict=False))}
                # One workload: what varies names the parameters only, as before (old campaigns resume).
                varies = (
                    ([("workload", workload)] if many_workloads else [])
                    + list(zip(varying, combination, strict=False))
                    + list(extra.items())
                )
                for scaleup, cpu_config, processor, platform in itertools.product(
                    experiment["scaleup"], experiment["cpu_config"], experiment["processor"], experiment["platforms"]
                ):
                    if _leaves_cores_idle(extra, scaleup, experiment) or _only_elsewhere(experiment, platform, extra):
                        continue
                    cell_extra, cell_varies = _injected_into(experiment, platform, extra, varies)
                    of_guest = _guest_setup_of(experiment, platform, cell_extra, cell_varies)
                    if of_guest is None:
                        continue
                    cell_extra, cell_varies = of_guest
                    made = Scenario(platform, scaleup, cpu_config, processor, tuple(cell_varies))
                    scenario, cell_id = made.name, made.cell_id(repeat)
                    labels = {
                        **cell_params,
                        "experiment": experiment["name"],
                        "workload": workload,
                        "platform": platform,
                        "scaleup": scaleup,
                        "cpu_config": cpu_config,
                        "processor": processor,
                        "mode": experiment["mode"],
                        "repeat": repeat,
                        "scenario": scenario,
                        "cell": cell_id,
                        schedule.LABEL: experiment.get("schedule", schedule.DEFAULT),
                        # Only the exception is a label: the cells of every other experiment keep theirs.
                        **({"isolation": "none"} if experiment.get("isolation") == "none" else {}),
                        **cell_extra,
                    }
                    cell = {"id": cell_id, "scenario": scenario, "labels": labels, "params": dict(cell_params)}
                    if spec:
                        cell["instances"] = spec
                    yield cell, workload_needs.drop_reason(workload, platform, processor)


def expand(experiment):
    """The cells of a validated experiment to run, in run order: ``_all_cells``' order, each round shuffled when
    the experiment's schedule is rounds or duet and it holds its seed (schedule.ordered; experiment_plan gives it
    one; duet also pairs the cells); the cells a workload cannot run in (``dropped_cells``) are left out."""
    cells = [cell for cell, dropped in _all_cells(experiment) if dropped is None]
    return schedule.ordered(
        cells, experiment.get("schedule"), experiment.get("schedule_seed"), baselines=experiment.get("baselines")
    )


def schedule_fallbacks(experiment):
    """The cells of a duet experiment that run alone, under rounds, and why (schedule.duet): one entry per platform
    and reason, ``{"platform", "reason", "cells"}``; [] for any other schedule."""
    if experiment.get("schedule") != "duet":
        return []
    cells = [cell for cell, dropped in _all_cells(experiment) if dropped is None]
    return schedule.duet(cells, experiment.get("schedule_seed") or 0, baselines=experiment.get("baselines"))[1]


def dropped_cells(experiment):
    """What the plan leaves out, one entry per workload and platform or processor:
    ``{"workload", "platform" or "processor", "reason", "cells"}`` (``cells``: how many)."""
    entries = {}
    for cell, dropped in _all_cells(experiment):
        if dropped is None:
            continue
        field, reason = dropped
        workload, value = cell["labels"]["workload"], cell["labels"][field]
        entry = entries.setdefault(
            (workload, field, value), {"workload": workload, field: value, "reason": reason, "cells": 0}
        )
        entry["cells"] += 1
    return list(entries.values())


def emulated_subset(cells, emulated, guests=platforms.GUESTS):
    """The cells to run where the guests of ``guests`` (platform labels) are emulated: their cells cut down
    to the experiment's ``emulated`` subset, with its parameter overrides in params and labels.
    Cells of other platforms, and every cell when ``emulated`` is None, pass unchanged."""
    if not emulated:
        return list(cells)
    scaleups = as_list(emulated.get("scaleup", [])) or None
    cpu_configs = as_list(emulated.get("cpu_config", [])) or None
    repeats = emulated.get("repeats")
    workloads = as_list(emulated.get("workloads", [])) or None
    overrides = emulated.get("params", {})
    workload_overrides = emulated.get("workload_params") or {}
    kept = []
    seen = set()  # an override of a varying parameter makes several cells one: it runs once
    for cell in cells:
        labels = cell["labels"]
        if labels["platform"] not in guests:
            kept.append(cell)
            continue
        if (
            (scaleups and labels["scaleup"] not in scaleups)
            or (cpu_configs and labels["cpu_config"] not in cpu_configs)
            or (repeats and labels["repeat"] >= repeats)
            or (workloads and labels["workload"] not in workloads)
        ):
            continue
        changes = {**overrides, **workload_overrides.get(labels["workload"], {})}
        params = {**cell["params"], **changes}
        identity = (labels["scenario"], labels["repeat"], labels["workload"], repr(sorted(params.items())))
        if identity in seen:
            continue
        seen.add(identity)
        kept.append({**cell, "params": params, "labels": {**labels, **changes, "emulated": True}})
    return kept


def cores_needed(experiment):
    """The most cores one instance of the experiment asks for as a number (relative scale-ups are the host's)."""
    return max((cores for cores in experiment["scaleup"] if sizing.is_number(cores)), default=1)
