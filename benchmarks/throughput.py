"""Benchmark (not a test): cnn_train's training speed against the machine's matrix-multiply peak.

In one run it prints
- the fp32 GEMM peak each framework reaches on the scenario's threads (what MFU divides by);
- images/sec, model FLOPs per image and MFU of cnn_train's TensorFlow and PyTorch backends for
  resnet50, inception3 and alexnet, each as its own process, the combinations taken in turn
  for every repeat so that drift of the host spreads over all of them;
- the harness tax: cnn_train's loop against a minimal hand-written one (benchmarks/harness_tax.py).

    python benchmarks/throughput.py [--threads 2] [--repeats 3] [--steps 20] [--warmup-steps 5]
                                    [--models resnet50,inception3,alexnet] [--frameworks tensorflow,torch]

The issue's target: TensorFlow resnet50 fp32 at >= 0.60 MFU on 2 threads.
"""

import argparse
import os
import statistics
import subprocess
import sys

from _runs import REPO_ROOT, run_workload

# Batch per model: big enough to keep 2 cores busy, small enough for a benchmark of minutes.
BATCH = {"resnet50": 8, "inception3": 8, "alexnet": 64}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--models", default="resnet50,inception3,alexnet")
    parser.add_argument("--frameworks", default="tensorflow,torch")
    parser.add_argument("--no-harness-tax", action="store_true", help="skip the harness-tax comparison")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))[-args.threads :]
    combos = [(framework, model) for model in args.models.split(",") for framework in args.frameworks.split(",")]
    runs = {combo: [] for combo in combos}
    for repeat in range(args.repeats):
        for framework, model in combos:
            record = run_workload(
                [
                    "-m",
                    "workloads.cnn_train",
                    "--framework",
                    framework,
                    "--model",
                    model,
                    "--batch-size",
                    str(BATCH.get(model, 8)),
                    "--threads",
                    str(args.threads),
                    "--steps",
                    str(args.steps),
                    "--warmup-steps",
                    str(args.warmup_steps),
                ],
                cpus=cpus,
            )
            runs[framework, model].append(record)
            metrics = record["metrics"]
            print(
                f"repeat {repeat} {framework:10} {model:10} {metrics['throughput']:8.2f} images/sec"
                f"  MFU {metrics['mfu']:.3f}",
                file=sys.stderr,
                flush=True,
            )

    print(
        f"\ncnn_train on CPUs {','.join(map(str, cpus))} ({args.threads} threads), fp32, synthetic data, "
        f"{args.steps} timed steps, median of {args.repeats} alternating repeats"
    )
    for framework in args.frameworks.split(","):
        peaks = [
            record["metrics"]["peak_flops"]
            for (fw, _), records in runs.items()
            if fw == framework
            for record in records
        ]
        print(f"GEMM peak ({framework}): {statistics.median(peaks):.1f} GFLOP/s")
    # A shared host slows down for seconds at a time; the median step shows the speed the
    # code reaches when nothing else runs, beside the records' mean over all timed steps.
    print(
        f"\n{'framework':10} {'model':10} {'batch':>5} {'images/sec':>11} {'GFLOP/image':>12} "
        f"{'GFLOP/s':>8} {'MFU':>6} {'median step: images/sec':>24} {'MFU':>6}"
    )
    for (framework, model), records in runs.items():
        metrics = [record["metrics"] for record in records]

        def median(name, metrics=metrics):
            return statistics.median(entry[name] for entry in metrics)

        batch = BATCH.get(model, 8)
        at_median_step = statistics.median(batch / entry["step_time_p50"] for entry in metrics)
        mfu_at_median_step = statistics.median(
            batch / entry["step_time_p50"] * entry["model_flops"] / entry["peak_flops"] for entry in metrics
        )
        print(
            f"{framework:10} {model:10} {batch:5d} {median('throughput'):11.2f} "
            f"{median('model_flops'):12.2f} {median('achieved_flops'):8.1f} {median('mfu'):6.3f} "
            f"{at_median_step:24.2f} {mfu_at_median_step:6.3f}"
        )
    if not args.no_harness_tax:
        print("\nharness tax (tiny model, 1 thread):", flush=True)
        subprocess.run(
            [
                sys.executable,
                os.path.join(REPO_ROOT, "benchmarks", "harness_tax.py"),
                "--repeats",
                "6",
                "--steps",
                "40",
            ],
            check=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
