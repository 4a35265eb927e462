"""Calibrate a lab host: how small a difference between two platforms can it tell, in how much time?

``platbench calibrate [--host H] [--effect 0.05] [--inject discard|spin|cpu_quota] [--time 10m] [--rounds 6]
[--cell-seconds 5]`` runs experiments/calibrate.yml, a short CPU-bound reference job on one pinned core of bare metal,
four cells a round in a shuffled order: two seeds as they are (A and A': the A/A pair) and the same two with a known
overhead of ``effect`` injected (B: with A, the A/B pair). The overhead is a discard by default: the job trains every
timed step and leaves ``effect`` of them out of its throughput, so its throughput is 1 - effect of the same steps'
whatever the host does (plugin_utils/experiment/inject.py). ``--inject spin`` busy-spins after each step instead (exact
beside nothing, not beside a duet partner); ``--inject cpu_quota`` caps B at 1 - effect of its core: what a CFS quota
costs this host's job, which on a VM may be well above its share. It then prints

- the host's noise: the CV between A's cells across rounds (what a campaign without pairing sees) and the CV of
  the A/A ratios within rounds (what a rounds campaign sees);
- whether the A/B pair found the injected effect (its paired interval excludes 1 and holds 1 - effect), at what
  estimate; and whether the A/A pair saw a difference where there is none;
- the minimum detectable effect at 95% confidence and 80% power for a campaign of ``--time`` comparing two
  platforms at this pace, and the time a campaign needs to detect ``--effect``;
- the harness check (``--harness-pairs N``, default 4, 0 to skip), where this machine's lab has bm and cn: N cn/bm
  duet pairs of `make lab`'s answer through platbench (the smoke experiment's size answer, campaign CAMPAIGN-harness)
  beside N pairs launched directly (platbench/direct_duet.py), and a warning where the harness widens the pairs'
  spread more than 1.5 times or moves their ratio outside the direct pairs' interval (calibration.harness_check).

The result goes into the campaign's run.json (``calibration``, the harness check under its ``harness``);
``platbench report`` shows it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import write_json

from platbench import decide, direct_duet, run
from platbench.calibration import (
    DEFAULT_KNOB,
    HARNESS_KEY,
    KNOBS,
    RUN_KEY,
    analyse,
    campaign_pairs,
    describe,
    harness_check,
    harness_lines,
    harness_not_checked,
    injected_setting,
)
from platbench.campaign import EXIT_BAD_INPUT, EXIT_OK

EXPERIMENT = "calibrate"
DEFAULT_EFFECT = 0.05
DEFAULT_TIME = "10m"
DEFAULT_ROUNDS = 6
DEFAULT_CELL_SECONDS = 5.0
DEFAULT_HARNESS_PAIRS = 4
HARNESS_SUFFIX = "-harness"  # the harness check's campaign: the calibration's name and this


def add_arguments(parser):
    parser.add_argument("--host", help="the runner host of the inventory to calibrate (default: every runner host)")
    parser.add_argument(
        "--effect",
        type=float,
        default=DEFAULT_EFFECT,
        help=f"the overhead injected into the A/B pair, and the one to detect (default {DEFAULT_EFFECT}: 5%%)",
    )
    parser.add_argument(
        "--inject",
        default=DEFAULT_KNOB,
        help=f"how the A/B pair's overhead is made (default {DEFAULT_KNOB}: exact by construction under every "
        "schedule; spin: a busy-spin after each step; cpu_quota: a CFS quota of 1 - effect, what a quota costs this "
        "host)",
    )
    parser.add_argument(
        "--time",
        default=DEFAULT_TIME,
        help=f"the campaign time the minimum detectable effect is given for (default {DEFAULT_TIME})",
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"rounds of the calibration (default {DEFAULT_ROUNDS})"
    )
    parser.add_argument(
        "--cell-seconds",
        type=float,
        default=DEFAULT_CELL_SECONDS,
        help=f"each cell's timed part, in seconds (steps: auto; default {DEFAULT_CELL_SECONDS:g})",
    )
    parser.add_argument(
        "--harness-pairs",
        type=int,
        default=DEFAULT_HARNESS_PAIRS,
        help=f"cn/bm duet pairs through platbench, and as many launched directly, to check the harness against "
        f"(default {DEFAULT_HARNESS_PAIRS}; 0 skips the check)",
    )
    parser.add_argument("--campaign", help="the calibration's campaign (default: calibrate-YYYYmmdd-HHMMSS)")
    parser.add_argument("--inventory", "-i", default=str(run.INVENTORY), help="the lab's inventory")
    parser.add_argument("--results-dir", default=str(run.RESULTS), help="where the campaign is written")
    parser.set_defaults(handler=main)


def _problems(args):
    found = []
    if not 0 < args.effect < 1:
        found.append(f"--effect {args.effect}: give the overhead as a fraction above 0 and below 1 (0.05: 5%)")
    try:
        args.seconds = decide.parse_duration(args.time)
    except ValueError as exc:
        found.append(str(exc).replace("--max-time", "--time"))
    if not args.cell_seconds > 0:
        found.append(f"--cell-seconds {args.cell_seconds}: give the timed part's seconds, above 0")
    if args.inject not in KNOBS:
        found.append(f"--inject {args.inject}: make the overhead with one of {', '.join(KNOBS)}")
    if args.rounds < 2:
        found.append(f"--rounds {args.rounds}: a paired interval needs at least 2 rounds")
    if args.harness_pairs < 0 or args.harness_pairs == 1:
        found.append(f"--harness-pairs {args.harness_pairs}: give 0 to skip the check, or 2 or more pairs")
    return found


def _run_args(args):
    """The `platbench run` of the calibration experiment."""
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    argv = [
        EXPERIMENT,
        "--campaign",
        args.campaign,
        "--repeats",
        str(args.rounds),
        "--set",
        f"inject={injected_setting(args.inject, args.effect)}",
        "--set",
        f"params.auto_seconds={args.cell_seconds:g}",
    ]
    return _parsed_run_args(parser, args, argv)


def _parsed_run_args(parser, args, argv):
    """``argv`` of a `platbench run` with the calibration's inventory, results directory and host, parsed."""
    argv = [*argv, "--inventory", args.inventory, "--results-dir", args.results_dir]
    argv += ["--hosts", args.host] if args.host else []
    parsed = parser.parse_args(argv)
    parsed.argv = argv
    return parsed


