"""The data path's rung for real (``platbench explain cn --workload inference_e2e`` climbs it): one cn cell of the IC
app reads its JPEGs through a read-only overlayfs, a volume of Docker's local driver (``data_path: overlay``), where
the other rungs bind the data directory in. The engine accepts the mount, the workload reads every file through it,
the record says so, and the campaign removes its volume when its cells are done."""

from __future__ import annotations

import subprocess

import pytest
from playbook_run import read_samples, run_lab_playbook

pytestmark = pytest.mark.lab

CAMPAIGN = "it-data-overlay"
REQUESTS = 8
OVERRIDES = {
    "platforms": ["cn"],
    "scaleup": [1],
    "cpu_config": ["pin"],
    "repeats": 1,
    "data_path": ["overlay"],
    "params": {"model_size": "tiny", "requests": REQUESTS, "batch_size": 4, "timing": "e2e"},
    "storage": None,
    "dataset": {"generator": "imagenet", "args": {"images": 16, "classes": 2, "image_size": 64}},
}


@pytest.fixture(scope="module")
def overlay_cell(lab, tmp_path_factory):
    results = tmp_path_factory.mktemp("overlay") / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        results.parent / "run",
        {
            "experiment": "samani2022-ic",
            "campaign": CAMPAIGN,
            "platbench_results_dir": str(results),
            "experiment_overrides": OVERRIDES,
        },
    )
    assert runner.rc == 0, (runner.failed_messages(), runner.output[-4000:])
    return read_samples(results / CAMPAIGN)


def test_the_cell_read_every_request_through_the_overlay(overlay_cell):
    (served,) = [s for s in overlay_cell if s["metric"] == "inference_time"]
    assert served["labels"]["platform"] == "cn" and served["labels"]["data_path"] == "overlay"
    through = served["metadata"]["data_through"]
    data_dir = served["metadata"]["data_dir"]
    assert "overlayfs" in through and f"lowerdir={data_dir}:" in through, through
    (queries,) = [s["value"] for s in overlay_cell if s["metric"] == "loadgen_queries"]
    assert queries == REQUESTS  # every request's JPEGs read, decoded and served


def test_no_volume_of_the_campaign_is_left(overlay_cell):
    listed = subprocess.run(
        ["docker", "volume", "ls", "--quiet", "--filter", f"label=org.platbench.campaign={CAMPAIGN}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == []
