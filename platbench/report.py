"""Summarize a campaign: one row per scenario, each platform normalized to bare metal.

Reads RESULTS_DIR/samples.jsonl, prints the table and writes report.csv, report.md and,
when matplotlib is installed, report.png into RESULTS_DIR. Campaigns with GPU profiles get more:
roofline.png (the measured roofs of each device and one point per scenario) when samples hold
roofline metrics, and a table of the host-to-device copy time's share of elapsed (h2d_split.csv,
also printed and in report.md) when samples hold h2d_time. Every campaign also gets Diff% tables
against bm (Xu 2017), one per component of the metric table (workloads/common/metric_table.py):
diff_<component>.csv and .md, printed after the main table.

A campaign may hold several workloads (the workload is then a row key) and metrics with labels of their
own (hpl_n, size_mb...: row keys where they vary). Cells that could not measure by design (a GPU benchmark
in a CPU cell) hold one ``skipped`` sample: no figure of theirs enters a table, a Diff% or a chart; a note
lists them with their reasons. Cells that MLPerf loadgen called INVALID (inference_e2e: a scaled-down run
misses its minimum duration) keep their measured times, but never pass for a valid MLPerf result: every table
counts them in an INVALID column, loadgen_samples_per_sec is marked INVALID and a note gives loadgen's reasons.
Inference campaigns also get a phase breakdown and a GPU-vs-CPU speedup (platbench/inference_report.py); campaigns
of shared and distributed cells their degradation and their throughput per network path (platbench/instances_report.py).
"""

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy
import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.records import (
    FAILED_METRIC,
    OUTCOME_METRICS,
    SKIPPED_METRIC,
    read_samples,
)
from ansible_collections.platbench.lab.workloads.common import metric_table

# The platform every other one is normalized to, and the row order: both from the registry.
BASELINE = platforms.BASELINE
DEFAULT_METRICS = ("throughput", "elapsed")
# A campaign of micro-benchmarks (workloads/micro_*) has no throughput: its main table shows one
# headline figure per component, and every Diff% table is printed (Xu 2017's way of reporting them).
MICRO_METRICS = ("hpl_gflops", "stream_triad", "mem_latency", "dd_write", "net_throughput", "gpu_sgemm")
SCENARIO_LABELS = ["platform", "scaleup", "cpu_config", "processor"]
# Labels that identify a run rather than what was run: never a row of their own.
RUN_LABELS = {"scenario", "cell", "repeat", "campaign"}
# The inventory host that measured a cell: a row of its own (and its own baseline) once a
# campaign holds samples of more than one host.
HOST = "host"
NOT_AVAILABLE = "n/a"
WORKLOAD = "workload"
# metadata.reason of a skipped sample, a column of the frame (never a label, never a row key).
SKIP_REASON = "skip_reason"
SKIPPED_TITLE = "skipped: {cells} cell(s) could not measure here by design (no failure, no figures):"
# metadata.accelerator of the vm and vmcn samples: "kvm" or "tcg" (QEMU's software emulator).
ACCELERATOR = "accelerator"
EMULATED = "tcg"
NO_ACCELERATOR = "-"
EMULATED_NOTE = (
    "tcg: emulated guest (QEMU TCG, no KVM on this host): functional only, 10-200x slower than "
    "hardware; left out of the ratios to bm (--include-emulated shows them)."
)
# metadata.loadgen of an inference_e2e sample: its verdict and reasons, columns of the frame (never labels).
LOADGEN_RESULT = "loadgen_result"
LOADGEN_REASONS = "loadgen_reasons"
INVALID = "INVALID"  # the verdict, and the column counting a row's cells that carry it
LOADGEN_SPEED = "loadgen_samples_per_sec"  # MLPerf's own figure: marked INVALID where it is
INVALID_TITLE = (
    f"{INVALID}: {{cells}} cell(s) that MLPerf loadgen called {INVALID}: their times are measured, but no figure "
    f"of theirs is a valid MLPerf result ({LOADGEN_SPEED} is marked {INVALID}); loadgen's reasons:"
)
EMULATED_INCLUDED_NOTE = (
    "tcg: emulated guest (QEMU TCG, no KVM on this host): functional only, 10-200x slower "
    "than hardware; its ratios to bm are shown because of --include-emulated."
)


NOISE_MARK = "~"
NOISE_NOTE = (
    f"{NOISE_MARK}: the difference to bm lies within its 95% confidence interval (Welch's t over the "
    "repeats): it cannot be told from noise. More repeats or a quieter host may resolve it."
)
CONFIDENCE = 0.95

# The device a GPU sample's roofline belongs to: metadata.roofline_device, else the first device it used.
GPU_DEVICE = "gpu_device"
ROOFLINE_INTENSITY = "roofline_arithmetic_intensity"
ROOFLINE_ACHIEVED = "gpu_achieved_flops"
ROOFLINE_PEAK_FLOPS = "roofline_peak_flops"
ROOFLINE_PEAK_BANDWIDTH = "roofline_peak_bandwidth"
ROOFLINE_METRICS = (ROOFLINE_INTENSITY, ROOFLINE_ACHIEVED, ROOFLINE_PEAK_FLOPS, ROOFLINE_PEAK_BANDWIDTH)
H2D_TIME = "h2d_time"
H2D_SHARE = "h2d share of elapsed"
H2D_TITLE = (
    f"Host-to-device copy time ({H2D_TIME}) as a share of elapsed ({H2D_TIME} / elapsed of each cell, averaged):"
)


