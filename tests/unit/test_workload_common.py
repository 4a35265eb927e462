"""workloads.common: cpusets, the result record, timing and the environment probe."""

import json
import math
import os
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests import skips
from workloads.common import (
    RESULT_PREFIX,
    emit_record,
    format_cpuset,
    metric,
    parse_cpuset,
    probe_environment,
    process_elapsed,
    set_thread_env,
    step_time_metrics,
)

# Acts on the host where a live lab would see it or suffer from it: a platbench-test cgroup of the host's. `make test`
# runs it first, before the lab is up (marker `host`, docs/src/tests.md).
pytestmark = pytest.mark.host

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_python(code, **kwargs):
    """Runs code in a fresh interpreter that imports workloads like the hosts do."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True, **kwargs
    )


@pytest.mark.parametrize(
    "cpus, text",
    [([], ""), ([0], "0"), ([0, 1], "0-1"), ([0, 2, 3], "0,2-3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([63], "63")],
)
def test_cpuset_format_and_parse_are_inverse(cpus, text):
    assert format_cpuset(cpus) == text
    assert parse_cpuset(text) == cpus


def test_cpuset_round_trips_random_sets():
    rng = random.Random(7)
    for _ in range(200):
        cpus = sorted(rng.sample(range(128), rng.randint(0, 40)))
        assert parse_cpuset(format_cpuset(cpus)) == cpus


def test_cpuset_accepts_kernel_file_content_and_normalizes():
    assert parse_cpuset("3,0-1,1\n") == [0, 1, 3]
    assert format_cpuset({5, 4, 6}) == "4-6"


@pytest.mark.parametrize("text", ["3-1", "a", "-1", "0-"])
def test_parse_cpuset_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_cpuset(text)


def test_emit_record_prints_one_parsable_line(capsys):
    before = time.time()
    emit_record("cnn_train", {"model": "tiny"}, [metric("throughput", 41.7, "images/sec")], {"cpuset": "0-1"})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(RESULT_PREFIX)
    record = json.loads(lines[0][len(RESULT_PREFIX) :])
    assert record == {
        "schema": 1,
        "workload": "cnn_train",
        "status": "ok",
        "error": None,
        "timestamp": record["timestamp"],
        "labels": {"model": "tiny"},
        "metrics": [{"metric": "throughput", "value": 41.7, "unit": "images/sec"}],
        "metadata": {"cpuset": "0-1"},
    }
    assert before <= record["timestamp"] <= time.time()


def test_emit_record_failed_run(capsys):
    emit_record("cnn_train", {}, [], {}, status="failed", error="MemoryError: too big")
    record = json.loads(capsys.readouterr().out.removeprefix(RESULT_PREFIX))
    assert (record["status"], record["error"], record["metrics"]) == ("failed", "MemoryError: too big", [])


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_emit_record_rejects_non_finite_metrics_and_prints_nothing(capsys, value):
    with pytest.raises(ValueError, match="not finite"):
        emit_record("cnn_train", {}, [metric("loss_last", value, "loss")], {})
    assert capsys.readouterr().out == ""


def test_emit_record_rejects_non_finite_anywhere(capsys):
    with pytest.raises(ValueError):
        emit_record("cnn_train", {}, [], {"step_times": [0.1, math.nan]})
    with pytest.raises(TypeError):
        emit_record("cnn_train", {}, [metric("throughput", "fast", "images/sec")], {})
    with pytest.raises(ValueError):
        emit_record("cnn_train", {}, [], {}, status="maybe")
    assert capsys.readouterr().out == ""


def test_step_time_metrics_match_numpy():
    times = [0.5, 0.1, 0.3, 0.2, 0.9, 0.4]
    values = {entry["metric"]: entry["value"] for entry in step_time_metrics(times)}
    assert values == pytest.approx(
        {
            "step_time_mean": np.mean(times),
            "step_time_std": np.std(times),
            "step_time_p50": np.percentile(times, 50),
            "step_time_p90": np.percentile(times, 90),
            "step_time_min": 0.1,
            "step_time_max": 0.9,
        }
    )
    assert {entry["unit"] for entry in step_time_metrics(times)} == {"s"}


def test_set_thread_env(monkeypatch):
    names = ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"]
    for name in names + ["TF_NUM_INTEROP_THREADS"]:
        monkeypatch.delenv(name, raising=False)  # restored after the test
    set_thread_env(3)
    assert [os.environ[name] for name in names] == ["3"] * 4
    assert os.environ["TF_NUM_INTEROP_THREADS"] == "1"


def test_importing_common_loads_no_framework():
    loaded = run_python(
        "import sys, workloads.common; print([m for m in ('tensorflow', 'torch', 'numpy') if m in sys.modules])"
    )
    assert loaded.stdout.strip() == "[]"


def test_process_elapsed_counts_from_launch():
    launched = time.monotonic()
    child = run_python("import time; time.sleep(0.3); from workloads.common import process_elapsed as e; print(e())")
    wall = time.monotonic() - launched
    # /proc clocks tick in 10 ms steps.
    assert 0.3 <= float(child.stdout) <= wall + 0.02
    assert process_elapsed() > 0


def test_probe_reports_the_real_process():
    env = probe_environment()
    allowed = os.sched_getaffinity(0)
    assert env["cpuset"] == format_cpuset(allowed)
    assert env["cpus_allowed_count"] == len(allowed)
    assert env["hostname"] == socket.gethostname()
    assert env["kernel"] == os.uname().release
    assert env["pid"] == os.getpid()
    assert env["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert env["virt"] in {
        "docker",
        "podman",
        "container-other",
        "kvm",
        "qemu",
        "vmware",
        "xen",
        "hyperv",
        "vm-other",
        "none",
    }
    assert set(env["cpu_flags_of_interest"]) <= {"avx2", "avx512f", "amx_tile", "amx_bf16", "vmx", "svm", "hypervisor"}
    assert env["container_id"] is None or re.fullmatch(r"[0-9a-f]{64}", env["container_id"])
    assert env["cgroup_cpuset"] is None or set(allowed) <= set(parse_cpuset(env["cgroup_cpuset"]))
    assert env["memory_limit_bytes"] is None or env["memory_limit_bytes"] > 0
    assert env["numa_nodes"] is None or env["numa_nodes"] >= 1
    json.dumps(env, allow_nan=False)


def test_probe_sees_a_narrowed_affinity():
    cpu = min(os.sched_getaffinity(0))
    child = run_python(
        f"import os, json; os.sched_setaffinity(0, {{{cpu}}}); from workloads.common import probe_environment as p;"
        " e = p(); print(json.dumps([e['cpuset'], e['cpus_allowed_count']]))"
    )
    assert json.loads(child.stdout) == [str(cpu), 1]


CGROUP_V1 = Path("/sys/fs/cgroup")


def cgroup_v2_root():
    """The mount point of the unified hierarchy (cgroup v2) when it holds the cpu and memory controllers."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        if tail.split()[0] == "cgroup2":
            mount = Path(fields.split()[4])
            if {"cpu", "memory"} <= set((mount / "cgroup.controllers").read_text().split()):
                return mount
    return None


