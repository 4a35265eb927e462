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
lists them with their reasons. An inference_e2e cell is in one of three states: VALID (it met MLPerf's minimums
and loadgen called it VALID), INVALID (loadgen called it so) or scaled-down (below MLPerf's minimums: timed, never an
MLPerf result). Every table counts a row's cells in a column per state, loadgen_samples_per_sec is marked with
its cells' state, and notes give loadgen's reasons for the INVALID cells and what fell short for the scaled-down.
Inference campaigns also get a phase breakdown and a GPU-vs-CPU speedup (platbench/report/inference.py); campaigns
of shared and distributed cells their degradation and their throughput per network path (platbench/report/instances.py).
With --budgets FILE, every budgeted row is marked pass, fail or inconclusive against its bound, after the tables, and
budgets.csv is written; --check exits 1 when a budget fails, --strict also when one is inconclusive
(platbench/budgets.py).
"""

# This module is the command line (``platbench report``, ``python -m platbench.report``); the report's parts
# live beside it in platbench/report/ by trade: load (samples to a frame), stats (statistics), tables (the summary
# tables and their notes), figures (charts), shares (the host-to-device split), diff (Diff% tables), inference and
# instances (the sections of such campaigns), page (report.html). Callers import them as report_<part>.

import argparse
import sys
from pathlib import Path

from platbench import __version__, answer, budgets, calibration, validity
from platbench.answer import seconds_per_round
from platbench.report import figures_stamp as figures_stamp
from platbench.report import inference as inference_report
from platbench.report import instances as instances_report
from platbench.report import ladder as report_ladder
from platbench.report import meta as report_meta
from platbench.report import page as report_html
from platbench.report.context import ReportContext
from platbench.report.diff import DIFF_NOTE, diff_percent, diff_tables, write_diff_tables
from platbench.report.figures import chart_rows, roofline_points, write_chart, write_roofline
from platbench.report.load import (
    BASELINE,
    LOADGEN_SPEED,
    ReportError,
    choose_metrics,
    gpu_device,
    is_micro_campaign,
    load_samples,
)
from platbench.report.load import platform_rank as _platform_rank
from platbench.report.shares import H2D_TITLE, h2d_csv_frame, h2d_display, h2d_split
from platbench.report.sizing_columns import CHR_CHART, sizing_keys, write_chr_chart
from platbench.report.stats import coefficient_of_variation, difference_interval, mean, ratio, sample_std, within_noise
from platbench.report.tables import (
    EMULATED_INCLUDED_NOTE,
    EMULATED_NOTE,
    INVALID_TITLE,
    NOISE_NOTE,
    SCALED_DOWN_TITLE,
    SKIPPED_TITLE,
    csv_frame,
    display_table,
    duet_note,
    invalid_note,
    noise_note,
    render_markdown,
    render_text,
    same_window_note,
    scaled_down_note,
    skipped_note,
    summarize,
)

# The command line, then the names the report's callers and tests reach through this module.
__all__ = [
    "add_arguments",
    "main",
    "run",
    "table_so_far",
    "BASELINE",
    "DIFF_NOTE",
    "EMULATED_INCLUDED_NOTE",
    "EMULATED_NOTE",
    "H2D_TITLE",
    "INVALID_TITLE",
    "LOADGEN_SPEED",
    "NOISE_NOTE",
    "SCALED_DOWN_TITLE",
    "SKIPPED_TITLE",
    "ReportError",
    "_platform_rank",
    "chart_rows",
    "choose_metrics",
    "coefficient_of_variation",
    "diff_percent",
    "diff_tables",
    "difference_interval",
    "display_table",
    "gpu_device",
    "h2d_split",
    "invalid_note",
    "load_samples",
    "mean",
    "noise_note",
    "duet_note",
    "ratio",
    "roofline_points",
    "sample_std",
    "scaled_down_note",
    "skipped_note",
    "summarize",
    "within_noise",
    "write_chart",
]


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
    parser.add_argument(
        "--budgets",
        metavar="FILE",
        help="a budgets file (YAML, e.g. experiments/budgets/smoke.yml): mark every budgeted row pass, fail or "
        'inconclusive and print a verdict summary (docs/src/reading-a-report.md "Budgets")',
    )
    defaults = validity.DEFAULTS
    for option, metavar, default, what in (
        ("--cv-threshold", "PERCENT", 100 * defaults.max_cv, "whose metric's CV is above this"),
        ("--min-timed-seconds", "SECONDS", defaults.min_timed_seconds, "whose cells were timed for less"),
        ("--max-steal-percent", "PERCENT", defaults.max_steal_percent, "whose host stole more CPU time while timed"),
        (
            "--max-harness-percent",
            "PERCENT",
            100 * defaults.max_harness_share,
            "whose harness used more of a cell's CPUs while it was timed",
        ),
    ):
        parser.add_argument(
            option,
            type=float,
            metavar=metavar,
            default=default,
            help=f'mark a row {what} (default {default:g}; docs/src/reading-a-report.md "Run validity")',
        )
    drawing = parser.add_mutually_exclusive_group()
    drawing.add_argument(
        "--figures",
        action="store_true",
        help="draw the figures and write report.html even when the campaign has not changed since they were drawn",
    )
    drawing.add_argument(
        "--no-figures", action="store_true", help="write the tables only: no figure, no report.html (the fastest)"
    )
    parser.add_argument("--check", action="store_true", help="with --budgets: exit 1 when a budget fails")
    parser.add_argument("--strict", action="store_true", help="--check, and exit 1 on inconclusive verdicts too")
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
    notes = "".join(f"\n\n{note}" for note in (noise_note(rows, metrics), validity.note(rows)) if note)
    return render_text(*display_table(rows, keys, metrics, units)) + notes


def run(args):
    results_dir = Path(args.results_dir)
    try:
        if (args.check or args.strict) and not args.budgets:
            raise ReportError("--check and --strict need --budgets FILE")
        stated = budgets.load(args.budgets) if args.budgets else None
        frame = load_samples(results_dir)
        metrics = choose_metrics(frame, args.metric)
        thresholds = validity.Thresholds(
            max_cv=args.cv_threshold / 100,
            ci_half_width=validity.DEFAULTS.ci_half_width,
            min_timed_seconds=args.min_timed_seconds,
            max_steal_percent=args.max_steal_percent,
            max_harness_share=args.max_harness_percent / 100,
        )
        # Every table, figure and section below reads this one context: the frame, the emulated rows' rule, the
        # thresholds, and each summary made once.
        report = ReportContext(frame, args.include_emulated, thresholds)
        judgement = None if stated is None else budgets.evaluate(report, stated, args.budgets)
    except (ReportError, budgets.BudgetError) as exc:
        print(f"platbench report: {exc}", file=sys.stderr)
        return 2
    rows, keys, units = report.summarize(metrics, always=sizing_keys(frame))
    header, lines = display_table(rows, keys, metrics, units)
    table = csv_frame(rows, keys, metrics, units)
    # The answer first (platbench/answer.py): each platform against bm on the main metric, then the tables.
    answer_lines = (
        answer.lines(rows, keys, report.baselines(rows, keys), metrics[0], seconds_per_round(frame)) if metrics else []
    )
    answer_text = "".join(line + "\n" for line in answer_lines) + ("\n" if answer_lines else "")
    answer_markdown = "".join(f"- {line}\n" if index else f"**{line}**\n\n" for index, line in enumerate(answer_lines))
    calibrated = (report_meta.read_run_file(results_dir) or {}).get(calibration.RUN_KEY)
    notes = "".join(
        f"\n\n{note}"
        for note in (
            "\n".join(calibration.describe(calibrated)) if calibrated else "",
            noise_note(rows, metrics),
            duet_note(frame),
            same_window_note(rows, metrics),
            validity.note(rows, thresholds),
            report.emulated_note(rows),
            skipped_note(frame),
            invalid_note(frame),
            scaled_down_note(frame),
        )
        if note
    )
    markdown = answer_markdown + ("\n" if answer_markdown else "") + render_markdown(header, lines) + notes

    table.to_csv(results_dir / "report.csv", index=False)
    written, notes_after = ["report.csv", "report.md"], []

    split, split_text, split_markdown = h2d_split(report), "", ""
    if split:
        split_header, split_lines = h2d_display(*split)
        split_text = f"\n\n{H2D_TITLE}\n" + render_text(split_header, split_lines)
        split_markdown = f"\n\n{H2D_TITLE}\n\n" + render_markdown(split_header, split_lines)
        h2d_csv_frame(*split).to_csv(results_dir / "h2d_split.csv", index=False)
        written.append("h2d_split.csv")
    inference_written, inference_text, inference_markdown = inference_report.write_inference_tables(results_dir, report)
    written += inference_written
    split_text, split_markdown = split_text + inference_text, split_markdown + inference_markdown
    instances_written, instances_text, instances_markdown = instances_report.write_instance_tables(results_dir, report)
    written += instances_written
    split_text, split_markdown = split_text + instances_text, split_markdown + instances_markdown
    # A ladder campaign's attribution (platbench explain): each rung against the one below it, and the waterfall.
    ladder_text, ladder_markdown, ladder_found = report_ladder.sections(report, rows, metrics, results_dir)
    split_text, split_markdown = ladder_text + split_text, ladder_markdown + split_markdown
    (results_dir / "report.md").write_text(markdown + split_markdown + "\n", encoding="utf-8")

    # Printed: the Diff% of the main table's metrics (of every metric, for micro-benchmarks without --metric);
    # every metric with a direction is in the diff_*.md files.
    every_table = not args.metric and "throughput" not in metrics and is_micro_campaign(metrics)
    diff_written, diff_text, diff_markdown, missing_note = write_diff_tables(
        results_dir, report, shown=None if every_table else metrics
    )
    written += diff_written
    if missing_note:
        notes_after.append(missing_note)
    budget_text = budget_markdown = ""
    if judgement:
        budget_written, budget_text, budget_markdown = budgets.section(results_dir, judgement, args.strict)
        written += budget_written
        with (results_dir / "report.md").open("a", encoding="utf-8") as stream:
            stream.write(budget_markdown.removeprefix("\n") + "\n")

    # The figures and the page, drawn only when the campaign or what they show changed since they were drawn
    # (report_figures_stamp.py), or when asked (--figures); never with --no-figures.
    page = results_dir / report_html.PAGE
    stamp = figures_stamp.inputs(results_dir, args, __version__)
    if args.no_figures:
        notes_after.append("figures and report.html not written (--no-figures)")
    elif args.figures or not figures_stamp.current(results_dir, stamp):
        # Read only to draw: the charts' titles name the run, the page shows it (a second pass over the samples).
        metadata = report_meta.load(results_dir)
        report.title = report_meta.context_line(metadata)
        drawn, drawn_notes = _draw(results_dir, report, rows, keys, metrics, units, judgement, args.strict, metadata)
        if ladder_found is not None:
            waterfall = report_ladder.waterfall_figure(ladder_found, report.title)
            if waterfall is not None:
                waterfall.savefig(results_dir / report_ladder.WATERFALL, dpi=110)
                drawn.append(report_ladder.WATERFALL)
        figures_stamp.write(results_dir, stamp, drawn)
        written, notes_after = written + drawn, notes_after + drawn_notes
    else:
        notes_after.append(
            "figures and report.html are as drawn for this campaign before (it has not changed since); "
            "--figures draws them again"
        )

    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        if judgement:  # stdout stays one CSV
            print(budgets.summary(judgement, args.strict), file=sys.stderr)
    elif args.format == "markdown":
        print(markdown + split_markdown + diff_markdown + budget_markdown)
    else:
        print(answer_text + render_text(header, lines) + notes + split_text + diff_text + budget_text)
    print(f"platbench report: wrote {', '.join(written)} in {results_dir}", file=sys.stderr)
    for line in notes_after:
        print(f"note: {line}", file=sys.stderr)
    if args.format == "table" and page.is_file():  # last, so that `make lab` ends with where the whole report is
        sys.stderr.flush()
        print(f"\nreport: {page}")
    return budgets.exit_status(judgement, args.strict) if judgement and (args.check or args.strict) else 0


def _draw(results_dir, report, rows, keys, metrics, units, judgement, strict, metadata):
    """Draw the campaign's figures (report.png, chr.png, roofline.png) and write report.html: ``(written, notes)``.
    The plotting and page libraries (matplotlib, Jinja) are imported by what draws, so that a text report never
    loads them."""
    written = []
    note = (
        write_chart(report, results_dir / "report.png", rows, keys, metrics[0], units[metrics[0]])
        if metrics
        else "report.png skipped: no successful cell to plot"
    )
    if note is None:
        written.append("report.png")
    notes = [note] if note else []
    chr_written, chr_note = write_chr_chart(report, results_dir / CHR_CHART, rows, keys, metrics)
    written, notes = written + chr_written, notes + ([chr_note] if chr_note else [])
    points, roofs = roofline_points(report.frame)
    if points:
        roofline_note = write_roofline(results_dir / "roofline.png", points, roofs, report.title)
        if roofline_note is None:
            written.append("roofline.png")
        else:
            notes.append(roofline_note)
    # The page's main table from the rows the text table has: the context's summary, not computed again.
    report_html.write(results_dir, report, metrics, judgement, strict, metadata)
    written.append(report_html.PAGE)
    return written, notes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m platbench.report", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
