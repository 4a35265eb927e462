"""Shares of a whole, cell by cell: ``cell_shares`` makes each cell's part / whole a sample of its own (the
inference phase breakdown uses it too), and the host-to-device split (Lin 2018) tabulates h2d_time's share of
elapsed: h2d_split.csv, printed and in report.md."""

import pandas as pd

from platbench.report.load import HOST
from platbench.report.tables import key_cells, mean_std_cell, mean_std_columns

H2D_TIME = "h2d_time"
H2D_SHARE = "h2d share of elapsed"
H2D_TITLE = (
    f"Host-to-device copy time ({H2D_TIME}) as a share of elapsed ({H2D_TIME} / elapsed of each cell, averaged):"
)


def h2d_split(report):
    """(rows, keys, units) of the cells that recorded h2d_time: its mean, elapsed's and the share of
    elapsed spent copying host-to-device (h2d_time / elapsed of each cell, averaged); None without h2d_time."""
    frame = report.frame
    if "cell" not in frame.columns or not (frame["metric"] == H2D_TIME).any():
        return None
    timed = frame[frame["metric"].isin((H2D_TIME, "elapsed"))]
    shares = cell_shares(timed, {H2D_TIME: H2D_SHARE}, "elapsed")
    if shares.empty:
        return None
    split = pd.concat([timed[timed["cell"].isin(set(shares["cell"]))], shares], ignore_index=True)
    return report.summarize([H2D_TIME, "elapsed", H2D_SHARE], frame=split)


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
        line = [*key_cells(row, keys), str(row["n"]), mean_std_cell(row, H2D_TIME), mean_std_cell(row, "elapsed")]
        line.append(f"{100 * row[f'{H2D_SHARE} mean']:.1f}%")
        lines.append(line)
    return header, lines


def h2d_csv_frame(rows, keys, units):
    columns = {key: key for key in [*keys, "n"]}
    columns.update(mean_std_columns((H2D_TIME, "elapsed", H2D_SHARE), units))
    return pd.DataFrame(rows, columns=list(columns)).rename(columns=columns)
