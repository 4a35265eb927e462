"""Overhead budgets: what ratio to bm a platform may show per metric, and the verdict of each row of a campaign.

A budgets file (YAML, ``platbench report DIR --budgets FILE``; experiments/budgets/ holds the shipped ones) states,
per platform and metric and optionally per scenario, a reference ratio to bm with a lower and an upper tolerance,
as ReFrame's performance references do: ``[REF, LOWER, UPPER]``, the bounds being REF * (1 + LOWER) and
REF * (1 + UPPER) on the ratio, None for no bound on that side::

    description: what these budgets stand for
    budgets:
      cn:
        throughput: [1.0, -0.05, null]            # every cn row: throughput at least 0.95 x bm
        elapsed:                                  # at most 1.05 x bm, and tighter on one scenario
          ref: [1.0, null, 0.05]
          scenarios: {"cn/2/pin/cpu": [1.0, null, 0.02]}

The direction of each metric comes from the metric table (workloads/common/metric_table.py): a budget must bound
its worse side (a lower tolerance for a higher-is-better metric, an upper one for a lower-is-better metric), so
that "at most 5% below bm" is never written for a time, where it would bound the platform being faster.

A budgeted row is judged on the 95% confidence interval of its ratio, the report's own (report_tables.comparison:
paired by round in a rounds campaign, Welch's otherwise): ``pass`` when
the whole interval lies within the bounds, ``fail`` when it lies wholly beyond one, ``inconclusive`` when it
straddles one (or there is no interval: fewer than two repeats on a side, no bm row).

A budget on a metric both sides of a duet pair measure alike (report_tables.SAME_WINDOW_METRICS: elapsed, each side
timing the same window) is refused where it would judge cells that ran in duet pairs, by ``platbench run`` before any
cell and by the report: its ratio is 1 whatever the platforms do.
"""

import difflib
import math
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import yaml

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import (
    CPU_CONFIGS,
    PROCESSORS,
    Scenario,
    ScenarioError,
)
from ansible_collections.platbench.lab.workloads.common import metric_table

from platbench.report.load import BASELINE, measured
from platbench.report.tables import (
    NOT_AVAILABLE,
    SAME_WINDOW_METRICS,
    SCHEDULE,
    comparison,
    key_cells,
    number_cell,
    render_markdown,
    render_text,
    with_keys_as_given,
)

FILE_FIELDS = ("description", "budgets")
SPEC_FIELDS = ("ref", "scenarios")
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
TITLE = "Budgets"
CSV_NAME = "budgets.csv"


class BudgetError(ValueError):
    """A budgets file is missing or invalid, or does not fit the campaign; the message names the key."""


class Budget(NamedTuple):
    """One reference: ``platform`` and ``metric``, ``scenario`` (None: every scenario of the platform), the
    reference ratio and its tolerances (None: unbounded), and ``key``, where the file states it."""

    platform: str
    metric: str
    scenario: str | None
    reference: float
    lower: float | None
    upper: float | None
    key: str

    @property
    def low(self):
        return None if self.lower is None else self.reference * (1.0 + self.lower)

    @property
    def high(self):
        return None if self.upper is None else self.reference * (1.0 + self.upper)

    def bound_text(self):
        """``>= 0.950``, ``<= 1.050`` or ``0.950..1.050``: the bounds on the ratio to bm."""
        if self.high is None:
            return f">= {self.low:.3f}"
        if self.low is None:
            return f"<= {self.high:.3f}"
        return f"{self.low:.3f}..{self.high:.3f}"


class Verdict(NamedTuple):
    """A budgeted row's verdict: the summarized ``row``, its ``budget``, its ratio to bm and the ratio's
    interval (None where there is none), ``verdict`` (PASS, FAIL, INCONCLUSIVE) and why when inconclusive."""

    row: dict
    budget: Budget
    ratio: float | None
    interval: tuple | None
    verdict: str
    reason: str | None


