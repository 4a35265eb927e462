"""End to end on this machine: the four samani2022 experiments (Samani 2022's inference apps) at a tiny size on
bm and cn through the lab, each request's phases timed under MLPerf loadgen, its logs kept, and the report's
phase table. One campaign per app (their cells have the same ids); one cell per platform, IC with both timings.
RS asks loadgen for a minimum duration far longer than its run: INVALID through a real run, at no extra cell."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playbook_run import REPO, read_samples, run_lab_playbook

from workloads.inference_e2e.phases import batches_of, span_problem

# `quiet`: it asserts what it measured, so it runs last, with no test cloud beside it (tests/suite.py).
pytestmark = [pytest.mark.lab, pytest.mark.quiet]

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
# A minimum duration the tiny run cannot last (it serves 8 requests in a second or two): loadgen says INVALID.
INVALID_PARAMS = {"rs": {"min_duration_ms": 60_000}}


@pytest.fixture(scope="module")
def campaigns(lab, tmp_path_factory):
    """{app: its campaign directory}, each samani2022-<app> run once."""
    results = tmp_path_factory.mktemp("inference") / "results"
    found = {}
    for app in APPS:
        overrides = {**TINY, "dataset": DATASETS[app]}
        overrides["params"] = {**TINY["params"], **INVALID_PARAMS.get(app, {})}
        if app == "ic":  # both timings in one campaign: the report sets them side by side
            overrides["params"]["timing"] = ["e2e", "inference_only"]
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


def loadgen_of(samples):
    """{(platform, timing): metadata.loadgen} of a campaign's cells."""
    return {
        (s["labels"]["platform"], s["labels"]["timing"]): s["metadata"]["loadgen"]
        for s in samples
        if s["metric"] == "inference_time"
    }


@pytest.mark.parametrize("app", APPS)
def test_each_app_is_served_on_both_platforms_with_its_phases_adding_up_to_loadgen_s_span(campaigns, app):
    samples = read_samples(campaigns[app])
    assert not [s for s in samples if s["metric"] in ("failed", "skipped")], samples
    timings = ["e2e", "inference_only"] if app == "ic" else ["e2e"]
    expected = {(platform, timing) for platform in ("bm", "cn") for timing in timings}
    assert set(values(samples, "inference_time")) == expected
    assert set(values(samples, "e2e_time")) == {key for key in expected if key[1] == "e2e"}
    loadgen = loadgen_of(samples)
    for key in expected:
        # The timed phases (all three end to end, inference alone in an inference-only cell) account for loadgen's
        # own span of the run, read from its detail log outside the phase timers: none lost, none counted twice.
        timed = PHASES if key[1] == "e2e" else ("inference_time",)
        total = sum(values(samples, phase)[key] for phase in timed)
        problem = span_problem(
            total, loadgen[key]["span"]["seconds"], batches_of(REQUESTS, TINY["params"]["batch_size"])
        )
        assert problem is None, (key, problem)
        # loadgen issued every request once, as its detail log says.
        assert values(samples, "loadgen_queries")[key] == REQUESTS
    containers = {s["labels"]["platform"]: s["metadata"]["virt"] for s in samples if s["metric"] == "inference_time"}
    assert containers["cn"] == "docker" and containers["bm"] != "docker"


@pytest.mark.parametrize("app", APPS)
def test_loadgens_logs_are_kept_beside_the_samples(campaigns, app):
    samples = [s for s in read_samples(campaigns[app]) if s["metric"] == "inference_time"]
    # One cell per platform, ic's with both timings: a campaign without them must not pass for want of samples.
    assert len(samples) == (4 if app == "ic" else 2), samples
    for sample in samples:
        kept = sample["metadata"]["kept_files"]  # {file name: its path in the campaign's directory}
        assert {"mlperf_log_summary.txt", "mlperf_log_detail.txt"} <= set(kept), kept
        for path in kept.values():
            assert path.startswith("files/") and (campaigns[app] / path).read_text().strip()


@pytest.mark.parametrize("app", APPS)
def test_a_tiny_run_is_scaled_down_and_one_given_a_minimum_duration_it_cannot_last_is_invalid(campaigns, app):
    cells = loadgen_of(read_samples(campaigns[app]))
    assert len(cells) == (4 if app == "ic" else 2), cells
    for key, loadgen in cells.items():
        minimums = loadgen["mlperf_minimums"]
        assert minimums["met"] is False and minimums["asked"]["samples"] == REQUESTS, (key, minimums)
        if app in INVALID_PARAMS:
            # Loadgen's own verdict through a real run: the 60 s asked outlast the run.
            assert (loadgen["result"], loadgen["loadgen_result"]) == ("INVALID", "INVALID"), (key, loadgen)
            assert loadgen["reasons"] == ["min duration not satisfied"]
            assert loadgen["settings"]["effective"]["min_duration_ms"] == 60_000
            assert loadgen["span"]["seconds"] < 60
        else:
            # Loadgen's VALID on what it was given, below MLPerf's minimums: never shown as VALID.
            assert (loadgen["result"], loadgen["loadgen_result"]) == ("scaled-down", "VALID"), (key, loadgen)
            assert loadgen["reasons"] == minimums["short_of"] and len(minimums["short_of"]) == 2


def report_of(campaign):
    report = subprocess.run(
        [sys.executable, "-m", "platbench", "report", str(campaign)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    return report.stdout


def test_the_report_shows_the_phase_breakdown_against_bm(campaigns):
    out = report_of(campaigns["ic"])
    assert "Phase breakdown" in out
    assert (campaigns["ic"] / "phases.csv").is_file()
    assert "scaled-down: 4 cell(s) ran below MLPerf's minimums" in out and "INVALID" not in out


def test_the_report_shows_the_invalid_cells_with_loadgen_s_reason(campaigns):
    out = report_of(campaigns["rs"])
    assert "INVALID: 2 cell(s) that MLPerf loadgen called INVALID" in out
    # Under the main table and again under the phase table: the same line.
    [line] = {line for line in out.splitlines() if line.endswith("(2 cell(s)): min duration not satisfied")}
    assert "bm/2/pin/cpu" in line and "cn/2/pin/cpu" in line
    assert "scaled-down:" not in out and "(VALID)" not in out
