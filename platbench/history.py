"""Every campaign of the results store, over time: each platform's ratio to bm with its 95% interval, campaign by
campaign, and beside it what changed from the campaign before (kernel, CPU model, engine versions, image,
framework, platbench version).

``platbench history`` reads the DuckDB store ``platbench index`` fills (platbench/store.py). Each campaign is
summarized as ``platbench report`` summarizes it (the same frame, the same rows, paired intervals where its cells
were paired), so a campaign's ratio here is the one its report and ``compare`` give.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from platbench import store
from platbench.compare import ENVIRONMENT_FIELDS, VERSION_SUFFIX
from platbench.report import figures as report_figures
from platbench.report import tables as report_tables
from platbench.report.context import ReportContext
from platbench.report.load import BASELINE, SCENARIO_LABELS, ReportError, choose_metrics, frame_of_columns

# The environment fields whose change is named beside a campaign: compare's, without the host (--host picks it) and
# the image's name (its id says whether it changed).
SETUP = "setup"
CHANGE_FIELDS = tuple(field for field in ENVIRONMENT_FIELDS if field not in ("host", "image"))


def add_arguments(parser):
    parser.add_argument("--store", help=store.STORE_HELP.replace("beside the campaigns", "in RESULTS_ROOT"))
    parser.add_argument("--results-root", default="results", help="where the campaigns are (default: results)")
    parser.add_argument("--platform", action="append", help="only this platform (repeat for several)")
    parser.add_argument("--metric", help="the metric (default: the campaigns' main one, as the report picks it)")
    parser.add_argument("--scenario", action="append", help="only this scenario, PLATFORM/SCALEUP/CPUCFG/PROC")
    parser.add_argument("--host", help="only campaigns run on this host")
    parser.add_argument("--since", type=_date, help="only campaigns started on or after this date (YYYY-MM-DD)")
    parser.add_argument("--html", metavar="FILE", help=f"where the page goes (default: RESULTS_ROOT/{PAGE})")
    parser.add_argument(
        "--study",
        help="instead: the verdicts of this study's findings over time, one line per `platbench reproduce`",
    )
    parser.add_argument("--finding", help="with --study: only this finding")
    parser.set_defaults(handler=run)


def _date(text):
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a date as YYYY-MM-DD, got {text!r}") from None


def changes(before, after):
    """``["field: A -> B", ...]`` of the environment fields that differ between two campaigns' environments."""
    fields = [field for field in CHANGE_FIELDS if field in before or field in after]
    fields += sorted(field for field in set(before) | set(after) if field.endswith(VERSION_SUFFIX))
    said = []
    for field in fields:
        old, new = before.get(field, []), after.get(field, [])
        if old != new:
            said.append(f"{field}: {','.join(old) or 'n/a'} -> {','.join(new) or 'n/a'}")
    return said


def ratio_rows(frame, metric=None):
    """A campaign's ratios to bm, as its report computes them: ``[{"metric", "main", "platform", "scenario",
    "setup", "ratio", "interval", "n"}]`` for ``metric``, else for each metric its report shows (its main one, the
    first, with ``main`` True). SETUP: what else tells a row from another of its scenario (a workload, a
    parameter, the host). ``platbench index`` keeps them in the store (table campaign_ratios)."""
    metrics = [metric] if metric else choose_metrics(frame)
    report = ReportContext(frame)
    rows, keys, _ = report.summarize(metrics)
    report.with_intervals(rows, keys, metrics)
    setup_keys = [key for key in keys if key not in SCENARIO_LABELS]
    found = []
    for used in metrics:
        for row in rows:
            ratio = row.get(f"{used} ratio to {BASELINE}")
            if row["platform"] == BASELINE or not _known(ratio):
                continue
            interval = row.get(f"{used} ratio interval")
            interval = [float(bound) for bound in interval] if interval and all(map(_known, interval)) else None
            count = row.get(f"{used} count")
            found.append(
                {
                    "metric": used,
                    "main": metric is None and used == metrics[0],
                    "platform": row["platform"],
                    "scenario": _scenario(row),
                    SETUP: ", ".join(f"{key}={row[key]}" for key in setup_keys if _known(row.get(key))),
                    "ratio": float(ratio),
                    "interval": interval,
                    "n": int(count) if _known(count) else None,
                }
            )
    return found


