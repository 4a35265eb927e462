"""The report's first lines: the answer, per platform against bm, before any table.

Each compared row of the main table on its first metric, as its ratio to bm with the 95% interval the table uses
(report_tables.comparison: paired by round in a rounds campaign, Welch's otherwise), read out as

- ``cn/bm throughput 0.991 [0.982, 1.000]: within 2% of bm`` (the interval holds 1 and lies within the resolution);
- ``vm/bm throughput 0.87 [0.85, 0.89]: 13% slower`` (the interval excludes 1);
- ``pd/bm throughput 1.01 [0.95, 1.07]: undecided: ±6%; about 9 more rounds (4 min) to resolve 3%``.

"Slower" follows the metric's direction (workloads/common/metric_table.py): a ratio above 1 of a time is slower.
The rounds still needed come from the spread of the pairs (report_tables.rounds_needed), or, unpaired, from the
interval's half-width shrinking as one over the square root of the repeats; the minutes from the campaign's own
time per round.
"""

import math

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils import inject, sizing
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench.report_load import ACCELERATOR, BASELINE, SAMPLE_TIME, is_emulated
from platbench.report_tables import comparison, key_cells, rounds_needed

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


def verdict(estimate, interval, metric, resolution=RESOLUTION, baseline=BASELINE):
    """The answer's words for a ratio ``estimate`` with its ``interval`` (None: undecided, no interval)."""
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
    return f"undecided: ±{_percent((high - low) / 2.0)}"


def lines(rows, keys, baselines, metric, seconds_per_round=None, resolution=RESOLUTION):
    """The answer's lines for ``metric`` (the main table's first), one per compared row; [] when no row has a
    ratio to bm. ``baselines``: report_tables.baseline_rows of ``rows``."""
    found, methods = [], set()
    context_keys = [key for key in keys if key not in ROW_KEYS_LEFT_OUT]
    compared_rows = [
        (row, baseline)
        for row, baseline in zip(rows, baselines, strict=True)
        if baseline and baseline is not row and not is_emulated(row) and row.get(f"{metric} values")
    ]
    platforms = [row["platform"] for row, _ in compared_rows]
    several = len(set(platforms)) < len(platforms)  # a platform in several rows: each line says which row
    for row, baseline in compared_rows:
        compared = comparison(row, baseline, metric)
        methods.add(compared["method"])
        estimate, interval = compared["estimate"], compared["interval"]
        context = f" ({where(row, context_keys)})" if several else ""
        text = f"{name(row)}/{name(baseline)} {metric}{context} {_ratio_text(estimate, interval)}: "
        words = verdict(estimate, interval, metric, resolution, name(baseline))
        if words.startswith("undecided: ±"):
            more = rounds_needed(compared, row, baseline, metric, resolution)
            if more is not None:
                minutes = f" ({math.ceil(more * seconds_per_round / 60)} min)" if seconds_per_round else ""
                words += f"; about {more} more round(s){minutes} to resolve {_percent(resolution)}"
        found.append(text + words)
    if not found:
        return []
    return [TITLE.format(metric=metric, baseline=BASELINE, methods=", ".join(sorted(methods))), *found]


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


def _ratio_text(estimate, interval):
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
