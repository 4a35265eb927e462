"""Benchmark (not a test): what the orchestration costs per cell, beside the workload's own time.

Runs a campaign of short cells (``--steps 1`` by default: the workload does next to nothing) through
playbooks/experiment.yml on the lab, then reads the overhead the results callback recorded for each cell
in the campaign's run.json (``overhead``: from the runner host deciding to run the cell to the workload's
launch, and from its exit to the samples synced to disk) and prints, per platform kind, the median and
the 90th percentile of each part and of their sum. Target: at most 1 s per bm/cn cell.

    python benchmarks/orchestration.py [--experiment smoke] [--platforms bm,cn] [--repeats 3] [--steps 1]
                                       [--inventory inventories/local]
    python benchmarks/orchestration.py --campaign-dir results/NAME     # read a finished campaign only
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = 1.0  # per bm/cn cell, issue 27
PARTS = ("before_launch_s", "after_exit_s")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="smoke")
    parser.add_argument("--platforms", default="bm,cn", help="comma-separated, from the experiment's platforms")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1, help="training steps per cell (params.steps)")
    parser.add_argument("--inventory", default=os.path.join(REPO_ROOT, "inventories", "local"))
    parser.add_argument("--campaign-dir", help="report the overhead of this campaign's run.json; run nothing")
    return parser.parse_args(argv)


def run_campaign(args):
    """Run the short campaign; its results directory."""
    campaign = f"orchestration-{time.strftime('%Y%m%d-%H%M%S')}"
    overrides = {
        "platforms": args.platforms.split(","),
        "repeats": args.repeats,
        "params": {"steps": args.steps, "warmup_steps": 0},
    }
    argv = [
        "ansible-playbook",
        "-i",
        args.inventory,
        os.path.join(REPO_ROOT, "playbooks", "experiment.yml"),
        "-e",
        f"experiment={args.experiment}",
        "-e",
        f"campaign={campaign}",
        "-e",
        json.dumps({"experiment_overrides": overrides}),
    ]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"))
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the campaign failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return os.path.join(REPO_ROOT, "results", campaign)


def percentile(values, fraction):
    """The nearest-rank percentile of ``values`` (at least one)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


def by_kind(overhead):
    """{kind: {part: [seconds...]}} with ``total_s`` per cell where both parts are known."""
    kinds = {}
    for entry in overhead.values():
        parts = kinds.setdefault(entry.get("kind") or "?", {part: [] for part in (*PARTS, "total_s")})
        known = [entry.get(part) for part in PARTS]
        for part, value in zip(PARTS, known, strict=True):
            if value is not None:
                parts[part].append(value)
        if None not in known:
            parts["total_s"].append(sum(known))
    return kinds


def table(overhead):
    lines = [f"{'kind':<14}{'cells':>6}" + "".join(f"{part:>22}" for part in (*PARTS, "total_s"))]
    for kind, parts in sorted(by_kind(overhead).items()):
        row = f"{kind:<14}{len(parts['after_exit_s']):>6}"
        for part in (*PARTS, "total_s"):
            values = parts[part]
            cell = f"{statistics.median(values):.2f} / {percentile(values, 0.9):.2f}" if values else "-"
            row += f"{cell:>22}"
        lines.append(row)
    lines.append(f"(median / p90 seconds per cell; target: total at most {TARGET_S:g} s per bm/cn cell)")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    results_dir = args.campaign_dir or run_campaign(args)
    with open(os.path.join(results_dir, "run.json"), encoding="utf-8") as stream:
        run = json.load(stream)
    overhead = dict(run.get("overhead") or {})
    for resume in run.get("resumes", []):
        overhead.update(resume.get("overhead") or {})
    if not overhead:
        sys.exit(f"{results_dir}/run.json records no overhead: no cell of this campaign left a record")
    print(f"campaign {os.path.basename(results_dir)}: {len(overhead)} cells")
    print(table(overhead))
    return 0


if __name__ == "__main__":
    sys.exit(main())
