"""The overheads the workload injects itself (plugin_utils/experiment/inject.py). The spin (``inject: {spin: S}``): its
arithmetic on a fake clock, the share of the timed part it takes in a loop of real steps. The discard
(``inject: {discard: D}``): how many timed steps it leaves out, a loop whose throughput is exactly the kept share of
the same steps', the distributed aggregate. For both: the refusal of a bad value, and a real cnn_train run that reads
it from its environment and records what it did. What a campaign finds with them:
tests/integration/test_calibrate.py."""

import itertools
import time

import pytest
from workload_run import metric_values, only_record, run_module

from workloads.cnn_train import ranks, training
from workloads.common.harness import WorkloadFailed


class FakeClock:
    """A clock that moves 1 ms each time it is read: a spin ends after a known number of reads."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 0.001
        return self.now


@pytest.mark.parametrize(("fraction", "step", "spun"), [(0.5, 0.1, 0.1), (0.2, 0.4, 0.1), (0.0, 0.4, 0.0)])
def test_the_spin_makes_it_the_given_fraction_of_step_and_spin(fraction, step, spun):
    # step x f / (1 - f): the step alone is then (1 - f) of the step and its spin, so the throughput is (1 - f) of it.
    assert training.spin_for(step, fraction, FakeClock()) == pytest.approx(spun, abs=0.0025)


# Its spin and steps are timed by the wall clock: beside the lab's cells (make test's unit run at nice 10) a preempted
# spin overshoots its share, so it runs with the host tests, before the lab.
@pytest.mark.host
def test_the_timed_steps_spend_the_fraction_spinning_and_the_warmup_spin_is_not_counted():
    counter = itertools.count()

    def step(batch):
        time.sleep(0.004)
        return 1.0

    run = training.run_steps(lambda: next(counter), step, 3, 10, spin=0.2)
    assert len(run.step_times) == 10
    # At least the fraction (the spin ends once it is reached), and not the warmup's spin on top.
    assert 0.2 <= run.spun / sum(run.step_times) < 0.5
    plain = training.run_steps(lambda: next(counter), step, 3, 10)
    assert plain.spun == 0.0


@pytest.mark.parametrize("text", ["1", "-0.1", "five", "nan"])
def test_a_bad_spin_in_the_environment_is_refused_naming_it(text):
    with pytest.raises(WorkloadFailed, match=rf"PLATBENCH_INJECT_SPIN='{text}': the injected spin must be a fraction"):
        training.spin_from_env({"PLATBENCH_INJECT_SPIN": text})
    assert training.spin_from_env({}) == 0.0 and training.spin_from_env({"PLATBENCH_INJECT_SPIN": "0.05"}) == 0.05


@pytest.mark.parametrize(
    ("steps", "fraction", "left_out"),
    [
        (100, 0.05, 5),
        (390, 0.05, 20),
        (10, 0.05, 1),
        (9, 0.05, 0),
        (12, 0.25, 3),
        (40, 0.0, 0),
        (1, 0.9, 0),
        (0, 0.5, 0),
    ],
)
def test_the_nearest_whole_number_of_steps_is_left_out_never_all_of_them(steps, fraction, left_out):
    assert training.discarded_steps(steps, fraction) == left_out


def test_a_discard_keeps_every_steps_time_and_counts_the_kept_share_of_its_images():
    counter = itertools.count()

    def step(batch):
        return 1.0

    run = training.run_steps(lambda: next(counter), step, 3, 20, discard=0.25)
    assert len(run.step_times) == 20 and run.discarded == 5
    metrics = {entry["metric"]: entry["value"] for entry in training.step_metrics(run, 8, 0.0)}
    # 15 of 20 steps' images over all 20 steps' time: 0.75 of the same steps counted whole, exactly.
    assert metrics["throughput"] == pytest.approx(8 * 15 / sum(run.step_times))
    plain = training.StepRun(*run[:-1], discarded=0)
    whole = {entry["metric"]: entry["value"] for entry in training.step_metrics(plain, 8, 0.0)}
    assert metrics["throughput"] / whole["throughput"] == pytest.approx(0.75)
    assert metrics["step_time_p50"] == whole["step_time_p50"]  # the steps themselves are untouched


@pytest.mark.parametrize("text", ["1", "-0.1", "five", "inf"])
def test_a_bad_discard_in_the_environment_is_refused_naming_it(text):
    match = rf"PLATBENCH_INJECT_DISCARD='{text}': the injected discard must be a fraction"
    with pytest.raises(WorkloadFailed, match=match):
        training.discard_from_env({"PLATBENCH_INJECT_DISCARD": text})
    assert training.discard_from_env({}) == 0.0
    assert training.discard_from_env({"PLATBENCH_INJECT_DISCARD": "0.05"}) == 0.05


def test_the_distributed_aggregate_counts_the_kept_steps_of_every_rank():
    per_rank = [ranks.rank_figures(rank, [0.1] * 20, [0.0] * 20, {}) for rank in range(2)]
    metrics, metadata = ranks.aggregate(per_rank, 4, discarded=1)
    throughput = {entry["metric"]: entry["value"] for entry in metrics}["throughput"]
    assert throughput == pytest.approx(4 * 19 * 2 / 2.0)
    assert [figures["throughput"] for figures in metadata["per_rank"]] == pytest.approx([4 * 19 / 2.0] * 2)


def real_run(variable, fraction):
    process, records = run_module(
        "cnn_train",
        *"--framework torch --model tiny --image-size 32 --batch-size 8 --warmup-steps 1 --steps 12".split(),
        "--threads",
        "1",
        env={variable: fraction},
    )
    assert process.returncode == 0, process.stderr
    return only_record(process, records)


def test_a_real_run_spins_what_its_environment_says_and_records_it():
    record = real_run("PLATBENCH_INJECT_SPIN", "0.3")
    spin = record["metadata"]["inject_spin"]
    assert spin["fraction"] == 0.3 and spin["timed_seconds"] == pytest.approx(
        sum(record["metadata"]["step_times"]), abs=1e-4
    )
    assert 0.3 <= spin["seconds"] / spin["timed_seconds"] < 0.6
    assert metric_values(record)["throughput"] > 0


def test_a_real_run_discards_what_its_environment_says_and_records_it():
    record = real_run("PLATBENCH_INJECT_DISCARD", "0.25")
    assert record["metadata"]["inject_discard"] == {"fraction": 0.25, "steps": 3, "timed_steps": 12}
    assert "inject_spin" not in record["metadata"]
    # The record keeps each step's time to the microsecond (half of one off at most) and its throughput is over the
    # steps' whole time: 9 kept steps of 8 images over the 12 steps' time, within what the rounding allows.
    recorded, rounding = sum(record["metadata"]["step_times"]), 12 * 0.5e-6
    throughput = metric_values(record)["throughput"]
    assert 8 * 9 / (recorded + rounding) * (1 - 1e-9) <= throughput <= 8 * 9 / (recorded - rounding) * (1 + 1e-9)
