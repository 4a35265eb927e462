"""cnn_train --mode ps|distributed: a parameter server and workers as real processes on 127.0.0.1."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workload_run import metric_values, records_of

from tests import skips
from workloads.cnn_train.cluster.addresses import AddressError, format_host_list, parse_host_list
from workloads.cnn_train.devices import partition, visible_gpus

REPO_ROOT = Path(__file__).resolve().parents[2]
CPUS = sorted(os.sched_getaffinity(0))
needs_tf = skips.requires(modules=["tensorflow"])
needs_torch = skips.requires(modules=["torch"])
needs_two_cpus = pytest.mark.usefixtures("two_cpus")
TINY = ["--model", "tiny", "--image-size", "32", "--batch-size", "8", "--net-timeout", "60"]


@pytest.fixture
def two_cpus():
    assert len(CPUS) >= 2, (
        f"one worker per CPU needs two CPUs; this process may use {CPUS} only: run the tests on a machine "
        "(or under a CPU affinity) with at least two CPUs"
    )


def command(*args):
    return [sys.executable, "-m", "workloads.cnn_train", *map(str, args)]


def popen(*args):
    return subprocess.Popen(
        command(*args), cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def run(*args, timeout=300):
    """(process, records) of one cnn_train command."""
    process = subprocess.run(command(*args), cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
    return process, records_of(process.stdout)


def gone(pid):
    """True once `pid` has exited and been reaped (it is no longer in the process table, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# ------------------------------------------------------------------------------- addresses


def test_host_lists_parse():
    assert parse_host_list("127.0.0.1:2222") == [("127.0.0.1", 2222)]
    assert parse_host_list("127.0.0.1:2222, node-2.lab:65535,[::1]:1") == [
        ("127.0.0.1", 2222),
        ("node-2.lab", 65535),
        ("::1", 1),
    ]
    assert format_host_list(parse_host_list("a:1,[::1]:2")) == "a:1,[::1]:2"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty entry"),
        ("127.0.0.1", "not host:port"),
        (":2222", "not host:port"),
        ("127.0.0.1:0", "from 1 to 65535"),
        ("127.0.0.1:65536", "from 1 to 65535"),
        ("127.0.0.1:http", "from 1 to 65535"),
        ("a:1,,b:2", "empty entry"),
        ("a:1,a:1", "listed twice"),
        ("bad host:1", "not a host name"),
        ("[nope]:1", "not an IPv6 address"),
    ],
)
def test_bad_host_lists_are_rejected(text, reason):
    with pytest.raises(AddressError, match=reason) as caught:
        parse_host_list(text)
    assert "expected a comma-separated list of host:port" in str(caught.value)


BAD_CLUSTERS = [
    (["--ps-hosts", "127.0.0.1", "--worker-hosts", "127.0.0.1:2"], ["argument --ps-hosts", "host:port", "'127.0.0.1'"]),
    (["--ps-hosts", "127.0.0.1:1", "--worker-hosts", "x:1;y:2"], ["argument --worker-hosts", "host:port"]),
    (["--ps-hosts", "127.0.0.1:1", "--worker-hosts", "x:99999"], ["argument --worker-hosts", "1 to 65535"]),
    (["--ps-hosts", "a:1,b:2", "--worker-hosts", "x:1"], ["exactly one parameter server"]),
    (["--worker-hosts", "x:1"], ["--role worker needs --ps-hosts"]),
    (["--ps-hosts", "a:1", "--worker-hosts", "x:1", "--task-index", "1"], ["--task-index 1 is out of range"]),
]


@pytest.mark.parametrize("args, expected", BAD_CLUSTERS, ids=[" ".join(args) for args, _ in BAD_CLUSTERS])
def test_bad_cluster_options_exit_2(args, expected):
    process, records = run("--model", "tiny", "--mode", "distributed", "--role", "worker", *args)
    assert (process.returncode, records) == (2, [])
    for text in expected:
        assert text in process.stderr


BAD_MODES = [
    (["--mode", "distributed"], ["--role ps|worker|chief", "--launch-local"]),
    (["--role", "ps", "--ps-hosts", "a:1", "--worker-hosts", "b:1"], ["need --mode ps or --mode distributed"]),
    (["--mode", "ps", "--cpu-workers", str(len(CPUS) + 1)], [f"this process may use {len(CPUS)} CPU(s)"]),
    (["--mode", "distributed", "--launch-local", "--num-workers", str(len(CPUS) + 1)], ["need a CPU each"]),
    (["--mode", "ps", "--num-gpus", str(len(visible_gpus()) + 1)], [f"only {len(visible_gpus())} GPU(s) visible"]),
    (["--num-gpus", str(len(visible_gpus()) + 1)], ["GPU(s) visible"]),
    (["--mode", "ps", "--launch-local"], ["for --mode distributed"]),
    (["--mode", "ps", "--ps-hosts", "a:1"], ["goes with --role"]),
]


