"""Benchmark (not a test): the resolving power of platbench on this host, per schedule, with known answers.

Runs campaigns of experiments/calibrate.yml through `platbench run` on the lab (bm, one pinned core, a tiny CNN
whose timed part lasts --cell-seconds), four cells a round: two seeds as they are (A and A', the A/A pair) and the
same two with the known overhead injected (B, of A's seed: the A/B pair): by default a discard of ``effect`` of the
timed steps (trained, timed, left out of the throughput: exact under every schedule), with ``--inject spin`` a spin
after each step (exact beside nothing; beside a duet partner it read 0.90-0.92 for 5% here), with ``--inject
cpu_quota`` a quota of 1 - effect of the core (what a quota costs this host's job). Each campaign runs one schedule:

- ``sequential``: the cells in the plan's fixed order round after round, compared unpaired (Welch's t), as
  platbench compared every campaign before rounds;
- ``rounds``: each round shuffled, each platform's cell paired with its baseline's of the same round (Student's t
  on the log-ratios);
- ``duet``: each compared cell beside its baseline's copy, at the same time, on the host's two cores, which swap
  every round, paired by duet pair. The pair rule pairs a cell with its baseline's, so the A/A pair is A beside A
  with a placebo injected (``discard: 0``, the same code path leaving nothing out; ``spin: 0`` likewise; with
  ``--inject cpu_quota``, a quota of its whole core, which a job pinned to that core never reaches), not a second
  seed; B is beside A. One seed, two pairs a round.

For each campaign it reads, after every round, the A/B interval's half-width against the campaign's time so far,
and at its end whether the A/B interval found the injected overhead (it excludes 1 and holds 1 - effect) and whether
the A/A interval saw a difference where there is none. It prints, side by side:

- per schedule, the half-width reached after 1, 2, ... minutes of campaign (mean over its campaigns), and the
  minimum detectable effect of a 10-minute campaign (95% confidence, 80% power, platbench/calibration.py);
- the detection count (A/B found) and the A/A false-positive count.

Targets (issue 38): a minimum detectable effect of at most 3% at 10 minutes for the best schedule; a 5% cap found in
5 of 5 campaigns of at most 10 minutes; A/A significant in at most 1 of 10. Measure on a quiet machine.

    python benchmarks/power.py [--schedules sequential,rounds,duet] [--campaigns 5 | sequential=2,rounds=2,duet=5]
                               [--rounds 8] [--effect 0.05] [--inject discard|spin|cpu_quota] [--cell-seconds 10]
                               [--results-dir /tmp/platbench-power]

``--campaigns`` gives every schedule the same count, or each its own (the detection count wants 5 campaigns of the
best schedule; the others' half-width per minute needs fewer).

Cells of 10 s: in short tries here a duet pair's log-ratio spread fell from 6-7% with 3 s windows to 3.6% with
10 s ones, more than the longer rounds cost.
"""

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
from _runs import REPO_ROOT  # first: it puts the repository and its collection on the path
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject

from platbench import cli
from platbench.calibration import (
    DEFAULT_KNOB,
    KNOBS,
    SEED,
    SEEDS,
    detectable_effect,
    inject_setting,
    injected_entry,
    injected_label,
)
from platbench.report.load import SAMPLE_TIME, load_samples, measured
from platbench.report.stats import paired_ratio_interval, ratio_interval

SCHEDULES = ("sequential", "rounds", "duet")
# duet's A/A: an injection that changes nothing, which the pair rule pairs with A (module docstring).
PLACEBO = {"discard": {"discard": 0}, "spin": {"spin": 0}, "cpu_quota": {"cpu_quota": 1.0}}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--campaigns", default="5", help="campaigns per schedule: N, or schedule=N,... (each its own)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds per campaign")
    parser.add_argument("--effect", type=float, default=0.05)
    parser.add_argument("--inject", choices=KNOBS, default=DEFAULT_KNOB, help="how the A/B overhead is made")
    parser.add_argument("--cell-seconds", type=float, default=10.0, help="each cell's timed part (steps: auto)")
    parser.add_argument("--results-dir", default="/tmp/platbench-power")
    parser.add_argument("--inventory", default=str(Path(REPO_ROOT) / "inventories" / "local"))
    return parser.parse_args(argv)


def cells(directory, effect, knob):
    """{name: [(round, value, time), ...]} of the campaign's throughput samples: A, A' (the second seed) and B."""
    frame = measured(load_samples(directory))
    frame = frame[frame["metric"] == "throughput"]
    found = {}
    injected = injected_label(knob, effect)
    for name, label, seed in (("A", "none", SEEDS[0]), ("A'", "none", SEEDS[1]), ("B", injected, SEEDS[0])):
        picked = frame[(frame["inject"].astype(str) == label) & (frame[SEED].astype(str) == str(seed))]
        found[name] = sorted(
            (int(row["repeat"]), float(row["value"]), float(row[SAMPLE_TIME])) for _, row in picked.iterrows()
        )
    return found


