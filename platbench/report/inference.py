"""The inference tables of a campaign's report: where the time of end-to-end inference goes (Samani 2022).

Wherever a campaign holds inference_e2e samples, ``platbench report`` adds, after the main table:

- a phase breakdown, one table per app (all of them in phases.csv): pre-processing, inference,
  post-processing and end-to-end seconds (summed over a cell's requests, mean over its repeats), each phase's
  share of e2e, and each mean's ratio to bm's with its 95% interval and the ``~`` mark;
- a GPU-vs-CPU speedup (gpu_speedup.csv) wherever the campaign has both processors for the same app, timing,
  platform and scale-up (and CPU config, request count, host...).

Rows follow the main table's rules, from its helpers: emulated (tcg) rows get no ratio unless
``--include-emulated``; a row counts its cells in each state (VALID, INVALID, scaled-down) in a column of that
state's name, and the section's notes give loadgen's reasons for the INVALID cells and what fell short of MLPerf's
minimums for the scaled-down ones.
"""

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench.report import load as report_load
from platbench.report import shares as report_shares
from platbench.report import stats as report_stats
from platbench.report import tables as report_tables

WORKLOAD = "inference_e2e"
APP, TIMING, REQUESTS = "app", "timing", "requests"
INFERENCE_ONLY = "inference_only"  # inference_e2e --timing: only inference is timed, no pre or post
PHASES = metric_table.INFERENCE_PHASES[:-1]  # pre, inference, post
E2E = metric_table.INFERENCE_PHASES[-1]
TIMES = {phase: f"{phase}_time" for phase in metric_table.INFERENCE_PHASES}  # seconds summed over the requests
SHARES = {TIMES[phase]: f"{phase} share of {E2E}" for phase in PHASES}
# Row keys even where they do not vary: the times are sums over the requests, so a row meets bm (and a GPU row
# its CPU row) only at the same app, timing and request count.
ALWAYS = (APP, TIMING, REQUESTS)
PROCESSOR, CPU, GPU = "processor", "cpu", "gpu"

PHASES_TITLE = "Phase breakdown of end-to-end inference (inference_e2e){app}:"
PHASES_NOTE = (
    f"pre, inference, post, {E2E}: seconds summed over a cell's requests, mean over its repeats (std in "
    f"phases.csv); %: the phase's share of {E2E}, each cell's own share averaged; an {INFERENCE_ONLY} run times "
    f"inference alone. / {report_load.BASELINE}: the mean's ratio to {report_load.BASELINE}'s of the same app, timing, "
    f"request count, scale-up, CPU config and processor (and host), then [its 95% interval]: Welch's t interval "
    f"of the difference of the means over {report_load.BASELINE}'s mean."
)
SPEEDUP_TITLE = "GPU-vs-CPU speedup (inference_e2e): CPU time / GPU time of the same app, timing and scenario:"
SPEEDUP_NOTE = (
    f"speedup = mean CPU time / mean GPU time of {TIMES[E2E]} for timing {E2E} and of {TIMES['inference']} for "
    f"timing {INFERENCE_ONLY}, then [its 95% interval]: Welch's t interval of the difference over the GPU's "
    f"mean; ~ here: the GPU cannot be told from the CPU."
)


def inference_samples(frame):
    """The samples of inference_e2e cells, their failed and skipped ones included; None when no cell holds
    phase times."""
    if report_load.WORKLOAD in frame.columns:
        frame = frame[frame[report_load.WORKLOAD] == WORKLOAD]
    if not frame["metric"].isin(TIMES.values()).any():
        return None
    return frame


def phase_rows(report):
    """(rows, keys, units, metrics) of the phase breakdown, None without inference_e2e phase times.

    Rows as ``report_tables.summarize`` makes them, keyed by the scenario, app, timing and request count (and
    whatever else varies), with ``<phase>_time ratio interval`` added: (low, high) of its ratio to bm."""
    samples = inference_samples(report.frame)
    if samples is None:
        return None
    shares = report_shares.cell_shares(samples, SHARES, TIMES[E2E])
    split = pd.concat([samples, shares], ignore_index=True)
    present = set(split["metric"])
    metrics = [metric for metric in (*TIMES.values(), *SHARES.values()) if metric in present]
    rows, keys, units = report.summarize(metrics, always=ALWAYS, frame=split)
    for row, baseline in zip(rows, report.baselines(rows, keys), strict=True):
        for metric in TIMES.values():
            compared = baseline and baseline is not row and metric in metrics
            row[f"{metric} ratio interval"] = (
                report_stats.ratio_interval(row[f"{metric} values"], baseline[f"{metric} values"]) if compared else None
            )
    return rows, keys, units, metrics


