"""The report's figures, each built as a ``matplotlib.figure.Figure`` (no pyplot state) with error bars from the 95%
intervals, then saved as PNG (report.png, roofline.png) or inlined as SVG in report.html (``svg_text``):

- ``bars_figure``: a metric normalised to bm per scenario, grouped by platform, the absolute value above each
  bar (Lin 2018's figures);
- ``diff_figure``: the Diff% of each metric of a component per platform (Xu 2017's);
- ``phases_figure``: the inference phases stacked per scenario: pre, inference, post (Samani 2022's);
- ``scaleup_figure``: a metric against the scale-up, one line per platform, where a campaign has several;
- ``roofline_figure``: each GPU's measured roofs and one point per scenario, from the samples that hold roofline
  metrics;
- ``pairs_figure``: a paired comparison's ratio pair by pair, in the order the pairs ran, with the answer's interval
  as a band: a change of regime shows as points leaving the band on either side of it."""

import functools
import io
import math
import textwrap

import numpy
import pandas as pd

from platbench.report.load import (
    ACCELERATOR,
    BASELINE,
    GPU_DEVICE,
    SCENARIO_LABELS,
    host_keys,
    platform_rank,
    varying_labels,
)
from platbench.report.stats import mean_interval
from platbench.report.tables import PAIRED_METHODS, loadgen_mark

# A GPU sample's roofline metrics (workloads/common/roofline.py).
ROOFLINE_INTENSITY = "roofline_arithmetic_intensity"
ROOFLINE_ACHIEVED = "gpu_achieved_flops"
ROOFLINE_PEAK_FLOPS = "roofline_peak_flops"
ROOFLINE_PEAK_BANDWIDTH = "roofline_peak_bandwidth"
ROOFLINE_METRICS = (ROOFLINE_INTENSITY, ROOFLINE_ACHIEVED, ROOFLINE_PEAK_FLOPS, ROOFLINE_PEAK_BANDWIDTH)


def chart_rows(report, rows, metric):
    """The rows write_chart draws: those with a ratio to bm, emulated ones only when the report compares them."""
    ratio_column = f"{metric} ratio to {BASELINE}"
    return [row for row in rows if row[ratio_column] is not None and report.compared(row)]


FIGURE_DPI = 120
TITLE_WIDTH = 80  # characters of a title line at its font size on the narrowest figure (6 in)
INTERVAL_NOTE = "error bars: 95% CI"
# Row keys that change with the scale-up on one host (plugins/plugin_utils/cells/sizing.py's labels).
SCALEUP_FOLLOWERS = ("chr", "numa_nodes", "scaleup_requested")
PHASE_COLORS = {"pre_time": "#8da0cb", "inference_time": "#fc8d62", "post_time": "#66c2a5"}


def matplotlib_missing(name):
    """None when matplotlib imports, else the note saying why ``name`` is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"{name} skipped: matplotlib is not installed"
    return None


def drawn(build):
    """A figure builder that gives None, no figure, where matplotlib cannot be imported."""

    @functools.wraps(build)
    def build_if_possible(*args, **kwargs):
        return None if matplotlib_missing(build.__name__) else build(*args, **kwargs)

    return build_if_possible


def new_figure(width, height):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def palette():
    import matplotlib

    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def title(text, context):
    # Wrapped: a suptitle wider than a narrow figure is cut at both edges; "95% CI" stays on one line.
    text = text.replace(INTERVAL_NOTE, INTERVAL_NOTE.replace("% CI", "%\u00a0CI"))
    return "\n".join(textwrap.wrap(text, TITLE_WIDTH) + textwrap.wrap(context or "", TITLE_WIDTH))


def _missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def error_bar(value, interval):
    """(below, above) of an error bar around ``value``; (nan, nan), drawn as none, without an interval."""
    if _missing(value) or interval is None:
        return math.nan, math.nan
    return max(0.0, value - interval[0]), max(0.0, interval[1] - value)


def series_of(row):
    """A bar's series: the platform, with its accelerator (kvm, tcg) where it has one."""
    return row["platform"] if _missing(row.get(ACCELERATOR)) else f"{row['platform']} ({row[ACCELERATOR]})"


