"""report.html: the whole report on one self-contained page (no network: inline CSS, figures as inline SVG), rendered
from templates/report.html.j2 with autoescaping. The tables come from the report's own row builders (summarize,
diff_tables, phase_rows, degradation_rows...) and display helpers; the figures from report_figures, drawn by
matplotlib and inlined as SVG; the metadata from report_meta. Nothing is computed in the template."""

from pathlib import Path

from platbench import answer, budgets, validity
from platbench.report import diff as report_diff
from platbench.report import figures as report_figures
from platbench.report import inference as inference_report
from platbench.report import instances as instances_report
from platbench.report import ladder as report_ladder
from platbench.report import load as report_load
from platbench.report import meta as report_meta
from platbench.report import sizing_columns as report_sizing
from platbench.report.load import (
    ACCELERATOR,
    BASELINE,
    EMULATED,
    INVALID,
    LOADGEN_REASONS,
    LOADGEN_RESULT,
    SCALED_DOWN,
    is_emulated,
)
from platbench.report.shares import H2D_TITLE, h2d_display, h2d_split
from platbench.report.tables import (
    NOISE_MARK,
    NOT_AVAILABLE,
    count_columns,
    duet_note,
    invalid_note,
    key_cells,
    loadgen_mark,
    mean_std_cell,
    measure_cell,
    noise_note,
    number_cell,
    ratio_cell,
    same_window_note,
    scaled_down_note,
    skipped_note,
)

PAGE = "report.html"
TEMPLATE = "report.html.j2"
# Another part of the report may mark a summary row invalid as a run (too noisy, too short...): a column of
# reasons, empty when valid. The page shows it wherever the rows carry it.
VALIDITY = validity.VALIDITY
VALID = "valid"


def _interval_cell(interval, center=None):
    if interval is None:
        return NOT_AVAILABLE
    scale = center if center is not None else interval[1]
    return f"[{measure_cell(interval[0], scale)}, {measure_cell(interval[1], scale)}]"


def _ratio_cell(row, metric):
    value = row.get(f"{metric} ratio to {BASELINE}")
    text = number_cell(value, "3f")
    interval = row.get(f"{metric} ratio interval")
    if value is not None and interval is not None:
        text += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    return ratio_cell(row, metric, text + (f" {NOISE_MARK}" if row.get(f"{metric} within noise") else ""))


def row_state(row):
    """The page's class of a summary row, the most serious first: failed (no measurement, a failed cell),
    invalid (a validity reason or loadgen's INVALID), emulated (tcg), scaled-down (inference cells below MLPerf's
    minimums), skipped, mlperf-valid (inference cells that are all VALID); "" for a plain row."""
    if not row.get("n") and row.get("failed"):
        return "failed"
    if row.get(VALIDITY) or row.get(INVALID):
        return "invalid"
    if is_emulated(row):
        return "emulated"
    if row.get(SCALED_DOWN):
        return SCALED_DOWN
    if not row.get("n") and row.get("skipped"):
        return "skipped"
    if row.get(report_load.VALID):
        return "mlperf-valid"
    return ""


def main_table(rows, keys, metrics, units):
    """Header and lines of the main table: each metric's n, mean ± std, 95% CI of the mean, CV and
    ratio to bm with its 95% interval and the noise mark; the validity column where the rows carry one."""
    counts = count_columns(rows)
    validity = any(row.get(VALIDITY) for row in rows)
    header = [*keys, *counts]
    for metric in metrics:
        header += [
            f"{metric} n",
            f"{metric} ({units[metric]}) mean ± std",
            "95% CI",
            "CV",
            f"/ {BASELINE} [95% CI]",
        ]
    lines = []
    for row in rows:
        cells = [*key_cells(row, keys), *(str(row[count]) for count in counts)]
        for metric in metrics:
            cv = row.get(f"{metric} cv")
            cells += [
                str(row.get(f"{metric} count", 0)),
                mean_std_cell(row, metric) + loadgen_mark(row, metric),
                _interval_cell(row.get(f"{metric} interval"), row.get(f"{metric} mean")),
                NOT_AVAILABLE if cv is None else f"{100 * cv:.1f}%",
                _ratio_cell(row, metric),
            ]
        # Last, where its reasons can wrap without pushing the figures off the page.
        if validity:
            cells.append(row.get(VALIDITY) or VALID)
        lines.append(cells)
    return header + ([VALIDITY] if validity else []), lines