# Diff% as Xu 2017 defines it, signed by the metric table's direction (never guessed from a name).
DIFF = "Diff%"
DIFF_TITLE = "{DIFF} against {BASELINE}, component {component}:"
DIFF_NOTE = (
    f"{DIFF} (Xu 2017) = ({BASELINE} - platform) / {BASELINE} x 100 for a higher-is-better metric, "
    f"(platform - {BASELINE}) / {BASELINE} x 100 for a lower-is-better one (times, latencies): positive means "
    f"the platform is slower or worse than the host. best: the best repeat (highest or lowest as the metric "
    f"table says), compared with {BASELINE}'s best; mean and std (ddof=1) over the repeats. Descriptive "
    f"figures (bytes, counts, losses) have no better direction and get no {DIFF}."
)
MISSING_ENTRY_NOTE = (
    "no {diff} for metric(s) without an entry in the metric table (workloads/common/metric_table.py): {names}"
)


class ReportError(Exception):
    """Nothing to report; the message says why."""


def mean(values):
    return statistics.fmean(values) if values else None


def sample_std(values):
    """Standard deviation with ddof=1 (the repeats are a sample); None below two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def coefficient_of_variation(values):
    """std / mean over the repeats; None below two values or with a zero mean."""
    spread, center = sample_std(values), mean(values)
    return None if spread is None or not center else spread / abs(center)


def difference_interval(values, baseline_values, confidence=CONFIDENCE):
    """(low, high): the confidence interval of mean(values) - mean(baseline_values) by Welch's t
    test (unequal variances); None with fewer than two values on either side or no spread at all."""
    if len(values) < 2 or len(baseline_values) < 2:
        return None
    if sample_std(values) == 0 and sample_std(baseline_values) == 0:
        return None
    from scipy import stats

    interval = stats.ttest_ind(values, baseline_values, equal_var=False).confidence_interval(confidence)
    return float(interval.low), float(interval.high)


def within_noise(values, baseline_values):
    """True when the interval of the difference holds 0, None when it cannot be computed."""
    interval = difference_interval(values, baseline_values)
    return None if interval is None else interval[0] <= 0.0 <= interval[1]


def ratio_interval(values, baseline_values):
    """(low, high) of mean(values) / mean(baseline_values): the interval of the difference
    (``difference_interval``) over the baseline's mean, held fixed; None where that interval is None or the
    baseline's mean is 0. It holds 1 exactly when ``within_noise`` is true."""
    interval, center = difference_interval(values, baseline_values), mean(baseline_values)
    if interval is None or not center:
        return None
    return 1.0 + interval[0] / center, 1.0 + interval[1] / center


def ratio(value, baseline):
    """``value / baseline``, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0 or math.isnan(value) or math.isnan(baseline):
        return None
    return value / baseline


def load_samples(results_dir):
    """The samples of a campaign as a frame: metric, value, unit, accelerator and one column per label."""
    path = Path(results_dir) / "samples.jsonl"
    if not Path(results_dir).is_dir():
        raise ReportError(f"results directory {results_dir} does not exist")
    if not path.is_file():
        raise ReportError(f"no samples: {path} does not exist (has the campaign recorded any cell?)")
    skipped = []
    samples = read_samples(path, on_bad_line=lambda number, line: skipped.append(number))
    if skipped:
        print(
            f"note: skipped {len(skipped)} unreadable line(s) of {path} (line {skipped[0]}...), "
            "probably a write cut short",
            file=sys.stderr,
        )
    if not samples:
        raise ReportError(f"no samples in {path}")
    frame = pd.DataFrame(
        [
            {
                "metric": sample.get("metric"),
                "value": sample.get("value"),
                "unit": sample.get("unit"),
                ACCELERATOR: (sample.get("metadata") or {}).get(ACCELERATOR),
                GPU_DEVICE: gpu_device(sample.get("metadata") or {}),
                SKIP_REASON: (sample.get("metadata") or {}).get("reason")
                if sample.get("metric") == SKIPPED_METRIC
                else None,
                **loadgen_verdict(sample.get("metadata") or {}),
                **sample.get("labels", {}),
            }
            for sample in samples
        ]
    )
    return _integer_labels(frame, samples)


def _integer_labels(frame, samples):
    """Integer labels stay integers (hpl_n 2000, not 2000.0) where samples without the label leave a gap,
    which would make pandas store the column as floats."""
    for column in frame.columns:
        if column in ("metric", "value", "unit") or frame[column].dtype.kind != "f":
            continue
        values = [(sample.get("labels") or {}).get(column) for sample in samples]
        present = [value for value in values if value is not None]
        if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
            frame[column] = pd.Series(values, index=frame.index, dtype=object)
    return frame


def loadgen_verdict(metadata):
    """{LOADGEN_RESULT: VALID|INVALID|None, LOADGEN_REASONS: its reasons joined, or None} of a sample."""
    loadgen = metadata.get("loadgen")
    if not isinstance(loadgen, dict) or not loadgen.get("result"):
        return {LOADGEN_RESULT: None, LOADGEN_REASONS: None}
    reasons = [str(reason) for reason in loadgen.get("reasons") or []]
    return {LOADGEN_RESULT: str(loadgen["result"]), LOADGEN_REASONS: "; ".join(reasons) or None}


def gpu_device(metadata):
    """The name of the GPU a sample measured on, None for CPU samples."""
    if metadata.get("roofline_device"):
        return str(metadata["roofline_device"])
    devices = metadata.get("devices")
    if isinstance(devices, list) and devices and isinstance(devices[0], dict) and devices[0].get("name"):
        return str(devices[0]["name"])
    return None


def varying_labels(frame):
    """Workload labels (parameters) that vary within a scenario: each value gets its own rows.

    A label that only follows the scenario (threads = scale-up) adds nothing and is left out.
    """
    fixed = set(SCENARIO_LABELS) | RUN_LABELS | {"metric", "value", "unit", ACCELERATOR, HOST, GPU_DEVICE, SKIP_REASON}
    fixed |= {LOADGEN_RESULT, LOADGEN_REASONS}
    scenarios = [column for column in SCENARIO_LABELS if column in frame.columns]
    varying = []
    for column in frame.columns:
        if column in fixed:
            continue
        values = frame[column].astype(str).where(frame[column].notna())
        within = values.groupby([frame[c].astype(str) for c in scenarios]).nunique() if scenarios else None
        if (within.max() if within is not None else values.nunique()) > 1:
            varying.append(column)
    return varying


def workload_keys(frame):
    """[workload] when the campaign holds samples of several workloads, else []."""
    if WORKLOAD not in frame.columns:
        return []
    return [WORKLOAD] if frame[WORKLOAD].dropna().astype(str).nunique() > 1 else []


def measured(frame):
    """The samples that are measurements: not the one sample of a failed or skipped cell."""
    return frame[~frame["metric"].isin(OUTCOME_METRICS)]


def choose_metrics(frame, requested=None):
    present = list(dict.fromkeys(measured(frame)["metric"]))
    if requested:
        missing = [metric for metric in requested if metric not in present]
        if missing:
            raise ReportError(
                f"metric(s) {', '.join(missing)} not in the samples; available: "
                + (", ".join(present) or "none (every cell failed)")
            )
        return list(requested)
    if "throughput" not in present and is_micro_campaign(present):
        return [metric for metric in MICRO_METRICS if metric in present]
    return [metric for metric in DEFAULT_METRICS if metric in present] or present


def is_micro_campaign(present):
    """True when the measured metrics hold a micro-benchmark's headline figure."""
    return any(metric in MICRO_METRICS for metric in present)


