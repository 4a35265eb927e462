"""The injected spin (``inject: {spin: S}``, plugins/plugin_utils/inject.py) in the workload: the spin's arithmetic on
a fake clock, the share of the timed part it takes in a loop of real steps, the refusal of a bad value, and a real
cnn_train run that reads it from its environment and records what it spent. What a campaign finds with it:
tests/integration/test_calibrate.py."""

import itertools
import time

import pytest
from workload_run import metric_values, only_record, run_module

from workloads.cnn_train import training
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


def test_a_real_run_spins_what_its_environment_says_and_records_it():
    process, records = run_module(
        "cnn_train",
        *"--framework torch --model tiny --image-size 32 --batch-size 8 --warmup-steps 1 --steps 12".split(),
        "--threads",
        "1",
        env={"PLATBENCH_INJECT_SPIN": "0.3"},
    )
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    spin = record["metadata"]["inject_spin"]
    assert spin["fraction"] == 0.3 and spin["timed_seconds"] == pytest.approx(
        sum(record["metadata"]["step_times"]), abs=1e-4
    )
    assert 0.3 <= spin["seconds"] / spin["timed_seconds"] < 0.6
    assert metric_values(record)["throughput"] > 0
