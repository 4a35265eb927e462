# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The order cells run in: the experiment's ``schedule``.

A host's capacity drifts 10-20% within minutes. Cells always in the same order (bm before cn, repeat after repeat)
put that drift on the comparison; the fix the benchmarking literature agrees on (Abedi and Brecht, ICPE'17:
randomized multiple interleaved trials) is to run every scenario once per round, in an order shuffled per round,
and to compare the platforms round by round (platbench/report_stats.paired_ratio_interval).

- ``rounds`` (the default): a round is a repeat: each runs every planned cell of that repeat once, in an order
  shuffled with the campaign's seed and the round's number, so the same campaign (a resumed one) runs the same
  order.
- ``sequential``: the plan's fixed order, round after round (the platform innermost: bm, then cn, ...).
- ``duet`` (Bulej et al., "Duet benchmarking", 2020): a cell and its baseline's cell (bm's, or for an injected cell
  the same platform's without injection) run at the same time, on disjoint CPU sets of one NUMA node, and swap the
  sets every round; the drift of the host then falls on both sides of each pair alike. The baseline runs as a copy
  of its cell for each pair (``<its id>|partner=<the other side>``); both sides carry the pair (``duet_pair``: the
  lead's id), their side of the CPUs (``duet_side``) and their partner's id (``duet_partner``). The pairs and the
  cells left alone are shuffled per round, as ``rounds`` does. A cell that cannot run beside another (a guest, an
  emulator, several instances, an unpinned or a gpu cell, idle_cores: none, no baseline cell to pair with) runs
  alone, under ``rounds``, and the plan says why (``fallbacks``). Whether a pair fits twice on a host is the
  precheck's (runplan.duet_problems): its facts say.

The experiment's ``baselines`` names, per rung (a platform, or a platform with label values: rungs.py), the rungs it is
compared with in place of bm (a ladder of platforms, ``platbench explain``: ``{cr: bm, ns: cr, sc: ns, cn: [sc,
bm]}``). Under ``duet`` a platform runs beside
each of them in a pair of its own every round: the first pair's lead is the cell itself, each further pair's a copy of
it (``<its id>|lead=<the baseline's scenario>``), so that every pair of a round is measured once. An injected cell whose
experiment plans no twin without injection (``inject_into``, inject.py) is compared with its baselines' cells.

Pure Python: matrix.expand orders the cells, experiment_plan picks the seed.
"""

from __future__ import annotations

import random
import zlib

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import peer
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import cell_labels, inject, rungs
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned

SCHEDULES = ("rounds", "sequential", "duet")
DEFAULT = "rounds"
# The label every cell carries: the report pairs the cells of a rounds campaign by round.
LABEL = cell_labels.SCHEDULE
SEED_FIELD = "schedule_seed"
_SEED_LIMIT = 2**31
# The labels of a duet pair's cells (run labels: never a row of the report of their own).
DUET_PAIR = "duet_pair"
DUET_SIDE = "duet_side"
DUET_PARTNER = "duet_partner"
DUET_ROLE = "duet_role"  # lead (the cell compared) or partner (its baseline's copy)
DUET_LABELS = (DUET_PAIR, DUET_SIDE, DUET_PARTNER, DUET_ROLE)
# The kinds whose cells can run beside another on CPUs of their own (a process and a container on the runner host)
# declare `duet` (placements/<kind>/: placements.DUET).


def problems(schedule, seed):
    """What is wrong with an experiment's ``schedule`` and ``schedule_seed`` fields, each naming the field."""
    found = []
    if schedule not in SCHEDULES:
        found.append(
            f"schedule: unknown value {schedule!r}; allowed: rounds (every scenario once per round, in an order "
            "shuffled per round: the default), sequential (the plan's fixed order, round after round) or duet "
            "(each cell beside its baseline's, at the same time, on disjoint cores)"
        )
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < _SEED_LIMIT):
        found.append(f"{SEED_FIELD}: {seed!r} must be a whole number from 0 to {_SEED_LIMIT - 1} (or left out)")
    return found


def seed_for(campaign):
    """The seed of a campaign that names none: a stable hash of its name, so that a resumed campaign (the same
    name) shuffles its rounds as it did."""
    return zlib.crc32(str(campaign).encode("utf-8")) % _SEED_LIMIT


def ordered(cells, schedule, seed, round_of=lambda cell: cell["labels"]["repeat"], baselines=None):
    """``cells`` in the order ``schedule`` runs them. rounds: the rounds in their order, each one's cells shuffled
    by ``random.Random`` seeded with ``seed`` and the round; duet: each round's pairs and lone cells shuffled so
    (``duet``, each platform beside its ``baselines``); sequential (or no seed): as given."""
    if schedule not in ("rounds", "duet") or seed is None:
        return list(cells)
    if schedule == "duet":
        return duet(cells, seed, round_of, baselines)[0]
    rounds = {}
    for cell in cells:
        rounds.setdefault(round_of(cell), []).append(cell)
    result = []
    for number, members in rounds.items():
        shuffled = list(members)
        random.Random(f"{seed}/{number}").shuffle(shuffled)
        result.extend(shuffled)
    return result


def _identity(labels, platform, injected):
    """What a cell is, but for its platform and its injection, and the run labels: its baseline shares it."""
    skipped = {"platform", "scenario", "cell", LABEL, inject.LABEL, *DUET_LABELS}
    return (
        tuple(sorted((key, repr(value)) for key, value in labels.items() if key not in skipped)),
        platform,
        injected,
    )


BASELINES_FIELD = "baselines"


def baselines_of(value):
    """The experiment's ``baselines`` as ``[((platform, settings), ((platform, settings), ...)), ...]``: each rung
    (rungs.py) and those it is compared with, in the file's order."""
    found = []
    for key, named in (value or {}).items():
        found.append(
            (rungs.parse(key), tuple(rungs.parse(item) for item in (named if isinstance(named, list) else [named])))
        )
    return found


def compared_with(labels, baselines=None):
    """The rungs a cell (its ``labels``) is compared with, in order: those of the most particular ``baselines`` key it
    matches (a rung with label values before its platform alone), or bm; () for bm's cells."""
    best = None
    for (platform, settings), named in baselines_of(baselines):
        if rungs.matches(labels, platform, settings) and (best is None or len(settings) > len(best[0])):
            best = (settings, named)
    if best is not None:
        return best[1]
    return () if labels.get("platform") == platforms.BASELINE else ((platforms.BASELINE, {}),)


def baselines_problems(value, experiment_platforms):
    """What is wrong with an experiment's ``baselines`` field, each naming it: a rung that does not parse, a platform
    or a baseline not among the experiment's ``platforms``, a rung compared with itself, bm compared with another, a
    chain that never reaches bm (each rung's first baseline, followed, must)."""
    if value is None:
        return []
    shape = (
        f"{BASELINES_FIELD}: must map rungs (a platform, or cn[data_path:overlay]) to the rung (or list of rungs) each "
        "is compared with in place of bm, e.g. {cr: bm, ns: cr, cn: [ns, bm]}"
    )
    if not isinstance(value, dict) or not value:
        return [f"{shape}; got {value!r}"]
    found = []
    planned = set(experiment_platforms or ())
    for key, named in value.items():
        named = named if isinstance(named, list) else [named]
        where = f"{BASELINES_FIELD}.{key}"
        try:
            platform, settings = rungs.parse(key)
            parsed = [rungs.parse(item) for item in named] if all(isinstance(item, str) for item in named) else None
        except rungs.RungError as exc:
            found.append(f"{where}: {exc}")
            continue
        if platform not in planned:
            found.append(
                f"{where}: {platform!r} is not one of the experiment's platforms ({', '.join(sorted(planned))})"
            )
        if platform == platforms.BASELINE and not settings:
            found.append(f"{where}: bm is the baseline of every comparison and is compared with nothing")
        if not parsed or len({rungs.text(*item) for item in parsed}) != len(parsed):
            found.append(f"{where}: {named!r} must name one rung, or a list of distinct ones")
            continue
        for other, other_settings in parsed:
            if (other, other_settings) == (platform, settings):
                found.append(f"{where}: a rung is not compared with itself")
            elif other not in planned:
                found.append(f"{where}: baseline {other!r} is not one of the experiment's platforms")
    if found:
        return found
    for key in value:
        platform, settings = rungs.parse(key)
        seen, current = [rungs.text(platform, settings)], (platform, settings)
        while current != (platforms.BASELINE, {}):
            labels = {"platform": current[0], **current[1]}
            current = compared_with(labels, value)[0] if compared_with(labels, value) else (platforms.BASELINE, {})
            if rungs.text(*current) in seen:
                found.append(
                    f"{BASELINES_FIELD}: {' -> '.join([*seen, rungs.text(*current)])} goes round in a circle: each "
                    "rung's first baseline, followed, must reach bm"
                )
                break
            seen.append(rungs.text(*current))
    return found


def baseline_identities(labels, baselines=None, planned=None):
    """The identities of the cells a cell is compared with, in order: the same platform's without injection for an
    injected one (where ``planned``, the round's identities, holds it: an ``inject_into`` experiment plans none), its
    baselines' (bm's unless ``baselines`` says otherwise: their labels, with the rung's own values) otherwise
    (report_tables.baseline_rows, on cells); () for a baseline itself."""
    injected = labels.get(inject.LABEL, inject.NONE)
    if inject.is_injected(injected):
        twin = _identity(labels, labels["platform"], inject.NONE)
        if planned is None or twin in planned:
            return (twin,)
        injected = inject.NONE  # no twin: its baselines' cells, which carry no injection
    found = []
    for other, settings in compared_with(labels, baselines):
        wanted = _identity({**labels, **settings}, other, injected)
        if planned is not None and wanted not in planned:
            # A baseline that carries fewer labels (a dimension of other platforms only: a guest's set-up), or that
            # was injected into alone (inject_into, its only cell carrying the injection): the closest one planned.
            alike = [known for known in planned if known[1] == other and set(known[0]) <= set(wanted[0])]
            wanted = max(alike, key=lambda known: (len(known[0]), known[2] == injected), default=wanted)
        found.append(wanted)
    return tuple(found)


def baseline_identity(labels, baselines=None, planned=None):
    """The identity of the first cell a cell is compared with (``baseline_identities``); None for a baseline."""
    found = baseline_identities(labels, baselines, planned)
    return found[0] if found else None


def alone_reason(cell):
    """Why ``cell`` cannot run beside another cell on cores of its own ("" when it can)."""
    labels = cell["labels"]
    platform = labels["platform"]
    kind = platforms.get(platform).kind if platform in platforms.LABELS else None
    if kind not in placements.DUET:
        return f"{platform} is a {kind or 'unknown'} platform; only a process's or a container's cells run in pairs"
    if not is_pinned(labels):
        return "its cores are not pinned (cpu_config vnl): a pair needs disjoint CPU sets"
    if labels.get("processor") != "cpu":
        return "it is a gpu cell: a pair needs one device each"
    if cell.get("instances") or peer.needs_peer(labels.get("workload")):
        return "it runs several instances"
    if labels.get("idle_cores") is not None:
        return "idle_cores: none gives it every core"
    if labels.get("mode") == "distributed":
        return "it is a distributed cell"
    return ""


def _partner_copy(baseline, lead, side):
    other = lead["labels"]
    name = other["scenario"] + (
        f"[{other[inject.LABEL]}]" if inject.is_injected(other.get(inject.LABEL, inject.NONE)) else ""
    )
    copy_id = f"{baseline['id']}|partner={name}"
    labels = {
        **baseline["labels"],
        "cell": copy_id,
        LABEL: "duet",
        DUET_PAIR: lead["id"],
        DUET_SIDE: 1 - side,
        DUET_PARTNER: lead["id"],
        DUET_ROLE: "partner",
    }
    return {**baseline, "id": copy_id, "labels": labels}, copy_id


def duet(cells, seed, round_of=lambda cell: cell["labels"]["repeat"], baselines=None):
    """``(cells in run order, fallbacks)`` of a duet campaign. Round by round: every cell with a baseline cell,
    both able to run beside another (``alone_reason``), is a lead followed by its partner (a copy of the baseline's
    cell); the lead takes CPU side ``round % 2``, its partner the other. A cell compared with several platforms
    (``baselines``) leads one pair per baseline, the first as itself, the others as copies of it. A cell that cannot
    pair, and the baseline cells such a cell (or nothing) is compared with, run alone under ``rounds``. The pairs and
    the lone cells of a round are shuffled with ``seed`` and the round. ``fallbacks``: one entry per platform and
    reason, ``{"platform", "reason", "cells"}``, for the plan to say."""
    rounds = {}
    for cell in cells:
        rounds.setdefault(round_of(cell), []).append(cell)
    result, fallbacks = [], {}
    for number, members in rounds.items():
        side = int(number) % 2 if isinstance(number, int) else 0
        by_identity = {
            _identity(cell["labels"], cell["labels"]["platform"], cell["labels"].get(inject.LABEL, inject.NONE)): cell
            for cell in members
        }
        units, paired, needed_alone = [], set(), set()
        for cell in members:
            for index, wanted in enumerate(baseline_identities(cell["labels"], baselines, by_identity)):
                baseline = by_identity.get(wanted)
                reason = _pair_reason(cell, baseline)
                if reason:
                    fallbacks.setdefault((cell["labels"]["platform"], reason), 0)
                    fallbacks[cell["labels"]["platform"], reason] += 1
                    if baseline is not None:
                        needed_alone.add(baseline["id"])
                    continue
                lead_id = cell["id"] if index == 0 else f"{cell['id']}|lead={baseline['scenario']}"
                copy, copy_id = _partner_copy(baseline, {**cell, "id": lead_id}, side)
                lead = {
                    **cell,
                    "id": lead_id,
                    "labels": {
                        **cell["labels"],
                        "cell": lead_id,
                        LABEL: "duet",
                        DUET_PAIR: lead_id,
                        DUET_SIDE: side,
                        DUET_PARTNER: copy_id,
                        DUET_ROLE: "lead",
                    },
                }
                paired.add(cell["id"])
                units.append([lead, copy])
        for cell in members:
            # A lead is never also alone: its id is taken (a cell left alone is never its injected twin's baseline:
            # both pair or neither does).
            if (cell["id"] in needed_alone and cell["id"] not in paired) or _alone(cell, members, paired, baselines):
                units.append([{**cell, "labels": {**cell["labels"], LABEL: "rounds"}}])
        random.Random(f"{seed}/{number}").shuffle(units)
        result.extend(cell for unit in units for cell in unit)
    return result, [
        {"platform": platform, "reason": reason, "cells": count} for (platform, reason), count in fallbacks.items()
    ]


def _pair_reason(cell, baseline):
    """Why ``cell`` cannot run beside its ``baseline``'s cell ("" when it can)."""
    if baseline is None:
        return "its baseline's cell is not in the plan (add bm to the platforms)"
    own = alone_reason(cell)
    if own:
        return own
    theirs = alone_reason(baseline)
    return f"its baseline's cell cannot: {theirs}" if theirs else ""


def _alone(cell, members, paired, baselines=None):
    """Whether ``cell``, needed by no lone cell, still runs alone: one that did not pair, or a baseline no cell of
    the round is compared with (the report shows it); not a baseline whose copies all run beside their leads."""
    if cell["id"] in paired:
        return False
    planned = {
        _identity(other["labels"], other["labels"]["platform"], other["labels"].get(inject.LABEL, inject.NONE))
        for other in members
    }
    if baseline_identities(cell["labels"], baselines, planned):
        return True
    mine = _identity(cell["labels"], cell["labels"]["platform"], cell["labels"].get(inject.LABEL, inject.NONE))
    return not any(
        mine in baseline_identities(other["labels"], baselines, planned) for other in members if other is not cell
    )
