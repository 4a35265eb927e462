"""The report's first lines: the answer, per platform against bm, before any table.

Each compared row of the main table on its first metric, as its ratio to bm with the 95% interval the table uses
(report_tables.comparison: paired by round in a rounds campaign, Welch's otherwise), read out as

- ``cn/bm throughput 0.991 [0.982, 1.000]: within 2% of bm`` (the interval holds 1 and lies within the resolution);
- ``vm/bm throughput 0.87 [0.85, 0.89]: 13% slower`` (the interval excludes 1);
- ``pd/bm throughput 1.01 [0.95, 1.07]: undecided: ±6%; about 9 more round(s) (4 min) to resolve 3% (±2.0%
  decides it)``;
- ``cn/bm throughput 1.015 [0.991, 1.039]: undecided: ±2%, not yet clear of 1 nor within 3% of it; about 4 more
  round(s) (2 min) to resolve 3% (±1.5% decides it)``: an interval narrower than the resolution is not decided while
  it holds 1 and reaches beyond the resolution on one side.

"Slower" follows the metric's direction (workloads/common/metric_table.py): a ratio above 1 of a time is slower.
The rounds still needed bring the interval to the half-width that decides it at its estimate (``deciding_half_width``),
at least one while it is undecided: from the spread of the pairs (report_tables.rounds_needed), or, unpaired, from the
interval's half-width shrinking as one over the square root of the repeats; the minutes from the campaign's own
time per round.

A paired comparison's pairs are checked for exchangeability in the order they ran (platbench/exchangeability.py): a
series that is not (two regimes, a drift) gets a line of its own after its answer, never averaged silently. Where the
compared cells' harness did not run apart from them, or the experiment asked for no isolation, every answer line ends
saying so (validity.harness_of). A duet row's elapsed is not compared: both sides time the same window.
"""

import math
from typing import NamedTuple

import pandas as pd
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench import exchangeability, validity
from platbench.report.load import ACCELERATOR, BASELINE, SAMPLE_TIME, is_emulated
from platbench.report.stats import log_ratio_series
from platbench.report.tables import (
    PAIRED_METHODS,
    SAME_WINDOW,
    comparison,
    key_cells,
    rounds_needed,
    same_window,
)

# The difference the answer resolves by default: within it, two platforms are the same for the user's decision.
RESOLUTION = 0.03
TITLE = "Answer: {metric}, each platform against {baseline} (95% interval, {methods})"
ROW_KEYS_LEFT_OUT = ("platform",)
SCENARIO_PARTS = ("scaleup", "cpu_config", "processor")
CONTEXT_LEFT_OUT = (ACCELERATOR, inject.LABEL, sizing.REQUESTED_LABEL, sizing.CHR_LABEL, sizing.NUMA_LABEL)


def _percent(fraction):
    """A difference in percent for the answer: whole percents, and "<1%" below one."""
    value = abs(fraction) * 100
    return "<1%" if value < 0.5 else f"{value:.0f}%"


def _direction_words(metric):
    info = metric_table.lookup(metric)  # None for a metric the table does not know: no direction
    better = info.better if info else None
    if better == metric_table.HIGHER:
        return "slower", "faster"
    if better == metric_table.LOWER:
        return "faster", "slower"
    return "lower", "higher"


def _fine_percent(fraction):
    """A half-width in percent to one decimal, for the half-width that decides: ``1.5%``."""
    return f"{abs(fraction) * 100:.1f}%"


def decided(interval, resolution=RESOLUTION):
    """Whether ``interval`` decides the answer: it excludes 1, or it lies within ``resolution`` of 1."""
    if interval is None:
        return False
    low, high = interval
    return high < 1.0 or low > 1.0 or max(1.0 - low, high - 1.0) <= resolution


