"""Diff% tables (Xu 2017): each platform's best and mean against bm's, signed by the metric table's direction
(workloads/common/metric_table.py), one table per component of that table: diff_<component>.csv and .md, and
the part of them printed after the main table."""

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench.report.load import (
    ACCELERATOR,
    BASELINE,
    EMULATED,
    INVALID,
    LOADGEN_STATES,
    SCALED_DOWN,
    metrics_present,
)
from platbench.report.stats import ratio, ratio_interval
from platbench.report.tables import (
    NOISE_MARK,
    NOISE_NOTE,
    NOT_AVAILABLE,
    NOT_COMPARED,
    SAME_WINDOW,
    invalid_note,
    key_cells,
    loadgen_columns,
    loadgen_mark,
    measure_cell,
    render_markdown,
    render_text,
    same_window,
    scaled_down_note,
    with_keys_as_given,
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


def diff_percent(host, platform, better):
    """Diff% of ``platform`` against ``host`` (bm): positive when the platform is worse.

    (host - platform) / host x 100 when higher is better, (platform - host) / host x 100 when lower is;
    None without a direction, a value, or with a zero host."""
    if better not in (metric_table.HIGHER, metric_table.LOWER) or ratio(platform, host) is None:
        return None
    gap = host - platform if better == metric_table.HIGHER else platform - host
    return 100.0 * gap / abs(host)


def diff_interval(interval, better):
    """(low, high) of Diff% from the 95% interval of the ratio platform / bm (``ratio_interval``), None without one."""
    if interval is None or better not in (metric_table.HIGHER, metric_table.LOWER):
        return None
    low, high = interval
    if better == metric_table.HIGHER:
        return 100.0 * (1.0 - high), 100.0 * (1.0 - low)
    return 100.0 * (low - 1.0), 100.0 * (high - 1.0)


def _best(row, metric, better):
    return row.get(f"{metric} max" if better == metric_table.HIGHER else f"{metric} min")


def diff_tables(report):
    """({component: (rows, keys)}, missing): the Diff% rows of every platform but bm, one table per component.

    A row per test (metric and the labels that vary) and platform: bm's mean and best, the platform's
    count, best, mean and std, Diff% of the best and of the mean and whether the means lie within noise.
    Only metrics the metric table gives a direction; ``missing``: the metrics it has no entry for.
    Emulated (tcg) rows only when the report compares them."""
    present = metrics_present(report.frame)
    missing = [metric for metric in present if metric_table.lookup(metric) is None]
    directed = [metric for metric in present if metric not in missing and metric_table.lookup(metric).better]
    if not directed:
        return {}, missing
    # One summary per component: its rows are keyed by the labels that vary among its own metrics.
    summaries = {}
    for metric in directed:
        summaries.setdefault(metric_table.lookup(metric).component, []).append(metric)
    summaries = {component: report.summarize(metrics) for component, metrics in summaries.items()}
    tables, keys_of = {}, {}
    for metric in directed:
        info = metric_table.lookup(metric)
        rows, keys, units = summaries[info.component]
        keys_of[info.component] = keys
        for row, baseline in zip(rows, report.baselines(rows, keys), strict=True):
            if row["platform"] == BASELINE or row[f"{metric} mean"] is None or not report.compared(row):
                continue
            host_mean, host_best = baseline.get(f"{metric} mean"), _best(baseline, metric, info.better)
            best = _best(row, metric, info.better)
            # A duet row's elapsed: both sides timed the same window, so its Diff% would be 0 whatever they did.
            uncompared = same_window(row, metric)
            entry = {
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
                f"{DIFF} mean interval": diff_interval(
                    ratio_interval(row[f"{metric} values"], baseline.get(f"{metric} values") or []), info.better
                )
                if baseline and not uncompared
                else None,
                "within noise": row[f"{metric} within noise"],
                **{state: row[state] for state in LOADGEN_STATES},
                NOT_COMPARED: uncompared,
            }
            if uncompared:
                entry.update({f"{DIFF} best": None, f"{DIFF} mean": None})
            tables.setdefault(info.component, []).append(entry)
    order = {component: index for index, component in enumerate(metric_table.COMPONENTS)}
    return {
        component: (tables[component], keys_of[component])
        for component in sorted(tables, key=lambda c: (order.get(c, 99), c))
    }, missing


def _percent(value, row=None):
    if row is not None and row.get(NOT_COMPARED):
        return NOT_COMPARED
    return NOT_AVAILABLE if value is None else f"{value:+.2f}%"


def same_window_rows_note(rows):
    """``elapsed: both sides of a duet pair time the same window...`` for each metric of ``rows`` (diff_tables')
    whose Diff% is not compared; None when none is."""
    found = dict.fromkeys(row["metric"] for row in rows if row.get(NOT_COMPARED))
    return "\n".join(f"{metric}: {SAME_WINDOW}" for metric in found) or None


def diff_display(rows, keys):
    """Header and lines of one component's Diff% table; ``~`` marks a mean within noise of bm."""
    counts = loadgen_columns(rows)
    header = ["metric", "unit", "better", *keys, "n", *counts, f"{BASELINE} mean", f"{BASELINE} best", "best"]
    header += ["mean", "std", f"{DIFF} best", f"{DIFF} mean"]
    lines = []
    for row in rows:
        mark = f" {NOISE_MARK}" if row["within noise"] else ""
        lines.append(
            [row["metric"], str(row["unit"]), row["better"], *key_cells(row, keys), str(row["n"])]
            + [str(row[count]) for count in counts]
            + [measure_cell(row[column], scale=row["mean"]) for column in (f"{BASELINE} mean", f"{BASELINE} best")]
            + [
                measure_cell(row["best"], scale=row["mean"]),
                measure_cell(row["mean"]) + loadgen_mark(row, row["metric"]),
            ]
            + [measure_cell(row["std"], scale=row["mean"]), _percent(row[f"{DIFF} best"], row)]
            + [_percent(row[f"{DIFF} mean"], row) + mark]
        )
    return header, lines


def diff_csv_frame(rows, keys):
    """One component's Diff% rows, unrounded."""
    columns = ["metric", "unit", "better", *keys, "n", *loadgen_columns(rows), f"{BASELINE} mean"]
    columns += [f"{BASELINE} best", "best", "mean", "std", f"{DIFF} best", f"{DIFF} mean", "within noise"]
    return with_keys_as_given(pd.DataFrame(rows, columns=columns), rows, keys).rename(
        columns={"within noise": f"{DIFF} mean within noise of {BASELINE} (95% CI)"}
    )


def missing_entry_note(missing):
    """The one line naming the metrics the metric table lacks, None when it lacks none."""
    return MISSING_ENTRY_NOTE.format(diff=DIFF, names=", ".join(missing)) if missing else None


def write_diff_tables(results_dir, report, shown=None):
    """Write diff_<component>.csv and .md; return (written file names, text, markdown, missing-entry note).

    The files hold every metric with a direction; the text and markdown returned (printed after the main
    table) only the ``shown`` metrics (all when None), so the printed report stays as short as its main table.
    The notes follow the tables: Diff%'s definition, the noise mark, the metrics the table lacks (.md only)
    and, last, the emulated rows' rule when the campaign has any."""
    tables, missing = diff_tables(report)
    frame = report.frame
    written, text, markdown = [], "", ""
    missing_note = missing_entry_note(missing)
    emulated = ACCELERATOR in frame.columns and bool((frame[ACCELERATOR] == EMULATED).any())
    emulated = report.emulated_rule if emulated else None
    invalid, scaled_down = invalid_note(frame), scaled_down_note(frame)
    printed = []
    for component, (rows, keys) in tables.items():
        title = DIFF_TITLE.format(DIFF=DIFF, BASELINE=BASELINE, component=component)

        def section(selected, notes_too=True, title=title, keys=keys):
            header, lines = diff_display(selected, keys)
            noise = NOISE_NOTE if any(row["within noise"] for row in selected) else None
            invalid_cells = invalid if any(row[INVALID] for row in selected) else None
            scaled_down_cells = scaled_down if any(row[SCALED_DOWN] for row in selected) else None
            uncompared = same_window_rows_note(selected)
            notes = (DIFF_NOTE, noise, uncompared, missing_note, emulated, invalid_cells, scaled_down_cells)
            notes = "".join(f"\n\n{note}" for note in notes if note)
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
        uncompared = same_window_rows_note(printed)
        text += "".join(f"\n\n{note}" for note in (DIFF_NOTE, noise, uncompared, emulated) if note)
    return written, text, markdown, missing_note
