"""Compare two campaigns: did the new kernel, BIOS setting or image change the platforms' speed or overhead?

A and B are campaign directories (results/<campaign>, holding samples.jsonl) or quoted globs of them; several
campaigns on one side are pooled. Per metric and per scenario present on both sides (the report's rows: the
scenario, and the workload, host and labels that vary): the centre of each side, the ratio B/A with its 95%
interval, the two-sided p-value and ``~`` where the change is not significant (p >= 0.05). The default method is
benchstat's: medians and Mann-Whitney's U test, with the rank (Hodges-Lehmann) interval of the ratio; ``--test
welch``: means and Welch's t test, with the report's interval of a ratio of means. Whether a change is better or
worse comes from the metric table (workloads/common/metric_table.py). Then the geometric mean of the ratios per
platform and over all, the scenarios found on one side only, and the environment that differs between the sides
(kernel, CPU model, framework, image and engine versions from the samples' metadata, platbench's from run.json).
"""

import glob
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench import store
from platbench.report.load import (
    ACCELERATOR,
    HOST,
    SCENARIO_LABELS,
    ReportError,
    choose_metrics,
    load_samples,
    measured,
)
from platbench.report.stats import (
    geometric_mean,
    mann_whitney_p,
    mean,
    median,
    rank_ratio_interval,
    ratio,
    ratio_interval,
    welch_p,
)
from platbench.report.tables import NOISE_MARK, NOT_AVAILABLE, measure_cell, render_markdown, render_text, summarize

ALPHA = 0.05  # a change is significant below this p-value; the intervals are 95% (report_stats.CONFIDENCE)
SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"
EXPERIMENT = "experiment"  # a label that names the run, not what ran: told among the differences, never a row key
# The environment told per side: these fields of a sample's metadata (flat, or under ``environment`` and
# ``runtime``) and every ``*_version`` one; from run.json, the version of platbench that ran each session.
ENVIRONMENT_FIELDS = ("host", "kernel", "os", "cpu_model", "gpu_count", "image", "image_id", "sif_image_id")
NESTED_METADATA = ("environment", "runtime")
VERSION_SUFFIX = "_version"
# What the words of a significant change are: by the metric table's direction, or by the sign without one.
WORDS = {
    metric_table.HIGHER: ("better", "worse"),
    metric_table.LOWER: ("worse", "better"),
    None: ("higher", "lower"),
}
# The HTML page's class of a row by its verdict (templates/compare.html.j2 colours them).
VERDICT_STYLES = {"better": "better", "worse": "worse", NOISE_MARK: "noise"}
NO_TEST_FEW = "no test: n<2"
NO_TEST_FLAT = "no test: no spread"


class Method(NamedTuple):
    centre: str  # the word for a side's centre, a column of the tables
    centre_of: Callable
    p_value: Callable
    interval: Callable
    description: str


# The --test choices. The default interval is Moses' rank interval of the ratio (on logarithms) rather than a
# bootstrap: it is the one that belongs to the U test (it holds 1 where the test does not reject), it is exact for
# the few repeats a campaign has, where a bootstrap of medians is coarse and its coverage poor, and it is
# deterministic without a seed.
METHODS = {
    "mann-whitney": Method(
        "median",
        median,
        mann_whitney_p,
        rank_ratio_interval,
        "medians, Mann-Whitney U test (two-sided); interval of B/A: the rank (Hodges-Lehmann) interval of the ratio",
    ),
    "welch": Method(
        "mean",
        mean,
        welch_p,
        ratio_interval,
        "means, Welch's t test (two-sided, unequal variances); interval of B/A: Welch's interval of the difference "
        "of means over A's mean",
    ),
}


class Side(NamedTuple):
    name: str  # A or B
    pattern: str  # as given
    dirs: list  # the campaign directories it pools
    frame: pd.DataFrame
    environment: dict  # field -> its distinct values, as text


