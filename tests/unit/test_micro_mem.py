"""workloads.micro_mem: the pointer chase's cycle and timing, STREAM from a saved real hpcc output, the sizes
against the instance's memory, and the workload run as the hosts run it (`python -m workloads.micro_mem`)."""

import argparse
from pathlib import Path

import numpy as np
import pytest
from workload_run import only_record, run_module

from tests import skips
from workloads.common import chase, hpcc
from workloads.common.harness import WorkloadFailed
from workloads.common.metric_table import METRICS
from workloads.micro_mem import cli

DATA = Path(__file__).parent / "data"
GIB = 1 << 30
needs_hpcc = skips.needs_lab("hpcc")


def environment(total_gib, limit_gib=None):
    limit = None if limit_gib is None else int(limit_gib * GIB)
    return {"memory_total_bytes": int(total_gib * GIB), "memory_limit_bytes": limit}


def test_the_chain_visits_every_cache_line_once_before_it_comes_back():
    lines = 1000
    chain = chase._line_chain(lines, 7)
    assert chain.dtype == np.int64 and len(chain) == lines * chase.INDEXES_PER_LINE
    visited, index = [], 0
    for _ in range(lines):
        visited.append(index)
        index = int(chain[index])
    assert index == 0, "one cycle: back at the start after exactly `lines` loads"
    assert sorted(visited) == [line * chase.INDEXES_PER_LINE for line in range(lines)]
    # Random, not a stride: the gaps between consecutive loads take many values.
    assert len({(b - a) % len(chain) for a, b in zip(visited, visited[1:], strict=False)}) > lines // 2


def test_the_chase_returns_where_the_chain_ends_and_times_every_pass():
    chase.compile_kernels()
    chain = chase._line_chain(64, 0)
    assert chase._chase(chain, 0, 64) == 0
    result = chase.measure(1, timed_steps=1 << 16, passes=3)
    assert result.working_set_mb == 1 and len(result.passes_ns) == 3 and result.steps_per_pass == 1 << 16
    assert 0 < min(result.passes_ns) <= result.ns_per_load <= max(result.passes_ns)


def test_a_slow_chase_stops_after_its_time_budget_with_at_least_one_pass():
    result = chase.measure(1, timed_steps=1 << 16, passes=5, budget=0.0)
    assert len(result.passes_ns) == 1


def test_stream_figures_come_from_the_single_stream_lines_of_a_real_output():
    # The real output of test_micro_cpu: 3 arrays of 3,000,000 doubles (HPL's largest N was 3000).
    output = hpcc.parse_output((DATA / "hpccoutf_2n.txt").read_text())
    assert {entry["metric"]: entry["value"] for entry in hpcc.stream_metrics(output)} == {
        "stream_copy": 29.6317,
        "stream_scale": 25.4767,
        "stream_add": 26.8644,
        "stream_triad": 26.346,
    }


def test_the_stream_size_defaults_to_8000_or_what_fits():
    assert cli.resolve_stream_n(None, environment(24)) == 8000
    assert cli.resolve_stream_n(None, environment(24, limit_gib=0.25)) == 4000
    assert cli.resolve_stream_n(0, environment(24)) == 0
    with pytest.raises(WorkloadFailed, match=r"--stream-n 50000 needs 20.0 GB .* pick N <= 4000"):
        cli.resolve_stream_n(50000, environment(24, limit_gib=0.25))


def test_a_working_set_larger_than_half_the_memory_is_refused_with_what_fits():
    cli.check_working_sets([1, 1024], environment(24))
    with pytest.raises(WorkloadFailed, match=r"--chase-mb 4096 needs 4.3 GB, .* pick sizes <= 1024 MiB"):
        cli.check_working_sets([1, 4096], environment(24, limit_gib=2))


@pytest.mark.parametrize("value", ["1,x", "0", "-1", "1,,2"])
def test_working_sets_must_be_positive_integers(value):
    with pytest.raises(argparse.ArgumentTypeError, match="positive sizes in MiB"):
        cli.working_sets(value)
    assert cli.working_sets("16,1") == [16, 1]
    with pytest.raises(argparse.ArgumentTypeError, match="each value once"):
        cli.working_sets("16,1,16")


def test_a_non_number_working_set_is_a_usage_error_before_anything_runs():
    process, records = run_module("micro_mem", "--chase-mb", "1,lots")
    assert (process.returncode, records) == (2, [])
    assert "argument --chase-mb: expected comma-separated positive sizes in MiB" in process.stderr


def test_a_huge_stream_size_fails_at_run_start_with_what_fits():
    process, records = run_module("micro_mem", "--stream-n", "10000000", "--chase-mb", "1", "--threads", 1)
    record = only_record(process, records)
    assert (process.returncode, record["status"], record["metrics"]) == (1, "failed", [])
    assert record["error"].startswith("--stream-n 10000000 needs 800000.0 GB for its matrix")


def check_latencies(record, sizes):
    latencies = [entry for entry in record["metrics"] if entry["metric"] == "mem_latency"]
    assert [entry["labels"] for entry in latencies] == [{"working_set_mb": size} for size in sizes]
    assert all(entry["unit"] == "ns" and 0 < entry["value"] < 10_000 for entry in latencies)
    chase_metadata = record["metadata"]["chase"]
    assert chase_metadata["threads"] == 1 and chase_metadata["compile_seconds"] > 0
    assert [entry["working_set_mb"] for entry in chase_metadata["working_sets"]] == sizes


def test_latency_only_runs_without_hpcc():
    process, records = run_module("micro_mem", "--stream-n", "0", "--chase-mb", "1,4", "--threads", 1)
    record = only_record(process, records)
    assert (process.returncode, record["status"]) == (0, "ok"), process.stderr
    assert record["labels"] == {"workload": "micro_mem", "threads": 1}
    assert {entry["metric"] for entry in record["metrics"]} == {"mem_latency", "elapsed"}
    check_latencies(record, [1, 4])
    assert record["metadata"]["stream_n"] == 0 and "tool_versions" not in record["metadata"]


@needs_hpcc
def test_a_real_run_reports_stream_from_hpcc_and_the_latency_per_working_set():
    process, records = run_module("micro_mem", "--stream-n", "1000", "--chase-mb", "1,4", "--threads", 2)
    record = only_record(process, records)
    assert (process.returncode, record["status"]) == (0, "ok"), process.stderr
    for entry in record["metrics"]:
        assert entry["metric"] in METRICS and entry["unit"] == METRICS[entry["metric"]].unit
    values = {entry["metric"]: entry["value"] for entry in record["metrics"] if "labels" not in entry}
    assert all(values[f"stream_{kernel}"] > 0 for kernel in ("copy", "scale", "add", "triad"))
    check_latencies(record, [1, 4])
    metadata = record["metadata"]
    assert metadata["stream_n"] == 1000 and metadata["hpcc_summary"]["STREAM_VectorSize"] == "333333"
    assert metadata["blas"] and metadata["tool_versions"]["hpcc"]


def test_check_args_checks_what_is_static_and_leaves_the_memory_to_the_instance():
    process, records = run_module("micro_mem", "--check-args", "--stream-n", "10000000", "--chase-mb", "999999")
    assert (process.returncode, process.stdout, process.stderr, records) == (0, "", "", [])
    process, _ = run_module("micro_mem", "--check-args", "--stream-n", "-1")
    assert process.returncode == 2 and "argument --stream-n: expected a non-negative integer" in process.stderr
