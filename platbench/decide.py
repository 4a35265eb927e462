"""Run until decided: whether a campaign's answer is precise enough, and how many rounds more it would take.

``platbench run EXP --precision 0.02 [--max-time 30m]`` (platbench/run.py) runs the campaign's rounds, reads the
answer's comparisons (report_tables.comparison, the estimate the report prints first) and adds rounds until

- every compared ratio's 95% interval has a half-width of at most the precision and the answer calls it decided
  (``precise``): an interval narrower than the precision that holds 1 and reaches beyond the answer's resolution
  (answer.RESOLUTION) on one side is undecided there, so the run goes on, aiming at the half-width that decides it
  (answer.deciding_half_width);
- or every budget is decided, pass or fail (``budgets_decided``);
- or the time is spent (the caller's part).

Pure reading: samples in, a ``State`` out. The rounds still needed come from the spread of the pairs
(report_tables.rounds_needed) or, unpaired, from the half-width shrinking as one over the square root of the rounds.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from platbench import answer, budgets
from platbench.answer import seconds_per_round
from platbench.report.context import ReportContext
from platbench.report.load import choose_metrics, load_samples
from platbench.report.tables import comparison, rounds_needed, same_window

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class State(NamedTuple):
    """Where a campaign stands: its ``widest`` half-width (None: no interval yet) and the row that has it, the
    ``rounds`` done, the ``more`` rounds the rows need to reach the precision and be decided, ``precise`` (every
    compared ratio within the precision and decided), ``budgets_decided`` (None without budgets),
    ``seconds_per_round``, and ``undecided``: a row within the precision that the answer still calls undecided, with
    the half-width that decides it (``(where, half-width)``; None when there is none)."""

    widest: float | None
    where: str
    rounds: int
    more: int | None
    precise: bool
    budgets_decided: bool | None
    seconds_per_round: float | None
    undecided: tuple | None = None


def precision_problem(value):
    """``--precision``: a fraction above 0 and below 1 (0.02: ±2%)."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1):
        return (
            f"--precision {value}: give the interval half-width to reach as a fraction above 0 and below 1 (0.02: ±2%)"
        )
    return None


def parse_duration(text):
    """Seconds of ``--max-time``: ``90s``, ``30m``, ``1h30m`` or a number of seconds; ValueError otherwise."""
    text = str(text).strip()
    if re.fullmatch(r"\d+", text):
        seconds = int(text)
    else:
        found = _DURATION.match(text)
        if not text or not found or not any(found.groups()):
            raise ValueError(f"--max-time {text}: give a duration such as 90s, 30m or 1h30m")
        hours, minutes, secs = (int(part or 0) for part in found.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise ValueError(f"--max-time {text}: give a duration above 0, such as 30m")
    return seconds


def _half_width(compared):
    low, high = compared["interval"]
    return (high - low) / 2.0


def state(results_dir, precision, stated_budgets=None, budgets_source="budgets"):
    """The ``State`` of the campaign in ``results_dir`` against ``precision`` (and ``stated_budgets``)."""
    frame = load_samples(results_dir)
    report = ReportContext(frame)  # the budgets below judge the same summary
    metric = choose_metrics(frame)[0]
    rows, keys, _ = report.summarize([metric])
    widest, where, more, every_decided, undecided = None, "", 0, True, None
    for row, baseline in zip(rows, report.baselines(rows, keys), strict=True):
        if not baseline or baseline is row or not report.compared(row) or not row.get(f"{metric} values"):
            continue
        if same_window(row, metric):
            continue  # a duet row's elapsed: never compared, so never waited for
        compared = comparison(row, baseline, metric)
        half = math.inf if compared["interval"] is None else _half_width(compared)
        context = answer.where(row, [key for key in keys if key != "platform"])
        named = f"{answer.name(row)}/{answer.name(baseline)} ({context})"
        target, row_decided = precision, answer.decided(compared["interval"])
        if compared["interval"] is not None and not row_decided:
            # The answer's words decide at its resolution: aim at the half-width that decides, where it is finer.
            deciding = answer.deciding_half_width(compared)
            target = min(precision, deciding)
            if half <= precision and undecided is None:
                undecided = (named, deciding)
        needed = rounds_needed(compared, row, baseline, metric, target)
        if needed is not None and half <= precision and not row_decided:
            needed = max(1, needed)
        more = None if more is None or needed is None else max(more, needed)
        every_decided = every_decided and row_decided
        if widest is None or half > widest:
            widest, where = half, named
    rounds = int(frame["repeat"].dropna().nunique()) if "repeat" in frame.columns else 0
    decided = None
    if stated_budgets is not None:
        judgement = budgets.evaluate(report, stated_budgets, budgets_source)
        decided = bool(judgement.verdicts) and all(v.verdict != budgets.INCONCLUSIVE for v in judgement.verdicts)
    precise = widest is not None and widest <= precision and every_decided
    return State(widest, where, rounds, more, precise, decided, seconds_per_round(frame), undecided)


def rounds_to_add(current, time_left, overhead_seconds=60.0):
    """How many rounds the next pass adds: what the widest row still needs, at least one, and no more than the
    time left holds at the campaign's pace (each pass also costs the playbook's own start, ``overhead_seconds``)."""
    wanted = max(1, current.more or 1)
    if current.seconds_per_round and time_left is not None:
        fits = math.floor((time_left - overhead_seconds) / current.seconds_per_round)
        wanted = min(wanted, fits)
    return max(0, wanted)


def describe(current, precision):
    """One progress line: the widest half-width left and where, against the precision."""
    if current.widest is None:
        return f"{current.rounds} round(s) done: no ratio to bm yet (aiming at ±{precision:.1%})"
    widest = "no interval yet" if math.isinf(current.widest) else f"±{current.widest:.1%}"
    line = f"{current.rounds} round(s) done: widest interval {widest} ({current.where}), aiming at ±{precision:.1%}"
    if current.undecided:
        named, deciding = current.undecided
        line += (
            f"; {named} is within it but undecided (not yet clear of 1 nor within {answer.RESOLUTION:.0%} of it): "
            f"aiming at ±{deciding:.1%} there"
        )
    return line
