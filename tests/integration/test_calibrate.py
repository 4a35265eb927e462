"""platbench calibrate against the lab, a short real run: four rounds of the reference job with a 50% overhead
injected as a discard (the default: the job leaves half its timed steps out of its throughput, so B's throughput is
half A's by construction; an effect large enough to be seen in four rounds of a loaded 2-core host, whose cells
drift by some 20%; with three rounds, two degrees of freedom, one A cell 60% faster than its round's other once put
the interval at 0.511 [0.256, 1.017]); its lines, run.json's record of them, the report showing them, and the
rounds' shuffled, recorded order. Whether the A/A pair stays quiet is a rate, the benchmark's business
(benchmarks/power.py), not a test's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from playbook_run import REPO, workload_processes

# `quiet`: it asserts what it measured, so it runs last, with no test cloud beside it (tests/suite.py).
pytestmark = [pytest.mark.lab, pytest.mark.quiet]

CAMPAIGN = "it-calibrate"
ROUNDS = 4
CELLS_PER_ROUND = 4  # each round: A and B (the discard), each with two seeds


@pytest.fixture(scope="module")
def calibrated(lab, tmp_path_factory):
    results = tmp_path_factory.mktemp("calibrate")
    argv = [sys.executable, "-m", "platbench", "calibrate", "--rounds", str(ROUNDS), "--effect", "0.5"]
    argv += ["--cell-seconds", "3"]
    # Two harness pairs (the fewest with an interval): the line's form and its record, not its verdict.
    argv += ["--campaign", CAMPAIGN, "--results-dir", str(results), "--harness-pairs", "2"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    return done, results / CAMPAIGN


def test_the_calibration_sees_the_injected_overhead_and_says_what_the_host_can_tell(calibrated):
    done, _ = calibrated
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"calibration of this host ({ROUNDS} rounds")))
    noise, aa, ab, mde, needed = lines[start + 1 : start + 6]
    assert noise.startswith("  noise between cells: CV ") and "(paired by round; pooled from A/A " in noise
    assert aa.startswith("  A/A (two seeds, nothing injected): ")
    assert ab.startswith("  A/B (a 50% overhead injected as discard=0.5, expected 0.500): ")
    estimate, bounds = ab.split(": ")[1].split(" [")
    low, high = (float(value) for value in bounds.split("]")[0].split(", "))
    assert high < 1.0 and 0.35 < float(estimate) < 0.65, ab  # seen, and about its size
    assert mde.startswith("  minimum detectable effect in 10 min of campaign") and mde.endswith("%")
    assert needed.startswith("  time to detect a 50% overhead: about ")
    harness = next(line for line in lines if line.lstrip().startswith("harness: "))
    assert harness.lstrip().startswith("harness: through platbench cn/bm "), harness
    assert "; direct " in harness and ": spread x" in harness
    assert workload_processes() == []


def test_run_json_keeps_it_and_the_report_shows_it(calibrated):
    done, directory = calibrated
    run = json.loads((directory / "run.json").read_text())
    assert run["calibration"]["rounds"] == ROUNDS and run["calibration"]["effect"] == 0.5
    assert run["calibration"]["inject"] == "discard=0.5"
    harness = run["calibration"]["harness"]
    assert len(harness["through"]["values"]) == 2 and len(harness["direct"]["values"]) == 2, harness
    assert run["experiment"]["schedule"] == "rounds" and isinstance(run["experiment"]["schedule_seed"], int)
    report = subprocess.run(
        [sys.executable, "-m", "platbench", "report", str(directory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert report.stdout.startswith("Answer: throughput, each platform against bm (95% interval, paired by round")
    assert "bm[discard=0.5]/bm" in report.stdout
    assert f"calibration of this host ({ROUNDS} rounds" in report.stdout


def test_the_rounds_ran_in_their_shuffled_recorded_order(calibrated):
    _, directory = calibrated
    samples = [json.loads(line) for line in (directory / "samples.jsonl").read_text().splitlines()]
    order = [s["labels"]["cell"] for s in samples if s["metric"] == "throughput"]
    assert len(order) == ROUNDS * CELLS_PER_ROUND and {s["labels"]["schedule"] for s in samples} == {"rounds"}
    # The discard cells left half their timed steps out (the workload's own record of it); the others none.
    throughput = [s for s in samples if s["metric"] == "throughput"]
    left_out = [s["metadata"].get("inject_discard") for s in throughput]
    assert sum(entry is not None for entry in left_out) == ROUNDS * CELLS_PER_ROUND // 2
    for sample, entry in zip(throughput, left_out, strict=True):
        assert (entry is not None) == (sample["labels"]["inject"] == "discard=0.5")
        assert entry is None or entry["steps"] == int(entry["timed_steps"] * 0.5 + 0.5)  # the nearest whole step
    rounds = [order[index : index + CELLS_PER_ROUND] for index in range(0, len(order), CELLS_PER_ROUND)]
    assert all({cell.rsplit("|", 1)[1] for cell in members} == {f"r{number}"} for number, members in enumerate(rounds))