def add_arguments(parser):
    parser.add_argument("a", metavar="A", help="the campaign(s) compared against: a directory or a quoted glob")
    parser.add_argument("b", metavar="B", help="the campaign(s) compared with A: a directory or a quoted glob")
    parser.add_argument(
        "--metric",
        action="append",
        metavar="METRIC",
        help="metric to compare, repeatable (default: the report's: throughput and elapsed when present)",
    )
    parser.add_argument(
        "--test",
        choices=tuple(METHODS),
        default="mann-whitney",
        help="mann-whitney: medians and the U test (default, as benchstat); welch: means and Welch's t test",
    )
    parser.add_argument("--format", choices=("table", "csv", "markdown"), default="table", help="what to print")
    parser.add_argument("--html", metavar="FILE", help="also write the comparison as one self-contained HTML page")
    parser.set_defaults(handler=run)


def campaign_dirs(pattern, name):
    """The campaign directories ``pattern`` names: itself, or the directories holding samples it matches."""
    expected = "expected a campaign directory (holding samples.jsonl) or a quoted glob of them"
    path = Path(pattern)
    if path.is_dir():
        return [path]
    if not glob.has_magic(pattern):
        raise ReportError(f"{name}: {pattern} does not exist: {expected}")
    matched = [Path(match) for match in sorted(glob.glob(pattern)) if Path(match).is_dir()]
    dirs = [match for match in matched if (match / SAMPLES_FILE).is_file() or store.parquet_current(match)]
    if not dirs:
        what = f"{len(matched)} directories, none holding {SAMPLES_FILE}" if matched else "nothing"
        raise ReportError(f"{name}: {pattern} matches {what}: {expected}")
    return dirs


def load_side(pattern, name):
    dirs = campaign_dirs(pattern, name)
    frames = []
    for results_dir in dirs:
        try:
            frames.append(load_samples(results_dir))
        except ReportError as exc:
            raise ReportError(f"{name}: {exc}") from None
    frame = pd.concat(frames, ignore_index=True)
    environment = environment_of(dirs)
    if EXPERIMENT in frame.columns:
        environment[EXPERIMENT] = sorted(frame[EXPERIMENT].dropna().astype(str).unique())
        frame = frame.drop(columns=EXPERIMENT)
    return Side(name, pattern, dirs, frame, environment)


def environment_of(dirs, samples=None):
    """{field: sorted distinct values} of the environment recorded in the campaigns ``dirs``; ``samples``: those of
    the one campaign in ``dirs``, when the caller has read them already (``platbench index``)."""
    values = {}

    def add(field, value):
        if value is not None and not isinstance(value, (dict, list)):
            values.setdefault(field, set()).add(str(value))

    def add_metadata(metadata):
        layers = [metadata, *(metadata.get(key) for key in NESTED_METADATA)]
        for layer in layers:
            for field, value in (layer if isinstance(layer, dict) else {}).items():
                if field in ENVIRONMENT_FIELDS or field.endswith(VERSION_SUFFIX):
                    add(field, value)

    for results_dir in dirs:
        for sample in store.campaign_samples(results_dir) if samples is None else samples:
            add_metadata(sample.get("metadata") or {})
        run_file = results_dir / RUN_FILE
        try:
            document = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else {}
        except (OSError, ValueError):
            document = {}
        for session in [document, *(document.get("resumes") or [])]:
            if isinstance(session, dict):
                add("platbench_version", session.get("platbench_version"))
                for host_environment in (session.get("hosts") or {}).values():
                    add_metadata(host_environment if isinstance(host_environment, dict) else {})
    return {field: sorted(found) for field, found in values.items()}


def environment_differences(side_a, side_b):
    """([(field, A's values, B's values)] of the fields that differ or are known on one side only, [fields that are
    the same on both]), in a stable order: the listed fields first, then the versions by name."""
    order = [EXPERIMENT, *ENVIRONMENT_FIELDS]
    fields = sorted(
        set(side_a.environment) | set(side_b.environment),
        key=lambda field: (order.index(field) if field in order else len(order), field),
    )
    differ = [
        (field, side_a.environment.get(field, []), side_b.environment.get(field, []))
        for field in fields
        if side_a.environment.get(field) != side_b.environment.get(field)
    ]
    same = [field for field in fields if side_a.environment.get(field) == side_b.environment.get(field)]
    return differ, same


