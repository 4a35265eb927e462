"""cnn_train's host-to-device split (Lin et al. 2018) and its check of the GPUs against the plan, on CPU."""

from types import SimpleNamespace

import pytest

from workloads.cnn_train.h2d import CopyLog, copy_totals, event_seconds, no_copy
from workloads.cnn_train.training import check_planned_gpus
from workloads.common.gpus import ExpectedGpus
from workloads.common.harness import WorkloadFailed


class FakeEvent:
    """A CUDA event's timing: the milliseconds since a shared origin at which the stream passed it."""

    def __init__(self, at_ms):
        self.at_ms = at_ms
        self.read = False

    def elapsed_time(self, end):
        self.read = True
        return end.at_ms - self.at_ms


def test_copy_totals_sum_seconds_and_bytes():
    assert copy_totals([]) == (0, 0)
    assert copy_totals([(0.25, 100), (0.5, 28), (0.0, 0)]) == (0.75, 128)


def test_event_times_are_milliseconds_turned_into_seconds():
    assert event_seconds(FakeEvent(10.0), FakeEvent(12.5)) == pytest.approx(0.0025)


def test_the_metrics_count_the_timed_steps_only_and_read_the_events_at_the_end():
    log = CopyLog("CUDA events around the input copies")
    warmup = (FakeEvent(0.0), FakeEvent(900.0))  # the first copy: slow, and not timed
    log.add(lambda: event_seconds(*warmup), 1000)
    timed = [(FakeEvent(1000.0 * step), FakeEvent(1000.0 * step + 4.0)) for step in (1, 2, 3)]
    for start, end in timed:
        log.add(lambda start=start, end=end: event_seconds(start, end), 1000)
    assert not any(start.read for start, _ in timed), "events are read once the run is over, not per step"
    assert log.metrics(3) == [
        {"metric": "h2d_time", "value": pytest.approx(0.012), "unit": "s"},
        {"metric": "h2d_bytes", "value": 3000, "unit": "B"},
    ]
    assert not warmup[0].read
    assert log.totals(10) == (pytest.approx(0.912), 4000)  # more timed steps than logged: all of them


def test_a_batch_already_on_the_gpu_copies_nothing():
    log = CopyLog("synthetic")
    for _ in range(3):
        log.add(no_copy, 0)
    assert log.totals(2) == (0.0, 0)


def planned(mode="single", gpus=(), num_gpus=None):
    return SimpleNamespace(mode=mode, gpus=list(gpus), num_gpus=num_gpus)


def test_the_gpus_a_process_will_use_must_be_the_plan_s_count():
    check_planned_gpus(planned(), None)  # a run by hand
    check_planned_gpus(planned(), ExpectedGpus(0, []))
    check_planned_gpus(planned(gpus=["0"]), ExpectedGpus(1, ["0000:3b:00.0"]))
    check_planned_gpus(planned("distributed"), ExpectedGpus(1, None))  # a rank: checked after its run
    with pytest.raises(WorkloadFailed) as caught:
        check_planned_gpus(planned(num_gpus=0), ExpectedGpus(1, ["0000:3b:00.0"]))
    assert str(caught.value) == (
        "cnn_train --mode single would use 0 GPU(s) (--num-gpus 0, visible: none) but the cell was planned "
        "with 1; set --num-gpus to the plan's count or leave it out"
    )
    with pytest.raises(WorkloadFailed, match=r"--mode ps would use 2 GPU\(s\) \(--num-gpus unset, visible: 0,1\)"):
        check_planned_gpus(planned("ps", ["0", "1"]), ExpectedGpus(1, None))


def test_a_local_launch_plans_each_rank_with_the_gpus_it_hands_it():
    from workloads.cnn_train.local_launch import _planned_env

    assert _planned_env(SimpleNamespace(expected_gpus=None), 1) == {}  # a run by hand: ranks unchecked too
    run = SimpleNamespace(expected_gpus=ExpectedGpus(2, ["0000:3b:00.0", "0000:5e:00.0"]))
    # Each rank sees its one GPU as device 0; the launcher checks the run's bus ids itself.
    assert _planned_env(run, 1) == {"PLATBENCH_EXPECTED_GPUS": '{"count":1,"pci_bus_ids":null}'}
    assert _planned_env(run, 0) == {"PLATBENCH_EXPECTED_GPUS": '{"count":0,"pci_bus_ids":null}'}
