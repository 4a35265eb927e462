"""Explain a platform's cost: ``platbench explain PLATFORM [--workload W] [--precision P] [--max-time T]``.

The ladder from bm to PLATFORM (platbench/explain/ladder.py) is read, and the rungs the runner host cannot run now
are left out, saying which and why (the step above then adds both mechanisms). The campaign is the experiment
``explain`` (experiments/explain.yml) with the ladder's platforms and each rung's baseline, the rung below it: under
``schedule: duet`` each rung runs beside the rung below it in pairs of their own every round, and the top beside bm
too. It runs as ``platbench run --precision`` runs one, until every step and the direct ratio are within ±P, or the
time is spent. Then the campaign's report (report.txt, report.html) holds the attribution and its waterfall, and the
command prints the attribution line, the check of the steps' product against the direct ratio, and the largest step.

``--inject RUNG:discard=D`` gives one rung a known overhead (the workload leaves the fraction D of its timed steps out
of its throughput), which stays in every rung above it as a mechanism's cost would: the step onto that rung should
then read about 1 - D and carry the platform's cost, the known-answer check of the attribution.

Exit status: 0 the campaign ran (decided or not), 1 it failed, 2 bad input, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from platbench import decide
from platbench.campaign import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, human
from platbench.explain import attribution as attributing
from platbench.explain import hosts
from platbench.explain import ladder as ladders

EXPERIMENT = "explain"
DEFAULT_WORKLOAD = "cnn_train"
DEFAULT_MAX_TIME = "20m"
DEFAULT_PRECISION = 0.01
MIN_PAIRS_ADDED = 3  # a pass costs the playbook's start: one of a round or two is mostly that
EXPLANATION = "explanation.json"
# The experiment's fields the ladder sets: --set may not.
LADDER_FIELDS = (
    "platforms",
    "baselines",
    "inject",
    "inject_into",
    "schedule",
    "only_on",
    "workload",
    ladders.GUEST_SETUP,
    *ladders.PATHS,
)
REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser):
    parser.add_argument("platform", help=f"the platform to explain ({', '.join(ladders.STEPS)})")
    parser.add_argument(
        "--workload",
        default=DEFAULT_WORKLOAD,
        help=f"the job the ladder runs: a size of experiments/{EXPERIMENT}.yml - cnn_train, inference_e2e (JPEG "
        "files read: the data path a rung too), distributed (2 ranks: the network path a rung too); default "
        f"{DEFAULT_WORKLOAD}",
    )
    parser.add_argument(
        "--precision",
        type=float,
        default=DEFAULT_PRECISION,
        metavar="P",
        help=f"run until every step and the direct ratio are within ±P (default {DEFAULT_PRECISION}: ±1%%)",
    )
    parser.add_argument(
        "--max-time",
        default=DEFAULT_MAX_TIME,
        metavar="DURATION",
        help=f"the campaign's time at most (90s, 20m, 1h; default {DEFAULT_MAX_TIME})",
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a field of the explain experiment, as platbench run --set does (params.auto_seconds=5); the ladder "
        "sets platforms, baselines and an injection itself",
    )
    parser.add_argument(
        "--inject",
        metavar="RUNG:discard=D",
        help="a known overhead on one rung (the known-answer check): its cells leave the fraction D of their timed "
        "steps out of their throughput",
    )
    parser.add_argument(
        "--campaign", help="the campaign's name (default: explain-PLATFORM-WORKLOAD-TIME); an existing one is resumed"
    )
    parser.add_argument("--inventory", "-i", default=str(REPO / "inventories" / "local"), help="the lab's inventory")
    parser.add_argument("--results-dir", default=str(REPO / "results"), help="where the campaign goes (results/)")
    parser.add_argument("--plan", action="store_true", help="print the ladder and the campaign, then stop")
    parser.set_defaults(handler=main)


@dataclass
class Plan:
    """What ``prepare`` worked out, before any cell."""

    steps: list  # the ladder's steps, bottom first (ladder.Step)
    left_out: list  # (platform, why) of each rung the host cannot build or the workload cannot run on
    runner: str  # the inventory host the cells run on
    settings: list  # the campaign's --set texts
    workload: str  # the explain experiment's size
    campaign: str
    max_seconds: float
    injected: tuple | None  # (rung, fraction) of a known overhead, or None
    paths: list  # the paths (ladder.PATHS) climbed as rungs
    experiment: dict  # the campaign's plan, as platbench run makes it
    cells: list


def _workloads():
    """The explain experiment's sizes: the workloads --workload may name."""
    import yaml

    data = yaml.safe_load((REPO / "experiments" / f"{EXPERIMENT}.yml").read_text(encoding="utf-8"))
    return list((data.get("sizes") or {}).keys())


