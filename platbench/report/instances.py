"""The report's tables of cells with several instances (Lin 2018): the shared cells' degradation and the
distributed cells' throughput per network path.

- Shared cells (``mode: shared``): per platform, scenario and background job, the foreground's elapsed time
  alone and beside the background (mean over the repeats) and the degradation % (record_cell's
  ``degradation`` samples), mean ± std with its ratio to bm's; written to degradation.csv.
- Distributed cells (``mode: distributed``): the global throughput normalised to bm's on the same network
  path, with the path's own figures beside it (``path_throughput`` by iperf3, ``path_rtt`` by ping,
  ``path_mtu``), and the overlay against the bridge per platform; written to distributed.csv.

Rows follow the main table's rules (platbench/report/tables.py's summarize): keys are the scenario and the labels that
vary, emulated (tcg) rows get no ratio unless ``--include-emulated``.
"""

import warnings

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import OUTCOME_METRICS

from platbench.report import load as report_load
from platbench.report import stats as report_stats
from platbench.report import tables as report_tables

MODE = "mode"
NETWORK = "network"
SHARE = "share"
INSTANCE_LABELS = ("instance_role", "instance_index", SHARE)
DEGRADATION = "degradation"
ALONE, SHARED = "elapsed_alone", "elapsed_shared"
PATH_METRICS = ("path_throughput", "path_rtt", "path_mtu")
THROUGHPUT = "throughput"

DEGRADATION_TITLE = "Shared cells (Lin 2018): the foreground alone and beside the background job, degradation %:"
DEGRADATION_NOTE = (
    "alone, shared: the foreground's elapsed seconds, mean over the repeats; degradation = (shared - alone) / "
    "alone x 100 per cell, mean ± std (a platform's own: Lin 2018 compares the platforms' degradations)."
)
DISTRIBUTED_TITLE = "Distributed cells: global throughput per network path, normalised to bm on the same path:"
DISTRIBUTED_NOTE = (
    "throughput: every rank's images over the timed wall time (the chief's record), mean ± std; / bm: the ratio "
    "to bm's on the same network path; path Gbit/s (iperf3, 1 s TCP) and RTT ms (ping, idle), measured before "
    "training; overlay / bridge: the platform's throughput over the overlay divided by its own over the bridge."
)


def _of_mode(frame, mode):
    if MODE not in frame.columns:
        return None
    selected = frame[frame[MODE] == mode]
    return None if selected.empty else selected


def _without(frame, labels):
    return frame.drop(columns=[label for label in labels if label in frame.columns])


def degradation_rows(report):
    """(rows, keys) of the shared cells, None without any."""
    shared = _of_mode(report.frame, "shared")
    if shared is None or not (shared["metric"] == DEGRADATION).any():
        return None
    elapsed = shared[(shared["metric"] == "elapsed") & shared.get(SHARE, pd.Series(index=shared.index)).notna()]
    split = elapsed.assign(metric=elapsed[SHARE].map({"alone": ALONE, "shared": SHARED}))
    rest = shared[shared["metric"].isin([DEGRADATION, *OUTCOME_METRICS])]
    combined = _without(pd.concat([split, rest], ignore_index=True), INSTANCE_LABELS)
    rows, keys, _ = report.summarize([ALONE, SHARED, DEGRADATION], frame=combined)
    return rows, keys


def distributed_rows(report):
    """(rows, keys) of the distributed cells, each with its overlay / bridge ratio where both paths ran; None
    without any."""
    distributed = _of_mode(report.frame, "distributed")
    if distributed is None or not (distributed["metric"] == THROUGHPUT).any():
        return None
    present = [metric for metric in (THROUGHPUT, *PATH_METRICS) if (distributed["metric"] == metric).any()]
    with warnings.catch_warnings():
        # The path's MTU is the same in every repeat by construction: its noise test has nothing to test.
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        rows, keys, _ = report.summarize(present, always=(NETWORK,), frame=_without(distributed, INSTANCE_LABELS))
    others = [key for key in keys if key != NETWORK]
    bridge = {tuple(str(row[key]) for key in others): row for row in rows if row.get(NETWORK) == "bridge"}
    for row in rows:
        over = bridge.get(tuple(str(row[key]) for key in others)) if row.get(NETWORK) == "overlay" else None
        row["overlay / bridge"] = (
            report_stats.ratio(row[f"{THROUGHPUT} mean"], over[f"{THROUGHPUT} mean"]) if over is not None else None
        )
    return rows, keys