def _key_value(value):
    """A key's value as both sides compare and show it: a missing one None, 2000.0 (pooled gaps) as 2000."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _identity(row, keys):
    return tuple(None if _key_value(row.get(key)) is None else str(_key_value(row.get(key))) for key in keys)


def describe(row, keys):
    """A scenario in a line: bm/2/pin/cpu, then the other keys as key=value."""
    scenario = "/".join(str(_key_value(row.get(key))) for key in SCENARIO_LABELS if key in keys)
    others = [f"{key}={_key_value(row.get(key))}" for key in keys if key not in SCENARIO_LABELS]
    others = [other for other in others if not other.endswith("=None")]
    return " ".join([scenario, *others])


def side_rows(frame, metric, always=()):
    """(rows with values, keys) of one side's metric, as the report summarizes it; ([], []) without samples."""
    if metric not in set(measured(frame)["metric"]):
        return [], []
    rows, keys, _ = summarize(frame, [metric], always=always)
    return [row for row in rows if row[f"{metric} values"]], keys


def compare_metric(side_a, side_b, metric, method):
    """(compared rows, keys, rows only in A, rows only in B) of one metric. Both sides are keyed alike: a label
    that makes rows on one side (it varies there) makes them on the other too."""
    first = {side.name: side_rows(side.frame, metric)[1] for side in (side_a, side_b)}
    union = list(dict.fromkeys(first["A"] + first["B"]))
    fixed = [SCENARIO_LABELS[0], ACCELERATOR, *SCENARIO_LABELS[1:], HOST]
    keys = [key for key in fixed if key in union] + [key for key in union if key not in fixed]
    extra = [key for key in keys if key not in fixed or key == HOST]
    rows_of = {
        side.name: side_rows(side.frame, metric, [key for key in extra if key not in first[side.name]])[0]
        for side in (side_a, side_b)
    }
    b_rows = {_identity(row, keys): row for row in rows_of["B"]}
    compared, only_a = [], []
    for row in rows_of["A"]:
        other = b_rows.pop(_identity(row, keys), None)
        if other is None:
            only_a.append(row)
        else:
            compared.append(compare_row(row, other, keys, metric, method))
    return compared, keys, only_a, list(b_rows.values())


def compare_row(row_a, row_b, keys, metric, method):
    info = metric_table.lookup(metric)
    better = info.better if info else None
    a_values, b_values = row_a[f"{metric} values"], row_b[f"{metric} values"]
    centre_a, centre_b = method.centre_of(a_values), method.centre_of(b_values)
    change = ratio(centre_b, centre_a)
    p = method.p_value(b_values, a_values)
    interval = method.interval(b_values, a_values)
    if p is None:
        verdict = NO_TEST_FEW if min(len(a_values), len(b_values)) < 2 else NO_TEST_FLAT
    elif p >= ALPHA:
        verdict = NOISE_MARK
    elif change is None or change == 1.0:
        verdict = "differs"
    else:
        verdict = WORDS[better][0 if change > 1.0 else 1]
    return {
        **{key: _key_value(row_a.get(key)) for key in keys},
        "metric": metric,
        "better": better,
        "A n": len(a_values),
        "A centre": centre_a,
        "B n": len(b_values),
        "B centre": centre_b,
        "ratio": change,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
        "p": p,
        "significant": None if p is None else p < ALPHA,
        "verdict": verdict,
    }


