"""The reproduction page: ``reproduction.txt`` (the verdicts first), ``reproduction.html`` (one self-contained
page, templates/reproduction.html.j2, figures inline as SVG) and ``reproduction.json`` (what both are made from).

Per finding: the paper's claim and its published numbers, this lab's measurement with its interval, the verdict and
why; per study, one summary line and a figure in the paper's own form (``figure`` of the findings file):
- normalized_bars (Lin 2018): each platform's mean over bm's, its absolute value above the bar;
- diff_table (Xu 2017): Diff% = (host - container) / host x 100 per test, the lab's beside the paper's;
- stacked_phases (Samani 2022): end-to-end time as its pre-processing, inference and post-processing parts;
- real_sys_times (Chopra 2022): real (elapsed) and system time per platform.
"""

from __future__ import annotations

import json
import math
import re
from typing import NamedTuple

from platbench import answer
from platbench.reproduce.findings import BASELINE, baseline_first
from platbench.reproduce.relations import NOT_EXPRESSIBLE, NOT_REPRODUCED, REPRODUCED, UNDECIDED

TEXT, HTML, JSON = "reproduction.txt", "reproduction.html", "reproduction.json"
PHASES = ("pre_time", "inference_time", "post_time")


class Entry(NamedTuple):
    """A finding in the reproduction: its ``verdict``, the ``outcome`` (relations.Outcome; None where it was not
    measured), what it ``lacks`` here (not expressible), the ``campaign`` that measured it and the ``seconds`` one
    round of that campaign takes (to say how long an undecided finding still needs)."""

    finding: object
    verdict: str
    outcome: object
    lacks: list
    campaign: str | None
    seconds_per_round: float | None


def short_name(study):
    """``lin2018`` -> ``Lin 2018``."""
    found = re.fullmatch(r"([a-z]+)(\d+)", study)
    return f"{found.group(1).capitalize()} {found.group(2)}" if found else study


def _needs_words(entries):
    """What the entries need, in a few words: ``GPUs, KVM or 80 cores`` (the most cores and hosts any needs)."""
    needs = [entry.finding.needs for entry in entries]
    wanted = [
        words
        for field, words in (
            ("gpus", "GPUs"),
            ("kvm", "KVM"),
            ("apptainer", "Apptainer"),
            ("firecracker", "Firecracker"),
        )
        if any(need.get(field) for need in needs)
    ]
    for field, words in (("hosts", "hosts"), ("cores", "cores")):
        most = max((need.get(field) or 0 for need in needs), default=0)
        if most:
            wanted.append(f"{most} {words}")
    if any(need.get("tools") for need in needs):
        wanted.append(" ".join(sorted({tool.upper() for need in needs for tool in need.get("tools") or []})))
    if not wanted:
        return "more"
    return ", ".join(wanted[:-1]) + (" or " if len(wanted) > 1 else "") + wanted[-1]


def summary_line(study, entries):
    """``Lin 2018: 3 reproduced, 1 not, 2 undecided, 9 need KVM, GPUs or 3 hosts``."""
    count = {
        verdict: sum(entry.verdict == verdict for entry in entries)
        for verdict in (REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_EXPRESSIBLE)
    }
    parts = [f"{count[REPRODUCED]} reproduced", f"{count[NOT_REPRODUCED]} not", f"{count[UNDECIDED]} undecided"]
    if count[NOT_EXPRESSIBLE]:
        lacking = [entry for entry in entries if entry.verdict == NOT_EXPRESSIBLE]
        parts.append(f"{count[NOT_EXPRESSIBLE]} need {_needs_words(lacking)}")
    return f"{short_name(study.name)}: {', '.join(parts)}"


def interval_text(estimate, interval):
    """``1.008 [0.959, 1.059]``, as the answer writes a ratio; ``(no interval yet)`` after an estimate without."""
    return answer.ratio_text(estimate, interval) + (
        " (no interval yet)" if estimate is not None and not interval else ""
    )


def _group_text(group):
    return ", ".join(f"{key}={value}" for key, value in group.items())


def measurement_lines(entry):
    """This lab's measurement of ``entry``, one line per group."""
    if entry.outcome is None or not entry.outcome.measurements:
        return []
    lines = []
    for item in entry.outcome.measurements:
        where = f"{_group_text(item.group)}: " if item.group else ""
        lines.append(
            f"{where}{entry.finding.relation.quantity_text()} = {interval_text(item.estimate, item.interval)}, "
            f"{item.rounds} rounds: {item.verdict}"
        )
    return lines


