"""Benchmark (not a test): the noise floor of a platbench measurement on this host.

Runs the smoke experiment's pinned bare-metal cell (bm/SCALEUP/pin/cpu, the highest-numbered
CPUs, exactly the experiment's workload parameters) REPEATS times as separate processes and
prints each throughput, the mean, the standard deviation and the coefficient of variation (CV).
With --long-steps N it alternates every run with the same cell timed over N steps, which shows
how much of the noise a longer measurement averages away on this host.
Target on a quiet machine: CV <= 2%. A gap between platforms smaller than this is noise.

    python benchmarks/noise.py [--experiment smoke] [--scaleup 2] [--repeats 10] [--long-steps 2000]
"""

import argparse
import os
import statistics
import sys

from _runs import REPO_ROOT, run_workload  # first: it puts the repository and its collection on the path
from ansible_collections.platbench.lab.plugins.filter.experiments import workload_argv
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import load_experiment


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="smoke")
    parser.add_argument("--scaleup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--long-steps", type=int, default=0, help="also time the cell over this many steps")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    experiment = load_experiment(os.path.join(REPO_ROOT, "experiments"), args.experiment)
    params = {key: value for key, value in experiment["params"].items() if not isinstance(value, list)}
    cpus = sorted(os.sched_getaffinity(0))[-args.scaleup :]
    # The GEMM peak is not part of the noise: --peak-gflops 0 skips it.
    argv = workload_argv(params, experiment["workload"]) + ["--threads", str(args.scaleup), "--peak-gflops", "0"]
    variants = {f"{params.get('steps')} steps (as the experiment)": argv}
    if args.long_steps:
        variants[f"{args.long_steps} steps"] = argv + ["--steps", str(args.long_steps)]
    values = {name: [] for name in variants}
    for repeat in range(args.repeats):
        for name, variant in variants.items():
            values[name].append(run_workload(variant, cpus=cpus)["metrics"]["throughput"])
            print(f"repeat {repeat}, {name}: {values[name][-1]:.1f}", flush=True)
    cpu_list = ",".join(map(str, cpus))
    print(f"\n{args.experiment} bm/{args.scaleup}/pin/cpu on CPUs {cpu_list}, {args.repeats} runs each:")
    for name, runs in values.items():
        center, spread = statistics.fmean(runs), statistics.stdev(runs)
        print(f"  {name}: throughput {center:.1f} ± {spread:.1f} images/sec, CV {100 * spread / center:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