def geomeans(rows):
    """[(platform or "all", scenarios, geometric mean of their ratios B/A, word)]: per platform in row order, then
    all. The geometric mean has no test of its own: its word is the rows' (better, worse...) where every row of the
    group changed significantly the same way, else none."""
    platforms = list(dict.fromkeys(row["platform"] for row in rows))
    groups = [(str(platform), [row for row in rows if row["platform"] == platform]) for platform in platforms]
    groups.append(("all", rows))
    means = []
    for name, group in groups:
        words = {row["verdict"] if row["significant"] else None for row in group}
        word = words.pop() if len(words) == 1 else None
        means.append((name, len(group), geometric_mean([row["ratio"] for row in group]), word))
    return means


class Section(NamedTuple):
    """One metric's comparison: its rows (``compare_row``), their keys and the geometric means (``geomeans``)."""

    metric: str
    unit: str
    better: str | None  # the metric table's direction
    rows: list
    keys: list
    geomeans: list


class Comparison(NamedTuple):
    sides: tuple
    method: Method
    metrics: list  # the Sections of the metrics with a scenario on both sides
    only: list  # [(side name, scenario described, [its metrics])], A's first
    differ: list
    same: list


def compare(side_a, side_b, requested=None, test="mann-whitney"):
    """The comparison of two loaded sides; ReportError when a requested metric is on neither side or no scenario
    is on both."""
    method = METHODS[test]
    both = pd.concat([side_a.frame, side_b.frame], ignore_index=True)
    metrics = choose_metrics(both, requested)
    sections, only = [], {}
    for metric in metrics:
        rows, keys, only_a, only_b = compare_metric(side_a, side_b, metric, method)
        for side, side_only in (("A", only_a), ("B", only_b)):
            for row in side_only:
                only.setdefault((side, describe(row, keys)), []).append(metric)
        if rows:
            unit = both.loc[both["metric"] == metric, "unit"].dropna().iloc[0]
            sections.append(Section(metric, unit, rows[0]["better"], rows, keys, geomeans(rows)))
    only = [(side, scenario, found) for (side, scenario), found in sorted(only.items(), key=lambda item: item[0][0])]
    if not sections:
        listed = "; ".join(only_lines(only))
        raise ReportError(f"no scenario of {', '.join(metrics)} is in both A and B: {listed or 'no samples'}")
    return Comparison((side_a, side_b), method, sections, only, *environment_differences(side_a, side_b))


# Rendering: the same cells for the text, markdown and HTML tables; the numbers unrounded in CSV.


def p_cell(p):
    if p is None:
        return NOT_AVAILABLE
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def interval_cell(row):
    return NOT_AVAILABLE if row["low"] is None else f"[{row['low']:.3f}, {row['high']:.3f}]"


def ratio_cell(value, word=None):
    """1.200 (+20.0%), with a word after the change when given: 1.200 (+20.0%, better)."""
    if value is None:
        return NOT_AVAILABLE
    return f"{value:.3f} ({100.0 * (value - 1.0):+.1f}%{f', {word}' if word else ''})"


def section_table(comparison, section):
    """Header and lines of strings of one metric's table."""
    centre, unit = comparison.method.centre, section.unit
    header = [*section.keys, f"A {centre} ({unit})", "A n", f"B {centre} ({unit})", "B n", "B/A", "95% CI", "p"]
    header.append("verdict")
    lines = []
    for row in section.rows:
        cells = [NOT_AVAILABLE if row[key] is None else str(row[key]) for key in section.keys]
        cells += [measure_cell(row["A centre"]), str(row["A n"]), measure_cell(row["B centre"]), str(row["B n"])]
        cells += [ratio_cell(row["ratio"]), interval_cell(row), p_cell(row["p"]), row["verdict"]]
        lines.append(cells)
    return header, lines


def section_title(section):
    direction = f"{section.better} is better" if section.better else "no better direction"
    return f"{section.metric} ({section.unit}, {direction})"


def geomean_line(section):
    return "geomean B/A: " + ", ".join(f"{name} {ratio_cell(value, word)}" for name, _, value, word in section.geomeans)


def side_lines(comparison):
    lines = []
    for side in comparison.sides:
        campaigns = ", ".join(results_dir.name for results_dir in side.dirs)
        lines.append(
            f"{side.name}: {side.pattern} ({len(side.dirs)} campaign(s): {campaigns}; {len(side.frame)} samples)"
        )
    return lines