def group_keys(keys):
    """The keys that name a bar group: the row keys but the platform and accelerator (the series)."""
    return [key for key in keys if key not in ("platform", ACCELERATOR)]


def group_of(row, keys):
    # A label this row does not have (n/a) names no part of the group.
    return "/".join(str(row[key]) for key in group_keys(keys) if not _missing(row.get(key)))


def _grouped_bars(axes, bars):
    """Draw ``bars``, dicts of group, series, value, interval and label, as grouped bars with error bars and the
    label above each; returns the highest point drawn."""
    groups = list(dict.fromkeys(bar["group"] for bar in bars))
    series = list(dict.fromkeys(bar["series"] for bar in bars))
    width = 0.8 / len(series)
    colors = palette()
    top = 0.0
    for index, name in enumerate(series):
        own = [bar for bar in bars if bar["series"] == name]
        offset = (index - (len(series) - 1) / 2) * width
        errors = numpy.array([error_bar(bar["value"], bar["interval"]) for bar in own]).T
        drawn = axes.bar(
            [groups.index(bar["group"]) + offset for bar in own],
            [bar["value"] for bar in own],
            width,
            yerr=errors,
            capsize=3,
            error_kw={"linewidth": 0.8},
            label=name,
            color=colors[index % len(colors)],
        )
        axes.bar_label(drawn, labels=[bar["label"] for bar in own], fontsize=7, padding=2)
        top = max([top, *(bar["value"] for bar in own), *(bar["interval"][1] for bar in own if bar["interval"])])
    axes.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    return groups, top


def _baseline_own_interval(row, metric):
    """bm's bar (1.0) carries its own mean's interval, relative to its mean."""
    interval, center = row.get(f"{metric} interval"), row.get(f"{metric} mean")
    if interval is None or not center:
        return None
    return interval[0] / center, interval[1] / center


