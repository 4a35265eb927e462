"""A ladder campaign's attribution (``platbench explain``; an experiment with ``baselines``): each rung against the
rung below it, the product of the steps against the direct ratio to bm, as a table and a waterfall.

The rungs and what each adds come from the campaign's plan (its experiment's ``baselines``, results/CAMPAIGN/
plan.json) and explain's ladder (platbench/explain/ladder.py names the mechanisms); the ratios from the report's own
rows (the same summary as the main table), so a step's ratio is the main table's paired comparison of its two rows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import rungs

from platbench.explain import attribution as attributing
from platbench.explain import ladder as ladders
from platbench.report.tables import BASELINE, render_markdown, render_text

TITLE = "Why {platform} costs what it costs ({metric}: each rung against the rung below it, 95% intervals):"
NOTE = (
    "Each step is the rung's ratio to the rung below it, measured in pairs of their own (duet pairs where both fit, "
    "else rounds); the product of the steps is checked against the platform's direct ratio to bm, measured in pairs of "
    "its own (docs/src/explaining.md)."
)
WATERFALL = "waterfall.png"
PLAN = "plan.json"


def plan_baselines(results_dir):
    """The campaign's ``baselines`` (its experiment's, from its plan file), or None for a campaign without."""
    path = Path(results_dir) / PLAN
    if not path.is_file():
        return None
    try:
        plan = json.loads(path.read_text(encoding="utf-8")).get("plan") or {}
    except ValueError:
        return None
    return plan.get("baselines") or None


def _named(platform, settings, lower, lower_settings):
    """The Step from rung (``lower``, ``lower_settings``) up to (``platform``, ``settings``), named as explain's ladder
    names it: a path's rung (the same platform, a label of ladder.PATHS changed), the declared step, several merged
    where the campaign skipped rungs, or the two rungs' names for a pair the ladder does not know."""
    changed = [label for label in settings if settings.get(label) != lower_settings.get(label)]
    levels = {
        **{label: path["levels"] for label, path in ladders.PATHS.items()},
        ladders.GUEST_SETUP: ladders.GUEST_SETUPS,
    }
    if platform == lower and len(changed) == 1 and changed[0] in levels:
        named = {level: rest for level, *rest in levels[changed[0]]}.get(settings[changed[0]])
        if named and named[0]:
            return ladders.Step(platform, lower, *named, settings, lower_settings)
    try:
        chain = ladders.chain(platform)
    except ladders.LadderError:
        chain = []
    reached = [BASELINE, *(step.platform for step in chain)]
    # The declared steps between the rung below and this one: one, or several where rungs were left out.
    climbed = chain[reached.index(lower) :] if lower in reached and lower != platform else []
    if len(climbed) == 1:
        return replace(climbed[0], settings=settings, below_settings=lower_settings)
    mechanism = " + ".join(step.mechanism for step in climbed) or (
        f"{rungs.text(platform, settings)} over {rungs.text(lower, lower_settings)}"
    )
    return ladders.Step(
        platform, lower, mechanism, "; ".join(step.adds for step in climbed), "", settings, lower_settings
    )


def steps_of(baselines):
    """The ladder's steps from the campaign's ``baselines``: each rung against its first baseline, named as
    explain's ladder names the step, bottom first."""
    steps = []
    for key, named in baselines.items():
        platform, settings = rungs.parse(key)
        lower, lower_settings = rungs.parse((named if isinstance(named, list) else [named])[0])
        steps.append(_named(platform, settings, lower, lower_settings))
    ordered, current = [], BASELINE
    while True:
        following = [step for step in steps if step.below_rung == current and step not in ordered]
        if not following:
            break
        ordered.append(following[0])
        current = following[0].rung
    return ordered


def _row_of(rows, platform, settings):
    found = [row for row in rows if rungs.matches(row, platform, settings)]
    return found[0] if len(found) == 1 else None


def attribution_of(rows, baselines, metric):
    """The campaign's Attribution on ``metric`` from its summary ``rows``; None where a rung is not one row (several
    scenarios of a rung: one ladder each is not drawn here)."""
    steps = steps_of(baselines)
    if not steps:
        return None
    of = {step.rung: _row_of(rows, step.platform, step.settings) for step in steps}
    of[BASELINE] = _row_of(rows, BASELINE, {})
    if any(row is None for row in of.values()):
        return None
    measured = [(step, attributing.of_rows(of[step.rung], of[step.below_rung], metric)) for step in steps]
    direct = attributing.of_rows(of[steps[-1].rung], of[BASELINE], metric)
    return attributing.Attribution(steps[-1].rung, metric, measured, direct)


def display(found):
    """Header and lines of the attribution table: bm, each step with its ratio, interval and the cumulative
    product, then the product and the direct ratio."""
    header = ["step", "adds", "ratio", "95% interval", "pairs", "after it, against bm"]
    lines = [[BASELINE, "the host's venv in a cgroup of its own", "1.000", "", "", "1.000"]]
    cumulative = 1.0
    for step, estimate in found.steps:
        if estimate is None:
            lines.append([f"+ {step.mechanism}", step.rung, "n/a", "", "", "n/a"])
            continue
        cumulative *= estimate.ratio
        low, high = estimate.interval()
        lines.append(
            [
                f"+ {step.mechanism}",
                f"{step.rung} over {step.below_rung}",
                f"{estimate.ratio:.3f}",
                f"[{low:.3f}, {high:.3f}]",
                str(estimate.pairs),
                f"{cumulative:.3f}",
            ]
        )
    for name, estimate in (("= product of the steps", found.product), (f"direct {found.platform}/bm", found.direct)):
        if estimate is None:
            lines.append([name, "", "n/a", "", "", ""])
            continue
        low, high = estimate.interval()
        lines.append([name, "", f"{estimate.ratio:.3f}", f"[{low:.3f}, {high:.3f}]", str(estimate.pairs), ""])
    return header, lines