def lab_cell(entry):
    """The measurement in one table cell: the single group's, or the groups' range of estimates."""
    if entry.outcome is None or not entry.outcome.measurements:
        return "-"
    items = entry.outcome.measurements
    if len(items) == 1:
        return interval_text(items[0].estimate, items[0].interval)
    estimates = [item.estimate for item in items if item.estimate is not None]
    if not estimates:
        return "n/a"
    return f"{len(items)} groups, {min(estimates):.3f}..{max(estimates):.3f}"


def paper_cell(finding):
    published = finding.data.get("published") or []
    if not published:
        return "-"
    shown = [
        f"{item['label']} {item['value']:g}{(' ' + item['unit']) if item.get('unit') else ''}" for item in published
    ]
    return "; ".join(shown[:3]) + (f" (+{len(shown) - 3})" if len(shown) > 3 else "")


def verdict_detail(entry):
    """Why the verdict, in words: the relation's reason, how much more an undecided one needs, what is lacking."""
    if entry.verdict == NOT_EXPRESSIBLE:
        return f"needs {', '.join(entry.lacks)}"
    outcome = entry.outcome
    if outcome is None:
        return "not run: the time was spent before its campaign"
    detail = outcome.reason
    if entry.verdict == UNDECIDED and not outcome.settled:
        rounds = max((item.rounds for item in outcome.measurements), default=0)
        if outcome.rounds_needed is not None and outcome.rounds_needed > rounds:
            more = outcome.rounds_needed - rounds
            detail += f"; about {more} more round(s)"
            if entry.seconds_per_round:
                detail += f", {_minutes(more * entry.seconds_per_round)}"
        else:
            detail += "; more rounds (too few to estimate how many)"
    return detail


def _minutes(seconds):
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


VERDICT_TABLE_HEADER = ["finding", "verdict", "this lab", "paper", "relation"]


def in_verdict_order(entries):
    """The entries by verdict (reproduced, not reproduced, undecided, not expressible), the file's order within."""
    order = {verdict: index for index, verdict in enumerate((REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_EXPRESSIBLE))}
    return sorted(entries, key=lambda entry: order[entry.verdict])


def verdict_rows(entries):
    return [
        [entry.finding.id, entry.verdict, lab_cell(entry), paper_cell(entry.finding), entry.finding.relation.text()]
        for entry in in_verdict_order(entries)
    ]


def _table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    ]
    return "\n".join(lines)


def render_text(reproduction):
    """The text page: the summary line, the verdict table, then each finding."""
    study, entries = reproduction["study"], reproduction["entries"]
    lines = [summary_line(study, entries), "", _table(VERDICT_TABLE_HEADER, verdict_rows(entries)), ""]
    lines.append(f"{study.title}: {study.data['citation']}")
    lines.append(f"Lab: {reproduction['lab']}; {reproduction['when']}; {reproduction['spent']}")
    for entry in entries:
        finding = entry.finding
        lines += ["", f"[{finding.id}] {entry.verdict.upper()}: {finding.claim} ({finding.data['shown_in']})"]
        if finding.data.get("published"):
            lines.append(f"  paper: {paper_cell(finding)}")
        if finding.data.get("published_note"):
            lines.append(f"  paper's numbers: {finding.data['published_note']}")
        lines.append(f"  relation: {finding.relation.text()} on {finding.metric} ({finding.experiment})")
        lines.append(f"  scaled: {finding.data['scaled']}")
        if finding.data.get("judgement"):
            lines.append(f"  judgement: {finding.data['judgement']}")
        lines += [f"  this lab: {line}" for line in measurement_lines(entry)]
        lines.append(f"  why: {verdict_detail(entry)}")
        if entry.campaign:
            lines.append(f"  campaign: results/{entry.campaign}")
    return "\n".join(lines) + "\n"


