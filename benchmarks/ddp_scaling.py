"""Benchmark (not a test): how DistributedDataParallel scales on bare metal over loopback.

For each model it times, alternately, (1) one PyTorch process (`--mode single`) on one core and
(2) two DDP ranks (`--mode distributed --launch-local 2`: two torchrun nodes meeting at a c10d
rendezvous on 127.0.0.1, gloo all-reduce), each rank pinned by the launcher to its own core, both
at the same threads per rank. It prints each throughput (images/sec, the record's own: global for
the ranks) and the ratio of the 2-rank throughput to twice the 1-rank one. Target: >= 0.9.

    python benchmarks/ddp_scaling.py [--cpus 0,1] [--models tiny,resnet50] [--threads 1]
                                     [--steps 20] [--warmup-steps 3] [--repeats 1]
"""

import argparse
import os
import statistics
import sys

from _runs import run_workload

# Small enough that ResNet-50 finishes in a few minutes on 2 cores; its gradients (25.6 M floats,
# 100 MB a step) still dwarf the tiny CNN's 38 k, so the two bracket how much the all-reduce costs.
# Each step must be long next to the all-reduce: with one core a rank, gloo's sends cannot overlap the
# backward pass. At 32 images (tiny) and 64 px (ResNet-50) a step is 7 ms and 0.55 s, and 2 ranks gave
# 0.78 and 0.81 of twice one rank on an Intel Xeon; at these shapes 0.91 and 0.92.
MODEL_SHAPES = {"tiny": ("32", "256"), "resnet50": ("128", "16")}  # image size, batch size per rank
TARGET = 0.9


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", help="two CPUs, one per rank (default: the first two this process may use)")
    parser.add_argument("--models", default="tiny,resnet50", help=f"comma-separated, from {', '.join(MODEL_SHAPES)}")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank, and of the single process")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="alternating (1 rank, 2 ranks) pairs per model")
    args = parser.parse_args(argv)
    allowed = sorted(os.sched_getaffinity(0))
    args.cpus = [int(cpu) for cpu in args.cpus.split(",")] if args.cpus else allowed[:2]
    if len(args.cpus) != 2 or not set(args.cpus) <= set(allowed):
        parser.error(f"--cpus must name two CPUs this process may use ({allowed}), got {args.cpus}")
    args.models = args.models.split(",")
    unknown = sorted(set(args.models) - set(MODEL_SHAPES))
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(MODEL_SHAPES)}")
    return args


def _common(bench, model):
    image_size, batch_size = MODEL_SHAPES[model]
    return [
        *("-m", "workloads.cnn_train", "--framework", "torch", "--model", model),
        *("--image-size", image_size, "--batch-size", batch_size, "--threads", str(bench.threads)),
        *("--steps", str(bench.steps), "--warmup-steps", str(bench.warmup_steps), "--peak-gflops", "0"),
    ]


def measure(bench, model):
    """(1-rank throughputs, 2-rank throughputs, each 2-rank run's rank cpusets) over the repeats."""
    one, two, cpusets = [], [], []
    for _ in range(bench.repeats):
        single = run_workload(_common(bench, model), cpus=bench.cpus[:1])
        one.append(single["metrics"]["throughput"])
        ranks = run_workload([*_common(bench, model), "--mode", "distributed", "--launch-local", "2"], cpus=bench.cpus)
        per_rank = ranks["metadata"]["per_rank"]
        cpusets.append([figures["cpuset"] for figures in per_rank])
        if len(set(cpusets[-1])) != 2:
            raise RuntimeError(f"the two ranks were not pinned to different CPUs: {cpusets[-1]}")
        two.append(ranks["metrics"]["throughput"])
    return one, two, cpusets


def main(argv=None):
    bench = parse_args(argv)
    print(f"CPUs {bench.cpus}, {bench.threads} thread(s) per rank, {bench.steps} timed steps, {bench.repeats} pair(s)")
    verdicts = []
    for model in bench.models:
        one, two, cpusets = measure(bench, model)
        ratio = statistics.median(two) / (2 * statistics.median(one))
        verdicts.append(ratio >= TARGET)
        image_size, batch_size = MODEL_SHAPES[model]
        print(f"{model} ({image_size} px, batch {batch_size} per rank), ranks on CPUs {cpusets[0]}")
        print(f"  1 rank        : {statistics.median(one):9.1f} images/sec (median of {len(one)})")
        print(f"  2 ranks (DDP) : {statistics.median(two):9.1f} images/sec (median of {len(two)}, global)")
        print(f"  2 ranks / (2 x 1 rank): {ratio:.3f}  (target >= {TARGET}: {'met' if ratio >= TARGET else 'missed'})")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