def duet_pairs(directory, effect, knob):
    """{"ab": [(round, B, A beside it, B's CPU set, time)], "aa": [(round, A under the placebo, A beside it, its CPU
    set, time)]} of a duet campaign, from its pairs (the duet_pair label both sides carry; the set: duet_side)."""
    frame = measured(load_samples(directory))
    frame = frame[frame["metric"] == "throughput"]
    found = {}
    for name, label in (("ab", injected_label(knob, effect)), ("aa", inject.label_of(PLACEBO[knob]))):
        leads = frame[frame["inject"].astype(str) == label]
        pairs = []
        for _, lead in leads.iterrows():
            partner = frame[(frame["duet_pair"] == lead["duet_pair"]) & (frame["inject"].astype(str) == "none")]
            if len(partner) == 1:
                baseline = partner.iloc[0]
                stamp = max(float(lead[SAMPLE_TIME]), float(baseline[SAMPLE_TIME]))
                side = None if pd.isna(lead.get("duet_side")) else int(lead["duet_side"])
                pairs.append((int(lead["repeat"]), float(lead["value"]), float(baseline["value"]), side, stamp))
        found[name] = sorted(pairs)
    return found


def sides_of(pairs):
    """The CPU set of each pair's lead (duet_pairs' fourth field), which the report blocks on; None if one lacks it."""
    sides = [side for _, _, _, side, _ in pairs]
    return None if None in sides else sides


def duet_figures(directory, effect, knob):
    """campaign_figures for a duet campaign: the A/B half-width after each round, its A/B and A/A verdicts."""
    found = duet_pairs(directory, effect, knob)
    ab, aa = found["ab"], found["aa"]
    start = min(stamp for *_, stamp in ab + aa)
    widths = []
    for last in range(1, max((number for number, *_ in ab), default=0) + 1):
        upto = [pair for pair in ab if pair[0] <= last]
        got = paired_ratio_interval([(mine, theirs) for _, mine, theirs, _, _ in upto], sides=sides_of(upto))
        if got is None:
            continue
        minutes = (max(stamp for number, *_, stamp in ab + aa if number <= last) - start) / 60.0
        widths.append((minutes, (got[2] - got[1]) / 2.0))
    ab_interval = paired_ratio_interval([(mine, theirs) for _, mine, theirs, _, _ in ab], sides=sides_of(ab))
    aa_interval = paired_ratio_interval([(mine, theirs) for _, mine, theirs, _, _ in aa], sides=sides_of(aa))
    logs = [math.log(mine / theirs) for _, mine, theirs, _, _ in aa]
    return {
        "widths": widths,
        "found": ab_interval is not None and ab_interval[2] < 1.0 and ab_interval[1] <= 1.0 - effect <= ab_interval[2],
        "ab": ab_interval,
        "aa_significant": aa_interval is not None and not aa_interval[1] <= 1.0 <= aa_interval[2],
        "aa": aa_interval,
        "spread": statistics.stdev(logs) if len(logs) >= 2 else None,
        "unpaired_spread": None,
        "minutes": widths[-1][0] if widths else None,
    }


def interval(schedule, mine, theirs):
    """(estimate, low, high) of mine / theirs over the rounds both have: paired for rounds, Welch otherwise."""
    by_round = {number: value for number, value, _ in theirs}
    if schedule == "rounds":
        pairs = [(value, by_round[number]) for number, value, _ in mine if number in by_round]
        return paired_ratio_interval(pairs)
    values, baseline = [value for _, value, _ in mine], [value for _, value, _ in theirs]
    bounds = ratio_interval(values, baseline)
    return None if bounds is None else (statistics.fmean(values) / statistics.fmean(baseline), *bounds)


def campaign_figures(schedule, directory, effect, knob):
    """The campaign's half-width after each round (with its minutes so far), and its final A/B and A/A verdicts."""
    found = cells(directory, effect, knob)
    a, a_prime, b = found["A"], found["A'"], found["B"]
    start = min(stamp for _, _, stamp in a + a_prime + b)
    widths = []
    for last in range(1, len(a)):
        upto = lambda series, last=last: [cell for cell in series if cell[0] <= last]  # noqa: E731
        got = interval(schedule, upto(b), upto(a))
        if got is None:
            continue
        minutes = (max(stamp for _, _, stamp in upto(a) + upto(a_prime) + upto(b)) - start) / 60.0
        widths.append((minutes, (got[2] - got[1]) / 2.0))
    ab, aa = interval(schedule, b, a), interval(schedule, a_prime, a)
    by_round = {number: value for number, value, _ in a}
    logs = [math.log(value / by_round[number]) for number, value, _ in a_prime if number in by_round]
    return {
        "widths": widths,
        "found": ab is not None and ab[2] < 1.0 and ab[1] <= 1.0 - effect <= ab[2],
        "ab": ab,
        "aa_significant": aa is not None and not aa[1] <= 1.0 <= aa[2],
        "aa": aa,
        "spread": statistics.stdev(logs) if len(logs) >= 2 else None,
        # What an unpaired comparison sees: A's spread across the rounds (the host's drift included).
        "unpaired_spread": statistics.stdev(math.log(value) for _, value, _ in a) if len(a) >= 2 else None,
        "minutes": widths[-1][0] if widths else None,
    }