def summary_lines(found):
    """The attribution line, the check against the direct ratio, and the largest step."""
    lines = [attributing.line(found), attributing.check_line(found)]
    largest = found.largest()
    if largest is not None:
        step, share = largest
        share_text = "" if share is None else f", {share:.0%} of the steps' summed effect"
        lines.append(f"largest step: {step.mechanism} ({step.rung} over {step.below_rung}{share_text})")
    return lines


def sections(report, rows, metrics, results_dir):
    """``(text, markdown, found)`` of a ladder campaign's attribution on its main metric; ('', '', None) for any
    other campaign."""
    baselines = plan_baselines(results_dir)
    if not baselines or not metrics:
        return "", "", None
    found = attribution_of(rows, baselines, metrics[0])
    if found is None:
        return "", "", None
    title = TITLE.format(platform=found.platform, metric=metrics[0])
    header, lines = display(found)
    said = "\n".join(summary_lines(found))
    text = f"\n\n{title}\n" + render_text(header, lines) + f"\n{said}\n{text_waterfall(found)}\n{NOTE}"
    markdown = f"\n\n{title}\n\n" + render_markdown(header, lines) + "\n\n" + said.replace("\n", "  \n") + f"\n\n{NOTE}"
    return text, markdown, found


def text_waterfall(found, width=40):
    """The waterfall in text: a bar per step from the product before it to the product after it, on a scale from
    the lowest to the highest product (1.0 marked), then the direct ratio's bar from 1."""
    values, cumulative = [1.0], 1.0
    for _, estimate in found.steps:
        if estimate is None:
            return ""
        cumulative *= estimate.ratio
        values.append(cumulative)
    if found.direct is not None:
        values.append(found.direct.ratio)
    low, high = min(values + [1.0]), max(values + [1.0])
    span = (high - low) or 1.0

    def column(value):
        return round((value - low) / span * width)

    lines = []
    previous = 1.0
    names = [step.mechanism for step, _ in found.steps]
    label_width = max(len(name) for name in [*names, "direct", BASELINE]) + 2
    for name, value in zip([BASELINE, *names], values, strict=False):
        start, end = sorted((column(previous), column(value)))
        bar = [" "] * (width + 1)
        for index in range(start, end + 1):
            bar[index] = "#" if value >= previous else "="
        bar[column(1.0)] = "|" if bar[column(1.0)] == " " else bar[column(1.0)]
        lines.append(f"  {name:<{label_width}}{''.join(bar)}  {value:.3f}")
        previous = value
    if found.direct is not None:
        start, end = sorted((column(1.0), column(found.direct.ratio)))
        bar = [" "] * (width + 1)
        for index in range(start, end + 1):
            bar[index] = "*"
        lines.append(f"  {'direct':<{label_width}}{''.join(bar)}  {found.direct.ratio:.3f}")
    return "waterfall (# a step up, = a step down, | 1.0, * the direct ratio):\n" + "\n".join(lines)


def waterfall_figure(found, context=None):
    """The waterfall: from bm's 1.0, each step a floating bar from the product before it to the product after it
    (green up, red down) with the step's 95% interval as an error bar at its end, then the product of the steps
    and the direct ratio as bars from 1 with theirs. None until every step is measured."""
    from platbench.report import figures

    if not found.measured:
        return None
    figure = figures.new_figure(max(6.0, 1.0 * len(found.steps) + 4.0), 4.5)
    axes = figure.add_subplot()
    previous, labels = 1.0, []
    for index, (step, estimate) in enumerate(found.steps):
        after = previous * estimate.ratio
        low, high = estimate.interval()
        color = "#2e7d32" if after >= previous else "#c62828"
        axes.bar(index, after - previous, 0.6, bottom=previous, color=color)
        axes.errorbar(
            index,
            after,
            yerr=[[after - previous * low], [previous * high - after]],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        axes.text(index, max(after, previous), f"{estimate.ratio:.3f}", ha="center", va="bottom", fontsize=7)
        labels.append(f"{step.mechanism}\n({step.rung})")
        previous = after
    for offset, (name, estimate) in enumerate(
        (("product", found.product), (f"direct {found.platform}/bm", found.direct))
    ):
        if estimate is None:
            continue
        index = len(found.steps) + offset
        low, high = estimate.interval()
        axes.bar(index, estimate.ratio - 1.0, 0.6, bottom=1.0, color="#546e7a")
        axes.errorbar(
            index,
            estimate.ratio,
            yerr=[[estimate.ratio - low], [high - estimate.ratio]],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        axes.text(index, max(estimate.ratio, 1.0), f"{estimate.ratio:.3f}", ha="center", va="bottom", fontsize=7)
        labels.append(name)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(labels)), labels, fontsize=7)
    axes.set_ylabel(f"{found.metric}, against bm")
    figure.suptitle(
        figures.title(f"Why {found.platform} costs what it costs: each step with its 95% interval", context),
        fontsize=9,
    )
    return figure