def limit_cgroups(name):
    """{cgroup directory: {file: value}} of a CPU quota of 1.5 cores and a 1 GiB memory limit, in the
    hierarchy this machine mounts: cgroup v1's cpu and memory, or else cgroup v2 (a child of its root)."""
    if (CGROUP_V1 / "cpu/cpu.cfs_quota_us").exists() and (CGROUP_V1 / "memory").is_dir():
        return {
            CGROUP_V1 / "cpu" / name: {"cpu.cfs_quota_us": "150000"},
            CGROUP_V1 / "memory" / name: {"memory.limit_in_bytes": str(1 << 30)},
        }
    root = cgroup_v2_root()
    assert root is not None, "this machine mounts neither cgroup v1's cpu and memory nor cgroup v2 with both"
    return {root / name: {"cpu.max": "150000 100000", "memory.max": str(1 << 30)}}


@skips.needs_root("a test cgroup is made and the probe's process moved into it")
def test_probe_reads_the_cgroup_limits():
    directories = limit_cgroups(f"platbench-test-{os.getpid()}")
    for directory in directories:
        directory.mkdir()
    try:
        for directory, files in directories.items():
            for name, value in files.items():
                (directory / name).write_text(value)
        # Writing 0 to cgroup.procs moves the writing process itself.
        moves = "".join(f"open('{directory}/cgroup.procs', 'w').write('0'); " for directory in directories)
        child = run_python(
            moves + "import json; from workloads.common import probe_environment as p; e = p();"
            " print(json.dumps([e['cgroup_cpu_quota'], e['memory_limit_bytes']]))"
        )
    finally:
        for directory in directories:
            directory.rmdir()
    assert json.loads(child.stdout) == [1.5, 1 << 30]