@pytest.mark.parametrize("args, expected", BAD_MODES, ids=[" ".join(args) for args, _ in BAD_MODES])
def test_bad_modes_and_more_devices_than_present_exit_2(args, expected):
    process, records = run("--model", "tiny", *args)
    assert (process.returncode, records) == (2, [])
    for text in expected:
        assert text in process.stderr


def test_cpus_are_split_evenly():
    assert partition([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert partition([0, 1], 2) == [[0], [1]]


# ------------------------------------------------------------------------------ real clusters


@pytest.fixture(scope="module")
def jpeg_dataset(tmp_path_factory):
    skips.require(modules=["PIL"])
    out = tmp_path_factory.mktemp("imagenet") / "jpeg"
    generator = [sys.executable, "-m", "workloads.datasets.imagenet", "--out", str(out)]
    subprocess.run(
        generator + ["--images", "48", "--classes", "4", "--image-size", "32"],
        env=ENV,
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    return out


def check_cluster_record(record, launcher_pid, workers, batch_size, steps):
    assert record["status"] == "ok", record["error"]
    values = metric_values(record)
    per_worker = record["metadata"]["per_worker"]
    assert [worker["task_index"] for worker in per_worker] == list(range(workers))
    assert [worker["role"] for worker in per_worker] == ["chief"] + ["worker"] * (workers - 1)
    figures = [values[f"worker{index}_throughput"] for index in range(workers)]
    assert figures == [worker["throughput"] for worker in per_worker]
    assert all(figure > 0 for figure in figures)
    assert values["throughput"] == pytest.approx(sum(figures))
    for worker in per_worker:
        assert worker["throughput"] == pytest.approx(batch_size * steps / sum(worker["step_times"]), rel=1e-3)
        assert 0 < worker["mfu"] <= 1 and worker["peak_flops"] > 0
        assert worker["ps_client"]["ps"].startswith("127.0.0.1:")
    # The cluster's MFU: all workers' FLOP/s against the sum of their peaks.
    assert values["achieved_flops"] == pytest.approx(values["throughput"] * values["model_flops"])
    assert values["peak_flops"] == pytest.approx(sum(worker["peak_flops"] for worker in per_worker))
    assert values["mfu"] == pytest.approx(values["achieved_flops"] / values["peak_flops"])
    # 1 PS + N workers: separate processes, none of them the launcher, all gone now.
    processes = record["metadata"]["cluster"]["processes"]
    pids = [info["pid"] for info in processes.values()]
    assert sorted(processes) == ["ps"] + [f"worker{index}" for index in range(workers)]
    assert len(set(pids)) == workers + 1 and launcher_pid not in pids
    assert [worker["pid"] for worker in per_worker] == [processes[f"worker{i}"]["pid"] for i in range(workers)]
    assert all(info["exit"] == 0 for info in processes.values())
    assert all(gone(pid) for pid in pids)
    # Each worker pinned to its own CPUs.
    cpusets = [worker["cpuset"] for worker in per_worker]
    assert len(set(cpusets)) == workers
    cluster = record["metadata"]["cluster"]
    for address in (cluster["ps_hosts"] + "," + cluster["worker_hosts"]).split(","):
        assert address.startswith("127.0.0.1:")
    ps = record["metadata"]["ps"]
    assert ps["updates"] == record["labels"]["warmup_steps"] + steps
    assert ps["bytes_received"] > 0 and ps["bytes_sent"] > 0
    assert ps["pid"] == processes["ps"]["pid"]


@needs_tf
@needs_two_cpus
def test_distributed_launch_runs_a_ps_and_two_workers_on_loopback(jpeg_dataset):
    process = popen(
        *"--framework tensorflow".split(),
        *TINY,
        *"--warmup-steps 2 --steps 4 --data real --data-dir".split(),
        jpeg_dataset,
        *"--mode distributed --launch-local --num-workers 2 --launch-timeout 240 --threads 2".split(),
        "--labels-json",
        '{"experiment": "unit", "threads": 2}',
    )
    stdout, stderr = process.communicate(timeout=300)
    records = records_of(stdout)
    assert process.returncode == 0, stderr[-4000:]
    assert len(records) == 1, "the launcher prints one aggregate record, the processes' own stay inside"
    record = records[0]
    assert {key: record["labels"][key] for key in ("experiment", "mode", "num_workers", "threads", "data")} == {
        "experiment": "unit",
        "mode": "distributed",
        "num_workers": 2,
        "threads": 2,
        "data": "real",
    }
    check_cluster_record(record, process.pid, 2, 8, 4)
    # Each worker read its own half of the 48 files: (2 + 4) x 8 = 48 images = 2 epochs of 24.
    inputs = [worker["input"] for worker in record["metadata"]["per_worker"]]
    assert [(info["dataset_files"], info["files_read"], info["distinct_files_read"]) for info in inputs] == [
        (24, 48, 24)
    ] * 2
    values = metric_values(record)
    assert values["data_load"] >= 0 and values["data_first_batch"] > 0
    assert record["metadata"]["model_params"] == 16 * 27 + 16 + 32 * 144 + 32 + 33 * 4


@needs_torch
@needs_two_cpus
def test_ps_mode_trains_on_two_cpu_worker_processes():
    process, records = run(
        "--framework", "torch", *TINY, "--warmup-steps", 1, "--steps", 5, "--mode", "ps", "--cpu-workers", 2
    )
    assert process.returncode == 0, process.stderr[-4000:]
    (record,) = records
    assert (record["labels"]["mode"], record["labels"]["num_workers"]) == ("ps", 2)
    check_cluster_record(record, None, 2, 8, 5)
    # Synchronous updates: both replicas hold the same variables, so their parameter counts and
    # bytes pulled agree, and the workers' data differ (each its own synthetic batch).
    clients = [worker["ps_client"] for worker in record["metadata"]["per_worker"]]
    assert clients[0]["bytes_received"] == clients[1]["bytes_received"]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@needs_torch
def test_roles_started_one_by_one_form_a_cluster():
    cluster = ["--mode", "distributed", "--ps-hosts", f"127.0.0.1:{free_port()}"]
    cluster += ["--worker-hosts", f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}", "--threads", 1]
    common = ["--framework", "torch", *TINY, "--warmup-steps", 1, "--steps", 3, *cluster]
    roles = [["--role", "worker", "--task-index", 1], ["--role", "chief"], ["--role", "ps"]]  # any start order
    processes = [
        subprocess.Popen(
            command(*common, *role), cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for role in roles
    ]
    outputs = [process.communicate(timeout=240) for process in processes]
    records = [records_of(stdout) for stdout, _ in outputs]
    for process, (_, stderr), found in zip(processes, outputs, records, strict=False):
        assert process.returncode == 0 and len(found) == 1 and found[0]["status"] == "ok", stderr[-3000:]
    worker, chief, ps = (found[0] for found in records)
    assert [(r["labels"]["role"], r["labels"]["task_index"]) for r in (worker, chief, ps)] == [
        ("worker", 1),
        ("chief", 0),
        ("ps", 0),
    ]
    assert metric_values(ps)["updates"] == 4
    assert metric_values(worker)["throughput"] > 0 and metric_values(chief)["throughput"] > 0


@needs_torch
def test_a_cluster_that_disagrees_fails_fast_with_a_record():
    cluster = [
        "--mode",
        "distributed",
        "--ps-hosts",
        f"127.0.0.1:{free_port()}",
        "--worker-hosts",
        f"127.0.0.1:{free_port()}",
    ]
    common = ["--framework", "torch", *TINY, "--warmup-steps", 0, "--steps", 2, "--threads", 1, *cluster]
    ps = subprocess.Popen(
        command(*common, "--role", "ps", "--steps", 3),
        cwd=REPO_ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    chief_process, chief_records = run(*common, "--role", "chief")
    ps_out, _ = ps.communicate(timeout=120)
    assert chief_process.returncode == 1 and ps.returncode == 1
    (chief,) = chief_records
    (ps_record,) = records_of(ps_out)
    assert chief["status"] == ps_record["status"] == "failed"
    assert "disagrees with the parameter server on total_steps" in chief["error"]
    assert "total_steps 2 vs 3" in ps_record["error"]


@needs_torch
def test_a_worker_without_its_ps_gives_up_after_the_net_timeout():
    started = time.monotonic()
    process, records = run(
        *"--framework torch".split(),
        *TINY[:-2],
        *"--net-timeout 2 --steps 1 --threads 1 --mode distributed".split(),
        "--role",
        "chief",
        "--ps-hosts",
        f"127.0.0.1:{free_port()}",
        "--worker-hosts",
        f"127.0.0.1:{free_port()}",
    )
    assert process.returncode == 1 and time.monotonic() - started < 60
    (record,) = records
    assert record["status"] == "failed"
    assert "could not reach the parameter server at 127.0.0.1:" in record["error"] and "within 2s" in record["error"]


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except FileNotFoundError:
        return []


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")
    except FileNotFoundError:
        return []


@needs_torch
@needs_two_cpus
def test_a_worker_dying_stops_the_whole_local_cluster_with_a_record():
    launcher = popen(
        "--framework", "torch", *TINY, *"--steps 1000000 --mode distributed --launch-local".split(), "--threads", 2
    )
    started = time.monotonic()
    victim = None
    for _ in range(300):  # the launcher starts its children within seconds
        victim = next(
            (pid for pid in children_of(launcher.pid) if [b"--task-index", b"1"] in _pairs(cmdline(pid))), None
        )
        if victim is not None:
            break
        time.sleep(0.1)
    assert victim is not None, "worker 1 never started"
    time.sleep(3)  # mostly mid-run by now; either way the others must stop
    os.kill(victim, 9)
    stdout, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 1, stderr[-3000:]
    assert time.monotonic() - started < 60
    (record,) = records_of(stdout)
    assert record["status"] == "failed" and record["metrics"] == []
    assert record["error"].startswith("worker1 (exit -9)")
    processes = record["metadata"]["cluster"]["processes"]
    assert processes["worker1"]["exit"] == -9
    assert all(gone(info["pid"]) for info in processes.values())


def _pairs(argv):
    return [argv[index : index + 2] for index in range(len(argv) - 1)]