def verdict(estimate, interval, metric, resolution=RESOLUTION, baseline=BASELINE):
    """The answer's words for a ratio ``estimate`` with its ``interval`` (None: undecided, no interval). An undecided
    interval already narrower than the resolution holds 1 and reaches beyond the resolution on one side: the words
    say that it is neither clear of 1 nor within the resolution of it yet."""
    if interval is None or estimate is None:
        return "undecided: no interval (fewer than 2 rounds on a side)"
    low, high = interval
    below, above = _direction_words(metric)
    if high < 1.0:
        return f"{_percent(1.0 - estimate)} {below}"
    if low > 1.0:
        return f"{_percent(estimate - 1.0)} {above}"
    widest = max(1.0 - low, high - 1.0)
    if widest <= resolution:
        return f"within {math.ceil(round(widest * 100, 6)) or 1}% of {baseline}"
    half = (high - low) / 2.0
    words = f"undecided: ±{_percent(half)}"
    if half <= resolution:
        words += f", not yet clear of 1 nor within {_percent(resolution)} of it"
    return words


def deciding_half_width(compared, resolution=RESOLUTION):
    """The half-width (as report_tables.rounds_needed takes it) below which ``compared``'s interval decides, its
    estimate staying where it is: it clears 1 once narrower than the estimate's distance from 1, and lies within
    ``resolution`` of 1 once narrower than what the distance leaves of the resolution; the larger comes first. A
    paired interval is symmetric about the estimate in logarithms, an unpaired one in the ratio itself."""
    estimate = compared["estimate"]
    if compared["method"] in PAIRED_METHODS:
        distance = abs(math.log(estimate))
        room = min(math.log((1.0 + resolution) / estimate), math.log(estimate / (1.0 - resolution)))
        return math.expm1(max(distance, room))
    distance = abs(estimate - 1.0)
    return max(distance, resolution - distance)


class Line(NamedTuple):
    """One compared row's answer: the ``row`` and its ``baseline``, ``compared`` (report_tables.comparison; None
    where the metric is not compared: ``same_window``), its ``text``, and ``exchangeability`` (exchangeability.check
    of its pairs in time order; None unpaired) with its ``notice``, the line that says a flagged series (None
    otherwise); ``label`` names the comparison (``cn/bm``, with its row where a platform is in several)."""

    label: str
    row: dict
    baseline: dict
    compared: dict | None
    text: str
    exchangeability: object
    notice: str | None


def answer_of(rows, keys, baselines, metric, seconds_per_round=None, resolution=RESOLUTION):
    """(title, [Line]) of ``metric`` (the main table's first), one Line per compared row; (None, []) when no row has
    a ratio to bm. ``baselines``: report_tables.baseline_rows of ``rows``."""
    found, methods = [], set()
    context_keys = [key for key in keys if key not in ROW_KEYS_LEFT_OUT]
    compared_rows = [
        (row, baseline)
        for row, baseline in zip(rows, baselines, strict=True)
        if baseline and baseline is not row and not is_emulated(row) and row.get(f"{metric} values")
    ]
    platforms = [row["platform"] for row, _ in compared_rows]
    several = len(set(platforms)) < len(platforms)  # a platform in several rows: each line says which row
    ending = _campaign_ending([side for pair in compared_rows for side in pair])
    for row, baseline in compared_rows:
        context = f" ({where(row, context_keys)})" if several else ""
        pair_name = f"{name(row)}/{name(baseline)}"
        label = pair_name + context
        if same_window(row, metric):
            text = f"{pair_name} {metric}{context}: {SAME_WINDOW}{ending}"
            found.append(Line(label, row, baseline, None, text, None, None))
            continue
        compared = comparison(row, baseline, metric)
        methods.add(compared["method"])
        estimate, interval = compared["estimate"], compared["interval"]
        text = f"{pair_name} {metric}{context} {ratio_text(estimate, interval)}: "
        words = verdict(estimate, interval, metric, resolution, name(baseline))
        if interval is not None and not decided(interval, resolution):
            words += _rounds_words(compared, row, baseline, metric, seconds_per_round, resolution)
        tested = _exchangeability(compared)
        notice = None
        if tested is not None and tested.flagged:
            notice = f"{label}: the pairs are not exchangeable: {tested.words()}"
        found.append(Line(label, row, baseline, compared, text + words + ending, tested, notice))
    if not found:
        return None, []
    shown = ", ".join(sorted(methods)) or "none compared"
    return TITLE.format(metric=metric, baseline=BASELINE, methods=shown), found