class Judgement(NamedTuple):
    """The verdicts of a campaign: their ``rows`` and the row ``keys`` they were summarized by, the ``source``
    (the budgets file) and ``unused``: the budgets no row of the campaign matched, each with why."""

    source: str
    verdicts: list
    keys: list
    unused: list


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _triple_problems(triple, better):
    """What is wrong with ``[REF, LOWER, UPPER]`` for a metric whose better side is ``better``; [] when nothing."""
    if not isinstance(triple, (list, tuple)) or len(triple) != 3:
        return [f"must be [REF, LOWER, UPPER] (e.g. [1.0, -0.05, null]), got {triple!r}"]
    reference, lower, upper = triple
    problems = []
    if not (_number(reference) and reference > 0):
        problems.append(f"REF {reference!r} must be a positive number (the ratio to {BASELINE}, e.g. 1.0)")
    if lower is not None and not (_number(lower) and -1.0 <= lower <= 0.0):
        problems.append(f"LOWER {lower!r} must be null or a number from -1 to 0 (-0.05: 5% below REF)")
    if upper is not None and not (_number(upper) and upper >= 0.0):
        problems.append(f"UPPER {upper!r} must be null or a number >= 0 (0.05: 5% above REF)")
    if problems:
        return problems
    if lower is None and upper is None:
        return ["bounds nothing: give LOWER, UPPER or both"]
    worse, side = (lower, "LOWER") if better == metric_table.HIGHER else (upper, "UPPER")
    if worse is None:
        example = "[1.0, -0.05, null]" if side == "LOWER" else "[1.0, null, 0.05]"
        return [
            f"{triple!r} bounds only the better side: {better} is better, so a budget gives {side} (e.g. {example})"
        ]
    return []


def _scenario_problems(scenario, platform):
    """What is wrong with a scenario key of ``platform``'s budget; [] when nothing."""
    try:
        parsed = Scenario.parse(scenario)
    except ScenarioError:
        parsed = None
    known = parsed is not None and parsed.cpu_config in CPU_CONFIGS and parsed.processor in PROCESSORS
    if not known or not isinstance(parsed.scaleup, int) or parsed.scaleup < 1 or parsed.varies:
        return [
            f"unknown scenario {scenario!r}: a scenario is PLATFORM/SCALEUP/CPUCFG/PROC "
            f"(CPUCFG {', '.join(CPU_CONFIGS)}; PROC {', '.join(PROCESSORS)}), e.g. {platform}/2/pin/cpu"
        ]
    if parsed.platform != platform:
        return [f"unknown scenario {scenario!r} for {platform}: a scenario of {platform} starts with {platform}/"]
    return []


def _metric_problems(metric):
    info = metric_table.lookup(metric) if isinstance(metric, str) else None
    if info is None:
        close = difflib.get_close_matches(str(metric), metric_table.METRICS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return [f"unknown metric {metric!r}: not in the metric table (workloads/common/metric_table.py){hint}"]
    if info.better is None:
        return [f"metric {metric!r} has no direction in the metric table (a descriptive figure): it has no budget"]
    return []


def _metric_budgets(platform, metric, spec, key, problems):
    """The Budgets of one ``platform: {metric: spec}`` entry; what is wrong goes to ``problems``."""
    better = metric_table.lookup(metric).better
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - set(SPEC_FIELDS), key=str)
        if unknown or not spec:
            problems.append(
                f"{key}: a mapping holds {' and/or '.join(SPEC_FIELDS)}, got "
                + (f"unknown key(s) {', '.join(map(repr, unknown))}" if unknown else "none")
            )
            return []
        scenarios = spec.get("scenarios", {})
        if not isinstance(scenarios, dict) or ("scenarios" in spec and not scenarios):
            problems.append(f"{key}.scenarios: must map scenarios to [REF, LOWER, UPPER], got {scenarios!r}")
            scenarios = {}
        triples = ([(None, spec["ref"], f"{key}.ref")] if "ref" in spec else []) + [
            (scenario, triple, f"{key}.scenarios.{scenario}") for scenario, triple in scenarios.items()
        ]
    else:
        triples = [(None, spec, key)]
    budgets = []
    for scenario, triple, where in triples:
        found = ([] if scenario is None else _scenario_problems(scenario, platform)) + _triple_problems(triple, better)
        problems.extend(f"{where}: {problem}" for problem in found)
        if not found:
            reference, lower, upper = (None if value is None else float(value) for value in triple)
            budgets.append(Budget(platform, metric, scenario, reference, lower, upper, where))
    return budgets