def _platform_rank(platform):
    return platforms.rank(platform)


def host_keys(frame):
    """[host] when the campaign holds samples of several runner hosts, else []."""
    if HOST not in frame.columns:
        return []
    return [HOST] if frame[HOST].dropna().astype(str).nunique() > 1 else []


def is_emulated(row):
    return row.get(ACCELERATOR) == EMULATED


def summarize(frame, metrics, include_emulated=False, always=()):
    """One row per scenario and parameter combination, bm first, with mean, std and ratio to bm.

    Only the samples of ``metrics`` (and those of failed or skipped cells) make rows, so the labels of
    other metrics add none. Row keys: the scenario, the workload when the campaign has several, the
    host when several, and the labels (parameters, a metric's own labels) that vary; a sample without
    such a label is a row of its own (n/a), never dropped.
    An accelerator column follows platform when any sample has one; emulated (tcg) rows get no
    ratio unless ``include_emulated``. ``always``: labels that are row keys even where they do not vary.
    Returns (rows, keys, units): rows are dicts, keys the columns that identify a row; a row also holds
    each metric's values over its cells (``<metric> values``) and its count of INVALID cells.
    """
    for column in SCENARIO_LABELS + ["cell", ACCELERATOR, LOADGEN_RESULT]:
        if column not in frame.columns:
            frame = frame.assign(**{column: None})
    by_workload = workload_keys(frame)
    frame = frame[frame["metric"].isin([*metrics, *OUTCOME_METRICS])]
    accelerated = [ACCELERATOR] if frame[ACCELERATOR].notna().any() else []
    wanted = [label for label in always if label in frame.columns] + varying_labels(frame)
    labels = by_workload + [label for label in dict.fromkeys(wanted) if label not in by_workload]
    keys = SCENARIO_LABELS[:1] + accelerated + SCENARIO_LABELS[1:] + host_keys(frame) + labels
    units = {metric: frame.loc[frame["metric"] == metric, "unit"].dropna().iloc[0] for metric in metrics}

    rows, values_of = [], {}
    for _, group in frame.groupby(keys, dropna=False, sort=False):
        succeeded = measured(group)
        first = group.iloc[0]
        row = {
            # The key values as the samples hold them: groupby gives a label with gaps (NaN) as floats.
            **{key: _python(first[key]) for key in keys},
            "n": succeeded["cell"].nunique(),
            "failed": int((group["metric"] == FAILED_METRIC).sum()),
            "skipped": int((group["metric"] == SKIPPED_METRIC).sum()),
            INVALID: succeeded.loc[succeeded[LOADGEN_RESULT] == INVALID, "cell"].nunique(),
        }
        for metric in metrics:
            values = [float(value) for value in succeeded.loc[succeeded["metric"] == metric, "value"]]
            values_of[id(row), metric] = row[f"{metric} values"] = values
            row[f"{metric} count"] = len(values)
            row[f"{metric} mean"] = mean(values)
            row[f"{metric} std"] = sample_std(values)
            row[f"{metric} cv"] = coefficient_of_variation(values)
            row[f"{metric} min"] = min(values) if values else None
            row[f"{metric} max"] = max(values) if values else None
        rows.append(row)

    for row, baseline in zip(rows, baseline_rows(rows, keys, include_emulated), strict=True):
        for metric in metrics:
            row[f"{metric} ratio to {BASELINE}"] = ratio(row[f"{metric} mean"], baseline.get(f"{metric} mean"))
            row[f"{metric} within noise"] = (
                within_noise(values_of[id(row), metric], values_of[id(baseline), metric])
                if baseline and baseline is not row
                else None
            )
    rows.sort(
        key=lambda row: (
            _platform_rank(row["platform"]),
            str(row["platform"]),
            *(_sortable(row[key]) for key in keys[1:]),
        )
    )
    return rows, keys, units


def _python(value):
    """A numpy scalar as the Python value it holds (an int sorts as a number); a missing label as None."""
    if pd.isna(value):
        return None
    return value.item() if isinstance(value, numpy.generic) else value


