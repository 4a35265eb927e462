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

from platbench import report_tables, store
from platbench.compare import ENVIRONMENT_FIELDS, VERSION_SUFFIX
from platbench.report_context import ReportContext
from platbench.report_load import BASELINE, ReportError, choose_metrics, frame_of_rows

# The environment fields whose change is named beside a campaign: compare's, without the host (--host picks it) and
# the image's name (its id says whether it changed).
CHANGE_FIELDS = tuple(field for field in ENVIRONMENT_FIELDS if field not in ("host", "image"))


def add_arguments(parser):
    parser.add_argument("--store", help=store.STORE_HELP.replace("beside the campaigns", "in RESULTS_ROOT"))
    parser.add_argument("--results-root", default="results", help="where the campaigns are (default: results)")
    parser.add_argument("--platform", action="append", help="only this platform (repeat for several)")
    parser.add_argument("--metric", help="the metric (default: the campaigns' main one, as the report picks it)")
    parser.add_argument("--scenario", action="append", help="only this scenario, PLATFORM/SCALEUP/CPUCFG/PROC")
    parser.add_argument("--host", help="only campaigns run on this host")
    parser.add_argument("--since", type=_date, help="only campaigns started on or after this date (YYYY-MM-DD)")
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


def campaign_rows(connection, campaign, metric=None):
    """``(metric, [row, ...])`` of one campaign: its summary rows (report_tables.summarize) with their intervals."""
    frame = frame_of_rows(*store.sample_rows(connection, campaign))
    metric = metric or choose_metrics(frame)[0]
    report = ReportContext(frame)
    rows, keys, _ = report.summarize([metric])
    report.with_intervals(rows, keys, [metric])
    return metric, rows


def history(connection, metric=None, platforms=None, scenarios=None, host=None, since=None):
    """The lines of the history: ``[{"campaign", "started", "platform", "scenario", "ratio", "interval", "n",
    "changed"}]``, the campaigns in time order."""
    lines, environment_before = [], None
    for campaign, _experiment, started, environment in store.campaigns(connection, since, host):
        try:
            used, rows = campaign_rows(connection, campaign, metric)
        except ReportError:
            continue  # the campaign has no such metric, or no successful cell
        changed = changes(environment_before, environment) if environment_before is not None else []
        environment_before = environment
        for row in rows:
            if row["platform"] == BASELINE or row.get(f"{used} ratio to {BASELINE}") is None:
                continue
            if platforms and row["platform"] not in platforms:
                continue
            scenario = _scenario(row)
            if scenarios and scenario not in scenarios:
                continue
            lines.append(
                {
                    "campaign": campaign,
                    "started": started,
                    "metric": used,
                    "platform": row["platform"],
                    "scenario": scenario,
                    "ratio": row[f"{used} ratio to {BASELINE}"],
                    "interval": row.get(f"{used} ratio interval"),
                    "n": row.get(f"{used} count"),
                    "changed": changed,
                }
            )
    return lines


def _scenario(row):
    return "/".join(str(row.get(key)) for key in ("platform", "scaleup", "cpu_config", "processor"))


def render(lines):
    """The history as text, one line per campaign and scenario."""
    if not lines:
        return "no campaign in the store has a ratio to bm for this selection"
    header = ["campaign", "started (UTC)", "scenario", "metric", "n", f"ratio to {BASELINE}", "95% CI", "changed"]
    table = []
    for line in lines:
        started = (
            datetime.datetime.fromtimestamp(line["started"], datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
            if line["started"]
            else "n/a"
        )
        low_high = line["interval"]
        interval = f"[{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high else "n/a"
        table.append(
            [
                line["campaign"],
                started,
                line["scenario"],
                line["metric"],
                str(line["n"]),
                f"{line['ratio']:.3f}",
                interval,
                "; ".join(line["changed"]) or "-",
            ]
        )
    return report_tables.render_text(header, table)


def run(args):
    root = Path(args.results_root)
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
    return 0
