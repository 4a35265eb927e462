"""The report's figures, drawn with matplotlib when it is installed (a note says why one is missing otherwise):
report.png, bars of the first metric normalized to bm per scenario; roofline.png, each GPU's measured roofs
and one point per scenario, from the samples that hold roofline metrics."""

import numpy
import pandas as pd

from platbench.report_load import (
    ACCELERATOR,
    BASELINE,
    GPU_DEVICE,
    SCENARIO_LABELS,
    host_keys,
    is_emulated,
    platform_rank,
    varying_labels,
)
from platbench.report_tables import invalid_mark

# A GPU sample's roofline metrics (workloads/common/roofline.py).
ROOFLINE_INTENSITY = "roofline_arithmetic_intensity"
ROOFLINE_ACHIEVED = "gpu_achieved_flops"
ROOFLINE_PEAK_FLOPS = "roofline_peak_flops"
ROOFLINE_PEAK_BANDWIDTH = "roofline_peak_bandwidth"
ROOFLINE_METRICS = (ROOFLINE_INTENSITY, ROOFLINE_ACHIEVED, ROOFLINE_PEAK_FLOPS, ROOFLINE_PEAK_BANDWIDTH)


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
    points.sort(key=lambda point: (platform_rank(point["label"].split("/")[0]), point["label"]))
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