def parse(data, source="budgets"):
    """The Budgets a budgets file's ``data`` states, or BudgetError listing every problem, each naming its key."""
    if not isinstance(data, dict):
        raise BudgetError(f"{source}: expected a mapping with {' and '.join(FILE_FIELDS)}, got {data!r}")
    problems = []
    unknown = sorted(set(data) - set(FILE_FIELDS), key=str)
    if unknown:
        problems.append(f"unknown field(s) {', '.join(map(str, unknown))}; allowed: {', '.join(FILE_FIELDS)}")
    if not isinstance(data.get("description", ""), str):
        problems.append(f"description: must be a string, got {data['description']!r}")
    table = data.get("budgets")
    if not isinstance(table, dict) or not table:
        problems.append(f"budgets: must map platforms to {{metric: [REF, LOWER, UPPER]}}, got {table!r}")
        table = {}
    budgets = []
    for platform, metrics in table.items():
        key = f"budgets.{platform}"
        if platform == BASELINE:
            problems.append(f"{key}: {BASELINE} is the baseline, every ratio is to it; budget other platforms")
            continue
        if platform not in platforms.LABELS:
            problems.append(f"{key}: unknown platform {platform!r}; known: {', '.join(platforms.LABELS)}")
            continue
        if not isinstance(metrics, dict) or not metrics:
            problems.append(f"{key}: must map metrics to [REF, LOWER, UPPER] or {{ref, scenarios}}, got {metrics!r}")
            continue
        for metric, spec in metrics.items():
            found = _metric_problems(metric)
            problems.extend(f"{key}.{metric}: {problem}" for problem in found)
            if not found:
                budgets += _metric_budgets(platform, metric, spec, f"{key}.{metric}", problems)
    if problems:
        raise BudgetError(f"{source}: invalid budgets:\n  - " + "\n  - ".join(dict.fromkeys(problems)))
    return budgets


def load(path):
    """The Budgets of the YAML file ``path``, validated (``parse``)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BudgetError(f"{path}: cannot read the budgets file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise BudgetError(f"{path}: not valid YAML: {exc}") from None
    return parse(data, str(path))


def check_scenarios(budgets, scenarios, source, where):
    """BudgetError naming each scenario budget whose scenario is not among ``scenarios`` (those of ``where``:
    an experiment, a campaign). Platform budgets apply to whatever scenarios a campaign holds."""
    known = set(scenarios)
    problems = []
    for budget in budgets:
        if budget.scenario is not None and budget.scenario not in known:
            own = sorted(scenario for scenario in known if Scenario.parse(scenario).platform == budget.platform)
            problems.append(
                f"{budget.key}: unknown scenario {budget.scenario!r}: not a scenario of {where} "
                f"(its {budget.platform} scenarios: {', '.join(own) or 'none'})"
            )
    if problems:
        raise BudgetError(f"{source}: invalid budgets:\n  - " + "\n  - ".join(dict.fromkeys(problems)))


def check_same_window(budgets, duet_scenarios, source, where):
    """BudgetError naming each budget on a metric both sides of a duet pair time alike (SAME_WINDOW_METRICS) that
    would judge a scenario of ``duet_scenarios`` (those of ``where`` whose cells run in duet pairs), with why and
    what to do instead."""
    problems = []
    for budget in budgets:
        if budget.metric not in SAME_WINDOW_METRICS:
            continue
        own = sorted(scenario for scenario in duet_scenarios if Scenario.parse(scenario).platform == budget.platform)
        judged = own if budget.scenario is None else [scenario for scenario in own if scenario == budget.scenario]
        if judged:
            problems.append(
                f"{budget.key}: {budget.metric} cannot be budgeted in {where}: {', '.join(judged)} run(s) in duet "
                f"pairs (schedule: duet), and both sides of a duet pair time the same window, so {budget.metric} is "
                f"the same on both whatever the platforms do. Budget throughput instead, or run the experiment with "
                "schedule: rounds"
            )
    if problems:
        raise BudgetError(f"{source}: invalid budgets:\n  - " + "\n  - ".join(dict.fromkeys(problems)))


def check_experiment(budgets, experiment, source="budgets"):
    """BudgetError unless every scenario budget names a scenario the (validated) ``experiment`` runs, and no budget
    judges a metric its duet pairs time alike (``check_same_window``)."""
    cells = list(expand(experiment))
    where = f"experiment {experiment['name']}"
    check_scenarios(budgets, {cell["scenario"] for cell in cells}, source, where)
    duet = {cell["scenario"] for cell in cells if cell["labels"].get(SCHEDULE) == "duet"}
    check_same_window(budgets, duet, source, where)


def _scenario_of(row):
    """The seed studies' name of a report row's scenario (``Scenario.name``, the one form)."""
    return Scenario.of(row).name


def _budget_of(budgets, row, metric):
    """The budget of ``row``'s metric: its scenario's, else its platform's; None when it has none."""
    matching = [budget for budget in budgets if budget.metric == metric and budget.platform == row["platform"]]
    scenario = _scenario_of(row)
    for budget in matching:
        if budget.scenario == scenario:
            return budget
    return next((budget for budget in matching if budget.scenario is None), None)