def method_line(comparison):
    return f"method: {comparison.method.description}; {NOISE_MARK}: not significant (p >= {ALPHA:.2f})"


def only_lines(only):
    return [f"only in {side}: {scenario} ({', '.join(metrics)})" for side, scenario, metrics in only]


def environment_lines(comparison):
    lines = [
        f"{field}: A {', '.join(a) or '(not recorded)'} | B {', '.join(b) or '(not recorded)'}"
        for field, a, b in comparison.differ
    ]
    if comparison.same:
        lines.append(f"the same on both sides: {', '.join(comparison.same)}")
    return lines


def render(comparison, markdown=False):
    """The whole comparison as text (tables aligned) or markdown."""
    table = render_markdown if markdown else render_text
    title = "### {}" if markdown else "{}:"
    bullet = "- " if markdown else "  "
    parts = ["\n".join(side_lines(comparison) + [method_line(comparison)])]
    for section in comparison.metrics:
        parts.append(
            "\n".join([title.format(section_title(section)), *([""] if markdown else []), ""])
            + table(*section_table(comparison, section))
            + "\n\n"
            + geomean_line(section)
        )
    if comparison.only:
        parts.append(
            "\n".join([title.format("scenarios on one side only")] + [bullet + x for x in only_lines(comparison.only)])
        )
    environment = environment_lines(comparison)
    parts.append(
        "\n".join([title.format("environment that differs between A and B")] + [bullet + x for x in environment])
        if comparison.differ
        else "environment: nothing recorded differs between A and B"
        + (f" ({', '.join(comparison.same)})" if comparison.same else "")
    )
    return "\n\n".join(parts)


def csv_frame(comparison):
    """One line per metric and scenario, the numbers unrounded."""
    keys = list(dict.fromkeys(key for section in comparison.metrics for key in section.keys))
    centre = comparison.method.centre
    records = []
    for section in comparison.metrics:
        for row in section.rows:
            records.append(
                {
                    "metric": section.metric,
                    "unit": section.unit,
                    "better": section.better,
                    **{key: row.get(key) for key in keys},
                    f"A {centre}": row["A centre"],
                    "A n": row["A n"],
                    f"B {centre}": row["B centre"],
                    "B n": row["B n"],
                    "B/A": row["ratio"],
                    "ci low": row["low"],
                    "ci high": row["high"],
                    "p": row["p"],
                    "significant": row["significant"],
                    "verdict": row["verdict"],
                }
            )
    return pd.DataFrame(records)


def write_html(path, comparison):
    """The comparison as one HTML page (templates/compare.html.j2): inline CSS, nothing to load."""
    from platbench.report.page import page_template

    sections = []
    for section in comparison.metrics:
        header, lines = section_table(comparison, section)
        styles = [VERDICT_STYLES.get(row["verdict"], "") for row in section.rows]
        sections.append(
            {
                "title": section_title(section),
                "header": header,
                "lines": list(zip(lines, styles, strict=True)),
                "geomean": geomean_line(section),
            }
        )
    page = page_template("compare.html.j2").render(
        sides=side_lines(comparison),
        method=method_line(comparison),
        sections=sections,
        only=only_lines(comparison.only),
        differ=comparison.differ,
        same=comparison.same,
    )
    Path(path).write_text(page, encoding="utf-8")


def run(args):
    try:
        side_a, side_b = load_side(args.a, "A"), load_side(args.b, "B")
        comparison = compare(side_a, side_b, args.metric, args.test)
    except ReportError as exc:
        print(f"platbench compare: {exc}", file=sys.stderr)
        return 2
    if args.format == "csv":
        print(csv_frame(comparison).to_csv(index=False), end="")
    else:
        print(render(comparison, markdown=args.format == "markdown"))
    if args.html:
        write_html(args.html, comparison)
        print(f"platbench compare: wrote {args.html}", file=sys.stderr)
    return 0
