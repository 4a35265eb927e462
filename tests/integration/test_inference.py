"""End to end on this machine: the four samani2022 experiments (Samani 2022's inference apps) at a tiny size on
bm and cn through the lab, each request's phases timed under MLPerf loadgen, its logs kept, and the report's
phase table. One campaign per app (their cells have the same ids); one cell per platform, IC with both timings."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playbook_run import REPO, read_samples, run_lab_playbook

pytestmark = pytest.mark.lab

APPS = ("ic", "sr", "nlp", "rs")
REQUESTS = 8
# A handful of requests of each app's tiny model, one pinned cell per platform.
TINY = {
    "platforms": ["bm", "cn"],
    "scaleup": [2],
    "cpu_config": ["pin"],
    "repeats": 1,
    "params": {"model_size": "tiny", "requests": REQUESTS, "batch_size": 4, "timing": "e2e"},
    "storage": None,  # IC's storage classes are unit-tested (test_storage_classes.py); one data directory here
}
DATASETS = {
    "ic": {"generator": "imagenet", "args": {"images": 16, "classes": 2, "image_size": 256}},
    "sr": {"generator": "librispeech", "args": {"utterances": REQUESTS}},
    "nlp": {"generator": "squad", "args": {"questions": 16}},
    "rs": {"generator": "criteo", "args": {"rows": 1600}},
}
PHASES = ("pre_time", "inference_time", "post_time")


@pytest.fixture(scope="module")
def campaigns(lab, tmp_path_factory):
    """{app: its campaign directory}, each samani2022-<app> run once."""
    results = tmp_path_factory.mktemp("inference") / "results"
    found = {}
    for app in APPS:
        overrides = {**TINY, "dataset": DATASETS[app]}
        if app == "ic":  # both timings in one campaign: the report sets them side by side
            overrides["params"] = {**TINY["params"], "timing": ["e2e", "inference_only"]}
        runner = run_lab_playbook(
            "playbooks/experiment.yml",
            results.parent / app,
            {
                "experiment": f"samani2022-{app}",
                "campaign": f"it-{app}",
                "platbench_results_dir": str(results),
                "experiment_overrides": overrides,
            },
        )
        assert runner.rc == 0, (app, runner.failed_messages(), runner.output[-4000:])
        found[app] = results / f"it-{app}"
    return found


def values(samples, metric):
    return {(s["labels"]["platform"], s["labels"]["timing"]): s["value"] for s in samples if s["metric"] == metric}


@pytest.mark.parametrize("app", APPS)
def test_each_app_is_served_on_both_platforms_with_its_phases_adding_up(campaigns, app):
    samples = read_samples(campaigns[app])
    assert not [s for s in samples if s["metric"] in ("failed", "skipped")], samples
    timings = ["e2e", "inference_only"] if app == "ic" else ["e2e"]
    expected = {(platform, timing) for platform in ("bm", "cn") for timing in timings}
    assert set(values(samples, "inference_time")) == expected
    # End to end is the three phases together; an inference-only cell times inference alone.
    e2e = values(samples, "e2e_time")
    assert set(e2e) == {key for key in expected if key[1] == "e2e"}
    for key in expected:
        if key[1] == "e2e":
            parts = sum(values(samples, phase)[key] for phase in PHASES)
            assert parts == pytest.approx(e2e[key], rel=0.01), (key, parts, e2e[key])
        # loadgen issued every request once, as its detail log says.
        assert values(samples, "loadgen_queries")[key] == REQUESTS
    containers = {s["labels"]["platform"]: s["metadata"]["virt"] for s in samples if s["metric"] == "inference_time"}
    assert containers["cn"] == "docker" and containers["bm"] != "docker"


@pytest.mark.parametrize("app", APPS)
def test_loadgens_logs_are_kept_beside_the_samples(campaigns, app):
    samples = [s for s in read_samples(campaigns[app]) if s["metric"] == "inference_time"]
    for sample in samples:
        kept = sample["metadata"]["kept_files"]  # {file name: its path in the campaign's directory}
        assert {"mlperf_log_summary.txt", "mlperf_log_detail.txt"} <= set(kept), kept
        for path in kept.values():
            assert path.startswith("files/") and (campaigns[app] / path).read_text().strip()
        assert sample["metadata"]["loadgen"]["result"] in ("VALID", "INVALID")


def test_the_report_shows_the_phase_breakdown_against_bm(campaigns):
    report = subprocess.run(
        [sys.executable, "-m", "platbench", "report", str(campaigns["ic"])],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert "Phase breakdown" in report.stdout
    assert (campaigns["ic"] / "phases.csv").is_file()
