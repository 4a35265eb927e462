# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A campaign's plan, planned once: ``results/<campaign>/plan.json``.

``platbench run`` plans the experiment (experiment_plan.plan_experiment) and writes the plan here before it starts
the playbook; ``playbooks/experiment.yml`` reads it back through the ``platbench.lab.experiment`` lookup's
``plan_file`` and does not plan again. A resumed campaign is checked against the file: a pass that would plan a cell
the campaign measured with other labels or parameters is refused (``changed_cell``), as the passes of ``--precision``
are; a cell that failed or never ran is planned anew.

The file is one JSON document: ``plan_version`` (PLAN_VERSION; a file of another version is refused, naming it), the
``campaign``, and the ``plan`` itself: every cell with its labels, parameters, schedule position and pairing, the
experiment as validated, and the experiment file's path and SHA-256 (``plan.experiment_file``).
"""

from __future__ import annotations

import json
import os

from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import write_json

PLAN_FILE = "plan.json"
PLAN_VERSION = 1
_ABSENT = object()


class PlanFileError(ValueError):
    """A plan file cannot be read or does not fit; the message names the file and what to do."""


def definition(plan):
    """The experiment of ``plan`` (a plan, or an experiment with or without its expansion) without its expanded cells:
    what a campaign's run.json keeps, and what the cells' records carry."""
    return {key: value for key, value in (plan or {}).items() if key != "cells"}


def path_in(campaign_dir):
    """Where a campaign's plan file is."""
    return os.path.join(str(campaign_dir), PLAN_FILE)


def write(path, plan, campaign):
    """Write ``plan`` for ``campaign`` to ``path`` (atomically: a reader sees the old file or the new one)."""
    write_json(path, {"plan_version": PLAN_VERSION, "campaign": campaign, "plan": plan})


def read(path):
    """``(plan, campaign)`` from the plan file at ``path``; PlanFileError when it is missing, not JSON, or of
    another version."""
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except FileNotFoundError:
        raise PlanFileError(
            f"plan file {path}: no such file; `platbench run` writes it before it starts the playbook (run the "
            "campaign with it, or leave platbench_plan_file unset so that the playbook plans the experiment)"
        ) from None
    except (OSError, ValueError) as exc:
        raise PlanFileError(f"plan file {path}: cannot be read as JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("plan"), dict):
        raise PlanFileError(f"plan file {path}: not a plan (no 'plan' mapping); it was not written by platbench")
    version = document.get("plan_version")
    if version != PLAN_VERSION:
        raise PlanFileError(
            f"plan file {path}: plan_version {version!r}, this platbench reads {PLAN_VERSION}; run the campaign "
            "with the platbench that planned it, or start it again as a campaign of its own (--campaign NEW)"
        )
    plan = document["plan"]
    if not isinstance(plan.get("cells"), list):
        raise PlanFileError(f"plan file {path}: its plan has no list of cells")
    return plan, document.get("campaign")


def changed_cell(before, after, measured=None):
    """How a cell that both plans hold (the same id) is planned differently in ``after``, in words; None when every
    shared cell is planned alike (its labels and parameters), as a pass that only adds rounds plans them. With
    ``measured`` (the ids of the cells the campaign holds samples of), only those are compared: a cell that failed
    or never ran is run again as the new plan says, and mixes with nothing."""
    planned = {cell["id"]: cell for cell in after["cells"]}
    for cell in before["cells"]:
        again = planned.get(cell["id"])
        if again is None or (measured is not None and cell["id"] not in measured):
            continue
        for part in ("labels", "params"):
            old, new = cell.get(part) or {}, again.get(part) or {}
            keys = [key for key in dict.fromkeys([*old, *new]) if old.get(key, _ABSENT) != new.get(key, _ABSENT)]
            if keys:
                shown = "; ".join(f"{key}: {_shown(old, key)} -> {_shown(new, key)}" for key in keys)
                return f"cell {cell['id']} was planned with other {part} ({shown})"
    return None


def _shown(values, key):
    return repr(values[key]) if key in values else "(not set)"
