"""cnn_train --mode distributed (torch DDP through torchrun, TensorFlow MultiWorkerMirroredStrategy) and
--mode ps (TensorFlow CentralStorageStrategy): real ranks on 127.0.0.1, each printing what the engine ran."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from workload_run import metric_values, records_of

from tests import skips
from workloads.cnn_train.local_launch import descendants
from workloads.cnn_train.ranks import RankEnvError, aggregate, rank_figures, tf_place, torch_place

REPO_ROOT = Path(__file__).resolve().parents[2]
needs_tf = skips.requires(modules=["tensorflow"])
needs_torch = skips.requires(modules=["torch"])
TINY = ["--model", "tiny", "--image-size", "32", "--batch-size", "8", "--net-timeout", "60", "--threads", "1"]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG"):
    ENV.pop(_name, None)


def command(*args):
    return [sys.executable, "-m", "workloads.cnn_train", *map(str, args)]


def run(*args, env=None, timeout=120):
    """(process, records) of one cnn_train command."""
    process = subprocess.run(
        command(*args), cwd=REPO_ROOT, env=env or ENV, capture_output=True, text=True, timeout=timeout
    )
    return process, records_of(process.stdout)


def gone(pid):
    """True once `pid` has exited and been reaped (no longer in the process table, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def processes_marked(mark):
    """Live processes whose environment carries `mark` (what a launch started inherits it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if mark.encode() in handle.read() and not gone(int(entry)):
                    found.append(int(entry))
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return found


# ------------------------------------------------------------------------------- no framework


def test_global_throughput_is_every_rank_s_images_over_the_slowest_rank_s_time():
    per_rank = [rank_figures(0, [0.1, 0.2], [0.0, 0.01], {}), rank_figures(1, [0.3, 0.1], [0.02, 0.0], {})]
    metrics, metadata = aggregate(per_rank, 8)
    values = {entry["metric"]: entry["value"] for entry in metrics}
    assert values["throughput"] == pytest.approx(2 * 2 * 8 / 0.4)
    assert metadata["step_times"] == [0.3, 0.2]  # each step: the slowest rank's time for it
    assert [figures["throughput"] for figures in metadata["per_rank"]] == pytest.approx([16 / 0.3, 16 / 0.4])
    assert values["data_load"] == pytest.approx(0.015)


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"RANK": "0", "WORLD_SIZE": "2"}, "LOCAL_RANK, MASTER_ADDR, MASTER_PORT not set"),
        ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "at least 2"),
        ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "out of range"),
        ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "RANK='x'"),
    ],
)
def test_torchrun_environments_that_cannot_be_a_rank_are_named(environ, message):
    with pytest.raises(RankEnvError, match=message):
        torch_place(environ)


def test_tf_config_is_read_as_multi_worker_mirrored_strategy_reads_it():
    config = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    assert tf_place({"TF_CONFIG": json.dumps(config)}) == (1, 2)
    assert tf_place({}) is None and torch_place({}) is None
    with pytest.raises(RankEnvError, match="workers only, got task type 'ps' and jobs ps"):
        tf_place(
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": ["a:1"], "ps": ["c:3"]}, "task": {"type": "ps", "index": 0}}
                )
            }
        )
    with pytest.raises(RankEnvError, match="TF_CONFIG's worker list gives 1 rank"):
        tf_place({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})})


BAD_INPUTS = [
    ([], {}, "--mode distributed needs --launch-local N (N ranks here), or to be started by torchrun"),
    (["--launch-local", "1"], {}, "--launch-local 1: a distributed run needs at least 2 ranks"),
    ([], {"RANK": "0", "WORLD_SIZE": "2"}, "--mode distributed: torchrun's environment is incomplete"),
    (
        ["--framework", "tensorflow"],
        {"TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}'},
        "TF_CONFIG's worker list gives 1 rank(s): a distributed run needs at least 2",
    ),
]


# With --check-args every case but the first: a run with no rank environment at all is the runner's to start
# (torchrun or TF_CONFIG there), so only a run refuses it.
REFUSED = [(*case, False) for case in BAD_INPUTS] + [(*case, True) for case in BAD_INPUTS[1:]]


@pytest.mark.parametrize(
    "args, environ, message, check_args",
    REFUSED,
    ids=[f"{message[:40]}{'-check-args' if check else ''}" for _, _, message, check in REFUSED],
)
def test_a_distributed_run_of_one_rank_or_no_rank_is_refused(args, environ, message, check_args):
    argv = ["--framework", "torch", "--model", "tiny", "--mode", "distributed", *args]
    process, records = run(*argv, *(["--check-args"] if check_args else []), env={**ENV, **environ})
    assert (process.returncode, records) == (2, [])
    assert message in process.stderr


# ------------------------------------------------------------------------------- real ranks


def check_distributed_record(record, ranks, steps, engine):
    assert record["status"] == "ok", record["error"]
    labels, metadata, values = record["labels"], record["metadata"], metric_values(record)
    assert (labels["mode"], labels["num_workers"], labels["threads"]) == ("distributed", ranks, 1)
    assert engine in metadata["engine"]
    per_rank = metadata["per_rank"]
    assert [figures["rank"] for figures in per_rank] == list(range(ranks))
    assert all(len(figures["step_times"]) == steps for figures in per_rank)
    assert len({figures["pid"] for figures in per_rank}) == ranks
    wall = max(sum(figures["step_times"]) for figures in per_rank)
    assert values["throughput"] == pytest.approx(ranks * 8 * steps / wall, rel=1e-3)
    processes = metadata["launch"]["processes"]
    assert len(processes) == ranks and all(info["exit"] == 0 for info in processes.values())
    assert all(gone(info["pid"]) for info in processes.values())
    assert all(gone(figures["pid"]) for figures in per_rank)
    assert values["loss_last"] > 0 and values["elapsed"] > values["startup"]


def launch_two(framework, *extra):
    """(process, records) of a tiny 2-rank run launched here: 1 warm-up and 4 timed steps."""
    steps = ["--warmup-steps", 1, "--steps", 4]
    launch = ["--mode", "distributed", "--launch-local", 2, "--launch-timeout", 100]
    return run("--framework", framework, *TINY, *steps, *launch, *extra)


@needs_torch
def test_ddp_two_ranks_over_loopback_print_one_record_with_every_rank_s_step_times():
    process, records = launch_two("torch", "--labels-json", '{"experiment": "unit"}')
    assert process.returncode == 0, process.stderr[-4000:]
    assert len(records) == 1, "rank 0 alone prints the run's record, the launcher adopts it"
    (record,) = records
    check_distributed_record(record, 2, 4, "DistributedDataParallel")
    assert "gloo" in record["metadata"]["engine"] and record["labels"]["experiment"] == "unit"
    assert record["metadata"]["launch"]["rendezvous"].startswith("c10d 127.0.0.1:")


@needs_tf
def test_tf_multi_worker_mirrored_strategy_two_workers_over_loopback():
    process, records = launch_two("tensorflow")
    assert process.returncode == 0, process.stderr[-4000:]
    (record,) = records
    check_distributed_record(record, 2, 4, "MultiWorkerMirroredStrategy")
    assert [address.split(":")[0] for address in record["metadata"]["launch"]["tf_workers"]] == ["127.0.0.1"] * 2


@needs_tf
def test_ps_mode_is_central_storage_strategy_and_averages_batch_norm_statistics():
    # ResNet-50 at 32 px: its batch norms assign their moving statistics inside each replica's step,
    # which the strategy allows only for variables that say how replicas combine (models_tf).
    process, records = run(
        "--framework",
        "tensorflow",
        "--model",
        "resnet50",
        "--image-size",
        32,
        "--batch-size",
        2,
        "--threads",
        1,
        "--warmup-steps",
        1,
        "--steps",
        2,
        "--mode",
        "ps",
        "--cpu-workers",
        2,
    )
    assert process.returncode == 0, process.stderr[-4000:]
    (record,) = records
    assert record["status"] == "ok", record["error"]
    assert (record["labels"]["mode"], record["labels"]["num_workers"]) == ("ps", 2)
    metadata = record["metadata"]
    assert metadata["engine"] == "tf.distribute.experimental.CentralStorageStrategy" and metadata["replicas"] == 2
    # Both replicas' batches count: 2 replicas x 2 images per timed step.
    assert metric_values(record)["throughput"] == pytest.approx(2 * 2 * 2 / sum(metadata["step_times"]), rel=1e-3)


def _rank_process(launcher_pid, rank):
    """The pid of the torchrun worker that is rank `rank` below the launcher, or None yet."""
    for pid in descendants(launcher_pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if f"RANK={rank}".encode() in environ and b"torch.distributed.run" not in argv:
            return pid
    return None


@needs_torch
def test_a_killed_rank_fails_the_run_with_its_own_error_and_leaves_no_process():
    mark = f"PLATBENCH_TEST_MARK={uuid.uuid4().hex}"
    launcher = subprocess.Popen(
        command(
            "--framework",
            "torch",
            *TINY,
            "--steps",
            1_000_000,
            "--mode",
            "distributed",
            "--launch-local",
            2,
            "--launch-timeout",
            100,
        ),
        cwd=REPO_ROOT,
        env={**ENV, mark.split("=")[0]: mark.split("=")[1]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    victim = None
    for _ in range(600):  # torchrun starts its worker within seconds
        victim = _rank_process(launcher.pid, 1)
        if victim is not None or launcher.poll() is not None:
            break
        time.sleep(0.1)
    assert victim is not None, "rank 1 never started"
    time.sleep(8)  # past the rendezvous and into training (either way the run must fail)
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = launcher.communicate(timeout=90)
    assert launcher.returncode == 1, stderr[-3000:]
    assert time.monotonic() - started < 100
    (record,) = records_of(stdout)
    assert record["status"] == "failed" and record["metrics"] == []
    # The cause first: the rank the signal killed, as its torchrun agent saw it.
    first = record["error"].split("; ")[0]
    assert first.endswith(f"killed by SIGKILL (pid {victim})"), record["error"]
    assert not processes_marked(mark), "a process of the launch outlived it"