def _mean_std(row, metric):
    mean, std = row.get(f"{metric} mean"), row.get(f"{metric} std")
    if mean is None:
        return "n/a"
    return f"{mean:.3g}" + (f" ± {std:.2g}" if std is not None else "")


def _ratio(row, metric):
    value = row.get(f"{metric} ratio to {report_load.BASELINE}")
    if value is None:
        return "n/a"
    return f"{value:.3f}" + (f" {report_tables.NOISE_MARK}" if row.get(f"{metric} within noise") else "")


def _key_cells(row, keys):
    return ["n/a" if row[key] is None else str(row[key]) for key in keys]


def degradation_display(rows, keys):
    header = [*keys, "n", "failed", "alone (s)", "shared (s)", "degradation (%)"]
    lines = [
        [
            *_key_cells(row, keys),
            str(row["n"]),
            str(row["failed"]),
            _mean_std(row, ALONE),
            _mean_std(row, SHARED),
            _mean_std(row, DEGRADATION),
        ]
        for row in rows
    ]
    return header, lines


def distributed_display(rows, keys):
    header = [*keys, "n", "failed", "throughput", f"/ {report_load.BASELINE}", "path Gbit/s", "path RTT ms", "MTU"]
    header.append("overlay / bridge")
    lines = []
    for row in rows:
        ratio = row["overlay / bridge"]
        lines.append(
            [
                *_key_cells(row, keys),
                str(row["n"]),
                str(row["failed"]),
                _mean_std(row, THROUGHPUT),
                _ratio(row, THROUGHPUT),
                _mean_std(row, "path_throughput"),
                _mean_std(row, "path_rtt"),
                "n/a" if row.get("path_mtu mean") is None else f"{row['path_mtu mean']:.0f}",
                "n/a" if ratio is None else f"{ratio:.3f}",
            ]
        )
    return header, lines


def _csv(rows, keys, metrics, extra=(), ratios=True):
    columns = [*keys, "n", "failed"]
    for metric in metrics:
        columns += [f"{metric} mean", f"{metric} std"] + (
            [f"{metric} ratio to {report_load.BASELINE}"] if ratios else []
        )
    return pd.DataFrame(rows).reindex(columns=[*columns, *extra])


def write_instance_tables(results_dir, report):
    """Write degradation.csv and distributed.csv where the campaign has such cells; return (written file names,
    text, markdown) of the printed section and report.md's; empty without them."""
    written, sections = [], []
    shared = degradation_rows(report)
    if shared:
        rows, keys = shared
        _csv(rows, keys, [ALONE, SHARED, DEGRADATION], ratios=False).to_csv(
            results_dir / "degradation.csv", index=False
        )
        written.append("degradation.csv")
        sections.append((DEGRADATION_TITLE, *degradation_display(rows, keys), DEGRADATION_NOTE))
    distributed = distributed_rows(report)
    if distributed:
        rows, keys = distributed
        metrics = [THROUGHPUT, *PATH_METRICS]
        _csv(rows, keys, metrics, ["overlay / bridge"]).to_csv(results_dir / "distributed.csv", index=False)
        written.append("distributed.csv")
        sections.append((DISTRIBUTED_TITLE, *distributed_display(rows, keys), DISTRIBUTED_NOTE))
    text = "".join(
        f"\n\n{title}\n" + report_tables.render_text(header, lines) + f"\n\n{note}"
        for title, header, lines, note in sections
    )
    markdown = "".join(
        f"\n\n{title}\n\n" + report_tables.render_markdown(header, lines) + f"\n\n{note}"
        for title, header, lines, note in sections
    )
    return written, text, markdown
