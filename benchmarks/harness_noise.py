"""Benchmark (not a test): does platbench's harness disturb the duet pairs it measures?

`make lab`'s answer is cn beside bm in duet pairs (experiments/smoke.yml, size answer). This alternates, ROUNDS
times, a platbench campaign of PAIRS such pairs (`platbench run smoke --size answer --repeats PAIRS`, read back as the
report compares it: report_tables.comparison) with PAIRS pairs of the same workload launched directly, with no
orchestration (platbench/direct_duet.py), and prints a row a round: platbench's cn/bm with its 95% interval and the
log spread of its pairs (the standard deviation of their log-ratios), the same of the direct pairs, the difference of
the two ratios and the spread ratio. Then the verdicts against the targets:

- platbench's cn/bm within ±1.5% of the direct pairs' in every round;
- platbench's log spread at most 1.5 times the direct one (each side's rounds pooled, each round around its own mean).

Measured before the harness was quiet: through platbench 1.09-1.15, its pairs spread some 10%; direct 1.011-1.013,
spread 1-2%. It takes about 2 x ROUNDS x PAIRS x 30 s on a 2-core host (some 20 minutes by default), needs root, Docker
and the lab built by site.yml, and nothing else of platbench may run beside it: it refuses to start while an
ansible-playbook or another `platbench` runs. The table also goes to --output as JSON.

    python benchmarks/harness_noise.py [--rounds 3] [--pairs 6] [--output harness-noise.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as `python benchmarks/harness_noise.py`: the platbench package is found from the repository root.
sys.path.insert(0, str(REPO_ROOT))

from platbench import direct_duet, run  # noqa: E402 - after the path it is found on
from platbench.calibration import campaign_pairs, pooled_spread  # noqa: E402

RATIO_TOLERANCE = 0.015  # platbench's cn/bm within ±1.5% of the direct pairs'
SPREAD_LIMIT = 1.5  # platbench's log spread at most 1.5 x the direct pairs'
# The lab's workload venv: a bm cell of platbench still running is platbench running.
WORKLOAD_PYTHON = "/opt/platbench/venv/bin/python"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="platbench campaigns, and as many direct runs")
    parser.add_argument("--pairs", type=int, default=6, help="duet pairs of each campaign and each direct run")
    parser.add_argument("--inventory", "-i", default=str(run.INVENTORY), help="the lab's inventory")
    parser.add_argument("--results-dir", default=str(run.RESULTS), help="where the campaigns are written")
    parser.add_argument("--output", help="write the table, the pairs and the verdicts to this JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.pairs < 2:
        parser.error("give --rounds 1 or more and --pairs 2 or more (a paired interval needs two pairs)")
    return args


def is_platbench(argv):
    """Whether a command line (its words) is platbench's: ansible-playbook, the ``platbench`` command, ``python -m
    platbench[.module]``, or a workload of the lab's venv."""
    names = [os.path.basename(word) for word in argv]
    modules = [argv[index + 1] for index, word in enumerate(argv[:-1]) if word == "-m"]
    return (
        "ansible-playbook" in names
        or (bool(names) and names[0] == "platbench")
        or any(module == "platbench" or module.startswith("platbench.") for module in modules)
        or WORKLOAD_PYTHON in argv
    )


