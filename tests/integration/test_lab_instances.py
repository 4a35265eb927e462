"""Cells with several instances through the lab, at a tiny size on bm and cn: Lin 2018's shared scenario (a
foreground alone, then beside a background job, and its degradation) and distributed training (DDP and
MultiWorkerMirroredStrategy ranks over a bridge and a VXLAN overlay, the path measured first); a rank killed
mid-training fails its cell with its own error; nothing is left behind (namespaces, links, containers)."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from playbook_run import instance_leftovers as leftovers
from playbook_run import read_samples, run_lab_playbook

pytestmark = pytest.mark.lab

SHARED = {
    "platforms": ["bm", "cn"],
    "scaleup": [1],
    "cpu_config": ["pin"],
    "repeats": 1,
    "background": {"params": {"image_size": 67, "batch_size": [32]}, "settle": 3},
    "params": {"model": "tiny", "batch_size": 32, "warmup_steps": 1, "steps": 40},
}
DISTRIBUTED = {
    "platforms": ["bm", "cn"],
    "scaleup": [1],
    "repeats": 1,
    "instances": {"count": 2, "cpus": "disjoint"},
    "network": ["bridge", "overlay"],
    "params": {"framework": ["torch", "tensorflow"], "model": "tiny", "batch_size": 8, "warmup_steps": 1, "steps": 4},
}


def run_campaign(tmp_path_factory, experiment, campaign, overrides):
    results = tmp_path_factory.mktemp(campaign) / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        results.parent,
        {
            "experiment": experiment,
            "campaign": campaign,
            "platbench_results_dir": str(results),
            "experiment_overrides": overrides,
        },
    )
    return runner, results / campaign


@pytest.fixture(scope="module")
def shared(lab, tmp_path_factory):
    runner, campaign = run_campaign(tmp_path_factory, "lin2018-shared", "it-shared", SHARED)
    assert runner.rc == 0, (runner.failed_messages(), runner.output[-4000:])
    return read_samples(campaign)


@pytest.fixture(scope="module")
def distributed(lab, tmp_path_factory):
    runner, campaign = run_campaign(tmp_path_factory, "lin2018-distributed", "it-distributed", DISTRIBUTED)
    assert runner.rc == 0, (runner.failed_messages(), runner.output[-4000:])
    return read_samples(campaign)


def test_a_shared_cell_records_its_foreground_alone_and_beside_the_background_and_the_degradation(shared):
    for platform in ("bm", "cn"):
        own = [s for s in shared if s["labels"]["platform"] == platform]
        elapsed = {s["labels"].get("share"): s for s in own if s["metric"] == "elapsed"}
        assert set(elapsed) == {"alone", "shared"}, platform
        assert all(s["labels"]["instance_role"] == "foreground" for s in elapsed.values())
        degradation = [s for s in own if s["metric"] == "degradation"]
        assert len(degradation) == 1 and degradation[0]["unit"] == "%"
        alone, beside = elapsed["alone"]["value"], elapsed["shared"]["value"]
        assert degradation[0]["value"] == pytest.approx((beside - alone) / alone * 100)
        ran = degradation[0]["metadata"]["instances_ran"]
        assert [(r["round"], r["role"]) for r in ran] == [(0, "foreground"), (1, "background"), (1, "foreground")]
        assert ran[1]["stopped"] and ran[2]["rc"] == 0  # the background was stopped when the foreground ended
    assert leftovers("it-shared") == []


def test_ranks_train_over_the_bridge_and_the_overlay_with_the_path_measured_first(distributed):
    cells = {s["labels"]["cell"] for s in distributed}
    assert len(cells) == 8 and not [s for s in distributed if s["metric"] == "failed"]
    for cell in cells:
        own = {s["metric"]: s for s in distributed if s["labels"]["cell"] == cell}
        labels = own["throughput"]["labels"]
        assert own["throughput"]["value"] > 0 and labels["instance_role"] == "chief"
        assert len(own["throughput"]["metadata"]["per_rank"]) == 2
        assert own["path_throughput"]["value"] > 0 and own["path_rtt"]["value"] > 0
        assert own["path_mtu"]["value"] == (1450 if labels["network"] == "overlay" else 1500), cell
    assert leftovers("it-distributed") == []


def test_a_rank_killed_mid_training_fails_its_cell_with_its_own_error_and_leaves_nothing(lab, tmp_path_factory):
    overrides = {
        **DISTRIBUTED,
        "platforms": ["bm"],
        "network": ["bridge"],
        "params": {**DISTRIBUTED["params"], "framework": "torch", "steps": 100000},
    }
    killed = []

    def kill_rank_1():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            found = subprocess.run(["pgrep", "-f", '"instance_index":1'], capture_output=True, text=True).stdout.split()
            for pid in found:
                time.sleep(3)  # in its training loop, past the rendezvous
                subprocess.run(["kill", "-KILL", pid], check=False)
                killed.append(pid)
            time.sleep(0.5)

    killer = threading.Thread(target=kill_rank_1, daemon=True)
    killer.start()
    runner, campaign = run_campaign(tmp_path_factory, "lin2018-distributed", "it-killed", overrides)
    killer.join(timeout=10)
    assert killed, "rank 1 never started"
    failed = [s for s in read_samples(campaign) if s["metric"] == "failed"]
    assert len(failed) == 1, runner.output[-3000:]
    assert "worker 1" in failed[0]["metadata"]["error"] and "killed by SIGKILL" in failed[0]["metadata"]["error"]
    assert leftovers("it-killed") == []