def _with_keys_as_given(table, rows, keys):
    """``table`` (a frame of ``rows``) with the key columns holding the rows' own values: a label with gaps
    would otherwise turn into floats (size_mb 1.0)."""
    for key in keys:
        table[key] = pd.Series([row[key] for row in rows], index=table.index, dtype=object)
    return table


def baseline_rows(rows, keys, include_emulated=False):
    """The bm row each summarized row is compared with ({} when none), in the order of ``rows``.

    bm has no accelerator: a vm row matches the bm row of the same scenario and parameters. Emulated
    (tcg) rows get none unless ``include_emulated``."""

    def identity(row, platform):
        return tuple(str(row[key]) for key in keys if key not in ("platform", ACCELERATOR)) + (platform,)

    baselines = {identity(row, row["platform"]): row for row in rows}
    return [
        {} if is_emulated(row) and not include_emulated else baselines.get(identity(row, BASELINE), {}) for row in rows
    ]


def _sortable(value):
    # Numbers before text, numbers by value: scale-up 2 before 16.
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return (0, value, "")
    return (1, 0, str(value))


def _number(value, digits):
    return NOT_AVAILABLE if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}}"


def _measure(value, scale=None):
    """Plain decimals sized to ``scale`` (default: the value): 1779, 41.7, 3.52, 0.0161; no exponents."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_AVAILABLE
    magnitude = abs(value if scale is None else scale)
    decimals = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 4
    return f"{value:.{decimals}f}"


def _key_cells(row, keys):
    """A row's label values as table cells: a missing accelerator is bare metal's, anything else missing n/a."""
    return [
        (NO_ACCELERATOR if key == ACCELERATOR else NOT_AVAILABLE) if pd.isna(row[key]) else str(row[key])
        for key in keys
    ]


def _mean_std(row, metric):
    """``mean ± std`` of a summarized row's metric, the std rounded to the mean's scale."""
    center, spread = row[f"{metric} mean"], row[f"{metric} std"]
    return _measure(center) + ("" if spread is None else f" ± {_measure(spread, scale=center)}")


def _mean_std_columns(metrics, units):
    """CSV column names of each metric's mean and std, with its unit."""
    columns = {}
    for metric in metrics:
        columns[f"{metric} mean"] = f"{metric} mean ({units[metric]})"
        columns[f"{metric} std"] = f"{metric} std ({units[metric]})"
    return columns


def count_columns(rows):
    """n and failed, skipped when some cell was, INVALID when loadgen called some cell so."""
    return ["n", "failed"] + (["skipped"] if any(row.get("skipped") for row in rows) else []) + invalid_columns(rows)


def invalid_columns(rows):
    """[INVALID] when some row holds cells loadgen called INVALID, else []."""
    return [INVALID] if any(row.get(INVALID) for row in rows) else []


def invalid_mark(row, metric):
    """`` (INVALID)`` after MLPerf's own figure in a row holding INVALID cells, else nothing."""
    return f" ({INVALID})" if metric == LOADGEN_SPEED and row.get(INVALID) else ""


def display_table(rows, keys, metrics, units):
    """Header and rows of strings: ``mean ± std`` per metric with its unit, and its ratio to bm."""
    counts = count_columns(rows)
    header = [*keys, *counts]
    for metric in metrics:
        header += [f"{metric} ({units[metric]})", "cv", f"{metric} / {BASELINE}"]
    lines = []
    for row in rows:
        line = [*_key_cells(row, keys), *(str(row[count]) for count in counts)]
        for metric in metrics:
            line.append(_mean_std(row, metric) + invalid_mark(row, metric))
            cv = row[f"{metric} cv"]
            line.append(NOT_AVAILABLE if cv is None else f"{100 * cv:.1f}%")
            mark = f" {NOISE_MARK}" if row[f"{metric} within noise"] else ""
            line.append(_number(row[f"{metric} ratio to {BASELINE}"], "3f") + mark)
        lines.append(line)
    return header, lines


def render_text(header, lines):
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=False)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)).rstrip()
        for line in [header, ["-" * width for width in widths], *lines]
    )


def render_markdown(header, lines):
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, ["---"] * len(header), *lines])


def csv_frame(rows, keys, metrics, units):
    """The numbers unrounded, units in the column names."""
    columns = {key: key for key in [*keys, *count_columns(rows)]}
    for metric in metrics:
        columns.update(_mean_std_columns([metric], units))
        columns[f"{metric} cv"] = f"{metric} cv"
        columns[f"{metric} ratio to {BASELINE}"] = f"{metric} ratio to {BASELINE}"
        columns[f"{metric} within noise"] = f"{metric} within noise of {BASELINE} (95% CI)"
    return _with_keys_as_given(pd.DataFrame(rows, columns=list(columns)), rows, keys).rename(columns=columns)


def noise_note(rows, metrics):
    """The line explaining the noise mark, None when no ratio carries it."""
    if not any(row[f"{metric} within noise"] for row in rows for metric in metrics):
        return None
    return NOISE_NOTE


def skipped_note(frame):
    """The note listing the skipped cells, one line per workload and reason with its scenarios; None when
    no cell was skipped."""
    return cells_note(frame[frame["metric"] == SKIPPED_METRIC], SKIPPED_TITLE, SKIP_REASON)


def invalid_note(frame):
    """The note listing the cells loadgen called INVALID, one line per workload and reasons with its
    scenarios; None when there are none."""
    if LOADGEN_RESULT not in frame.columns:
        return None
    return cells_note(measured(frame[frame[LOADGEN_RESULT] == INVALID]), INVALID_TITLE, LOADGEN_REASONS)