def judge(interval, budget):
    """PASS, FAIL or INCONCLUSIVE of a ratio's ``(low, high)`` interval against ``budget``'s bounds."""
    low, high = interval
    if (budget.low is not None and high < budget.low) or (budget.high is not None and low > budget.high):
        return FAIL
    if (budget.low is None or low >= budget.low) and (budget.high is None or high <= budget.high):
        return PASS
    return INCONCLUSIVE


def _verdict(row, baseline, budget, metric):
    values = row[f"{metric} values"]
    if not values:
        return Verdict(row, budget, None, None, INCONCLUSIVE, "no measurement")
    if not baseline:
        return Verdict(row, budget, None, None, INCONCLUSIVE, f"no ratio to {BASELINE}")
    point = row[f"{metric} ratio to {BASELINE}"]
    baseline_values = baseline[f"{metric} values"]
    interval = comparison(row, baseline, metric)["interval"]  # the table's own estimate: paired by round, or Welch's
    if interval is None and point is not None and len(values) >= 2 and len(baseline_values) >= 2:
        interval = (point, point)  # no spread on either side: the ratio is exact
    if interval is None:
        return Verdict(row, budget, point, None, INCONCLUSIVE, "no interval: fewer than 2 repeats on a side")
    verdict = judge(interval, budget)
    return Verdict(
        row, budget, point, interval, verdict, "interval straddles a bound" if verdict == INCONCLUSIVE else None
    )


def evaluate(report, budgets, source="budgets"):
    """The Judgement of a campaign's samples (``report``, a ReportContext) against ``budgets``: one verdict per row
    and budgeted metric, in the report's row order. BudgetError when a scenario budget names a scenario the campaign
    lacks."""
    frame = report.frame
    present = set(measured(frame)["metric"])
    if "scenario" in frame.columns:
        check_scenarios(budgets, set(frame["scenario"].dropna().astype(str)), source, "this campaign")
        if SCHEDULE in frame.columns:
            duet = set(frame.loc[frame[SCHEDULE] == "duet", "scenario"].dropna().astype(str))
            check_same_window(budgets, duet, source, "this campaign")
    metrics = [metric for metric in dict.fromkeys(budget.metric for budget in budgets) if metric in present]
    unused = [
        (budget, f"no {budget.metric} samples in this campaign") for budget in budgets if budget.metric not in present
    ]
    if not metrics:
        return Judgement(source, [], [], unused)
    rows, keys, _ = report.summarize(metrics)
    verdicts = []
    for row, baseline in zip(rows, report.baselines(rows, keys), strict=True):
        for metric in metrics:
            budget = _budget_of(budgets, row, metric)
            if budget is not None:
                verdicts.append(_verdict(row, baseline, budget, metric))
    judged = {verdict.budget for verdict in verdicts}
    unused += [
        (budget, f"no {budget.platform} rows in this campaign")
        for budget in budgets
        if budget.metric in present and budget not in judged
    ]
    return Judgement(source, verdicts, keys, unused)