@drawn
def bars_figure(report, rows, keys, metric, unit):
    """Lin 2018's chart: ``metric`` normalised to bm per scenario, one bar per platform, the absolute mean above
    each bar and the 95% interval of the ratio as its error bar (bm's: its own mean's). None without a ratio."""
    plotted = chart_rows(report, rows, metric)
    if not plotted:
        return None
    report.with_intervals(rows, keys, [metric])
    ratio_column = f"{metric} ratio to {BASELINE}"
    bars = [
        {
            "group": group_of(row, keys),
            "series": series_of(row),
            "value": row[ratio_column],
            "interval": _baseline_own_interval(row, metric)
            if row["platform"] == BASELINE
            else row[f"{metric} ratio interval"],
            "label": f"{row[f'{metric} mean']:.4g}" + loadgen_mark(row, metric),
        }
        for row in plotted
    ]
    groups = list(dict.fromkeys(bar["group"] for bar in bars))
    figure = new_figure(max(6.0, 1.2 * len(groups) * len({bar["series"] for bar in bars})), 4.8)
    axes = figure.add_subplot()
    _, top = _grouped_bars(axes, bars)
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_ylim(0, 1.2 * top)
    axes.set_xlabel(" / ".join(group_keys(keys)) or "scenario")
    axes.set_ylabel(f"{metric} / {BASELINE}'s {metric} (ratio)")
    figure.suptitle(
        title(
            f"{metric} normalised to {BASELINE}; mean {metric} ({unit}) above each bar; {INTERVAL_NOTE}", report.title
        ),
        fontsize=9,
    )
    axes.legend(title="platform", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def write_chart(report, path, rows, keys, metric, unit):
    """report.png: ``bars_figure`` of ``metric``, the report's title (experiment and hosts) in its title.

    Returns a note when no chart could be drawn."""
    missing = matplotlib_missing("report.png")
    if missing:
        return missing
    figure = bars_figure(report, rows, keys, metric, unit)
    if figure is None:
        return f"report.png skipped: no {BASELINE} baseline to normalize {metric} to"
    figure.savefig(path, dpi=FIGURE_DPI)
    return None


@drawn
def scaleup_figure(report, rows, keys, metric, unit):
    """``metric``'s mean against the scale-up, one line per platform (and the other keys), 95% intervals as error
    bars; None unless the rows hold at least two scale-ups. Emulated rows only when the report compares them."""
    if "scaleup" not in keys:
        return None
    report.with_intervals(rows, keys, [metric])
    shown = [
        row
        for row in rows
        if row.get(f"{metric} mean") is not None
        and isinstance(row.get("scaleup"), (int, float))
        and report.compared(row)
    ]
    if len({row["scaleup"] for row in shown}) < 2:
        return None
    # The sizing labels that follow the scale-up (chr, numa_nodes, the form asked for) would split every line into
    # points of its own: a line is one platform's configuration across the scale-ups.
    line_keys = [key for key in keys if key not in ("scaleup", *SCALEUP_FOLLOWERS)]
    lines = {}
    for row in shown:
        name = "/".join(str(row[key]) for key in line_keys if not _missing(row.get(key)))
        lines.setdefault(name, []).append(row)
    figure = new_figure(7.5, max(4.8, 2.0 + 0.22 * len(lines)))  # room for a legend of many lines
    axes = figure.add_subplot()
    for name, own in lines.items():
        own.sort(key=lambda row: row["scaleup"])
        centers = [row[f"{metric} mean"] for row in own]
        errors = numpy.array(
            [error_bar(center, row[f"{metric} interval"]) for center, row in zip(centers, own, strict=True)]
        ).T
        axes.errorbar([row["scaleup"] for row in own], centers, yerr=errors, marker="o", capsize=3, label=name)
    axes.set_xticks(sorted({row["scaleup"] for row in shown}))
    axes.set_xlabel("scaleup (cores, or instances for scale-out)")
    axes.set_ylabel(f"{metric} ({unit}), mean")
    axes.set_ylim(bottom=0)
    figure.suptitle(title(f"{metric} by scale-up; {INTERVAL_NOTE} of the mean", report.title), fontsize=9)
    axes.legend(title=" / ".join(line_keys), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return figure


@drawn
def diff_figure(component, rows, keys, diff, context=None):
    """Xu 2017's chart of one component: the Diff% of each metric's mean per platform, the 95% interval (from the
    ratio's) as error bars; positive means worse than bm. ``rows``: report_diff.diff_tables' rows. None without
    any Diff%."""
    bars = [
        {
            "group": "/".join([row["metric"], *(str(row[k]) for k in group_keys(keys) if not _missing(row.get(k)))]),
            "series": series_of(row),
            "value": row[f"{diff} mean"],
            "interval": row.get(f"{diff} mean interval"),
            "label": f"{row[f'{diff} mean']:+.1f}",
        }
        for row in rows
        if row.get(f"{diff} mean") is not None
    ]
    if not bars:
        return None
    groups = list(dict.fromkeys(bar["group"] for bar in bars))
    figure = new_figure(max(6.0, 1.0 * len(groups) * len({bar["series"] for bar in bars})), 4.8)
    axes = figure.add_subplot()
    _grouped_bars(axes, bars)
    low = min([0.0, *(bar["value"] for bar in bars), *(bar["interval"][0] for bar in bars if bar["interval"])])
    high = max([0.0, *(bar["value"] for bar in bars), *(bar["interval"][1] for bar in bars if bar["interval"])])
    margin = 0.15 * (high - low or 1.0)
    axes.set_ylim(low - margin, high + margin)
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xlabel(" / ".join(["metric", *group_keys(keys)]))
    axes.set_ylabel(f"{diff} of the mean against {BASELINE} (positive: worse)")
    figure.suptitle(title(f"{diff} against {BASELINE}, component {component}; {INTERVAL_NOTE}", context), fontsize=9)
    axes.legend(title="platform", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


@drawn
def phases_figure(rows, keys, metrics, context=None):
    """Samani 2022's chart: per scenario the mean pre, inference and post times stacked, each segment with its
    mean's 95% interval as an error bar at its top. ``rows``, ``keys``, ``metrics``: inference_report.phase_rows'.
    None without a phase time."""
    phases = [metric for metric in PHASE_COLORS if metric in metrics]
    shown = [row for row in rows if any(row.get(f"{metric} mean") is not None for metric in phases)]
    if not phases or not shown:
        return None
    labels = ["/".join(str(row[key]) for key in keys if not _missing(row.get(key))) for row in shown]
    figure = new_figure(max(6.0, 0.9 * len(shown) + 2.5), 5.0)
    axes = figure.add_subplot()
    bottoms = numpy.zeros(len(shown))
    for metric in phases:
        heights = numpy.array([row.get(f"{metric} mean") or 0.0 for row in shown])
        intervals = [mean_interval(row.get(f"{metric} values") or []) for row in shown]
        errors = numpy.array(
            [error_bar(height, interval) for height, interval in zip(heights, intervals, strict=True)]
        ).T
        axes.bar(
            range(len(shown)),
            heights,
            0.6,
            bottom=bottoms,
            label=metric.removesuffix("_time"),
            color=PHASE_COLORS[metric],
        )
        axes.errorbar(range(len(shown)), bottoms + heights, yerr=errors, fmt="none", ecolor="black", capsize=3)
        bottoms = bottoms + heights
    axes.set_xticks(range(len(shown)), labels, rotation=25, ha="right", fontsize=7)
    axes.set_xlabel(" / ".join(keys))
    axes.set_ylabel("time summed over the requests (s), mean")
    figure.suptitle(
        title(f"Inference phases per scenario (stacked); {INTERVAL_NOTE} of each phase", context), fontsize=9
    )
    axes.legend(title="phase", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


@drawn
def pairs_figure(line, metric, label, context=None):
    """Each pair's ratio of a paired comparison (``line``: an answer.Line) in the order the pairs ran, marked by the
    CPU set the platform's side ran on in a duet, over the answer's estimate and its 95% interval as a band, with the
    line at 1; where the pairs are not exchangeable because of a change of level, the two segments' levels. ``label``
    names the comparison (``cn/bm``, with its row where a platform has several) in the title and the SVG's ids. None
    for an unpaired comparison or one of fewer than two pairs."""
    compared = line.compared
    if compared is None or compared["method"] not in PAIRED_METHODS or len(compared["pairs"]) < 2:
        return None
    ratios = [value / baseline if baseline else math.nan for value, baseline in compared["pairs"]]
    numbers = numpy.arange(1, len(ratios) + 1)
    figure = new_figure(min(12.0, max(6.0, 3.5 + 0.1 * len(ratios))), 4.0)
    figure.set_label(f"pairs of {label} {metric}")  # one page holds a figure per comparison: their ids differ
    axes = figure.add_subplot()
    colors = palette()
    if compared["interval"] is not None:
        low, high = compared["interval"]
        axes.axhspan(low, high, color=colors[0], alpha=0.18, linewidth=0, label="the answer's 95% interval")
    axes.axhline(compared["estimate"], color=colors[0], linewidth=1.2, label=f"the answer, {compared['estimate']:.3f}")
    axes.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    axes.plot(numbers, ratios, color="grey", linewidth=0.6, zorder=2)
    sides = compared.get("sides")
    if sides:
        for index, side in enumerate(sorted(set(sides))):
            own = [position for position, found in enumerate(sides) if found == side]
            axes.plot(
                numbers[own],
                [ratios[position] for position in own],
                "o^"[index % 2],
                color=colors[(index + 1) % len(colors)],
                markersize=4,
                zorder=3,
                label=f"pair's ratio, platform on CPU set {side}",
            )
    else:
        axes.plot(numbers, ratios, "o", color=colors[1], markersize=4, zorder=3, label="pair's ratio")
    tested = line.exchangeability
    if tested is not None and tested.flagged and tested.change_after and "change" in tested.rejected():
        split = tested.change_after + 0.5
        axes.hlines(math.exp(tested.before), 0.5, split, color=colors[3], linewidth=2.2, zorder=4)
        axes.hlines(math.exp(tested.after), split, len(ratios) + 0.5, color=colors[3], linewidth=2.2, zorder=4)
        axes.axvline(split, color=colors[3], linestyle=":", linewidth=1.0, label="two-segment fit: not exchangeable")
    axes.set_xlim(0.5, len(ratios) + 0.5)
    axes.set_xlabel("pair, in the order the pairs ran")
    axes.set_ylabel(f"{metric} / {BASELINE}'s {metric} (pair's ratio)")
    figure.suptitle(
        title(
            f"{label} {metric}: each pair's ratio in the order the pairs ran; band: the answer's 95% interval", context
        ),
        fontsize=9,
    )
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return figure


def svg_text(figure):
    """``figure`` as an SVG element to inline in an HTML page: text drawn as paths (no font to load), without the
    XML prolog and the metadata block (an inline element needs neither)."""
    import matplotlib

    buffer = io.StringIO()
    # The ids of the SVG's clip paths, salted with what the figure shows rather than at random: the same campaign
    # gives the same page, byte for byte, and two figures of one page do not share ids.
    salt = "|".join([figure.get_label(), *(f"{axes.get_title()}/{axes.get_ylabel()}" for axes in figure.axes)])
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": f"platbench:{salt}"}):
        figure.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def point_keys(frame):
    """The labels that name a scenario's point or row: scenario, host when several, varying parameters."""
    return [key for key in SCENARIO_LABELS if key in frame.columns] + host_keys(frame) + varying_labels(frame)


def _label(row, keys):
    return "/".join(str(row[key]) for key in keys if not pd.isna(row[key]))


def roofline_points(frame):
    """(points, roofs) of the samples that hold roofline metrics; ([], {}) when none do.

    points: one per scenario and device, {"label", "device", "intensity" (FLOP/B), "achieved" (FLOP/s),
    "achieved interval" (its mean's 95% interval, None below two cells)}, the means over its cells;
    roofs: {device: (peak FLOP/s, peak B/s)}, the medians of the peaks
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
                    "achieved interval": mean_interval([float(value) for value in achieved]),
                }
            )
    points.sort(key=lambda point: (platform_rank(point["label"].split("/")[0]), point["label"]))
    return points, roofs


@drawn
def roofline_figure(points, roofs, context=None):
    """The roofline, log-log: each device's roofs from its measured peaks, one point per scenario with its achieved
    rate's 95% interval as an error bar."""
    ridges = [peak_flops / bandwidth for peak_flops, bandwidth in roofs.values()]
    intensities = [point["intensity"] for point in points] + ridges
    low, high = min(intensities) / 8, max(intensities) * 8
    figure = new_figure(7.5, 5.2)
    axes = figure.add_subplot()
    colors = dict(zip(roofs, palette() * len(roofs), strict=False))
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
        below, above = error_bar(point["achieved"], point.get("achieved interval"))
        axes.errorbar(
            point["intensity"],
            point["achieved"],
            yerr=[[below], [above]],
            fmt="o",
            color=colors[point["device"]],
            capsize=3,
            zorder=3,
        )
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
    figure.suptitle(
        title(f"Roofline: peaks measured on each device (GEMM, device-to-device copy); {INTERVAL_NOTE}", context),
        fontsize=9,
    )
    axes.grid(True, which="major", linewidth=0.4)
    return figure


def write_roofline(path, points, roofs, context=None):
    """roofline.png: ``roofline_figure``, ``context`` (experiment and hosts) in its title.

    Returns a note when no figure could be drawn."""
    missing = matplotlib_missing("roofline.png")
    if missing:
        return missing
    roofline_figure(points, roofs, context).savefig(path, dpi=FIGURE_DPI)
    return None
