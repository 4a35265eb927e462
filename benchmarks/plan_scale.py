"""Benchmark (not a test): how long planning a campaign takes as it grows, as `platbench run` plans it.

Writes an experiment of N cells (five platforms of the runner host, two scale-ups, pinned and vanilla CPUs, shuffled
rounds; the repeats make up the count) to a scratch folder, then times in a process of its own, --repeats times per
size: the interpreter starting, the planner's imports, `plan_experiment` (load, validate, check the workload's
parameters, expand the matrix, order the rounds) and the plan file written, as `platbench run` does before it starts
the playbook. It prints the median and the range of the whole, and of the planning alone (imports left out).

Goal (issue 52): a 1,000-cell campaign planned in at most 2 s. Run it on a quiet machine; figures compare within one
run only.

    python benchmarks/plan_scale.py [--sizes 100,1000,10000] [--repeats 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL_S = 2.0  # a 1,000-cell campaign, issue 52
PLATFORMS = ["bm", "cn", "pd", "gv", "lx"]
SCALEUPS = [1, 2]
CPU_CONFIGS = ["pin", "vnl"]
# What the child runs: the same calls as platbench run's planning (platbench/run.py), timed from inside too.
CHILD = """
import json, sys, time
started = time.perf_counter()
import platbench  # noqa: F401 - puts the platbench.lab collection on the import path
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
imported = time.perf_counter()
plan, _ = plan_experiment(sys.argv[1], "scale", campaign="scale")
plan_file.write(sys.argv[2], plan, "scale")
done = time.perf_counter()
print(json.dumps({"cells": len(plan["cells"]), "import_s": imported - started, "plan_s": done - imported}))
"""


def experiment(cells):
    """An experiment of ``cells`` cells (rounded up to whole rounds of its scenarios)."""
    scenarios = len(PLATFORMS) * len(SCALEUPS) * len(CPU_CONFIGS)
    return {
        "name": "scale",
        "description": "planning benchmark: a matrix of the runner host's platforms, repeated",
        "workload": "cnn_train",
        "platforms": PLATFORMS,
        "scaleup": SCALEUPS,
        "cpu_config": CPU_CONFIGS,
        "processor": ["cpu"],
        "mode": "single",
        "schedule": "rounds",
        "repeats": -(-cells // scenarios),
        "params": {"framework": "tensorflow", "model": "tiny", "batch_size": 32, "image_size": 32, "steps": 10},
    }


def time_planning(folder, size, repeats):
    """Per repeat, ``(whole seconds, planning seconds, cells)`` of a child process planning ``size`` cells."""
    with open(os.path.join(folder, "scale.yml"), "w", encoding="utf-8") as stream:
        yaml.safe_dump(experiment(size), stream, sort_keys=False)
    runs = []
    for _ in range(repeats):
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, folder, os.path.join(folder, "plan.json")],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        whole = time.perf_counter() - began
        if done.returncode != 0:
            sys.exit(f"planning {size} cells failed:\n{done.stderr[-3000:]}")
        child = json.loads(done.stdout.strip().splitlines()[-1])
        runs.append((whole, child["plan_s"], child["cells"]))
    return runs


def spread(values):
    return f"{statistics.median(values):6.2f} s [{min(values):.2f}, {max(values):.2f}]"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="cells per campaign, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="processes timed per size")
    args = parser.parse_args(argv)
    print(f"| cells | whole process, median [min, max] of {args.repeats} | planning alone (no imports) |")
    print("|---|---|---|")
    verdict = None
    with tempfile.TemporaryDirectory(prefix="platbench-plan-scale-") as folder:
        for size in (int(text) for text in args.sizes.split(",")):
            runs = time_planning(folder, size, args.repeats)
            wholes, plans, cells = [run[0] for run in runs], [run[1] for run in runs], runs[0][2]
            print(f"| {cells} | {spread(wholes)} | {spread(plans)} |")
            if size == 1000:
                verdict = statistics.median(wholes) <= GOAL_S
    if verdict is not None:
        print(f"goal: a 1,000-cell campaign planned in at most {GOAL_S:.0f} s: {'met' if verdict else 'NOT met'}")


if __name__ == "__main__":
    main()
