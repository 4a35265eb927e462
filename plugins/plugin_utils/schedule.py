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

Pure Python: matrix.expand orders the cells, experiment_plan picks the seed.
"""

from __future__ import annotations

import random
import zlib

SCHEDULES = ("rounds", "sequential")
DEFAULT = "rounds"
# The label every cell carries: the report pairs the cells of a rounds campaign by round.
LABEL = "schedule"
SEED_FIELD = "schedule_seed"
_SEED_LIMIT = 2**31


def problems(schedule, seed):
    """What is wrong with an experiment's ``schedule`` and ``schedule_seed`` fields, each naming the field."""
    found = []
    if schedule not in SCHEDULES:
        found.append(
            f"schedule: unknown value {schedule!r}; allowed: rounds (every scenario once per round, in an order "
            "shuffled per round: the default) or sequential (the plan's fixed order, round after round)"
        )
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < _SEED_LIMIT):
        found.append(f"{SEED_FIELD}: {seed!r} must be a whole number from 0 to {_SEED_LIMIT - 1} (or left out)")
    return found


def seed_for(campaign):
    """The seed of a campaign that names none: a stable hash of its name, so that a resumed campaign (the same
    name) shuffles its rounds as it did."""
    return zlib.crc32(str(campaign).encode("utf-8")) % _SEED_LIMIT


def ordered(cells, schedule, seed, round_of=lambda cell: cell["labels"]["repeat"]):
    """``cells`` in the order ``schedule`` runs them. rounds: the rounds in their order, each one's cells shuffled
    by ``random.Random`` seeded with ``seed`` and the round; sequential (or no seed): as given."""
    if schedule != "rounds" or seed is None:
        return list(cells)
    rounds = {}
    for cell in cells:
        rounds.setdefault(round_of(cell), []).append(cell)
    result = []
    for number, members in rounds.items():
        shuffled = list(members)
        random.Random(f"{seed}/{number}").shuffle(shuffled)
        result.extend(shuffled)
    return result