def others_running(me=None, proc="/proc"):
    """``[(pid, command line)]`` of platbench's processes (``is_platbench``) running beside this one: the benchmark's
    numbers mean nothing beside them."""
    me = os.getpid() if me is None else me
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            argv = [word.decode(errors="replace") for word in Path(proc, entry, "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue  # gone meanwhile
        argv = [word for word in argv if word]
        if is_platbench(argv):
            found.append((int(entry), " ".join(argv)))
    return found


def round_row(number, through, through_sides, direct):
    """One round's row: platbench's pairs (``through``, (cn, bm) values, and the CPU set cn ran on in each) and the
    direct pairs' results (direct_duet.run_pairs), summarized alike (direct_duet.summary)."""
    mine = direct_duet.summary(through, through_sides)
    known = direct_duet.summary_of(direct)
    spread, known_spread = mine["log_spread"], known["log_spread"]
    return {
        "round": number,
        "platbench": {**mine, "values": [list(pair) for pair in through]},
        "direct": {**known, "values": [[pair["cn"], pair["bm"]] for pair in direct]},
        "difference": mine["estimate"] / known["estimate"] - 1.0,
        "spread_ratio": spread / known_spread if spread is not None and known_spread else None,
    }


def verdicts(rows):
    """The targets' verdicts over the rounds: ``{"ratio": {...}, "spread": {...}}``, each with ``met``."""
    worst = max((row["difference"] for row in rows), key=abs)
    through = pooled_spread(*(row["platbench"]["values"] for row in rows))
    known = pooled_spread(*(row["direct"]["values"] for row in rows))
    ratio = through / known if through is not None and known else None
    return {
        "ratio": {"target": RATIO_TOLERANCE, "worst_difference": worst, "met": abs(worst) <= RATIO_TOLERANCE},
        "spread": {
            "target": SPREAD_LIMIT,
            "platbench_pooled": through,
            "direct_pooled": known,
            "ratio": ratio,
            "met": ratio is not None and ratio <= SPREAD_LIMIT,
        },
    }


def _ratio(found):
    interval = found["interval"]
    return f"{found['estimate']:.4f} [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else f"{found['estimate']:.4f}"


def _percent(value):
    return "n/a" if value is None else f"{value:.2%}"


def row_line(row):
    """One round's line of the table."""
    spread_ratio = "n/a" if row["spread_ratio"] is None else f"{row['spread_ratio']:.2f}"
    return (
        f"{row['round']:>5}  {_ratio(row['platbench']):<27} {_percent(row['platbench']['log_spread']):>7}  "
        f"{_ratio(row['direct']):<27} {_percent(row['direct']['log_spread']):>7}  "
        f"{row['difference']:>+10.2%}  {spread_ratio:>8}"
    )


HEADER = (
    f"{'round':>5}  {'platbench cn/bm':<27} {'spread':>7}  {'direct cn/bm':<27} {'spread':>7}  {'difference':>10}  "
    f"{'spread x':>8}"
)


def table_lines(rows, judged):
    """The table and the verdicts, as printed."""
    lines = [HEADER, *(row_line(row) for row in rows)]
    ratio, spread = judged["ratio"], judged["spread"]
    lines.append(
        f"ratio: platbench's cn/bm within ±{ratio['target']:.1%} of the direct pairs' every round (worst "
        f"{ratio['worst_difference']:+.2%}): {'met' if ratio['met'] else 'NOT met'}"
    )
    times = "n/a" if spread["ratio"] is None else f"x{spread['ratio']:.2f}"
    lines.append(
        f"spread: platbench's log spread at most x{spread['target']:g} the direct pairs' (pooled: "
        f"{_percent(spread['platbench_pooled'])} against {_percent(spread['direct_pooled'])}, {times}): "
        f"{'met' if spread['met'] else 'NOT met'}"
    )
    return lines


def platbench_pairs(args, campaign):
    """Run a platbench campaign of ``args.pairs`` smoke-answer pairs as its own process, and read its pairs."""
    argv = [sys.executable, "-m", "platbench", "run", direct_duet.EXPERIMENT, "--size", direct_duet.SIZE]
    argv += ["--campaign", campaign, "--repeats", str(args.pairs), "--inventory", args.inventory]
    argv += ["--results-dir", args.results_dir]
    done = subprocess.run(argv, cwd=REPO_ROOT, check=False)  # its progress on our terminal
    directory = Path(args.results_dir).resolve() / campaign
    if done.returncode != 0:
        raise RuntimeError(f"platbench run of {campaign} ended with exit status {done.returncode}; see {directory}")
    return campaign_pairs(directory)


def main(argv=None):
    args = parse_args(argv)
    others = others_running()
    if others:
        listed = "; ".join(f"pid {pid}: {line[:120]}" for pid, line in others)
        print(
            f"harness_noise: platbench or Ansible runs beside this benchmark ({listed}): wait for it", file=sys.stderr
        )
        return 2
    try:
        sides = direct_duet.prepare()
    except direct_duet.DirectDuetError as exc:
        print(f"harness_noise: {exc}", file=sys.stderr)
        return 2
    # A SIGTERM ends a direct pair under way as a Ctrl-C does: its sides killed, its container and cgroup removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for number in range(1, args.rounds + 1):
        campaign = f"harness-noise-{stamp}-{number}"
        try:
            through, through_sides = platbench_pairs(args, campaign)
            direct = direct_duet.run_pairs(
                args.pairs, sides, on_pair=lambda result: print(direct_duet.pair_line(result), flush=True)
            )
        except (RuntimeError, ValueError) as exc:  # DirectDuetError is a RuntimeError
            print(f"harness_noise: round {number}: {exc}", file=sys.stderr)
            return 1
        rows.append({**round_row(number, through, through_sides, direct), "campaign": campaign})
        print(f"{HEADER}\n{row_line(rows[-1])}", flush=True)
    judged = verdicts(rows)
    print("\n" + "\n".join(table_lines(rows, judged)))
    if args.output:
        document = {"rounds": rows, "verdicts": judged, "pairs": args.pairs}
        Path(args.output).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if judged["ratio"]["met"] and judged["spread"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