def cells_note(samples, title, reason_column):
    """``title`` (with the count of cells), then one line per workload and reason: its scenarios and cells."""
    if samples.empty:
        return None
    groups = {}
    for _, sample in samples.iterrows():
        workload = sample.get(WORKLOAD)
        reason = sample.get(reason_column)
        key = (
            NOT_AVAILABLE if pd.isna(workload) else str(workload),
            "no reason given" if pd.isna(reason) else str(reason),
        )
        scenario = sample.get("scenario")
        group = groups.setdefault(key, {"cells": set(), "scenarios": {}})
        group["cells"].add((sample.get("cell"), sample.get(HOST)))
        if not pd.isna(scenario):
            group["scenarios"][str(scenario)] = None
    cells = sum(len(group["cells"]) for group in groups.values())
    lines = [title.format(cells=cells)]
    for (workload, reason), group in groups.items():
        where = f" on {', '.join(group['scenarios'])}" if group["scenarios"] else ""
        lines.append(f"- {workload}{where} ({len(group['cells'])} cell(s)): {reason}")
    return "\n".join(lines)


def emulated_note(rows, include_emulated=False):
    """The line explaining tcg rows, None when there are none."""
    if not any(is_emulated(row) for row in rows):
        return None
    return EMULATED_INCLUDED_NOTE if include_emulated else EMULATED_NOTE


def chart_rows(rows, metric, include_emulated=False):
    """The rows write_chart draws: those with a ratio to bm, emulated ones only when asked."""
    ratio_column = f"{metric} ratio to {BASELINE}"
    return [row for row in rows if row[ratio_column] is not None and (include_emulated or not is_emulated(row))]