def _section(title, header, lines, notes=(), figures=(), states=None):
    """One table of the page, each line with its row's class (``states``, in the lines' order; none by default)."""
    states = states or [""] * len(lines)
    return {
        "title": title,
        "header": header,
        "lines": list(zip(lines, states, strict=True)),
        "notes": [note for note in notes if note],
        "figures": list(figures),
    }


def _figure(name, figure):
    return None if figure is None else {"name": name, "svg": report_figures.svg_text(figure)}


def _figures(*named):
    return [figure for figure in (_figure(name, built) for name, built in named) if figure]


def answer_section(report, metrics):
    """The page's first section, as the text report's first lines: the answer (platbench/answer.py) on the main
    table's first metric, each line with the line that says its pairs are not exchangeable where they are not, the
    duet note, then each paired comparison's ratio pair by pair in time order with the answer's interval as a band.
    None without a ratio to bm."""
    if not metrics:
        return None
    frame = report.frame
    rows, keys, _ = report.summarize(metrics, always=report_sizing.sizing_keys(frame))
    metric = metrics[0]
    title, found = answer.answer_of(rows, keys, report.baselines(rows, keys), metric, answer.seconds_per_round(frame))
    if title is None:
        return None
    figures = []
    for line in found:
        figures += _figures(
            (
                f"{line.label} {metric}: each pair's ratio in the order the pairs ran, the answer's 95% interval as a "
                "band",
                report_figures.pairs_figure(line, metric, line.label, report.title),
            )
        )
    return {
        "title": title,
        "lines": [(line.text, line.notice) for line in found],
        "notes": [note for note in (duet_note(frame),) if note],
        "figures": figures,
    }


def main_sections(report, metrics):
    """The main table and its figures: the report's summary of ``metrics``, the very rows of its text table."""
    frame = report.frame
    rows, keys, units = report.summarize(metrics, always=report_sizing.sizing_keys(frame))
    report.with_intervals(rows, keys, metrics)
    header, lines = main_table(rows, keys, metrics, units)
    figures = []
    for metric in metrics:
        figures += _figures(
            (
                f"{metric} normalised to {BASELINE}",
                report_figures.bars_figure(report, rows, keys, metric, units[metric]),
            ),
            (
                f"{metric} by scale-up",
                report_figures.scaleup_figure(report, rows, keys, metric, units[metric]),
            ),
            (
                f"{metric} normalised to {BASELINE} against CHR",
                report_sizing.chr_figure(report, rows, keys, metric),
            ),
        )
    notes = [
        noise_note(rows, metrics),
        same_window_note(rows, metrics),
        validity.note(rows, report.thresholds),
        report.emulated_note(rows),
        skipped_note(frame),
        invalid_note(frame),
        scaled_down_note(frame),
    ]
    states = [row_state(row) for row in rows]
    return [_section("Every metric against " + BASELINE, header, lines, notes, figures, states)]


def diff_sections(report):
    tables, missing = report_diff.diff_tables(report)
    sections = []
    for component, (rows, keys) in tables.items():
        header, lines = report_diff.diff_display(rows, keys)
        title = report_diff.DIFF_TITLE.format(DIFF=report_diff.DIFF, BASELINE=BASELINE, component=component).rstrip(":")
        figure = report_figures.diff_figure(component, rows, keys, report_diff.DIFF, report.title)
        states = [row_state(row) for row in rows]
        notes = [report_diff.DIFF_NOTE, report_diff.same_window_rows_note(rows)]
        sections.append(_section(title, header, lines, notes, _figures((title, figure)), states))
    if sections and missing:
        sections[-1]["notes"].append(report_diff.missing_entry_note(missing))
    return sections


