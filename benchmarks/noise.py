"""Benchmark (not a test): the noise floor of a platbench measurement on this host.

Runs the smoke experiment's pinned bare-metal cell (bm/SCALEUP/pin/cpu, the highest-numbered
CPUs, exactly the experiment's workload parameters) REPEATS times as separate processes and
prints each throughput, the mean, the standard deviation and the coefficient of variation.
Target on a quiet machine: CV <= 2%. A gap between platforms smaller than this is noise.

    python benchmarks/noise.py [--experiment smoke] [--scaleup 2] [--repeats 10]
"""

import argparse
import os
import statistics
import sys

import platbench  # noqa: F401  (puts the platbench.lab collection on the import path)
from _runs import REPO_ROOT, run_workload

from ansible_collections.platbench.lab.plugins.module_utils.matrix import load_experiment


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="smoke")
    parser.add_argument("--scaleup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    experiment = load_experiment(os.path.join(REPO_ROOT, "experiments"), args.experiment)
    params = {key: value for key, value in experiment["params"].items() if not isinstance(value, list)}
    cpus = sorted(os.sched_getaffinity(0))[-args.scaleup:]
    argv = ["-m", f"workloads.{experiment['workload']}", "--threads", str(args.scaleup)]
    for key, value in params.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    values = []
    for repeat in range(args.repeats):
        values.append(run_workload(argv, cpus=cpus)["metrics"]["throughput"])
        print(f"repeat {repeat}: {values[-1]:.1f}", flush=True)
    center, spread = statistics.fmean(values), statistics.stdev(values)
    print(f"\n{args.experiment} bm/{args.scaleup}/pin/cpu on CPUs {','.join(map(str, cpus))}, {args.repeats} runs: "
          f"throughput {center:.1f} ± {spread:.1f} images/sec, CV {100 * spread / center:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
