"""A finding's relation, evaluated on a campaign's samples: its quantity with a 95% interval, and the verdict.

The quantity is a ratio of means, ``of`` / ``to``, or a ratio of two such ratios (``per``, an interaction). Every
side is measured in the same rounds of one campaign, so the quantity is taken round by round: the log of the
quantity is the signed sum of the sides' logs in that round, and its interval is Student's t on those round values,
back-transformed (the estimate is their geometric mean). Pairing by round takes the host's drift out, as the report's
paired ratios do. Without two rounds that hold every side, the sides' log means are compared unpaired (Welch).

The verdict, on the interval:
- reproduced: the whole interval satisfies the relation;
- not reproduced: the whole interval lies where the relation fails;
- undecided: it straddles a bound; the rounds that would decide it come from the rounds' spread, and a finding whose
  interval is already within ±precision and still straddles is settled as undecided: its quantity sits on the bound.
"""

from __future__ import annotations

import math
import statistics
from typing import NamedTuple

from platbench import distributions
from platbench.report.load import SKIP_REASON, measured
from platbench.report.stats import CONFIDENCE

REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_EXPRESSIBLE = "reproduced", "not reproduced", "undecided", "not expressible"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_EXPRESSIBLE)
ROUND = "repeat"
SKIPPED_METRIC = "skipped"  # the one sample of a cell skipped by design (plugin_utils/records/records.py)
PAIRED, UNPAIRED = "paired by round (t on log-ratios)", "unpaired (Welch's t on the sides' log means)"
MOST_ROUNDS = 10_000  # rounds needed beyond this are reported as "more than"


class SelectionError(ValueError):
    """A side of a relation picks no cell, or several in one round: the finding's labels must say which."""


class Measurement(NamedTuple):
    """The relation on one value of the finding's ``for_each`` labels (``group``; {} without them)."""

    group: dict
    estimate: float | None
    interval: tuple | None
    rounds: int
    method: str | None
    verdict: str
    settled: bool
    rounds_needed: int | None  # rounds in all that would decide it (None: decided, or no spread to tell from)
    reason: str


class Outcome(NamedTuple):
    """A finding's verdict on a campaign: every group's ``measurements``, the verdict they give together, whether it
    is ``settled`` (no round more is needed), the ``rounds_needed`` in all where not, and the reason in words."""

    verdict: str
    measurements: list
    settled: bool
    rounds_needed: int | None
    reason: str