def _sized(size):
    """The explain experiment at ``size`` (a --workload), as the file gives it."""
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import load_experiment

    return load_experiment(str(REPO / "experiments"), EXPERIMENT, None, size)


def _paths_used(loaded):
    """The paths (ladder.PATHS) the experiment at its size (``loaded``) uses: the data path where it reads a data
    directory (a generated dataset, or params.data_dir), the network path where its ranks talk (mode distributed)."""
    reads = loaded.get("dataset") is not None or "data_dir" in (loaded.get("params") or {})
    talks = loaded.get("mode") == "distributed"
    return [label for label, used in (("data_path", reads), ("network", talks)) if used]


def _unplaceable(labels, loaded):
    """The rungs of ``labels`` whose kind cannot place the size's cells (several instances: mode distributed), and
    why: left out of the ladder as a rung the host cannot build is."""
    from ansible_collections.platbench.lab.plugins.module_utils import platforms
    from ansible_collections.platbench.lab.plugins.plugin_utils import placements

    if loaded.get("mode") == "single":
        return {}
    return {
        label: f"its kind ({platforms.get(label).kind}) places no cell of several instances (mode {loaded['mode']})"
        for label in labels
        if placements.declaration(platforms.get(label)).instances is None
    }


def parse_inject(text, rungs):
    """``RUNG:discard=D`` as (rung, fraction), each part checked; ValueError naming what is wrong."""
    rung, colon, setting = str(text).partition(":")
    knob, equals, number = setting.partition("=")
    if not colon or not equals or knob != "discard":
        raise ValueError(f"--inject {text}: give RUNG:discard=D, e.g. --inject ns:discard=0.2")
    if rung not in rungs or rung == rungs[0]:
        raise ValueError(f"--inject {text}: {rung!r} is not a rung above bm of this ladder ({', '.join(rungs[1:])})")
    try:
        fraction = float(number)
    except ValueError:
        raise ValueError(f"--inject {text}: {number!r} is not a fraction") from None
    if not 0 < fraction < 1:
        raise ValueError(f"--inject {text}: the fraction must be above 0 and below 1 (0.2: a 20% overhead)")
    return rung, fraction


def settings_of(steps, injected=None, paths=(), guest_setups=False):
    """The campaign's --set texts: the ladder's platforms and each rung's baselines, the paths' dimensions on the top
    platform only, a guest's set-ups on its first guest only (the others at the lab's own, virtio: the first value),
    and an injection into a rung."""
    found = [f"platforms=[{','.join(ladders.rungs(steps))}]"]
    for rung, named in ladders.baselines(steps).items():
        found.append(f"baselines.{rung}={json.dumps(named)}")
    if guest_setups:
        guest = next(step.platform for step in steps if step.settings.get(ladders.GUEST_SETUP))
        levels = [level for level, *_ in reversed(ladders.GUEST_SETUPS)]
        found += [f"{ladders.GUEST_SETUP}=[{','.join(levels)}]", f"only_on.{ladders.GUEST_SETUP}=[{guest}]"]
    for label in paths:
        found += [f"{label}=[{','.join(ladders.levels_of(label))}]", f"only_on.{label}=[{steps[-1].platform}]"]
    if injected:
        rung, fraction = injected
        # The cost a mechanism adds stays in every rung above it: the injection goes into the rung and those above.
        rungs = ladders.rungs(steps)
        found += [f"inject.discard={fraction:g}", f"inject_into=[{','.join(rungs[rungs.index(rung) :])}]"]
    return found


def _planned(settings, workload, campaign):
    """The campaign's plan as ``platbench run`` makes it (the experiment loaded with the settings, checked, its
    workload parameters checked, its cells expanded and paired)."""
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment

    from platbench import run

    args = argparse.Namespace(settings=settings, platforms=None, workloads=None, repeats=None)
    plan, _warnings = plan_experiment(
        str(REPO / "experiments"), EXPERIMENT, run.build_overrides(args), workload, campaign=campaign
    )
    return plan


