"""The report's view of how cells were sized (plugins/plugin_utils/cells/sizing.py): the CHR and NUMA columns of the
main table, and chr.png, the overhead (ratio to bm) against the container-to-host ratio.

A campaign whose cells all have one CHR (one scale-up on one host) shows none of it: the scale-up column says
it all.
"""

from __future__ import annotations

import numpy
import pandas as pd

from platbench.report import figures as report_figures
from platbench.report.load import ACCELERATOR, BASELINE

CHR = "chr"
NUMA_NODES = "numa_nodes"
REQUESTED = "scaleup_requested"
CHR_CHART = "chr.png"


def _distinct(frame, column):
    if column not in frame.columns:
        return 0
    return frame[column].dropna().astype(str).nunique()


def sizing_keys(frame):
    """The sizing labels that are row keys of the main table: ``scaleup_requested`` where any cell asked for a
    relative scale-up (so that ``all`` and a plain number of the same size stay two rows), ``chr`` where the
    campaign holds several CHRs, and ``numa_nodes`` where it holds several node counts or shows the CHR: the nodes a
    cell spanned belong beside how much of the host it took, even where every cell stayed in one node."""
    keys = [REQUESTED] if _distinct(frame, REQUESTED) else []
    if _distinct(frame, CHR) > 1:
        keys.append(CHR)
    if _distinct(frame, NUMA_NODES) > 1 or (CHR in keys and _distinct(frame, NUMA_NODES)):
        keys.append(NUMA_NODES)
    return keys


# Row keys that a CHR line runs across or that name it already; any other key whose value varies among the plotted
# rows (idle_cores, storage, a workload parameter) splits the lines, so that no line joins unlike cells.
LINE_KEYS = {"platform", "cpu_config", ACCELERATOR, "host", CHR, NUMA_NODES, REQUESTED, "scaleup"}


def _splitting_keys(rows, keys):
    return [
        key
        for key in keys or []
        if key not in LINE_KEYS and len({str(row.get(key)) for row in rows if not pd.isna(row.get(key))}) > 1
    ]


def chr_series(report, rows, metric, keys=None):
    """``{series: [(chr, ratio to bm, its 95% interval or None), ...]}`` sorted by CHR, one series per platform (and
    accelerator) and CPU configuration (and host, where the rows have one), and per value of every other of ``keys``
    that varies (``idle_cores=none``); bm left out (its ratio is 1 by definition); empty unless the rows hold
    several CHRs."""
    ratio_column = f"{metric} ratio to {BASELINE}"
    plotted = [
        row
        for row in rows
        if row.get(ratio_column) is not None
        and not pd.isna(row.get(CHR))
        and row["platform"] != BASELINE
        and report.compared(row)
    ]
    if len({float(row[CHR]) for row in plotted}) < 2:
        return {}
    splitting = _splitting_keys(plotted, keys)
    series = {}
    for row in plotted:
        name = str(row["platform"])
        if not pd.isna(row.get(ACCELERATOR)):
            name += f" ({row[ACCELERATOR]})"
        name += f" {row['cpu_config']}"
        if not pd.isna(row.get("host")):
            name += f" on {row['host']}"
        name += "".join(f", {key}={row.get(key)}" for key in splitting)
        interval = row.get(f"{metric} ratio interval")
        series.setdefault(name, []).append((float(row[CHR]), float(row[ratio_column]), interval))
    return {name: sorted(points, key=lambda point: point[0]) for name, points in series.items()}


@report_figures.drawn
def chr_figure(report, rows, keys, metric):
    """Samani 2022's view: ``metric``'s ratio to bm against CHR, a line per platform and CPU configuration, the
    ratio's 95% interval as error bars; None unless the rows hold several CHRs."""
    report.with_intervals(rows, keys, [metric])
    series = chr_series(report, rows, metric, keys)
    if not series:
        return None
    figure = report_figures.new_figure(7.5, max(4.5, 2.0 + 0.22 * len(series)))
    axes = figure.add_subplot()
    for name, points in series.items():
        errors = numpy.array([report_figures.error_bar(ratio, interval) for _, ratio, interval in points]).T
        axes.errorbar(
            [chr_ for chr_, _, _ in points], [ratio for _, ratio, _ in points], yerr=errors, marker="o", capsize=3
        ).set_label(name)
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_xlabel("chr (instance cores / host usable cores)")
    axes.set_ylabel(f"{metric} / {BASELINE}")
    title = f"{metric} normalised to {BASELINE} against the container-to-host ratio; {report_figures.INTERVAL_NOTE}"
    figure.suptitle(report_figures.title(title, report.title), fontsize=9)
    axes.legend(title="platform, cpu_config, ...", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return figure


def write_chr_chart(report, path, rows, keys, metrics):
    """chr.png: ``chr_figure`` of the first metric. Returns ``(written, note)``: ``[chr.png]`` when drawn, and a
    note when it could not be."""
    if not metrics or not chr_series(report, rows, metrics[0], keys):
        return [], None
    missing = report_figures.matplotlib_missing(CHR_CHART)
    if missing:
        return [], missing
    chr_figure(report, rows, keys, metrics[0]).savefig(path, dpi=report_figures.FIGURE_DPI)
    return [CHR_CHART], None