def _as_text(value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _matching(frame, labels):
    """The rows of ``frame`` whose labels are ``labels`` (compared as text); SelectionError on an unknown label."""
    for label, value in labels.items():
        if label not in frame.columns:
            raise SelectionError(f"no cell has the label {label!r} (wanted {label}={value})")
        frame = frame[frame[label].map(_as_text) == _as_text(value)]
    return frame


def side_values(frame, selector, metric):
    """``{round: value}`` of ``metric`` on the cells ``selector`` picks in ``frame``: the mean of a cell's samples.
    SelectionError where it picks no cell, or two cells in one round."""
    rows = _matching(frame[frame["metric"] == (selector.metric or metric)], selector.labels)
    if rows.empty:
        raise SelectionError(f"{selector.text}: no cell measured {selector.metric or metric}")
    values = {}
    for round_value, cells in rows.groupby(rows[ROUND].map(_as_text), sort=True):
        names = sorted(set(cells["cell"].map(str)))
        if len(names) > 1:
            raise SelectionError(
                f"{selector.text}: {len(names)} cells in round {round_value} ({', '.join(names[:3])}): name more "
                "labels in the finding's where, its selectors or for_each"
            )
        numbers = [float(value) for value in cells["value"] if value is not None and not math.isnan(float(value))]
        if numbers:
            values[round_value] = statistics.fmean(numbers)
    return values


def _interval(sides):
    """``(estimate, (low, high), rounds, method, spread, df)`` of the quantity from ``[(values by round, sign)]``;
    the interval None where there are fewer than two values to tell it from."""
    if any(value <= 0 for values, _ in sides for value in values.values()):
        raise SelectionError("a value is 0 or negative: a ratio of it means nothing")
    common = set.intersection(*(set(values) for values, _ in sides))
    t = lambda df: distributions.t_quantile((1.0 + CONFIDENCE) / 2.0, df)  # noqa: E731
    if len(common) >= 2:
        logs = [sum(sign * math.log(values[key]) for values, sign in sides) for key in sorted(common)]
        center, spread = statistics.fmean(logs), statistics.stdev(logs)
        half = t(len(logs) - 1) * spread / math.sqrt(len(logs))
        interval = (math.exp(center - half), math.exp(center + half))
        return math.exp(center), interval, len(logs), PAIRED, spread, len(logs) - 1
    means, shares, counts = 0.0, [], []
    for values, sign in sides:
        logs = [math.log(value) for value in values.values()]
        if not logs:
            return None, None, 0, None, None, None
        means += sign * statistics.fmean(logs)
        counts.append(len(logs))
        shares.append(statistics.variance(logs) / len(logs) if len(logs) > 1 else None)
    if None in shares:
        return math.exp(means), None, min(counts), None, None, None
    error = math.sqrt(sum(shares))
    if not error:
        return math.exp(means), (math.exp(means),) * 2, min(counts), UNPAIRED, 0.0, None
    df = sum(shares) ** 2 / sum(share**2 / (count - 1) for share, count in zip(shares, counts, strict=True))
    half = t(df) * error
    return math.exp(means), (math.exp(means - half), math.exp(means + half)), min(counts), UNPAIRED, None, df


def verdict_of(relation, interval):
    """REPRODUCED, NOT_REPRODUCED or UNDECIDED for a quantity's ``interval`` (None: UNDECIDED). ``within`` holds
    where the interval lies inside its bounds (touching them counts), ``above``/``below`` where it lies strictly
    beyond the bound; each fails where the interval lies wholly on the other side."""
    if interval is None:
        return UNDECIDED
    low, high = interval
    bound_low, bound_high = relation.bounds()
    if relation.kind == "within":
        if bound_low <= low and high <= bound_high:
            return REPRODUCED
        return NOT_REPRODUCED if high < bound_low or low > bound_high else UNDECIDED
    if relation.kind == "above":
        return REPRODUCED if low > bound_low else NOT_REPRODUCED if high <= bound_low else UNDECIDED
    return REPRODUCED if high < bound_high else NOT_REPRODUCED if low >= bound_high else UNDECIDED


def deciding_distance(relation, estimate):
    """How far (in log) the estimate lies from the bound that decides it: the half-width the interval must reach."""
    bound_low, bound_high = relation.bounds()
    here = math.log(estimate)
    distances = [abs(here - math.log(bound)) for bound in (bound_low, bound_high) if bound is not None]
    if relation.kind == "within" and bound_low <= estimate <= bound_high:
        return min(distances)  # inside: the nearer bound
    if relation.kind == "within":
        return min(distances)  # outside: the bound it lies beyond is the nearer one
    return distances[0]


def rounds_needed(spread, distance, rounds):
    """The fewest rounds in all whose interval (t at their degrees of freedom) has a log half-width below
    ``distance``, from the rounds' ``spread``; None without a spread, MOST_ROUNDS + 1 beyond MOST_ROUNDS."""
    if spread is None or distance <= 0:
        return None if spread is None else MOST_ROUNDS + 1
    count = max(2, rounds)
    while count <= MOST_ROUNDS:
        if distributions.t_quantile((1.0 + CONFIDENCE) / 2.0, count - 1) * spread / math.sqrt(count) < distance:
            return count
        count += 1 if count < 100 else max(1, count // 10)
    return MOST_ROUNDS + 1


def measure(relation, rows, metric, precision, group=None):
    """The ``Measurement`` of ``relation`` on ``rows`` (a campaign's measured samples, already narrowed to the
    finding's cells) at ``precision`` (a fraction: the half-width at which a straddling interval is settled)."""
    group = group or {}
    sides = [(side_values(rows, selector, metric), sign) for selector, sign in relation.sides()]
    estimate, interval, rounds, method, spread, _ = _interval(sides)
    verdict = verdict_of(relation, interval)
    if interval is None:
        why = "fewer than two rounds measured every side" if estimate is not None else "no round measured every side"
        return Measurement(group, estimate, None, rounds, method, UNDECIDED, False, None, why)
    half = (math.log(interval[1]) - math.log(interval[0])) / 2.0
    if verdict != UNDECIDED:
        words = "the whole interval satisfies" if verdict == REPRODUCED else "the whole interval lies outside"
        return Measurement(group, estimate, interval, rounds, method, verdict, True, None, f"{words} {relation.text()}")
    if half <= math.log1p(precision):
        why = (
            f"the interval is within ±{precision:.1%} and still straddles a bound of {relation.text()}: the quantity "
            "sits on the bound"
        )
        return Measurement(group, estimate, interval, rounds, method, UNDECIDED, True, None, why)
    # Aim at the half-width that decides it, or at the precision, whichever is wider: the one reached first.
    target = max(deciding_distance(relation, estimate), math.log1p(precision))
    needed = rounds_needed(spread, target, rounds) if method == PAIRED else None
    why = f"the interval straddles a bound of {relation.text()}"
    return Measurement(group, estimate, interval, rounds, method, UNDECIDED, False, needed, why)


def groups(rows, labels):
    """The values of the ``for_each`` labels present in ``rows``, each as a mapping (one empty mapping without)."""
    if not labels:
        return [{}]
    missing = [label for label in labels if label not in rows.columns]
    if missing:
        raise SelectionError(f"for_each: no cell has the label(s) {', '.join(missing)}")
    present = rows[labels].dropna().drop_duplicates()
    return [
        dict(zip(labels, values, strict=True))
        for values in sorted(
            present.itertuples(index=False, name=None), key=lambda values: tuple(map(_as_text, values))
        )
    ]


def combine(measurements):
    """The finding's verdict from its groups': reproduced where every group is, not reproduced where one is not
    (that settles it), undecided otherwise."""
    verdicts = [item.verdict for item in measurements]
    if verdicts and all(verdict == REPRODUCED for verdict in verdicts):
        return REPRODUCED, True
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED, True
    return UNDECIDED, all(item.settled for item in measurements)


def _skipped(frame, finding):
    """Why the finding's cells were skipped by design (a tool the lab did not build), or None: the skipped cells'
    reasons where no cell of the finding measured its metric."""
    if SKIP_REASON not in frame.columns:
        return None
    try:
        skipped = _matching(frame[frame["metric"] == SKIPPED_METRIC], finding.data.get("where") or {})
    except SelectionError:
        return None
    reasons = sorted({str(reason) for reason in skipped[SKIP_REASON].dropna()})
    return "; ".join(reasons[:2]) if reasons else None


# Rounds a pass adds to a campaign whose cells were recorded before their workload reported a finding's metric: two
# give the first interval, and the judge estimates the rest from it.
FIRST_ROUNDS = 2


def _recorded_before(rows, finding):
    """``(rounds held, reason)`` where the finding's cells were measured but none reported its metric: a campaign
    recorded before its workload reported that metric (planning checked that the workload reports it now), which the
    rounds added now measure; None otherwise."""
    try:
        cells = _matching(rows, finding.data.get("where") or {})
    except SelectionError:
        return None
    missing = sorted(set(finding.metrics()) - set(cells["metric"].dropna()))
    if cells.empty or not missing:
        return None
    held = int(cells[ROUND].map(_as_text).nunique()) if ROUND in cells.columns else 0
    return held, (
        f"not measured yet: the campaign's {held} round(s) hold no {', '.join(missing)} (recorded before its workload "
        "reported it); the rounds added now measure it"
    )


def evaluate(finding, frame, precision):
    """The ``Outcome`` of ``finding`` on a campaign's samples ``frame`` (report.load.load_samples). A finding its
    campaign did not measure is settled as undecided, and says why: its cells were skipped by design or failed, which
    more rounds would not change (planning checked that the experiment plans its cells). Cells measured before their
    workload reported the finding's metric leave it open instead: new rounds measure it."""
    rows = measured(frame)
    if "accelerator" in rows.columns:
        rows = rows[rows["accelerator"].map(_as_text) != "tcg"]  # an emulated guest's speed says nothing here
    try:
        rows = _matching(rows, finding.data.get("where") or {})
        found = groups(rows, list(finding.data.get("for_each") or []))
        measurements = [
            measure(finding.relation, _matching(rows, group), finding.metric, precision, group) for group in found
        ]
    except SelectionError as exc:
        skipped = _skipped(frame, finding)
        if skipped:
            return Outcome(UNDECIDED, [], True, None, f"not measured: its cells were skipped here ({skipped})")
        older = _recorded_before(rows, finding)
        if older:
            held, reason = older
            return Outcome(UNDECIDED, [], False, held + FIRST_ROUNDS, reason)
        return Outcome(UNDECIDED, [], True, None, f"not measured: {exc}")
    if not measurements:
        return Outcome(UNDECIDED, [], False, None, "not measured: no cell has the for_each labels")
    verdict, settled = combine(measurements)
    open_ones = [item for item in measurements if not item.settled]
    needed = None
    if not settled and all(item.rounds_needed is not None for item in open_ones):
        needed = max(item.rounds_needed for item in open_ones)
    reasons = [item.reason for item in measurements if item.verdict == verdict] or [measurements[0].reason]
    return Outcome(verdict, measurements, settled, needed, reasons[0])