def inference_sections(report):
    phases = inference_report.phase_rows(report)
    if phases is None:
        return []
    rows, keys, units, metrics = phases
    sections = []
    for app in dict.fromkeys(row.get(inference_report.APP) for row in rows):
        selected = [row for row in rows if row.get(inference_report.APP) == app]
        shown = inference_report.shown_keys(selected, keys)
        header, lines = inference_report.phases_display(selected, shown, metrics)
        title = inference_report.PHASES_TITLE.format(app="" if app is None else f", app {app}").rstrip(":")
        figure = report_figures.phases_figure(selected, shown, metrics, report.title)
        states = [row_state(row) for row in selected]
        sections.append(
            _section(title, header, lines, [inference_report.PHASES_NOTE], _figures((title, figure)), states)
        )
    speedups, speedup_keys = inference_report.speedup_rows(report, rows, keys)
    if speedups:
        header, lines = inference_report.speedup_display(speedups, speedup_keys)
        title = inference_report.SPEEDUP_TITLE.rstrip(":")
        sections.append(_section(title, header, lines, [inference_report.SPEEDUP_NOTE]))
    return sections


def ladder_sections(report, metrics, results_dir):
    """A ladder campaign's attribution (platbench explain): its table, what it says, and the waterfall; [] for any
    other campaign."""
    if not metrics:
        return []
    rows, _keys, _units = report.summarize(metrics, always=report_sizing.sizing_keys(report.frame))
    _text, _markdown, found = report_ladder.sections(report, rows, metrics, results_dir)
    if found is None:
        return []
    title = report_ladder.TITLE.format(platform=found.platform, metric=metrics[0]).rstrip(":")
    header, lines = report_ladder.display(found)
    figure = report_ladder.waterfall_figure(found, report.title)
    notes = [*report_ladder.summary_lines(found), report_ladder.NOTE]
    return [_section(title, header, lines, notes, _figures((title, figure)))]


def instance_sections(report):
    kinds = (
        (instances_report.degradation_rows, instances_report.degradation_display, "DEGRADATION"),
        (instances_report.distributed_rows, instances_report.distributed_display, "DISTRIBUTED"),
    )
    sections = []
    for rows_of, display, name in kinds:
        built = rows_of(report)
        if built:
            rows, keys = built
            title = getattr(instances_report, f"{name}_TITLE").rstrip(":")
            note = getattr(instances_report, f"{name}_NOTE")
            states = [row_state(row) for row in rows]
            sections.append(_section(title, *display(rows, keys), [note], (), states))
    return sections


def gpu_sections(report):
    sections = []
    split = h2d_split(report)
    if split:
        header, lines = h2d_display(*split)
        sections.append(_section(H2D_TITLE.rstrip(":"), header, lines))
    points, roofs = report_figures.roofline_points(report.frame)
    if points:
        figures = _figures(("Roofline", report_figures.roofline_figure(points, roofs, report.title)))
        header = ["scenario", "device", "arithmetic intensity (FLOP/B)", "achieved (FLOP/s)", "95% CI"]
        lines = [
            [
                point["label"],
                point["device"],
                f"{point['intensity']:.4g}",
                f"{point['achieved']:.4g}",
                NOT_AVAILABLE
                if point["achieved interval"] is None
                else f"[{point['achieved interval'][0]:.4g}, {point['achieved interval'][1]:.4g}]",
            ]
            for point in points
        ]
        sections.append(_section("Roofline", header, lines, (), figures))
    return sections


def budget_section(judgement, strict):
    if not judgement:
        return None
    header, lines = budgets.display_table(judgement)
    states = [verdict.verdict for verdict in judgement.verdicts]
    return _section(budgets.TITLE, header, lines, budgets.summary(judgement, strict).splitlines(), (), states)