def campaign_ratios(connection, campaign, metric, kept):
    """The campaign's ratio rows for ``metric`` (None: its main one): those ``platbench index`` kept (``kept``,
    None when it kept none), else computed from its samples in the store."""
    if kept is not None:
        chosen = [row for row in kept if (row["metric"] == metric if metric else row["main"])]
        if chosen or not metric or not kept:
            return chosen
    frame = frame_of_columns(*store.sample_rows(connection, campaign))
    return ratio_rows(frame, metric or choose_metrics(frame)[0])


def history(connection, metric=None, platforms=None, scenarios=None, host=None, since=None):
    """The lines of the history: ``[{"campaign", "started", "metric", "platform", "scenario", "setup", "ratio",
    "interval", "n", "changed"}]``, the campaigns in time order."""
    lines, environment_before = [], None
    kept = store.kept_ratios(connection)
    for campaign, _experiment, started, environment in store.campaigns(connection, since, host):
        try:
            rows = campaign_ratios(connection, campaign, metric, kept.get(campaign))
        except ReportError:
            continue  # the campaign has no such metric, or no successful cell
        changed = changes(environment_before, environment) if environment_before is not None else []
        environment_before = environment
        for row in rows:
            if platforms and row["platform"] not in platforms:
                continue
            if scenarios and row["scenario"] not in scenarios:
                continue
            line = {key: value for key, value in row.items() if key != "main"}
            lines.append({"campaign": campaign, "started": started, **line, "changed": changed})
    return lines


def _known(value):
    return value is not None and value == value  # NaN: a label this row lacks


def _scenario(row):
    return "/".join(str(row.get(key)) for key in SCENARIO_LABELS)


def _named(line):
    """A line's scenario as shown: with its set-up where the campaign's rows have one."""
    return f"{line['scenario']} ({line['setup']})" if line.get("setup") else line["scenario"]


EMPTY = "no campaign in the store has a ratio to bm for this selection"
HEADER = ["campaign", "started (UTC)", "scenario", "metric", "n", f"ratio to {BASELINE}", "95% CI", "changed"]
PAGE = "history.html"