def lines(rows, keys, baselines, metric, seconds_per_round=None, resolution=RESOLUTION):
    """The answer's lines for ``metric`` (the main table's first): its title, then one per compared row, each
    followed by the line that says its pairs are not exchangeable where they are not; [] when no row has a ratio to
    bm. ``baselines``: report_tables.baseline_rows of ``rows``."""
    title, found = answer_of(rows, keys, baselines, metric, seconds_per_round, resolution)
    if title is None:
        return []
    return [title, *(text for line in found for text in (line.text, line.notice) if text)]


def _rounds_words(compared, row, baseline, metric, seconds_per_round, resolution):
    """``; about N more round(s) (M min) to resolve 3% (±1.5% decides it)``: the rounds that bring the interval to the
    half-width that decides it (``deciding_half_width``), at least one while it is undecided; "" where it cannot be
    said (fewer than two rounds on a side)."""
    target = deciding_half_width(compared, resolution)
    more = rounds_needed(compared, row, baseline, metric, target)
    if more is None:
        return ""
    more = max(1, more)
    minutes = f" ({math.ceil(more * seconds_per_round / 60)} min)" if seconds_per_round else ""
    return (
        f"; about {more} more round(s){minutes} to resolve {_percent(resolution)} (±{_fine_percent(target)} decides it)"
    )


def _exchangeability(compared):
    """exchangeability.check of a paired comparison's log-ratios in the order the pairs ran, the duet's CPU-set term
    taken out where the interval is blocked on it; None for an unpaired one."""
    if compared["method"] not in PAIRED_METHODS:
        return None
    series = log_ratio_series(compared["pairs"], compared.get("sides"))
    return None if series is None else exchangeability.check(series)


def _campaign_ending(rows):
    """What every answer line of the campaign ends with, from how its compared cells ran (``rows``: the compared
    rows and their baselines, validity.harness_of each): the isolation the experiment chose not to have, and a
    harness that did not run apart from the cells, with how or why not. "" when neither."""
    not_isolated, isolation = {}, {}
    for row in rows:
        harness = row.get(validity.HARNESS) or {}
        not_isolated.update(dict.fromkeys(harness.get("not isolated", ())))
        isolation.update(dict.fromkeys(harness.get("isolation", ())))
    ending = ""
    if validity.NO_ISOLATION in isolation:
        ending += f"; isolation: {validity.NO_ISOLATION} (the experiment's choice)"
    if not_isolated:
        ending += f"; harness not isolated: {' / '.join(not_isolated)}"
    return ending


def name(row):
    """A row's platform, with the overhead injected into it (``cn[cpu_quota=0.95]``)."""
    label = row.get(inject.LABEL)
    return f"{row['platform']}[{label}]" if inject.is_injected(label) else str(row["platform"])


def where(row, keys):
    """Which row a line is about: its scenario without the platform (``1/pin/cpu``), then its other keys as
    ``key=value`` (parameters, workload, host); the host's sizing labels and the accelerator say nothing new."""
    scenario = "/".join(str(row.get(key)) for key in SCENARIO_PARTS)
    others = [key for key in keys if key not in SCENARIO_PARTS and key not in CONTEXT_LEFT_OUT]
    return ", ".join([scenario, *(f"{key}={cell}" for key, cell in zip(others, key_cells(row, others), strict=True))])


def ratio_text(estimate, interval):
    if estimate is None:
        return "n/a"
    if interval is None:
        return f"{estimate:.3f}"
    return f"{estimate:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def seconds_per_round(frame):
    """The campaign's time per round: the span of its samples' timestamps over its rounds (repeats) measured;
    None where the samples do not say."""
    if SAMPLE_TIME not in frame.columns or "repeat" not in frame.columns or frame.empty:
        return None
    stamps = pd.to_numeric(frame[SAMPLE_TIME], errors="coerce").dropna()
    rounds = frame["repeat"].dropna().nunique()
    if stamps.empty or not rounds:
        return None
    span = float(stamps.max() - stamps.min())
    return span / rounds if span > 0 else None