def prepare(args):
    """The Plan of ``args``; ValueError (or a LadderError, an ExperimentError) naming the bad input."""
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import ExperimentError

    from platbench import run

    max_seconds = decide.parse_duration(args.max_time)
    problem = decide.precision_problem(args.precision)
    if problem:
        raise ValueError(problem)
    known = _workloads()
    if args.workload not in known:
        raise ValueError(
            f"--workload {args.workload}: unknown; the ladder runs {', '.join(known)} (the sizes of "
            f"experiments/{EXPERIMENT}.yml: add one there for another job)"
        )
    chain = ladders.chain(args.platform)
    runner, unready = hosts.unready(ladders.rungs(chain), args.inventory)
    sized = _sized(args.workload)
    unready = {**_unplaceable(ladders.rungs(chain), sized), **unready}
    steps, left_out = ladders.climb(args.platform, unready)
    steps, paths = ladders.with_paths(steps, _paths_used(sized))
    steps, guest_setups = ladders.with_guest_setups(steps)
    injected = parse_inject(args.inject, ladders.rungs(steps)) if args.inject else None
    owned = [text for text in args.settings if text.split("=", 1)[0].split(".")[0] in LADDER_FIELDS]
    if owned:
        raise ValueError(
            f"--set {owned[0]}: the ladder sets {', '.join(LADDER_FIELDS)} itself; name the platform to explain "
            "(and --inject for a known overhead) instead"
        )
    settings = [*settings_of(steps, injected, paths, guest_setups), *args.settings]
    campaign = (
        args.campaign
        or f"{EXPERIMENT}-{args.platform}-{args.workload.replace('_', '-')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    try:
        experiment = _planned(settings, args.workload, campaign)
    except (ExperimentError, run.UsageError) as exc:
        raise ValueError(str(exc)) from None
    return Plan(
        steps=steps,
        left_out=left_out,
        runner=runner,
        settings=settings,
        workload=args.workload,
        campaign=campaign,
        max_seconds=max_seconds,
        injected=injected,
        paths=paths,
        experiment=experiment,
        cells=experiment["cells"],
    )


def plan_lines(plan):
    lines = [
        f"platbench explain {plan.steps[-1].platform} on {plan.runner}: the ladder, each rung against the one below it"
    ]
    for step in plan.steps:
        lines.append(f"  {step.below_rung} -> {step.rung}: + {step.mechanism}: {step.adds}")
    for label, why in plan.left_out:
        lines.append(f"  left out: {label}: {why}")
    if plan.injected:
        lines.append(f"  known answer: {plan.injected[0]} leaves {plan.injected[1]:g} of its timed steps out")
    pairs = sum(1 for cell in plan.cells if cell["labels"].get("duet_role") == "lead" and cell["labels"]["repeat"] == 0)
    lines.append(
        f"  campaign {plan.campaign}: {pairs} pair(s) a round, {plan.experiment['repeats']} rounds first; "
        f"platbench run {EXPERIMENT} --size {plan.workload} " + " ".join(f"--set '{text}'" for text in plan.settings)
    )
    return lines


def found_of(directory, metric=None, frame=None):
    """The campaign's Attribution from its samples (None before any), on ``metric`` (the report's first); ``frame``:
    its samples, where the caller has read them already."""
    from platbench.report import ladder as report_ladder
    from platbench.report.context import ReportContext
    from platbench.report.load import ReportError, choose_metrics, load_samples
    from platbench.report.sizing_columns import sizing_keys

    if frame is None and not (Path(directory) / "samples.jsonl").is_file():
        return None
    try:
        frame = load_samples(directory) if frame is None else frame
        metrics = [metric] if metric else choose_metrics(frame, None)
    except ReportError:
        return None
    rows, _keys, _units = ReportContext(frame).summarize(metrics, always=sizing_keys(frame))
    baselines = report_ladder.plan_baselines(directory)
    return None if not baselines else report_ladder.attribution_of(rows, baselines, metrics[0])


def pairs_wanted(found, precision):
    """How many more pairs a round would bring every open ratio within ±``precision`` (from each one's standard
    error shrinking as one over the square root of its pairs); None where one is not measured yet."""
    named = [estimate for _, estimate in found.steps] + [found.direct]
    if any(estimate is None for estimate in named):
        return None
    more = 0
    for estimate in named:
        half = estimate.half_width()
        if half > precision and estimate.pairs:
            more = max(more, int(estimate.pairs * (half / precision) ** 2) + 1 - estimate.pairs)
    return more


def judge_for(precision):
    """The run's judge (run._until_decided): a decide.State of the ladder's ratios, and its progress line."""
    from platbench.answer import seconds_per_round

    def judge(directory):
        from platbench.report.load import ReportError, load_samples

        try:
            frame = load_samples(directory) if (Path(directory) / "samples.jsonl").is_file() else None
        except ReportError:
            frame = None
        found = None if frame is None else found_of(directory, frame=frame)
        if found is None:
            return decide.State(None, "", 0, None, False, None, None), "no pairs yet"
        rounds = int(frame["repeat"].dropna().nunique()) if "repeat" in frame.columns else 0
        open_ones = found.open_steps(precision)
        wanted = pairs_wanted(found, precision)
        more = None if wanted is None else (max(MIN_PAIRS_ADDED, min(wanted, rounds)) if open_ones else 0)
        widest = max(
            (estimate.half_width() for _, estimate in [*found.steps, (None, found.direct)] if estimate is not None),
            default=None,
        )
        state = decide.State(widest, ", ".join(open_ones), rounds, more, not open_ones, None, seconds_per_round(frame))
        line = f"{rounds} round(s): " + attributing.line(found)
        line += f"; open: {', '.join(open_ones)}" if open_ones else "; every step within the precision"
        return state, line

    return judge


def run_campaign(plan, args, out, err):
    """Run the ladder's campaign as ``platbench run --precision`` would, judged by its steps."""
    from platbench import run

    argv = [EXPERIMENT, "--campaign", plan.campaign, "--size", plan.workload]
    for setting in plan.settings:
        argv += ["--set", setting]
    argv += ["--inventory", args.inventory, "--results-dir", args.results_dir]
    argv += ["--precision", str(args.precision), "--max-time", f"{int(plan.max_seconds)}s", "--until", "precision"]
    parser = argparse.ArgumentParser(prog="platbench run")
    run.add_arguments(parser)
    run_args = parser.parse_args(argv)
    run_args.argv = argv
    run_args.judge = judge_for(args.precision)
    return run.main(run_args, out, err)


def as_json(found, plan, spent):
    """The explanation as data (explanation.json beside the campaign's samples)."""

    def of(estimate):
        if estimate is None:
            return None
        low, high = estimate.interval()
        return {
            "ratio": estimate.ratio,
            "interval": [low, high],
            "pairs": estimate.pairs,
            "log": estimate.center,
            "error": estimate.error,
            "df": estimate.df,
        }

    largest = found.largest()
    return {
        "platform": found.platform,
        "metric": found.metric,
        "workload": plan.workload,
        "runner": plan.runner,
        "steps": [
            {
                "platform": step.platform,
                "rung": step.rung,
                "below": step.below_rung,
                "mechanism": step.mechanism,
                "adds": step.adds,
                "cannot": step.cannot,
                "estimate": of(estimate),
            }
            for step, estimate in found.steps
        ],
        "left_out": [{"platform": label, "why": why} for label, why in plan.left_out],
        "product": of(found.product),
        "direct": of(found.direct),
        "interaction": of(found.interaction),
        "agrees": found.agrees(),
        "largest": None if largest is None else {"platform": largest[0].platform, "share": largest[1]},
        "injected": None if not plan.injected else {"platform": plan.injected[0], "discard": plan.injected[1]},
        "paths": list(plan.paths),
        "spent_seconds": round(spent, 1),
    }


def main(args, out=None, err=None):
    """``platbench explain``: the exit status (see the module's docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    started = time.monotonic()
    try:
        plan = prepare(args)
    except (ValueError, ladders.LadderError) as exc:
        print(f"platbench explain: {exc}", file=err)
        return EXIT_BAD_INPUT
    print("\n".join(plan_lines(plan)), file=out, flush=True)
    if args.plan:
        return EXIT_OK
    result = run_campaign(plan, args, out, err)
    if result in (EXIT_INTERRUPTED, 143):
        return result
    directory = Path(args.results_dir) / plan.campaign
    found = found_of(directory)
    if found is None:
        print(f"platbench explain: the campaign {directory} holds no pairs to explain", file=err)
        return EXIT_FAILED
    from platbench.report import command as report_command

    report_command.main([str(directory)])
    spent = time.monotonic() - started
    (directory / EXPLANATION).write_text(json.dumps(as_json(found, plan, spent), indent=1) + "\n", encoding="utf-8")
    from platbench.report import ladder as report_ladder

    print("", file=out)
    for line in report_ladder.summary_lines(found):
        print(line, file=out)
    print(f"time: {human(spent)} of --max-time {human(plan.max_seconds)}; {directory / EXPLANATION}", file=out)
    return EXIT_OK if result == EXIT_OK else EXIT_FAILED
