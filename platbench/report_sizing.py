"""The report's view of how cells were sized (plugins/plugin_utils/sizing.py): the CHR and NUMA columns of the
main table, and chr.png, the overhead (ratio to bm) against the container-to-host ratio.

A campaign whose cells all have one CHR (one scale-up on one host) shows none of it: the scale-up column says
it all.
"""

from __future__ import annotations

import pandas as pd

from platbench.report_load import ACCELERATOR, BASELINE, is_emulated

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
    relative scale-up (so that ``all`` and a plain number of the same size stay two rows), ``chr`` and
    ``numa_nodes`` where the campaign holds several values of them."""
    keys = [REQUESTED] if _distinct(frame, REQUESTED) else []
    return keys + [column for column in (CHR, NUMA_NODES) if _distinct(frame, column) > 1]


def chr_series(rows, metric, include_emulated=False):
    """``{series: [(chr, ratio to bm), ...]}`` sorted by CHR, one series per platform (and accelerator) and CPU
    configuration (and host, where the rows have one), bm left out (its ratio is 1 by definition); empty unless the
    rows hold several CHRs."""
    ratio_column = f"{metric} ratio to {BASELINE}"
    plotted = [
        row
        for row in rows
        if not pd.isna(row.get(CHR))
        and row.get(ratio_column) is not None
        and row["platform"] != BASELINE
        and (include_emulated or not is_emulated(row))
    ]
    if len({float(row[CHR]) for row in plotted}) < 2:
        return {}
    series = {}
    for row in plotted:
        name = str(row["platform"])
        if not pd.isna(row.get(ACCELERATOR)):
            name += f" ({row[ACCELERATOR]})"
        name += f" {row['cpu_config']}"
        if not pd.isna(row.get("host")):
            name += f" on {row['host']}"
        series.setdefault(name, []).append((float(row[CHR]), float(row[ratio_column])))
    return {name: sorted(points) for name, points in series.items()}


def write_chr_chart(path, rows, metrics, include_emulated=False):
    """chr.png: the first metric's ratio to bm against CHR, a line per platform and CPU configuration. Returns
    ``(written, note)``: ``[chr.png]`` when drawn, and a note when it could not be."""
    series = chr_series(rows, metrics[0], include_emulated) if metrics else {}
    if not series:
        return [], None
    try:
        import matplotlib
    except ImportError:
        return [], f"{CHR_CHART} skipped: matplotlib is not installed"
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7.0, 4.5))
    for name, points in series.items():
        axes.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_xlabel("CHR (instance cores / host usable cores)")
    axes.set_ylabel(f"{metrics[0]} / {BASELINE}")
    axes.set_title(f"{metrics[0]} normalized to {BASELINE} against the container-to-host ratio", fontsize=10)
    axes.legend(title="platform, CPUs", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return [CHR_CHART], None
