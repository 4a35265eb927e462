"""A duet side's record is not lost with its attach stream: a real container of the lab's workload image, started as
duet_run starts a side (module_utils/duet.py run_pair: `docker start --attach`), whose output reaches the waiter
without its PLATBENCH_RESULT line (what `docker start --attach` once did to a cn side), is still recorded ok with the
workload's own figures, read from the record file the workload wrote beside (PLATBENCH_RECORD_FILE)."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import duet
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import duet_pair
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import FIXED_ENV, THREAD_ENV
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import OK, cell_outcome

from tests import skips
from workloads.common.record import RECORD_FILE_ENV, RESULT_PREFIX, metric_value, parse_result_lines

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("lab"), skips.requires(commands=["docker"], by=skips.LAB)]

IMAGE = "platbench/workload:latest"
CELL = "cn/1/pin/cpu|r0"
CAMPAIGN = "it-record-file"
# The tiny CNN for a few steps: the framework's import is most of the cell.
WORKLOAD = ["python", "-m", "workloads.cnn_train", "--threads", "1", "--framework", "tensorflow", "--model", "tiny"]
WORKLOAD += ["--batch-size", "16", "--image-size", "32", "--data", "synthetic", "--warmup-steps", "1", "--steps", "5"]
PAIR_SECONDS = 300


def losing_record_lines(dropped):
    """A Popen whose stdout reaches its reader without the record lines (kept in ``dropped``), as a side's output
    that lost them on the way."""
    prefix = RESULT_PREFIX.encode()

    class LosingRecordLines(subprocess.Popen):
        def communicate(self, *args, **keywords):
            stdout, stderr = super().communicate(*args, **keywords)
            lines = stdout.splitlines(keepends=True)
            dropped.extend(line for line in lines if line.startswith(prefix))
            return b"".join(line for line in lines if not line.startswith(prefix)), stderr

    return LosingRecordLines


def docker(*args):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def test_a_container_side_whose_attach_stream_lost_the_record_is_recorded_from_its_record_file(tmp_path):
    cache = tmp_path / "cache"  # the container sees it at the same path, as a cell sees the runner's cache
    cache.mkdir()
    name = f"platbench-recordfile-{os.getpid()}"
    record_file = cache / "duet" / "pair" / f"{name}.record"
    env = {**dict.fromkeys(THREAD_ENV, "1"), **FIXED_ENV, "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
    env.update({"PLATBENCH_CACHE_DIR": str(cache), RECORD_FILE_ENV: str(record_file)})
    plan = {"cell": CELL, "platform": "cn", "record_file": str(record_file)}
    plan["container"] = {"engine": "docker", "name": name}
    try:
        docker(
            "create",
            "--name",
            name,
            "--network",
            "none",
            "--label",
            f"org.platbench.campaign={CAMPAIGN}",
            "--volume",
            f"{cache}:{cache}:rw",
            *[f"--env={key}={value}" for key, value in env.items()],
            IMAGE,
            *WORKLOAD,
        )
        (side,) = duet_pair.sides([plan])
        dropped, pair = [], {}
        # The waiter goes to SCHED_IDLE as the module's does: in a thread of its own, pytest's policy stays as it is.
        waiter = threading.Thread(
            target=lambda: pair.update(duet.run_pair([side["run"]], PAIR_SECONDS, popen=losing_record_lines(dropped)))
        )
        waiter.start()
        waiter.join(timeout=PAIR_SECONDS + 60)
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)

    (outcome,) = pair["sides"]
    assert outcome["rc"] == 0 and not outcome["timed_out"], outcome["stderr"][-2000:]
    assert len(dropped) == 1 and RESULT_PREFIX not in outcome["stdout"]  # the workload printed it; the stream lost it
    assert not record_file.exists()  # read, and removed
    assert outcome["inspect"]["Name"] == f"/{name}" and outcome["inspect"]["State"]["Status"] == "exited"  # duet_run's
    (entry,) = duet_pair.results([side], pair)
    assert entry["duet"]["record_from"] == "file"
    observed = placements.observed({"platform": "cn", "container": {"engine": "docker"}}, entry["results"])
    labels = {"cell": CELL, "platform": "cn", "campaign": CAMPAIGN}
    status, error, samples = cell_outcome(labels, observed.output, None, {}, {"duet": entry["duet"]})
    assert (status, error) == (OK, None)
    (printed,) = parse_result_lines(dropped[0].decode())
    (throughput,) = [sample for sample in samples if sample["metric"] == "throughput"]
    # The workload's own figures, as the line the stream lost said them.
    assert throughput["value"] > 0 and throughput["value"] == metric_value(printed["metrics"], "throughput")
    assert throughput["timestamp"] == printed["timestamp"]
    assert throughput["metadata"]["duet"]["record_from"] == "file"