def unpaired_detectable_effect(spread, rounds):
    """The smallest difference Welch's comparison of two platforms over ``rounds`` cells each detects at 95%
    confidence with 80% power, from one side's spread of log values: exp((t_.975 + t_.80) * s * sqrt(2 / n)) - 1."""
    from scipy import stats

    if spread is None or rounds is None or rounds < 2:
        return None
    df = 2 * rounds - 2
    return math.expm1((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * spread * math.sqrt(2.0 / rounds))


def run_campaign(args, schedule, index):
    campaign = f"power-{schedule}-{index}-{time.strftime('%H%M%S')}"
    injected = [injected_entry(args.inject, args.effect)]
    if schedule == "duet":  # A/B and the placebo A/A as pairs beside A, one seed (module docstring)
        injected.append(PLACEBO[args.inject])
    argv = [
        "run",
        "calibrate",
        "--campaign",
        campaign,
        "--results-dir",
        args.results_dir,
        "--inventory",
        args.inventory,
        "--repeats",
        str(args.rounds),
        "--set",
        f"schedule={schedule}",
        "--set",
        f"inject={inject_setting(*injected)}",
        "--set",
        f"params.auto_seconds={args.cell_seconds}",
    ]
    if schedule == "duet":
        argv += ["--set", f"params.seed={SEEDS[0]}"]
    code = cli.main(argv)
    if code != 0:
        raise SystemExit(f"platbench {' '.join(argv)} exited {code}")
    return Path(args.results_dir) / campaign


def campaign_counts(text, schedules):
    """{schedule: campaigns} from ``--campaigns``: one count for all (``5``) or one each (``rounds=2,duet=5``; a
    schedule left out runs none)."""
    if "=" not in text:
        return dict.fromkeys(schedules, int(text))
    counts = {name.strip(): int(count) for name, _, count in (part.partition("=") for part in text.split(","))}
    unknown = set(counts) - set(schedules)
    if unknown:
        raise SystemExit(
            f"--campaigns {text}: {', '.join(sorted(unknown))} not among --schedules {','.join(schedules)}"
        )
    return {schedule: counts.get(schedule, 0) for schedule in schedules}


def main(argv=None):
    args = parse_args(argv)
    schedules = [name.strip() for name in args.schedules.split(",") if name.strip()]
    counts = campaign_counts(args.campaigns, schedules)
    figures = {schedule: [] for schedule in schedules if counts[schedule]}
    for index in range(max(counts.values(), default=0)):
        for schedule in [name for name in figures if index < counts[name]]:  # alternating: drift spreads over all
            directory = run_campaign(args, schedule, index)
            figures[schedule].append(
                duet_figures(directory, args.effect, args.inject)
                if schedule == "duet"
                else campaign_figures(schedule, directory, args.effect, args.inject)
            )
            last = figures[schedule][-1]
            print(
                f"{schedule} #{index}: A/B {last['ab'][0]:.3f} [{last['ab'][1]:.3f}, {last['ab'][2]:.3f}] "
                f"{'found' if last['found'] else 'not found'}; A/A [{last['aa'][1]:.3f}, {last['aa'][2]:.3f}] "
                f"{'SIGNIFICANT' if last['aa_significant'] else 'not significant'}; {last['minutes']:.1f} min",
                flush=True,
            )
    planned = ", ".join(f"{schedule} {count}" for schedule, count in counts.items() if count)
    print(f"\nresolving power, campaigns ({planned}) x {args.rounds} rounds, effect {args.effect} ({args.inject}):")
    print("schedule    minutes  half-width (mean)  MDE at 10 min  A/B found  A/A significant")
    for schedule, runs in figures.items():
        pace = statistics.fmean(run["minutes"] / max(len(run["widths"]), 1) for run in runs)  # minutes a round
        pairs_in_ten = max(2, math.floor(10.0 / pace)) if pace > 0 else None
        if schedule in ("rounds", "duet"):
            spreads = [run["spread"] for run in runs if run["spread"] is not None]
            mde = detectable_effect(statistics.fmean(spreads), pairs_in_ten) if spreads and pairs_in_ten else None
        else:
            spreads = [run["unpaired_spread"] for run in runs if run["unpaired_spread"] is not None]
            mde = unpaired_detectable_effect(statistics.fmean(spreads), pairs_in_ten) if spreads else None
        found = sum(run["found"] for run in runs)
        significant = sum(run["aa_significant"] for run in runs)
        for minute in range(1, int(max(run["minutes"] for run in runs)) + 1):
            reached = [next((w for m, w in reversed(run["widths"]) if m <= minute), None) for run in runs]
            reached = [width for width in reached if width is not None]
            if reached:
                print(f"{schedule:<10}  {minute:>7}  ±{statistics.fmean(reached):>15.1%}")
        print(
            f"{schedule:<10}  {'all':>7}  {'':>16}  {('n/a' if mde is None else f'{mde:.1%}'):>13}  "
            f"{found}/{len(runs):<8} {significant}/{len(runs)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