def as_json(reproduction):
    """What the page shows, as data (reproduction.json) and as the store's rows take it."""
    rows = []
    for entry in reproduction["entries"]:
        items = entry.outcome.measurements if entry.outcome else []
        single = items[0] if len(items) == 1 else None
        rows.append(
            {
                "finding": entry.finding.id,
                "verdict": entry.verdict,
                "estimate": single.estimate if single else None,
                "low": single.interval[0] if single and single.interval else None,
                "high": single.interval[1] if single and single.interval else None,
                "groups": [
                    {
                        "group": item.group,
                        "estimate": item.estimate,
                        "interval": item.interval,
                        "rounds": item.rounds,
                        "verdict": item.verdict,
                    }
                    for item in items
                ],
                "relation": entry.finding.relation.text(),
                "detail": verdict_detail(entry),
                "campaign": entry.campaign,
                "lacks": entry.lacks,
            }
        )
    return {
        "study": reproduction["study"].name,
        "summary": summary_line(reproduction["study"], reproduction["entries"]),
        "lab": reproduction["lab"],
        "when": reproduction["when"],
        "spent": reproduction["spent"],
        "findings": rows,
    }


# -- figures in the paper's own form ------------------------------------------------------------------------------


def _means(frame, metric, labels):
    """``{(label values...): mean}`` of ``metric`` over the measured cells of ``frame``, by ``labels``."""
    rows = frame[frame["metric"] == metric]
    if rows.empty:
        return {}
    present = [label for label in labels if label in rows.columns]
    means = rows.groupby([rows[label].map(str) for label in present])["value"].mean()
    return {(key if isinstance(key, tuple) else (key,)): float(value) for key, value in means.items()}


def _figure_sets(entries, frames):
    """``[(campaign, metric, for_each labels, findings)]``: one figure per campaign and metric the entries measured."""
    sets = {}
    for entry in entries:
        if entry.campaign and entry.campaign in frames:
            key = (entry.campaign, entry.finding.metric)
            sets.setdefault(key, []).append(entry.finding)
    return [(campaign, metric, findings) for (campaign, metric), findings in sets.items()]


