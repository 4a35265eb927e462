"""Benchmark (not a test): how `platbench index`, `report` and `history` grow with a campaign's size.

Writes synthetic campaigns of 100, 1,000 and 10,000 cells with the real record shape (each cell 17 metrics of
cnn_train, each line carrying the cell's labels and its metadata: environment, runtime, host state, and the name of the
file that holds its step times, data waits and losses, as a smoke cell writes), then times, each in a process of its own
with its peak memory (the child's maximum resident set):

- `platbench report` from samples.jsonl alone: the full report, figures and report.html drawn (the campaign's first),
  then the text report (a report of the campaign unchanged: the tables, the figures left as drawn);
- `platbench index` (Parquet beside the campaign, the campaign added to a DuckDB store);
- `platbench report` again, now reading the Parquet files: `--figures` (everything drawn again), then `--no-figures`;
- `platbench history` over --history-campaigns campaigns of --history-cells cells each, indexed into one store.

Goals (issue 41): at 10,000 cells, report in at most 5 s with at most 1 GB; history over 100 campaigns in at most
2 s. Issue 52: a 100-cell text report in at most 1.5 s, a 10,000-cell one (from Parquet) in at most 3 s and 1 GB.
Run it on a quiet machine; the sizes' times are comparable within one run only.

    python benchmarks/report_scale.py [--sizes 100,1000,10000] [--history-campaigns 100] [--history-cells 16]
                                      [--work-dir DIR] [--keep]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = {"bm": 1.0, "cn": 0.99, "gv": 0.8, "lx": 0.98}  # each one's speed against bm, for plausible ratios
METRICS = [
    ("throughput", "images/sec"),
    ("startup", "s"),
    ("step_time_mean", "s"),
    ("step_time_std", "s"),
    ("step_time_p50", "s"),
    ("step_time_p90", "s"),
    ("step_time_min", "s"),
    ("step_time_max", "s"),
    ("data_load", "s"),
    ("data_first_batch", "s"),
    ("loss_first", "loss"),
    ("loss_last", "loss"),
    ("elapsed", "s"),
    ("model_flops", "GFLOP/sample"),
    ("achieved_flops", "GFLOP/s"),
    ("peak_flops", "GFLOP/s"),
    ("mfu", "ratio"),
]
STEPS = 100


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="cells per campaign, comma-separated")
    parser.add_argument("--history-campaigns", type=int, default=100)
    parser.add_argument("--history-cells", type=int, default=16, help="cells of each campaign history reads")
    parser.add_argument("--work-dir", help="where the campaigns are written (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="leave the campaigns written")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",")]
    return args


def cell_lines(campaign, number, started, rng):
    """The 17 samples of one synthetic cell, as JSON lines shaped as a real smoke cell's."""
    platforms = list(PLATFORMS)
    platform = platforms[number % len(platforms)]
    scaleup = 1 + (number // len(platforms)) % 2
    cpu_config = ("pin", "vnl")[(number // (2 * len(platforms))) % 2]
    repeat = number // (4 * len(platforms))
    scenario = f"{platform}/{scaleup}/{cpu_config}/cpu"
    labels = {
        "framework": "tensorflow",
        "model": "tiny",
        "batch_size": 32,
        "image_size": 32,
        "data": "synthetic",
        "warmup_steps": 5,
        "steps": STEPS,
        "experiment": "smoke",
        "workload": "cnn_train",
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": cpu_config,
        "processor": "cpu",
        "mode": "single",
        "repeat": repeat,
        "scenario": scenario,
        "cell": f"{scenario}|r{repeat}",
        "schedule": "rounds",
        "host": "localhost",
        "campaign": campaign,
        "dtype": "float32",
        "threads": scaleup,
    }
    step = 0.003 / PLATFORMS[platform] / scaleup * rng.uniform(0.95, 1.05)
    step_times = [round(step * rng.uniform(0.9, 1.1), 6) for _ in range(STEPS)]
    launched = started + number * 12.0
    metadata = {
        "host": "localhost",
        "kernel": "6.1.0-28-amd64",
        "os": "Debian 12.11",
        "cpu_model": "AMD EPYC",
        "cpu_count": 2,
        "numa_nodes": 1,
        "gpu_count": 0,
        "docker_version": "20.10.24+dfsg1",
        "ansible_version": "2.19.14",
        "launcher": "taskset",
        "rc": 0,
        "cpu_flags_of_interest": ["avx2", "avx512f"],
        "cpuset": "1" if scaleup == 1 else "0-1",
        "cgroup_cpu_quota": None if cpu_config == "pin" else scaleup * 100000,
        "memory_total_bytes": 25276510208,
        "python_version": "3.11.2",
        "pid": 10000 + number,
        "optimizer": {"name": "sgd", "learning_rate": 0.01, "momentum": 0.9},
        "seed": 0,
        "launched_at": launched,
        "timed_seconds": round(sum(step_times), 6),
        "timed_steps": STEPS,
        "host_state": {"window": "timed part", "seconds": round(sum(step_times), 3), "steal_percent": 0.0},
        "framework_version": "2.21.0",
        "model_params": 38088,
        "device": "/CPU:0",
        # The per-step figures are in a file of the cell's folder (records/outcome.py series_files), not here.
        "series_file": f"files/{scenario.replace('/', '_')}_r{repeat}-{number:08x}/series-1.json",
        "peak_gemm_best_gflops": 243.772,
    }
    losses = [round(6.94 - 0.01 * index * rng.uniform(0.9, 1.1), 6) for index in range(STEPS)]
    throughput = 32 / (sum(step_times) / STEPS)
    values = {
        "throughput": throughput,
        "elapsed": sum(step_times) + 2.0,
        "step_time_mean": sum(step_times) / STEPS,
        "loss_first": losses[0],
        "loss_last": losses[-1],
    }
    return [
        json.dumps(
            {
                "metric": metric,
                "value": values.get(metric, rng.uniform(0.001, 1.0)),
                "unit": unit,
                "timestamp": launched + 11.0,
                "labels": labels,
                "metadata": metadata,
            }
        )
        for metric, unit in METRICS
    ]


def write_campaign(directory, campaign, cells, started, seed):
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "samples.jsonl").open("w", encoding="utf-8") as handle:
        for number in range(cells):
            handle.write("\n".join(cell_lines(campaign, number, started, rng)) + "\n")
    return (directory / "samples.jsonl").stat().st_size


def timed(*argv):
    """``(seconds, peak resident MB)`` of ``python -m platbench ARGV`` in a process of its own; exits on failure."""
    environment = {**os.environ, "MPLBACKEND": "Agg"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "platbench", *argv],
        cwd=REPO_ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    errors = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"platbench {' '.join(argv)} failed:\n{errors}")
    return seconds, usage.ru_maxrss / 1024


def main(argv=None):
    args = parse_args(argv)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="platbench-scale-"))
    started = time.time() - 86400
    rows = []
    try:
        for cells in args.sizes:
            directory = work / f"scale-{cells}"
            size = write_campaign(directory, directory.name, cells, started, seed=cells)
            store = work / f"scale-{cells}.duckdb"
            what = f"{cells} cells"
            steps = [
                ("full report (samples.jsonl)", ("report", str(directory))),
                ("text report (samples.jsonl)", ("report", str(directory))),  # the campaign as the figures show it
                ("index", ("index", str(directory), "--store", str(store))),
                ("full report (Parquet)", ("report", str(directory), "--figures")),
                ("text report (Parquet)", ("report", str(directory), "--no-figures")),
            ]
            for step, command in steps:
                rows.append((what, step, size, *timed(*command)))
                print(*_line(rows[-1]), sep="\n", flush=True)
        history_root = work / "history"
        for number in range(args.history_campaigns):
            name = f"history-{number:03d}"
            write_campaign(history_root / name, name, args.history_cells, started + number * 3600, seed=number)
        store = history_root / "platbench.duckdb"
        campaigns = sorted(str(path) for path in history_root.iterdir() if path.is_dir())
        size = sum((Path(path) / "samples.jsonl").stat().st_size for path in campaigns)
        what = f"{len(campaigns)} campaigns of {args.history_cells} cells"
        rows.append((what, "index", size, *timed("index", *campaigns, "--store", str(store))))
        print(*_line(rows[-1]), sep="\n", flush=True)
        page = str(history_root / "history.html")
        rows.append((what, "history", size, *timed("history", "--store", str(store), "--html", page)))
        print(*_line(rows[-1]), sep="\n", flush=True)
    finally:
        if not args.keep and not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("| size | step | samples.jsonl (MB) | seconds | peak memory (MB) |")
    print("|---|---|---:|---:|---:|")
    for what, step, size, seconds, memory in rows:
        print(f"| {what} | {step} | {size / 1e6:.1f} | {seconds:.2f} | {memory:.0f} |")
    return 0


def _line(row):
    what, step, size, seconds, memory = row
    return [f"{what:<28} {step:<22} {size / 1e6:9.1f} MB  {seconds:8.2f} s  {memory:7.0f} MB peak"]


if __name__ == "__main__":
    sys.exit(main())