def speedup_rows(report, rows, keys):
    """(rows, keys) of the GPU-vs-CPU speedup: one row per CPU row that has a GPU row of the same keys.

    Times, not throughputs: they are the study's measure and the phase table's own figures, and at the same
    request count (a key) CPU time / GPU time is the GPU's gain in requests per second of that very phase.
    ``throughput`` would fold loadgen's own time into it, and an inference_only run has no end-to-end figure.
    An emulated (tcg) pair gets no speedup unless the report compares emulated rows."""
    if PROCESSOR not in keys:
        return [], []
    others = [key for key in keys if key != PROCESSOR]
    by_identity = {(tuple(str(row[key]) for key in others), row[PROCESSOR]): row for row in rows}
    speedups = []
    for cpu in rows:
        gpu = by_identity.get((tuple(str(cpu[key]) for key in others), GPU))
        if cpu[PROCESSOR] != CPU or gpu is None:
            continue
        measure = TIMES["inference"] if cpu.get(TIMING) == INFERENCE_ONLY else TIMES[E2E]
        cpu_values, gpu_values = cpu.get(f"{measure} values", []), gpu.get(f"{measure} values", [])
        shown = report.compared(cpu)
        interval = report_stats.ratio_interval(cpu_values, gpu_values) if shown else None
        speedups.append(
            {
                **{key: cpu[key] for key in others},
                "measure": measure,
                "n cpu": len(cpu_values),
                "n gpu": len(gpu_values),
                **{state: cpu[state] + gpu[state] for state in report_load.LOADGEN_STATES},
                "cpu mean": report_stats.mean(cpu_values),
                "gpu mean": report_stats.mean(gpu_values),
                "speedup": report_stats.ratio(report_stats.mean(cpu_values), report_stats.mean(gpu_values))
                if shown
                else None,
                "interval": interval,
                "within noise": None if interval is None else interval[0] <= 1.0 <= interval[1],
            }
        )
    return speedups, others


def _ratio_cell(value, interval, within_noise):
    """``1.050 [0.980, 1.120] ~``: a ratio, its interval and the noise mark; n/a without a ratio."""
    text = report_tables.number_cell(value, "3f")
    if value is not None and interval is not None:
        text += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    return text + (f" {report_tables.NOISE_MARK}" if within_noise else "")


def _phase(metric):
    return metric.removesuffix("_time")


def phases_display(rows, keys, metrics):
    """Header and lines of a phase table: per phase its mean time and share of e2e, then each mean's ratio."""
    counts = report_tables.count_columns(rows)
    times = [metric for metric in TIMES.values() if metric in metrics]
    shares = {metric: SHARES[metric] for metric in times if SHARES.get(metric) in metrics}
    header = [*keys, *counts]
    for metric in times:
        header += [f"{_phase(metric)} (s)"] + (["%"] if metric in shares else [])
    header += [f"{_phase(metric)} / {report_load.BASELINE}" for metric in times]
    lines = []
    for row in rows:
        line = [*report_tables.key_cells(row, keys), *(str(row[count]) for count in counts)]
        for metric in times:
            line.append(report_tables.measure_cell(row[f"{metric} mean"]))
            if metric in shares:
                share = row[f"{shares[metric]} mean"]
                line.append(report_tables.NOT_AVAILABLE if share is None else f"{100 * share:.1f}%")
        line += [
            _ratio_cell(
                row[f"{metric} ratio to {report_load.BASELINE}"],
                row[f"{metric} ratio interval"],
                row[f"{metric} within noise"],
            )
            for metric in times
        ]
        lines.append(line)
    return header, lines


def phases_csv_frame(rows, keys, units, metrics):
    """The phase rows unrounded: each time's mean, std, ratio to bm, its interval and whether it holds 1;
    each share's mean and std."""
    columns = {column: [row[column] for row in rows] for column in [*keys, *report_tables.count_columns(rows)]}
    for metric in metrics:
        columns[f"{metric} mean ({units[metric]})"] = [row[f"{metric} mean"] for row in rows]
        columns[f"{metric} std ({units[metric]})"] = [row[f"{metric} std"] for row in rows]
        if metric not in TIMES.values():
            continue
        ratio = f"{metric} ratio to {report_load.BASELINE}"
        columns[ratio] = [row[ratio] for row in rows]
        for bound, index in (("low", 0), ("high", 1)):
            columns[f"{ratio} {bound} (95% CI)"] = [_bound(row[f"{metric} ratio interval"], index) for row in rows]
        columns[f"{metric} within noise of {report_load.BASELINE} (95% CI)"] = [
            row[f"{metric} within noise"] for row in rows
        ]
    return pd.DataFrame(columns, dtype=object)


