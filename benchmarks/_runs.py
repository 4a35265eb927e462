"""What the benchmarks share: run a workload as its own process and read its record."""

import importlib
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Scripts here run as `python benchmarks/NAME.py`: the workloads package is found from the repo root.
sys.path.insert(0, REPO_ROOT)
parse_result_lines = importlib.import_module("workloads.common.record").parse_result_lines
importlib.import_module("platbench")  # puts the platbench.lab collection on the import path (noise.py reads it)


def run_workload(argv, cpus=None, timeout=3600):
    """The record of ``python ARGV`` (pinned to ``cpus`` when given): dict with ``metrics`` as
    {name: value}; raises RuntimeError with the output's tail when the run leaves no ok record."""
    command = [sys.executable, *argv]
    if cpus:
        command = ["taskset", "-c", ",".join(map(str, cpus)), *command]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    for record in parse_result_lines(done.stdout):
        if record["status"] == "ok":
            record["metrics"] = {entry["metric"]: entry["value"] for entry in record["metrics"]}
            return record
        raise RuntimeError(f"{' '.join(argv)}: {record['error']}")
    raise RuntimeError(f"{' '.join(argv)} left no record (exit {done.returncode}):\n{done.stderr[-3000:]}")
