"""``--steps auto`` of cnn_train (params.steps: auto): the probe's arithmetic on a fake clock, a real run whose timed
part lasts at least the target with the chosen steps recorded, and the refusals of what cannot calibrate."""

import itertools
import math

import pytest
from workload_run import metric_values, only_record, run_module

from tests import skips
from workloads.cnn_train import training
from workloads.cnn_train.settings import AUTO_MARGIN, PROBE_MAX_STEPS, PROBE_MIN_STEPS

needs_taskset = skips.requires(commands=["taskset"], by="util-linux (in every Debian system)")


def fake_clock(step_seconds):
    """A clock that moves ``step_seconds`` each time a step runs (and not otherwise)."""
    now = [0.0]

    def one_step(index):
        now[0] += step_seconds
        return index

    return one_step, lambda: now[0]


@pytest.mark.parametrize(
    ("step_seconds", "probe_steps"),
    [
        (0.125, 8),  # the probe's second: 8 steps
        (0.6, PROBE_MIN_STEPS),  # slow steps: at least two
        (0.001, PROBE_MAX_STEPS),  # fast steps: at most fifty
    ],
)
def test_the_probe_chooses_steps_that_last_the_target_with_a_margin(step_seconds, probe_steps):
    one_step, clock = fake_clock(step_seconds)
    chosen = training.calibrated_steps(one_step, 5, 10.0, clock=clock)
    assert chosen.probe_steps == probe_steps
    assert chosen.probe_seconds == pytest.approx(probe_steps * step_seconds)
    assert chosen.steps * step_seconds >= 10.0
    assert chosen.steps == pytest.approx(10.0 * AUTO_MARGIN / step_seconds, abs=1)


def test_run_steps_times_the_chosen_steps_after_the_probe():
    counter = itertools.count()
    run = training.run_steps(lambda: next(counter), lambda batch: 1.0, 2, "auto", auto_seconds=0.05)
    assert run.calibration is not None and run.calibration.steps >= 1
    assert len(run.step_times) == run.calibration.steps
    # The warmup, the probe and the timed steps all trained: one loss each.
    assert len(run.losses) == 2 + run.calibration.probe_steps + run.calibration.steps
    assert sum(run.step_times) > 0


@needs_taskset
def test_a_real_run_times_the_steps_its_probe_chose_and_records_them():
    process, records = run_module(
        "cnn_train",
        *"--framework tensorflow --model tiny --image-size 32 --batch-size 8 --warmup-steps 1 --threads 1".split(),
        "--steps",
        "auto",
        "--auto-seconds",
        "1.5",
        one_cpu=True,
    )
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    assert record["labels"]["steps"] == "auto"
    chosen = record["metadata"]["steps_auto"]
    assert chosen["target_seconds"] == 1.5 and chosen["probe_steps"] >= PROBE_MIN_STEPS
    assert len(record["metadata"]["step_times"]) == chosen["steps"] == record["metadata"]["timed_steps"]
    # The steps follow from the probe's recorded pace (calibrated_steps; its duration is tested above on a fake
    # clock). How long they then took is the host's business: beside the other xdist worker, on one CPU, the pace
    # drifts by a third between the probe and the timed steps, and no test asserts a wall-clock speed.
    pace = chosen["probe_steps"] / chosen["probe_seconds"]
    assert abs(chosen["steps"] - math.ceil(1.5 * AUTO_MARGIN * pace)) <= 1
    assert record["metadata"]["timed_seconds"] > 0
    assert metric_values(record)["throughput"] > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "some"], "argument --steps: expected a positive integer or auto, got 'some'"),
        (
            ["--steps", "auto", "--data", "real", "--data-dir", "/nonexistent"],
            "--steps auto trains on --data synthetic",
        ),
        (["--steps", "auto", "--mode", "distributed", "--launch-local", "2"], "ranks of --mode distributed must agree"),
    ],
)
def test_what_cannot_calibrate_is_refused(extra, message):
    process, _ = run_module("cnn_train", "--check-args", "--framework", "torch", "--model", "tiny", *extra)
    assert process.returncode == 2
    assert message in process.stderr