def main(args, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    problems = _problems(args)
    if problems:
        print("\n".join(problems), file=err)
        return EXIT_BAD_INPUT
    args.campaign = args.campaign or f"{EXPERIMENT}-{time.strftime('%Y%m%d-%H%M%S')}"
    code = run.main(_run_args(args), out, err)
    if code != EXIT_OK:
        return code
    directory = Path(args.results_dir).resolve() / args.campaign
    try:
        result = analyse(directory, args.effect, args.seconds, args.inject)
    except ValueError as exc:
        print(f"platbench calibrate: {exc}", file=err)
        return 1
    _keep(directory, result)
    print("\n".join(describe(result)), file=out)
    if args.harness_pairs:
        result[HARNESS_KEY] = harness(args, out, err)
        _keep(directory, result)
        print("\n".join(f"  {line}" for line in harness_lines(result[HARNESS_KEY])), file=out)
    return EXIT_OK


def _keep(directory, result):
    """The calibration into its campaign's run.json."""
    run_file = directory / "run.json"
    document = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else {}
    document[RUN_KEY] = result
    write_json(str(run_file), document)


def _harness_run_args(args, campaign):
    """The `platbench run` of the harness check: the smoke experiment's size answer, one duet pair a round."""
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    argv = [
        direct_duet.EXPERIMENT,
        "--size",
        direct_duet.SIZE,
        "--campaign",
        campaign,
        "--repeats",
        str(args.harness_pairs),
    ]
    return _parsed_run_args(parser, args, argv)


def harness(args, out, err):
    """The harness check (calibration.harness_check) of this machine's lab: ``--harness-pairs`` pairs through
    platbench, then as many launched directly; or why it could not be made (calibration.harness_not_checked). The
    direct pairs run here, on the machine that runs this command: the check is of a lab whose runner it is."""
    try:
        sides = direct_duet.prepare()
    except direct_duet.DirectDuetError as exc:
        return harness_not_checked(str(exc))
    campaign = args.campaign + HARNESS_SUFFIX
    code = run.main(_harness_run_args(args, campaign), out, err)
    directory = Path(args.results_dir).resolve() / campaign
    if code != EXIT_OK:
        return harness_not_checked(
            f"the harness campaign {campaign} ended with exit status {code}: its cells' errors are in {directory}"
        )
    try:
        through, through_sides = campaign_pairs(directory)
        direct = direct_duet.run_pairs(args.harness_pairs, sides)
    except (ValueError, direct_duet.DirectDuetError) as exc:
        return harness_not_checked(str(exc))
    pairs = [(pair[direct_duet.PLATFORM], pair[direct_duet.BASELINE]) for pair in direct]
    cpus = [pair["cpus"][direct_duet.PLATFORM] for pair in direct]
    return {"campaign": campaign, **harness_check(through, pairs, through_sides, cpus)}