def normalized_bars(entries, frames):
    """Lin's form: per campaign, each platform's mean over bm's (per model or batch where several), its absolute
    value above the bar."""
    from platbench.report import figures

    drawn = []
    for campaign, metric, findings in _figure_sets(entries, frames):
        labels = list(dict.fromkeys(label for finding in findings for label in finding.data.get("for_each") or []))
        means = _means(frames[campaign], metric, ["platform", *labels])
        groups = sorted({key[1:] for key in means})
        platforms = baseline_first({key[0] for key in means})
        if BASELINE not in platforms or not groups:
            continue
        figure = figures.new_figure(max(4.0, 1.2 * len(groups) * len(platforms)), 3.4)
        axes = figure.subplots()
        width = 0.8 / len(platforms)
        colours = figures.palette()
        for index, platform in enumerate(platforms):
            xs, heights, values = [], [], []
            for position, group in enumerate(groups):
                base, value = means.get((BASELINE, *group)), means.get((platform, *group))
                if base and value is not None:
                    xs.append(position + index * width)
                    heights.append(value / base)
                    values.append(value)
            bars = axes.bar(xs, heights, width, label=platform, color=colours[index % len(colours)])
            for bar, value in zip(bars, values, strict=True):
                axes.text(
                    bar.get_x() + bar.get_width() / 2,
                    bar.get_height(),
                    f"{value:.3g}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
        axes.set_xticks([position + width * (len(platforms) - 1) / 2 for position in range(len(groups))])
        axes.set_xticklabels([", ".join(group) or metric for group in groups])
        axes.set_ylabel(f"{metric} / bm")
        axes.axhline(1.0, color="#888", linewidth=0.8)
        axes.legend(fontsize=7)
        axes.set_title(f"{_experiment(campaign)}: {metric} over {BASELINE}'s, the value above each bar", fontsize=8)
        drawn.append(figures.svg_text(figure))
    return drawn


def _experiment(campaign):
    """A figure's title names the experiment: the campaign's name without what makes it unique."""
    return campaign.split("-reproduce-")[0]


def _finished(figure, axes, title, ylabel="seconds (mean over the rounds)"):
    """A time figure's labels, legend and title set, as inline SVG."""
    from platbench.report import figures

    axes.set_ylabel(ylabel)
    axes.legend(fontsize=7)
    axes.set_title(title, fontsize=8)
    return figures.svg_text(figure)


def _compared_labels(findings):
    """The cell labels besides the platform and the metric that ``findings`` compare or split by (Samani's storage:
    hdd against ssd on one platform): their relations' sides given as labels, and their for_each."""
    labels = []
    for finding in findings:
        relation = finding.data.get("relation") or {}
        for side in (relation.get("of"), relation.get("to")):
            if isinstance(side, dict):
                labels += list(side)
        labels += finding.data.get("for_each") or []
    # The platform is in the scenario, and the phases are metrics: neither splits a bar.
    return [label for label in dict.fromkeys(labels) if label not in ("platform", "metric")]


def phase_bars(frame, findings):
    """``{bar name: {phase: mean}}`` of one campaign: a bar per scenario and, where ``findings`` compare cells of one
    scenario by another label (storage), per value of that label too, named ``scenario, label=value``. Baseline
    scenarios first."""
    labels = [label for label in _compared_labels(findings) if label in frame.columns]
    bars = {}
    for phase in PHASES:
        for key, mean in _means(frame, phase, ["scenario", *labels]).items():
            name = ", ".join([key[0], *(f"{label}={value}" for label, value in zip(labels, key[1:], strict=True))])
            bars.setdefault(name, {})[phase] = mean
    order = sorted(bars, key=lambda name: (not name.startswith(BASELINE + "/"), name))
    return {name: bars[name] for name in order}


def stacked_phases(entries, frames):
    """Samani's form: per campaign, each platform's end-to-end time as its pre-processing, inference and
    post-processing parts stacked (a bar per scenario, and per storage or other label its findings compare)."""
    from platbench.report import figures

    drawn = []
    for campaign in dict.fromkeys(entry.campaign for entry in entries if entry.campaign in frames):
        bars = phase_bars(frames[campaign], [entry.finding for entry in entries if entry.campaign == campaign])
        if not bars:
            continue
        names = list(bars)
        figure = figures.new_figure(max(4.0, 0.9 * len(names)), 3.4)
        axes = figure.subplots()
        bottoms = [0.0] * len(names)
        for phase, colour in zip(PHASES, figures.palette(), strict=False):
            heights = [bars[name].get(phase, 0.0) for name in names]
            axes.bar(range(len(names)), heights, 0.6, bottom=bottoms, label=phase.replace("_time", ""), color=colour)
            bottoms = [bottom + height for bottom, height in zip(bottoms, heights, strict=True)]
        axes.set_xticks(range(len(names)))
        axes.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
        drawn.append(_finished(figure, axes, f"{_experiment(campaign)}: end to end, by phase"))
    return drawn


def real_sys_times(entries, frames):
    """Chopra's form: per campaign, each platform's real (elapsed) and system time."""
    from platbench.report import figures

    drawn = []
    for campaign in dict.fromkeys(entry.campaign for entry in entries if entry.campaign in frames):
        frame = frames[campaign]
        real, system = _means(frame, "elapsed", ["platform"]), _means(frame, "system_time", ["platform"])
        platforms = baseline_first({key[0] for key in [*real, *system]})
        if not platforms:
            continue
        figure = figures.new_figure(max(3.5, 1.1 * len(platforms)), 3.2)
        axes = figure.subplots()
        for offset, (name, means, colour) in enumerate(
            zip(("real", "system"), (real, system), figures.palette(), strict=False)
        ):
            heights = [means.get((platform,), 0.0) for platform in platforms]
            bars = axes.bar(
                [index + offset * 0.4 for index in range(len(platforms))], heights, 0.4, label=name, color=colour
            )
            for bar, value in zip(bars, heights, strict=True):
                axes.text(
                    bar.get_x() + bar.get_width() / 2, value, f"{value:.2f}", ha="center", va="bottom", fontsize=7
                )
        axes.set_xticks([index + 0.2 for index in range(len(platforms))])
        axes.set_xticklabels(platforms)
        drawn.append(_finished(figure, axes, f"{_experiment(campaign)}: real and system time"))
    return drawn


def diff_rows(entries, frames):
    """Xu's form as rows: per finding (and group) whose relation compares a platform to bm, bm's and the platform's
    means and Diff% = (host - platform) / host x 100, this lab's with its interval beside the paper's."""
    rows = []
    for entry in entries:
        finding = entry.finding
        paper_text = _diff_text(finding)
        if entry.outcome is None or not entry.outcome.measurements:
            rows.append([finding.id, finding.metric, "-", "-", "-", "-", paper_text, entry.verdict])
            continue
        for item in entry.outcome.measurements:
            diff = "n/a"
            if item.estimate is not None:
                diff = f"{(1 - item.estimate) * 100:+.1f}%"
                if item.interval:
                    diff += f" [{(1 - item.interval[1]) * 100:+.1f}, {(1 - item.interval[0]) * 100:+.1f}]"
            host = platform = "-"
            frame = frames.get(entry.campaign)
            if frame is not None:
                means = _means(frame, finding.metric, ["platform", *item.group])
                host_value = means.get((BASELINE, *map(str, item.group.values())))
                other = sorted(finding.relation.of.platforms())
                platform_value = means.get((other[0], *map(str, item.group.values()))) if other else None
                host = f"{host_value:.4g}" if host_value is not None else "-"
                platform = f"{platform_value:.4g}" if platform_value is not None else "-"
            rows.append(
                [
                    finding.id,
                    finding.metric,
                    _group_text(item.group) or "-",
                    host,
                    platform,
                    diff,
                    paper_text,
                    item.verdict,
                ]
            )
    return rows


def _diff_text(finding):
    """The paper's Diff% values of ``finding``: each where a few, else their count, range and median."""
    values = [
        item["value"]
        for item in finding.data.get("published") or []
        if "diff" in f"{item['label']} {item.get('unit', '')}".lower()
    ]
    if not values:
        return "-"
    if len(values) <= 3:
        return ", ".join(f"{value:+.1f}%" for value in values)
    values.sort()
    middle = (
        values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    )
    return f"{len(values)} values, {values[0]:+.1f}% to {values[-1]:+.1f}% (median {middle:+.1f}%)"


DIFF_HEADER = ["finding", "metric", "test", "host (bm)", "platform", "Diff% here [95%]", "Diff% paper", "verdict"]
FIGURES = {"normalized_bars": normalized_bars, "stacked_phases": stacked_phases, "real_sys_times": real_sys_times}


def render_html(reproduction, frames):
    """The HTML page (templates/reproduction.html.j2)."""
    from platbench.report.page import page_template

    study, entries = reproduction["study"], reproduction["entries"]
    form = study.figure
    drawn = FIGURES[form](entries, frames) if form in FIGURES else []
    return page_template("reproduction.html.j2").render(
        title=f"Reproduction: {study.title}",
        citation=study.data["citation"],
        summary=summary_line(study, entries),
        lab=reproduction["lab"],
        when=reproduction["when"],
        spent=reproduction["spent"],
        header=VERDICT_TABLE_HEADER,
        rows=verdict_rows(entries),
        verdict_classes=[entry.verdict.replace(" ", "-") for entry in in_verdict_order(entries)],
        form=form,
        figures=drawn,
        diff_header=DIFF_HEADER,
        diff_rows=diff_rows(entries, frames) if form == "diff_table" else [],
        findings=[
            {
                "id": entry.finding.id,
                "verdict": entry.verdict,
                "verdict_class": entry.verdict.replace(" ", "-"),
                "claim": entry.finding.claim,
                "shown_in": entry.finding.data["shown_in"],
                "published": entry.finding.data.get("published") or [],
                "published_note": entry.finding.data.get("published_note"),
                "relation": entry.finding.relation.text(),
                "metric": entry.finding.metric,
                "experiment": entry.finding.experiment,
                "scaled": entry.finding.data["scaled"],
                "judgement": entry.finding.data.get("judgement"),
                "measurements": measurement_lines(entry),
                "detail": verdict_detail(entry),
                "campaign": entry.campaign,
            }
            for entry in entries
        ],
    )


def write(directory, reproduction, frames):
    """Write the three files into ``directory``; the text page's content is returned."""
    directory.mkdir(parents=True, exist_ok=True)
    text = render_text(reproduction)
    (directory / TEXT).write_text(text, encoding="utf-8")
    (directory / HTML).write_text(render_html(reproduction, frames), encoding="utf-8")
    data = as_json(reproduction)
    (directory / JSON).write_text(json.dumps(data, indent=1, default=_plain) + "\n", encoding="utf-8")
    return text


def _plain(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return str(value)
