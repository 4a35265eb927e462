"""Running a workload as the hosts run it (`python -m workloads.NAME` in a subprocess), for the tests."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import skips
from workloads.common.record import parse_result_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
FIRST_CPU = min(os.sched_getaffinity(0))
# The GEMM peak cache of these runs starts empty and stays out of the user's ~/.cache.
ENV = {
    **os.environ,
    "PYTHONPATH": str(REPO_ROOT),
    "PLATBENCH_CACHE_DIR": tempfile.mkdtemp(prefix="platbench-test-cache-"),
}
FRAMEWORKS = [
    pytest.param(name, marks=skips.requires(modules=[module]))
    for name, module in [("tensorflow", "tensorflow"), ("torch", "torch")]
]


def records_of(stdout):
    """Every result record a workload printed, validated against the record schema."""
    return parse_result_lines(stdout)


def run_module(workload, *args, one_cpu=False, timeout=300, env=None):
    """(completed process, result records on stdout); one_cpu pins it like `taskset -c N` does; ``env`` adds to the
    workload's environment."""
    command = [sys.executable, "-m", f"workloads.{workload}", *map(str, args)]
    if one_cpu:
        command = ["taskset", "-c", str(FIRST_CPU), *command]
    process = subprocess.run(
        command, cwd=REPO_ROOT, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    return process, records_of(process.stdout)


def only_record(process, records):
    assert len(records) == 1, process.stdout + process.stderr
    return records[0]


def metric_values(record):
    return {entry["metric"]: entry["value"] for entry in record["metrics"]}