def write_chart(path, rows, keys, metric, unit, include_emulated=False):
    """Bars of ``metric`` normalized to bm per scenario, the absolute value above each bar.

    Returns a note when no chart could be drawn.
    """
    try:
        import matplotlib
    except ImportError:
        return "report.png skipped: matplotlib is not installed"
    matplotlib.use("Agg")
    from matplotlib import pyplot

    ratio_column = f"{metric} ratio to {BASELINE}"
    plotted = chart_rows(rows, metric, include_emulated)
    if not plotted:
        return f"report.png skipped: no {BASELINE} baseline to normalize {metric} to"

    def group_of(row):
        # A label this metric does not have (n/a) names no group.
        return "/".join(str(row[key]) for key in keys[1:] if key != ACCELERATOR and not pd.isna(row[key]))

    def series_of(row):
        return row["platform"] if pd.isna(row.get(ACCELERATOR)) else f"{row['platform']} ({row[ACCELERATOR]})"

    groups = list(dict.fromkeys(map(group_of, plotted)))
    platforms = list(dict.fromkeys(map(series_of, plotted)))
    width = 0.8 / len(platforms)
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.2 * len(groups) * len(platforms)), 4.5))
    for index, platform in enumerate(platforms):
        bars_rows = [row for row in plotted if series_of(row) == platform]
        offset = (index - (len(platforms) - 1) / 2) * width
        bars = axes.bar(
            [groups.index(group_of(row)) + offset for row in bars_rows],
            [row[ratio_column] for row in bars_rows],
            width,
            label=platform,
        )
        labels = [f"{row[f'{metric} mean']:.4g}" + invalid_mark(row, metric) for row in bars_rows]
        axes.bar_label(bars, labels=labels, fontsize=8)
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_ylim(0, 1.2 * max(row[ratio_column] for row in plotted))
    axes.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    axes.set_ylabel(f"{metric} / {BASELINE}")
    axes.set_title(f"{metric} normalized to {BASELINE}; {unit} above each bar", fontsize=10)
    axes.legend(title="platform", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return None


def point_keys(frame):
    """The labels that name a scenario's point or row: scenario, host when several, varying parameters."""
    return [key for key in SCENARIO_LABELS if key in frame.columns] + host_keys(frame) + varying_labels(frame)


def _label(row, keys):
    return "/".join(str(row[key]) for key in keys if not pd.isna(row[key]))


def roofline_points(frame):
    """(points, roofs) of the samples that hold roofline metrics; ([], {}) when none do.

    points: one per scenario and device, {"label", "device", "intensity" (FLOP/B), "achieved" (FLOP/s)},
    the means over its cells; roofs: {device: (peak FLOP/s, peak B/s)}, the medians of the peaks
    measured on that device by every cell."""
    measured = frame[frame["metric"].isin(ROOFLINE_METRICS)]
    if measured.empty:
        return [], {}
    measured = measured.assign(**{GPU_DEVICE: measured[GPU_DEVICE].fillna("GPU")})
    roofs = {}
    for device, group in measured.groupby(GPU_DEVICE, sort=False):
        peak_flops = group.loc[group["metric"] == ROOFLINE_PEAK_FLOPS, "value"].astype(float)
        peak_bandwidth = group.loc[group["metric"] == ROOFLINE_PEAK_BANDWIDTH, "value"].astype(float)
        if len(peak_flops) and len(peak_bandwidth):
            roofs[device] = (float(peak_flops.median()), float(peak_bandwidth.median()))
    keys = point_keys(frame)
    points = []
    for key, group in measured.groupby([*keys, GPU_DEVICE], dropna=False, sort=False):
        row = dict(zip([*keys, GPU_DEVICE], key, strict=True))
        intensity = group.loc[group["metric"] == ROOFLINE_INTENSITY, "value"].astype(float)
        achieved = group.loc[group["metric"] == ROOFLINE_ACHIEVED, "value"].astype(float)
        if len(intensity) and len(achieved) and row[GPU_DEVICE] in roofs:
            points.append(
                {
                    "label": _label(row, keys),
                    "device": row[GPU_DEVICE],
                    "intensity": float(intensity.mean()),
                    "achieved": float(achieved.mean()),
                }
            )
    points.sort(key=lambda point: (_platform_rank(point["label"].split("/")[0]), point["label"]))
    return points, roofs


def write_roofline(path, points, roofs):
    """The roofline figure, log-log: each device's roofs from its measured peaks, one point per scenario.

    Returns a note when no figure could be drawn."""
    try:
        import matplotlib
    except ImportError:
        return "roofline.png skipped: matplotlib is not installed"
    matplotlib.use("Agg")
    from matplotlib import pyplot

    ridges = [peak_flops / bandwidth for peak_flops, bandwidth in roofs.values()]
    intensities = [point["intensity"] for point in points] + ridges
    low, high = min(intensities) / 8, max(intensities) * 8
    figure, axes = pyplot.subplots(figsize=(7.5, 5.0))
    colors = dict(zip(roofs, pyplot.rcParams["axes.prop_cycle"].by_key()["color"] * len(roofs), strict=False))
    xs = numpy.geomspace(low, high, 200)
    for device, (peak_flops, bandwidth) in roofs.items():
        axes.plot(xs, numpy.minimum(peak_flops, xs * bandwidth), color=colors[device], linewidth=1.5)
        axes.annotate(
            f"{device}: {peak_flops / 1e12:.3g} TFLOP/s, {bandwidth / 1e9:.4g} GB/s",
            (high, peak_flops),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            fontsize=8,
            color=colors[device],
        )
    for point in points:
        axes.scatter(point["intensity"], point["achieved"], color=colors[point["device"]], zorder=3)
        axes.annotate(
            point["label"],
            (point["intensity"], point["achieved"]),
            xytext=(4, -10),
            fontsize=7,
            textcoords="offset points",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(low, high)
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("achieved (FLOP/s)")
    axes.set_title("Roofline: peaks measured on each device (GEMM, device-to-device copy)", fontsize=10)
    axes.grid(True, which="major", linewidth=0.4)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return None


def h2d_split(frame, include_emulated=False):
    """(rows, keys, units) of the cells that recorded h2d_time: its mean, elapsed's and the share of
    elapsed spent copying host-to-device (h2d_time / elapsed of each cell, averaged); None without h2d_time."""
    if H2D_TIME not in set(frame["metric"]) or "cell" not in frame.columns:
        return None
    timed = frame[frame["metric"].isin((H2D_TIME, "elapsed"))]
    shares = cell_shares(timed, {H2D_TIME: H2D_SHARE}, "elapsed")
    if shares.empty:
        return None
    split = pd.concat([timed[timed["cell"].isin(set(shares["cell"]))], shares], ignore_index=True)
    return summarize(split, [H2D_TIME, "elapsed", H2D_SHARE], include_emulated)


def cell_shares(frame, parts, whole):
    """Samples of each cell's share of ``whole``: for every metric of ``parts`` ({metric: share's name}) the
    cell holds, ``metric / whole`` (unit ratio) under the share's name and the labels of the cell's ``whole``
    sample. Cells without ``whole``, or with a zero one, get none; an empty frame when no cell has any."""
    cell_keys = ["cell"] + ([HOST] if HOST in frame.columns else [])
    shares = []
    for _, cell in frame[frame["metric"].isin([*parts, whole])].groupby(cell_keys, dropna=False, sort=False):
        by_metric = dict(zip(cell["metric"], cell["value"].astype(float), strict=False))
        if not by_metric.get(whole):
            continue
        labelled = cell[cell["metric"] == whole].iloc[:1]
        shares += [
            labelled.assign(metric=name, value=by_metric[part] / by_metric[whole], unit="ratio")
            for part, name in parts.items()
            if part in by_metric
        ]
    return pd.concat(shares, ignore_index=True) if shares else frame.iloc[:0]


def h2d_display(rows, keys, units):
    """Header and lines of the host-to-device split: mean ± std of h2d_time and elapsed, the share in %."""
    header = [*keys, "n", f"{H2D_TIME} ({units[H2D_TIME]})", f"elapsed ({units['elapsed']})", H2D_SHARE]
    lines = []
    for row in rows:
        line = [*_key_cells(row, keys), str(row["n"]), _mean_std(row, H2D_TIME), _mean_std(row, "elapsed")]
        line.append(f"{100 * row[f'{H2D_SHARE} mean']:.1f}%")
        lines.append(line)
    return header, lines


def h2d_csv_frame(rows, keys, units):
    columns = {key: key for key in [*keys, "n"]}
    columns.update(_mean_std_columns((H2D_TIME, "elapsed", H2D_SHARE), units))
    return pd.DataFrame(rows, columns=list(columns)).rename(columns=columns)


def diff_percent(host, platform, better):
    """Diff% of ``platform`` against ``host`` (bm): positive when the platform is worse.

    (host - platform) / host x 100 when higher is better, (platform - host) / host x 100 when lower is;
    None without a direction, a value, or with a zero host."""
    if better not in (metric_table.HIGHER, metric_table.LOWER) or ratio(platform, host) is None:
        return None
    gap = host - platform if better == metric_table.HIGHER else platform - host
    return 100.0 * gap / abs(host)


def _best(row, metric, better):
    return row.get(f"{metric} max" if better == metric_table.HIGHER else f"{metric} min")


def diff_tables(frame, include_emulated=False):
    """({component: (rows, keys)}, missing): the Diff% rows of every platform but bm, one table per component.

    A row per test (metric and the labels that vary) and platform: bm's mean and best, the platform's
    count, best, mean and std, Diff% of the best and of the mean and whether the means lie within noise.
    Only metrics the metric table gives a direction; ``missing``: the metrics it has no entry for.
    Emulated (tcg) rows only with ``include_emulated``."""
    present = list(dict.fromkeys(measured(frame)["metric"].dropna()))
    missing = [metric for metric in present if metric_table.lookup(metric) is None]
    directed = [metric for metric in present if metric not in missing and metric_table.lookup(metric).better]
    if not directed:
        return {}, missing
    # One summary per component: its rows are keyed by the labels that vary among its own metrics.
    summaries = {}
    for metric in directed:
        summaries.setdefault(metric_table.lookup(metric).component, []).append(metric)
    summaries = {component: summarize(frame, metrics, include_emulated) for component, metrics in summaries.items()}
    tables, keys_of = {}, {}
    for metric in directed:
        info = metric_table.lookup(metric)
        rows, keys, units = summaries[info.component]
        keys_of[info.component] = keys
        for row, baseline in zip(rows, baseline_rows(rows, keys, include_emulated), strict=True):
            if row["platform"] == BASELINE or row[f"{metric} mean"] is None:
                continue
            if is_emulated(row) and not include_emulated:
                continue
            host_mean, host_best = baseline.get(f"{metric} mean"), _best(baseline, metric, info.better)
            best = _best(row, metric, info.better)
            tables.setdefault(info.component, []).append(
                {
                    "metric": metric,
                    "unit": units[metric],
                    "better": info.better,
                    **{key: row[key] for key in keys},
                    "n": row[f"{metric} count"],
                    f"{BASELINE} mean": host_mean,
                    f"{BASELINE} best": host_best,
                    "best": best,
                    "mean": row[f"{metric} mean"],
                    "std": row[f"{metric} std"],
                    f"{DIFF} best": diff_percent(host_best, best, info.better),
                    f"{DIFF} mean": diff_percent(host_mean, row[f"{metric} mean"], info.better),
                    "within noise": row[f"{metric} within noise"],
                    INVALID: row[INVALID],
                }
            )
    order = {component: index for index, component in enumerate(metric_table.COMPONENTS)}
    return {
        component: (tables[component], keys_of[component])
        for component in sorted(tables, key=lambda c: (order.get(c, 99), c))
    }, missing


def _percent(value):
    return NOT_AVAILABLE if value is None else f"{value:+.2f}%"


def diff_display(rows, keys):
    """Header and lines of one component's Diff% table; ``~`` marks a mean within noise of bm."""
    counts = invalid_columns(rows)
    header = ["metric", "unit", "better", *keys, "n", *counts, f"{BASELINE} mean", f"{BASELINE} best", "best"]
    header += ["mean", "std", f"{DIFF} best", f"{DIFF} mean"]
    lines = []
    for row in rows:
        mark = f" {NOISE_MARK}" if row["within noise"] else ""
        lines.append(
            [row["metric"], str(row["unit"]), row["better"], *_key_cells(row, keys), str(row["n"])]
            + [str(row[count]) for count in counts]
            + [_measure(row[column], scale=row["mean"]) for column in (f"{BASELINE} mean", f"{BASELINE} best")]
            + [_measure(row["best"], scale=row["mean"]), _measure(row["mean"]) + invalid_mark(row, row["metric"])]
            + [_measure(row["std"], scale=row["mean"]), _percent(row[f"{DIFF} best"])]
            + [_percent(row[f"{DIFF} mean"]) + mark]
        )
    return header, lines


def diff_csv_frame(rows, keys):
    """One component's Diff% rows, unrounded."""
    columns = ["metric", "unit", "better", *keys, "n", *invalid_columns(rows), f"{BASELINE} mean"]
    columns += [f"{BASELINE} best", "best", "mean", "std", f"{DIFF} best", f"{DIFF} mean", "within noise"]
    return _with_keys_as_given(pd.DataFrame(rows, columns=columns), rows, keys).rename(
        columns={"within noise": f"{DIFF} mean within noise of {BASELINE} (95% CI)"}
    )


def missing_entry_note(missing):
    """The one line naming the metrics the metric table lacks, None when it lacks none."""
    return MISSING_ENTRY_NOTE.format(diff=DIFF, names=", ".join(missing)) if missing else None


def write_diff_tables(results_dir, frame, include_emulated=False, shown=None):
    """Write diff_<component>.csv and .md; return (written file names, text, markdown, missing-entry note).

    The files hold every metric with a direction; the text and markdown returned (printed after the main
    table) only the ``shown`` metrics (all when None), so the printed report stays as short as its main table.
    The notes follow the tables: Diff%'s definition, the noise mark, the metrics the table lacks (.md only)
    and, last, the emulated rows' rule when the campaign has any."""
    tables, missing = diff_tables(frame, include_emulated)
    written, text, markdown = [], "", ""
    missing_note = missing_entry_note(missing)
    emulated = ACCELERATOR in frame.columns and bool((frame[ACCELERATOR] == EMULATED).any())
    emulated = (EMULATED_INCLUDED_NOTE if include_emulated else EMULATED_NOTE) if emulated else None
    invalid = invalid_note(frame)
    printed = []
    for component, (rows, keys) in tables.items():
        title = DIFF_TITLE.format(DIFF=DIFF, BASELINE=BASELINE, component=component)

        def section(selected, notes_too=True, title=title, keys=keys):
            header, lines = diff_display(selected, keys)
            noise = NOISE_NOTE if any(row["within noise"] for row in selected) else None
            invalid_cells = invalid if any(row[INVALID] for row in selected) else None
            notes = "".join(f"\n\n{note}" for note in (DIFF_NOTE, noise, missing_note, emulated, invalid_cells) if note)
            return header, lines, f"{title}\n\n" + render_markdown(header, lines) + (notes if notes_too else "")

        diff_csv_frame(rows, keys).to_csv(results_dir / f"diff_{component}.csv", index=False)
        (results_dir / f"diff_{component}.md").write_text(section(rows)[2] + "\n", encoding="utf-8")
        written += [f"diff_{component}.csv", f"diff_{component}.md"]
        selected = [row for row in rows if shown is None or row["metric"] in shown]
        if selected:
            header, lines, component_markdown = section(selected)
            text += f"\n\n{title}\n" + render_text(header, lines)
            markdown += f"\n\n{component_markdown}"
            printed += selected
    if printed:
        noise = NOISE_NOTE if any(row["within noise"] for row in printed) else None
        text += "".join(f"\n\n{note}" for note in (DIFF_NOTE, noise, emulated) if note)
    return written, text, markdown, missing_note


def add_arguments(parser):
    parser.add_argument("results_dir", metavar="RESULTS_DIR", help="a campaign's directory, results/<campaign>")
    parser.add_argument(
        "--format",
        choices=("table", "csv", "markdown"),
        default="table",
        help="what to print (report.csv and report.md are always written)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        metavar="METRIC",
        help="metric to report, repeatable (default: throughput and elapsed when present)",
    )
    parser.add_argument(
        "--include-emulated",
        action="store_true",
        help="give emulated (QEMU TCG) vm/vmcn rows their ratios to bm and chart them too",
    )
    parser.set_defaults(handler=run)


def table_so_far(results_dir, cells=None):
    """The main table of the campaign's samples as they are now (``platbench run`` shows it once only the
    emulated guests' cells are left), with its noise note; nothing is written. None while nothing measured.

    ``cells``: the ids of cells it must show; None (as well) until the samples file holds every one of them: the
    results callback writes a cell's samples about when its event reaches ``platbench run``, before or after.
    The emulated guests' cells are left out: the table is of the others."""
    try:
        frame = load_samples(Path(results_dir))
    except ReportError:
        return None
    if cells is not None and ("cell" not in frame.columns or not set(cells) <= set(frame["cell"].dropna())):
        return None
    if "emulated" in frame.columns:
        frame = frame[frame["emulated"].ne(True)]
    try:
        metrics = choose_metrics(frame, None)
    except ReportError:
        return None
    if not metrics:
        return None
    rows, keys, units = summarize(frame, metrics)
    note = noise_note(rows, metrics)
    return render_text(*display_table(rows, keys, metrics, units)) + (f"\n\n{note}" if note else "")


def run(args):
    results_dir = Path(args.results_dir)
    try:
        frame = load_samples(results_dir)
        metrics = choose_metrics(frame, args.metric)
    except ReportError as exc:
        print(f"platbench report: {exc}", file=sys.stderr)
        return 2
    rows, keys, units = summarize(frame, metrics, include_emulated=args.include_emulated)
    header, lines = display_table(rows, keys, metrics, units)
    table = csv_frame(rows, keys, metrics, units)
    notes = "".join(
        f"\n\n{note}"
        for note in (
            noise_note(rows, metrics),
            emulated_note(rows, args.include_emulated),
            skipped_note(frame),
            invalid_note(frame),
        )
        if note
    )
    markdown = render_markdown(header, lines) + notes

    table.to_csv(results_dir / "report.csv", index=False)
    written = ["report.csv", "report.md"]
    note = (
        write_chart(
            results_dir / "report.png",
            rows,
            keys,
            metrics[0],
            units[metrics[0]],
            include_emulated=args.include_emulated,
        )
        if metrics
        else "report.png skipped: no successful cell to plot"
    )
    if note is None:
        written.append("report.png")
    notes_after = [note] if note else []

    split, split_text, split_markdown = h2d_split(frame, args.include_emulated), "", ""
    if split:
        split_header, split_lines = h2d_display(*split)
        split_text = f"\n\n{H2D_TITLE}\n" + render_text(split_header, split_lines)
        split_markdown = f"\n\n{H2D_TITLE}\n\n" + render_markdown(split_header, split_lines)
        h2d_csv_frame(*split).to_csv(results_dir / "h2d_split.csv", index=False)
        written.append("h2d_split.csv")
    from platbench import inference_report  # it builds on this module's helpers

    inference_written, inference_text, inference_markdown = inference_report.write_inference_tables(
        results_dir, frame, args.include_emulated
    )
    written += inference_written
    split_text, split_markdown = split_text + inference_text, split_markdown + inference_markdown
    from platbench import instances_report  # it builds on this module's helpers

    instances_written, instances_text, instances_markdown = instances_report.write_instance_tables(
        results_dir, frame, args.include_emulated
    )
    written += instances_written
    split_text, split_markdown = split_text + instances_text, split_markdown + instances_markdown
    (results_dir / "report.md").write_text(markdown + split_markdown + "\n", encoding="utf-8")

    points, roofs = roofline_points(frame)
    if points:
        roofline_note = write_roofline(results_dir / "roofline.png", points, roofs)
        if roofline_note is None:
            written.append("roofline.png")
        else:
            notes_after.append(roofline_note)

    # Printed: the Diff% of the main table's metrics (of every metric, for micro-benchmarks without --metric);
    # every metric with a direction is in the diff_*.md files.
    every_table = not args.metric and "throughput" not in metrics and is_micro_campaign(metrics)
    diff_written, diff_text, diff_markdown, missing_note = write_diff_tables(
        results_dir, frame, args.include_emulated, shown=None if every_table else metrics
    )
    written += diff_written
    if missing_note:
        notes_after.append(missing_note)

    if args.format == "csv":
        print(table.to_csv(index=False), end="")
    elif args.format == "markdown":
        print(markdown + split_markdown + diff_markdown)
    else:
        print(render_text(header, lines) + notes + split_text + diff_text)
    print(f"platbench report: wrote {', '.join(written)} in {results_dir}", file=sys.stderr)
    for line in notes_after:
        print(f"note: {line}", file=sys.stderr)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m platbench.report", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