def _interval_cell(interval):
    return NOT_AVAILABLE if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def display_table(judgement):
    """Header and rows of strings: the row's keys, metric, ratio to bm, its 95% interval, bound and verdict."""
    header = [*judgement.keys, "metric", f"ratio to {BASELINE}", "95% CI", "bound", "verdict"]
    lines = [
        [
            *key_cells(verdict.row, judgement.keys),
            verdict.budget.metric,
            number_cell(verdict.ratio, "3f"),
            _interval_cell(verdict.interval),
            verdict.budget.bound_text(),
            verdict.verdict + (f" ({verdict.reason})" if verdict.reason else ""),
        ]
        for verdict in judgement.verdicts
    ]
    return header, lines


def csv_frame(judgement):
    """The verdicts unrounded, one row each."""
    rows = [
        {
            **{key: verdict.row[key] for key in judgement.keys},
            "metric": verdict.budget.metric,
            f"ratio to {BASELINE}": verdict.ratio,
            "ci low": None if verdict.interval is None else verdict.interval[0],
            "ci high": None if verdict.interval is None else verdict.interval[1],
            "bound low": verdict.budget.low,
            "bound high": verdict.budget.high,
            "verdict": verdict.verdict,
            "reason": verdict.reason,
            "budget": verdict.budget.key,
        }
        for verdict in judgement.verdicts
    ]
    columns = [*judgement.keys, "metric", f"ratio to {BASELINE}", "ci low", "ci high", "bound low", "bound high"]
    frame = pd.DataFrame(rows, columns=[*columns, "verdict", "reason", "budget"])
    return with_keys_as_given(frame, rows, judgement.keys)


def _row_name(verdict, keys):
    """``cn/2/pin/cpu throughput``, with the row's other keys (``batch_size=32``) where it has any."""
    scenario_keys = {"platform", "scaleup", "cpu_config", "processor", "accelerator"}
    extra = [f"{key}={verdict.row[key]}" for key in keys if key not in scenario_keys]
    return " ".join([_scenario_of(verdict.row), *([f"({', '.join(extra)})"] if extra else []), verdict.budget.metric])


def summary(judgement, strict=False):
    """The verdict summary: the counts, then each failing row (and, with ``strict``, each inconclusive one) with
    its ratio, interval and bound, then the budgets no row matched."""
    counts = dict.fromkeys((PASS, FAIL, INCONCLUSIVE), 0)
    for verdict in judgement.verdicts:
        counts[verdict.verdict] += 1
    lines = [
        f"budgets ({judgement.source}): "
        + ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
        + f" of {len(judgement.verdicts)} budgeted row(s)"
    ]
    shown = (FAIL, INCONCLUSIVE) if strict else (FAIL,)
    for verdict in judgement.verdicts:
        if verdict.verdict in shown:
            ratio = number_cell(verdict.ratio, "3f")
            lines.append(
                f"{verdict.verdict.upper()} {_row_name(verdict, judgement.keys)}: ratio {ratio}, "
                f"95% CI {_interval_cell(verdict.interval)}, bound {verdict.budget.bound_text()} ({verdict.budget.key})"
                + (f": {verdict.reason}" if verdict.reason else "")
            )
    lines += [f"unused: {budget.key}: {why}" for budget, why in judgement.unused]
    return "\n".join(lines)


def section(results_dir, judgement, strict=False):
    """Write budgets.csv into ``results_dir``; return (written, text, markdown) of the budgets section:
    the verdict table and the summary."""
    csv_frame(judgement).to_csv(Path(results_dir) / CSV_NAME, index=False)
    header, lines = display_table(judgement)
    first, *rest = summary(judgement, strict).splitlines()
    text = f"\n\n{TITLE}\n" + (render_text(header, lines) + "\n\n" if lines else "") + "\n".join([first, *rest])
    listed = "".join(f"\n- {line}" for line in rest)
    markdown = f"\n\n{TITLE}\n\n" + (render_markdown(header, lines) + "\n\n" if lines else "") + first
    markdown += f"\n{listed}" if listed else ""
    return [CSV_NAME], text, markdown


def exit_status(judgement, strict=False):
    """1 when a budget fails (or, with ``strict``, is inconclusive), else 0: ``platbench report --check``."""
    failing = (FAIL, INCONCLUSIVE) if strict else (FAIL,)
    return 1 if any(verdict.verdict in failing for verdict in judgement.verdicts) else 0
