"""The campaigns a study's expressible findings need: planned once, shared where alike, found where they exist.

A finding names an experiment, optionally a size and fields to set (its scaled-down form) and the platforms it runs.
Findings that name the same experiment, size and settings share one campaign, which runs the union of their
platforms. Each campaign is planned as ``platbench run`` plans it (the experiment loaded and expanded), and every
finding is checked against the planned cells before anything runs: its metric must be one its workload emits, and
each side of its relation must pick exactly one cell per round. A campaign has a name that follows from what it runs
(``EXPERIMENT-reproduce-DIGEST``), so a second ``platbench reproduce`` resumes it; a campaign of the results store
planned alike (the same cells, any number of rounds) is used instead of running one anew.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    load_experiment,
    workloads_of,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench.reproduce import relations
from platbench.reproduce.findings import StudyError, baseline_first

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
# The labels that say where and when a cell ran, not what it runs: two campaigns planned alike differ in them.
_RUN_LABELS = ("repeat", "cell", "campaign", "schedule", "duet_pair", "duet_side", "duet_partner", "duet_role")


class CampaignPlan(NamedTuple):
    """One campaign: its ``name``, what it runs (``experiment``, ``size``, ``settings`` as --set texts,
    ``platforms``), the ``findings`` it decides, its first-pass ``cells`` and whether it is ``found`` in the results
    already (its directory holds samples)."""

    name: str
    experiment: str
    size: str | None
    settings: list
    platforms: list
    repeats: int | None
    findings: list
    cells: list
    found: bool

    def command(self):
        """The ``platbench run`` line that runs this campaign by hand."""
        parts = ["platbench run", self.experiment, f"--campaign {self.name}"]
        parts += [f"--size {self.size}"] if self.size else []
        parts += [f"--set 'platforms=[{','.join(self.platforms)}]'"]
        parts += [f"--repeats {self.repeats}"] if self.repeats else []
        parts += [f"--set '{setting}'" for setting in self.settings]
        return " ".join(parts)


class Plan(NamedTuple):
    """A reproduction's plan: the ``campaigns`` of the expressible findings and the ``not_expressible`` ones, each
    ``(finding, what it lacks)``."""

    campaigns: list
    not_expressible: list


def settings_of(finding):
    """The finding's ``set`` as ``--set KEY=VALUE`` texts, in the file's order (values as JSON, which is YAML), and
    its first rounds (``repeats``, which ``platbench run --repeats`` gives: a run until decided adds to it)."""
    given = dict(finding.data.get("set") or {})
    repeats = given.pop("repeats", None)
    return [f"{key}={json.dumps(value)}" for key, value in given.items()], repeats


def overrides_of(settings, platforms, repeats=None):
    """``experiment_overrides`` as ``platbench run --set ... --platforms ... --repeats ...`` builds them."""
    from platbench import run

    args = argparse.Namespace(settings=settings, platforms=platforms, workloads=None, repeats=repeats)
    try:
        return run.build_overrides(args)
    except run.UsageError as exc:
        raise StudyError(str(exc)) from None


def _signature(cells):
    """What a campaign's cells run, rounds aside: their labels but where and when, and their parameters."""
    return sorted(
        {
            json.dumps(
                [{k: v for k, v in cell["labels"].items() if k not in _RUN_LABELS}, cell.get("params") or {}],
                sort_keys=True,
                default=str,
            )
            for cell in cells
        }
    )


def _name(experiment, size, settings, platforms):
    text = json.dumps([experiment, size, sorted(settings), platforms], sort_keys=True)
    return f"{experiment}-reproduce-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def planned_cells(experiment, size, settings, platforms, repeats=None):
    """The cells ``platbench run`` would plan for the campaign (the experiment loaded, merged and expanded)."""
    try:
        loaded = load_experiment(str(EXPERIMENTS), experiment, overrides_of(settings, platforms, repeats), size)
    except ExperimentError as exc:
        raise StudyError(str(exc)) from None
    return loaded, expand(loaded)


def check_finding(finding, experiment, cells):
    """StudyError where ``finding`` names a metric its experiment's workloads do not emit, or a side of its relation
    picks no cell, or several in one round, of ``cells``."""
    where = f"{finding.study}.yml: finding {finding.id}"
    produced = metric_table.produced_by(workloads_of(experiment))
    for metric in finding.metrics():
        if metric not in produced:
            raise StudyError(
                f"{where}: metric {metric!r} is not one that experiment {experiment['name']} measures (workload "
                f"{', '.join(workloads_of(experiment))}: {', '.join(sorted(produced))})"
            )
    rounds = sorted({cell["labels"].get("repeat", 0) for cell in cells})[:2]
    rows = [
        {**cell["labels"], "metric": metric, "value": 1.0}
        for cell in cells
        if cell["labels"].get("repeat", 0) in rounds
        for metric in finding.metrics()
    ]
    frame = pd.DataFrame(rows)
    # A label the workload gives its samples within a cell (a file size) is in no plan: it picks samples, not cells.
    within_cell = metric_table.sample_labels(workloads_of(experiment)) - set(frame.columns)

    def planned(labels):
        return {label: value for label, value in labels.items() if label not in within_cell}

    try:
        narrowed = relations._matching(frame, planned(finding.data.get("where") or {}))
        for_each = [label for label in finding.data.get("for_each") or [] if label not in within_cell]
        for group in relations.groups(narrowed, for_each):
            in_group = relations._matching(narrowed, group)
            for selector, _ in finding.relation.sides():
                relations.side_values(in_group, selector._replace(labels=planned(selector.labels)), finding.metric)
    except relations.SelectionError as exc:
        raise StudyError(
            f"{where}: experiment {experiment['name']} as the finding sets it plans no such cell: {exc}"
        ) from None


def _existing(results_root, name, signature, experiment):
    """The campaign of the results store to use: ``name`` where it exists, else one planned alike (its plan file
    plans the same cells, any number of rounds); None where there is none."""
    root = Path(results_root)
    if (root / name / plan_file.PLAN_FILE).is_file():
        return name
    for path in sorted(root.glob(f"*/{plan_file.PLAN_FILE}")):
        try:
            planned, _ = plan_file.read(str(path))
        except plan_file.PlanFileError:
            continue
        if planned.get("name") == experiment and _signature(planned["cells"]) == signature:
            return path.parent.name
    return None


def plan(findings, lab, results_root):
    """The ``Plan`` of ``findings`` on ``lab`` (lab.Lab); StudyError naming a finding its experiment cannot test."""
    groups, not_expressible = {}, []
    for finding in findings:
        lacking = lab.missing(finding.needs)
        if lacking:
            not_expressible.append((finding, lacking))
            continue
        key = (finding.experiment, finding.data.get("size"), json.dumps(settings_of(finding), sort_keys=True))
        groups.setdefault(key, []).append(finding)
    campaigns = []
    for (experiment, size, _), members in groups.items():
        platforms = baseline_first({platform for finding in members for platform in finding.platforms()})
        settings, repeats = settings_of(members[0])
        loaded, cells = planned_cells(experiment, size, settings, platforms, repeats)
        for finding in members:
            check_finding(finding, loaded, cells)
        name = _name(experiment, size, settings, platforms)  # the rounds aside: more rounds resume it
        found = (
            _existing(results_root, name, _signature(cells), loaded["name"]) if Path(results_root).is_dir() else None
        )
        name = found or name
        has_samples = (Path(results_root) / name / "samples.jsonl").is_file()
        campaigns.append(
            CampaignPlan(name, experiment, size, settings, platforms, repeats, members, cells, has_samples)
        )
    return Plan(campaigns, not_expressible)