def _bound(interval, index):
    return None if interval is None else interval[index]


def speedup_display(rows, keys):
    """Header and lines of the speedup table."""
    counts = report_tables.loadgen_columns(rows)
    header = [*keys, "measure", "n cpu", "n gpu", *counts, "cpu (s)", "gpu (s)", "speedup (cpu / gpu)"]
    lines = [
        [*report_tables.key_cells(row, keys), row["measure"], str(row["n cpu"]), str(row["n gpu"])]
        + [str(row[count]) for count in counts]
        + [report_tables.measure_cell(row["cpu mean"]), report_tables.measure_cell(row["gpu mean"])]
        + [_ratio_cell(row["speedup"], row["interval"], row["within noise"])]
        for row in rows
    ]
    return header, lines


def speedup_csv_frame(rows, keys):
    """The speedup rows unrounded."""
    columns = {column: [row[column] for row in rows] for column in [*keys, "measure", "n cpu", "n gpu"]}
    columns.update({column: [row[column] for row in rows] for column in report_tables.loadgen_columns(rows)})
    columns.update({f"{side} mean (s)": [row[f"{side} mean"] for row in rows] for side in (CPU, GPU)})
    columns["speedup (cpu / gpu)"] = [row["speedup"] for row in rows]
    for bound, index in (("low", 0), ("high", 1)):
        columns[f"speedup {bound} (95% CI)"] = [_bound(row["interval"], index) for row in rows]
    columns["speedup within noise of 1 (95% CI)"] = [row["within noise"] for row in rows]
    return pd.DataFrame(columns, dtype=object)


def shown_keys(rows, keys, app=False):
    """The key columns printed: the scenario's, timing and requests, the app when ``app`` (else it is the
    table's title) and the labels that vary among ``rows`` (one that follows the app, the framework, does not)."""
    kept = {*report_load.SCENARIO_LABELS, report_load.ACCELERATOR, report_load.HOST, TIMING, REQUESTS} | (
        {APP} if app else set()
    )
    return [key for key in keys if key in kept or (key != APP and len({str(row[key]) for row in rows}) > 1)]


def write_inference_tables(results_dir, report):
    """Write phases.csv (and gpu_speedup.csv when a pair of processors exists); return (written file names,
    text, markdown): the printed section and report.md's, empty without inference_e2e phase times.

    One phase table per app (the app is its title, not a column), then the speedup table, then the notes:
    the tables' definitions, the noise mark, the emulated rows' rule, loadgen's INVALID cells and the scaled-down
    ones."""
    phases = phase_rows(report)
    if phases is None:
        return [], "", ""
    rows, keys, units, metrics = phases
    phases_csv_frame(rows, keys, units, metrics).to_csv(results_dir / "phases.csv", index=False)
    written, sections = ["phases.csv"], []
    for app in dict.fromkeys(row.get(APP) for row in rows):
        selected = [row for row in rows if row.get(APP) == app]
        title = PHASES_TITLE.format(app="" if app is None else f", app {app}")
        sections.append((title, *phases_display(selected, shown_keys(selected, keys), metrics)))
    speedups, speedup_keys = speedup_rows(report, rows, keys)
    if speedups:
        speedup_csv_frame(speedups, speedup_keys).to_csv(results_dir / "gpu_speedup.csv", index=False)
        written.append("gpu_speedup.csv")
        sections.append((SPEEDUP_TITLE, *speedup_display(speedups, shown_keys(speedups, speedup_keys, app=True))))
    ratios = [row[f"{metric} within noise"] for row in rows for metric in TIMES.values() if metric in metrics]
    notes = [
        PHASES_NOTE,
        SPEEDUP_NOTE if speedups else None,
        report_tables.NOISE_NOTE if any(ratios) else None,
        report.emulated_note(rows),
        report_tables.invalid_note(inference_samples(report.frame)),
        report_tables.scaled_down_note(inference_samples(report.frame)),
    ]
    notes = "".join(f"\n\n{note}" for note in notes if note)
    text = "".join(f"\n\n{title}\n" + report_tables.render_text(header, lines) for title, header, lines in sections)
    markdown = "".join(
        f"\n\n{title}\n\n" + report_tables.render_markdown(header, lines) for title, header, lines in sections
    )
    return written, text + notes, markdown + notes