def _cells(line):
    started = (
        datetime.datetime.fromtimestamp(line["started"], datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        if line["started"]
        else "n/a"
    )
    low_high = line["interval"]
    interval = f"[{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high else "n/a"
    return [
        line["campaign"],
        started,
        _named(line),
        line["metric"],
        str(line["n"]),
        f"{line['ratio']:.3f}",
        interval,
        "; ".join(line["changed"]) or "-",
    ]


def render(lines):
    """The history as text, one line per campaign and scenario."""
    if not lines:
        return EMPTY
    return report_tables.render_text(HEADER, [_cells(line) for line in lines])


@report_figures.drawn
def history_figure(lines):
    """Each scenario's ratio to bm over the campaigns' start times, its 95% interval as a band; None when no
    scenario has a ratio."""
    if not lines:
        return None
    series = {}
    for line in lines:
        series.setdefault((_named(line), line["metric"]), []).append(line)
    figure = report_figures.new_figure(9, 4.5)
    axes = figure.add_subplot()
    colors = report_figures.palette()
    for number, ((scenario, metric), points) in enumerate(sorted(series.items())):
        color = colors[number % len(colors)]
        times = [datetime.datetime.fromtimestamp(point["started"] or 0, datetime.timezone.utc) for point in points]
        axes.plot(times, [point["ratio"] for point in points], marker="o", color=color, label=f"{scenario} {metric}")
        banded = [(time, point["interval"]) for time, point in zip(times, points, strict=True) if point["interval"]]
        if banded:
            axes.fill_between(
                [time for time, _ in banded],
                [interval[0] for _, interval in banded],
                [interval[1] for _, interval in banded],
                color=color,
                alpha=0.2,
                linewidth=0,
            )
    axes.axhline(1.0, color="#555", linewidth=1, linestyle="--")
    # A campaign of two rounds has an interval wider than every ratio's spread: the axis follows the ratios.
    ratios = [line["ratio"] for line in lines] + [1.0]
    spread = max(max(ratios) - min(ratios), 0.05)
    axes.set_ylim(min(ratios) - spread, max(ratios) + spread)
    axes.set_ylabel(f"ratio to {BASELINE} (95% interval)")
    axes.set_title("each platform against bm, campaign by campaign")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.autofmt_xdate()
    return figure


def write_page(path, lines, selection):
    """history.html at ``path``: the figure inlined as SVG, then the table; returns the path."""
    from platbench.report.page import page_template

    figure = history_figure(lines)
    page = page_template("history.html.j2").render(
        selection=selection,
        figures_note=report_figures.matplotlib_missing("the figure"),
        figures=[report_figures.svg_text(figure)] if figure is not None else [],
        header=HEADER,
        lines=[_cells(line) for line in lines],
        empty=EMPTY,
    )
    Path(path).write_text(page, encoding="utf-8")
    return Path(path)


def _day(timestamp):
    return None if timestamp is None else datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).date()


def _selection(args):
    said = [
        f"{name} {', '.join(value) if isinstance(value, list) else value}"
        for name, value in (
            ("platform", args.platform),
            ("scenario", args.scenario),
            ("metric", args.metric),
            ("host", args.host),
            ("since", _day(args.since)),
        )
        if value
    ]
    return "campaigns: " + ("; ".join(said) if said else "all")


FINDINGS_HEADER = ["recorded", "finding", "verdict", "quantity [95% interval]", "reproduction"]


def findings_lines(rows):
    """The table of a study's verdicts over time (store.findings_over_time's rows)."""
    lines = []
    for row in rows:
        when = datetime.datetime.fromtimestamp(row["recorded_at"], datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        quantity = "n/a" if row["estimate"] is None else f"{row['estimate']:.3f}"
        if row["low"] is not None:
            quantity += f" [{row['low']:.3f}, {row['high']:.3f}]"
        lines.append([when, row["finding"], row["verdict"], quantity, row["reproduction"]])
    return lines


def run_findings(args, location):
    """``platbench history --study STUDY``: each finding's verdicts over time, as text."""
    try:
        rows = store.findings_over_time(location, args.study, args.finding)
    except store.StoreError as exc:
        print(f"platbench history: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"platbench history: no verdicts of {args.study} in the store: run `platbench reproduce {args.study}`")
        return 0
    print(report_tables.render_text(FINDINGS_HEADER, findings_lines(rows)))
    return 0


def run(args):
    root = Path(args.results_root)
    if args.finding and not args.study:
        print("platbench history: --finding picks a finding of --study STUDY: give --study too", file=sys.stderr)
        return 2
    if args.study:
        return run_findings(args, store.location_of(args.store, root))
    try:
        connection = store.connect(store.location_of(args.store, root), read_only=True)
    except store.StoreError as exc:
        print(f"platbench history: {exc}", file=sys.stderr)
        return 2
    try:
        lines = history(connection, args.metric, args.platform, args.scenario, args.host, args.since)
    finally:
        connection.close()
    print(render(lines))
    page = Path(args.html) if args.html else root / PAGE
    try:
        write_page(page, lines, _selection(args))
    except OSError as exc:
        print(f"platbench history: {page} cannot be written: {exc}", file=sys.stderr)
        return 2
    print(f"platbench history: wrote {page}", file=sys.stderr)
    return 0