def metadata_view(metadata):
    """The metadata section's parts: hosts (a field per row, a host per column), versions alike, the sessions
    of run.json and the experiment as it ran, as YAML."""
    import yaml

    hosts = list(metadata.hosts)
    host_rows = [[field, *(metadata.hosts[host][field] for host in hosts)] for field in report_meta.HOST_FIELDS]
    names = sorted({name for host in hosts for name in metadata.versions[host]})
    version_rows = [
        [name, *(metadata.versions[host].get(name, report_meta.NOT_RECORDED) for host in hosts)] for name in names
    ]
    sessions = [
        [str(index), *("" if session[field] is None else str(session[field]) for field in report_meta.SESSION_FIELDS)]
        for index, session in enumerate(metadata.sessions)
    ]
    experiment = dict(metadata.experiment or {})
    as_run = experiment.pop("as_run", None)  # the size and overrides given (campaigns since as_run was recorded)
    experiment = yaml.safe_dump(experiment, sort_keys=False, default_flow_style=False) if experiment else None
    if as_run is not None:
        as_run = yaml.safe_dump(as_run, sort_keys=False, default_flow_style=False)
    return {
        "campaign": metadata.campaign,
        "experiments": ", ".join(metadata.experiments) or report_meta.NOT_RECORDED,
        "hosts": hosts,
        "host_rows": host_rows,
        "version_rows": version_rows,
        "session_header": ["session", *report_meta.SESSION_FIELDS],
        "sessions": sessions,
        "experiment": experiment,
        "as_run": as_run,
        "run_file": report_meta.RUN_FILE,
        "not_recorded": report_meta.NOT_RECORDED,
    }


def _marked_cells(frame, cell_hosts, column, value, state, reason_of):
    """(cells, state, detail) of each cell whose samples hold ``value`` in ``column``."""
    if column not in frame.columns or "cell" not in frame.columns:
        return []
    lines = []
    for cell, group in frame[frame[column] == value].groupby("cell", sort=False):
        sample = group.iloc[0]
        host = cell_hosts.get(str(cell), report_meta.NOT_RECORDED)
        lines.append(([state, str(sample.get("scenario")), str(cell), host, reason_of(sample)], state, ""))
    return lines


def outcome_rows(report, metadata):
    """(cells, state, detail) per cell that gave no figure that counts: failed (its error; detail: the whole error
    and output tail), skipped (its reason), INVALID (loadgen's reasons), emulated (tcg: why its ratios are left out,
    or shown)."""
    lines = [
        ([outcome.status, outcome.scenario, outcome.cell, outcome.host, outcome.reason], outcome.status, outcome.detail)
        for outcome in metadata.outcomes
    ]
    lines += _marked_cells(
        report.frame,
        metadata.cell_hosts,
        LOADGEN_RESULT,
        INVALID,
        INVALID,
        lambda sample: str(sample.get(LOADGEN_REASONS) or "no reason given"),
    )
    lines += _marked_cells(
        report.frame, metadata.cell_hosts, ACCELERATOR, EMULATED, "emulated", lambda sample: report.emulated_rule
    )
    return lines


def page_template(name):
    """The Jinja2 template ``name`` of platbench/templates, escaping what it is given (every page of platbench's)."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("platbench", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template(name)


def render(results_dir, report, metrics, judgement=None, strict=False, metadata=None):
    """The page's HTML text of ``report`` (a ReportContext: the same summaries as the text table's);
    ``metadata``: report_meta.load's, when the caller has it already."""
    metadata = metadata or report_meta.load(results_dir)
    sections = []
    if metrics:
        sections += main_sections(report, metrics)
    sections += ladder_sections(report, metrics, results_dir)
    sections += diff_sections(report)
    sections += inference_sections(report)
    sections += instance_sections(report)
    sections += gpu_sections(report)
    budget = budget_section(judgement, strict)
    missing = report_figures.matplotlib_missing("the page's figures")
    return page_template(TEMPLATE).render(
        title=f"platbench report: {metadata.campaign}",
        context=report_meta.context_line(metadata),
        figures_note=missing,
        answer=answer_section(report, metrics),
        sections=sections,
        budget=budget,
        outcome_header=["outcome", "scenario", "cell", "host", "reason"],
        outcomes=outcome_rows(report, metadata),
        metadata=metadata_view(metadata),
    )


def write(results_dir, report, metrics, judgement=None, strict=False, metadata=None):
    """Write RESULTS_DIR/report.html; returns its path. The arguments: as ``render``'s."""
    path = Path(results_dir) / PAGE
    page = render(results_dir, report, metrics, judgement, strict, metadata)
    path.write_text(page, encoding="utf-8")
    return path
