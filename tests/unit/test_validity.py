"""Run validity: the marks of a summary row (CV, short timed part, steal, throttling) with their fixes."""

import csv
import math

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples

from platbench import report, validity

UNAVAILABLE = "not offered by this host"


@pytest.mark.parametrize(
    "cv, half_width, expected",
    [
        (0.10, 0.05, 18),  # t(17) = 2.110: (2.110 * 0.10 / 0.05)^2 = 17.8 <= 18; t(16) = 2.120 gives 17.98 > 17
        (0.06, 0.05, 9),  # n = 8: t(7) * 0.06 / sqrt(8) = 0.0502, just over; n = 9: 0.0461
        (0.01, 0.05, 3),  # n = 2: t(1) = 12.7 makes even a 1% CV's interval 9.0% wide; n = 3: 2.5%
        (0.0, 0.05, 2),
    ],
)
def test_repeats_needed_bring_the_mean_interval_within_the_target(cv, half_width, expected):
    from scipy import stats

    needed = validity.repeats_needed(cv, half_width)
    # The defining property, checked against scipy directly: n holds, n - 1 does not (unless n is the minimum).
    holds = [stats.t.ppf(0.975, n - 1) * cv / math.sqrt(n) <= half_width for n in (needed - 1, needed)]
    assert holds[1] and (needed == 2 or not holds[0])
    assert needed == expected


def test_steps_needed_scale_the_timed_part_to_the_minimum():
    assert validity.steps_needed(100, 2.5, 10.0) == 400
    assert validity.steps_needed(30, 7.0, 10.0) == 43  # 42.86 steps: one more, never short of the minimum


def test_cv_marks_above_the_threshold_only():
    reasons = validity.cv_reasons(3, {"throughput": 0.048, "elapsed": 0.10, "startup": None})
    assert reasons == ["elapsed CV 10% > 5%: raise repeats to 18"]
    # 40 repeats already bound the mean: more will not help, and the mark says so.
    (reason,) = validity.cv_reasons(40, {"elapsed": 0.10})
    assert reason.startswith("elapsed CV 10% > 5% though 40 repeats bound its mean within ±5%")
    assert validity.cv_reasons(3, {"elapsed": 0.10}, validity.Thresholds(max_cv=0.2)) == []


def test_a_short_timed_part_asks_for_the_steps_that_make_it_long_enough():
    assert validity.timed_reason([(12.0, 100), (4.0, 50), (None, None)]) == (
        "timed part 4 s < 10 s: raise steps to 125"
    )
    assert validity.timed_reason([(3.0, None)]) == "timed part 3 s < 10 s: lengthen it to 10 s"
    assert validity.timed_reason([(10.0, 100)]) is None
    assert validity.timed_reason([(None, None)]) is None  # not recorded: nothing to judge


def test_steal_and_throttling_name_the_host():
    cells = [("lab1", 0.5, None), ("lab2", 3.25, None)]
    assert validity.host_reasons(cells) == ["CPU steal 3.2% on host lab2"]
    assert validity.host_reasons([("lab1", 1.9, 0)]) == []
    assert validity.host_reasons([("lab1", None, 2), ("lab1", None, 1)]) == [
        "frequency throttled (3 event(s) on host lab1)"
    ]
    assert validity.host_reasons([("lab1", None, None)]) == []  # not offered: never a mark


def test_sample_fields_keep_numbers_and_leave_what_the_host_does_not_offer():
    metadata = {
        "timed_seconds": 12.5,
        "timed_steps": 100,
        "host_state": {"steal_percent": 0.4, "throttle_events": UNAVAILABLE},
    }
    assert validity.sample_fields(metadata) == {
        "timed_seconds": 12.5,
        "timed_steps": 100,
        "steal_percent": 0.4,
        "throttle_events": None,
        "harness_cpu_seconds": None,
        "harness_cpu_share": None,
        "harness_isolated": None,
        "harness_isolation": None,
        "isolation": None,
        "workload_sched_policy": None,
        "workload_nice": None,
    }
    assert set(validity.sample_fields({}).values()) == {None}
    placed = validity.sample_fields({"sched_policy": "SCHED_IDLE", "nice": 0})
    assert (placed["workload_sched_policy"], placed["workload_nice"]) == ("SCHED_IDLE", 0)
    assert validity.sample_fields({"sched_policy": 5, "nice": "0"})["workload_sched_policy"] is None
    harness = {"harness_isolated": False, "harness_isolation": "no spare CPU", "harness_cpu_share": 0.004}
    fields = validity.sample_fields({**harness, "harness_cpu_seconds": "n/a", "isolation": "none"})
    assert {name: fields[name] for name in validity.HARNESS_COLUMNS} == {
        **harness,
        "harness_cpu_seconds": None,  # not a number: not recorded
        "isolation": "none",
    }
    assert validity.sample_fields({"harness_isolated": "yes"})["harness_isolated"] is None


def test_a_harness_that_used_over_half_a_percent_of_the_cells_cpus_marks_its_row():
    assert validity.harness_reason([0.001, 0.012, None]) == (
        "the harness used 1.2% of the cell's CPUs during its timed part (> 0.5%)"
    )
    assert validity.harness_reason([0.005, None]) is None  # at the threshold: within it
    assert validity.harness_reason([None]) is None  # an older campaign: no mark
    assert validity.harness_reason([0.012], validity.Thresholds(max_harness_share=0.02)) is None
    cells = [
        {"harness_isolated": False, "harness_isolation": "no spare CPU", "isolation": None},
        {"harness_isolated": False, "harness_isolation": "no spare CPU", "isolation": "none"},
        {"harness_isolated": False, "harness_isolation": None},
        {"harness_isolated": True, "harness_isolation": "CPU 3"},
        {},
    ]
    assert validity.harness_of(cells) == {"not isolated": ["no spare CPU", "no reason recorded"], "isolation": ["none"]}
    assert validity.harness_of([{}]) == {"not isolated": [], "isolation": []}


def test_a_workload_below_the_normal_priority_marks_its_row_with_how_many_cells_and_what_to_restart():
    said = validity.priority_reason([("SCHED_IDLE", 0), ("SCHED_OTHER", 0), ("SCHED_IDLE", 0), (None, None)])
    assert said.startswith("the workload ran at SCHED_IDLE in 2 of 4 cells, not the normal policy at nice 0")
    assert "a dockerd started by a process at idle priority" in said
    assert validity.priority_reason([("SCHED_OTHER", 10)]).startswith("the workload ran at SCHED_OTHER, nice 10 in 1")
    assert validity.priority_reason([("SCHED_OTHER", 0), ("SCHED_OTHER", -5)]) is None  # raised: nothing goes first
    assert validity.priority_reason([(None, None)]) is None  # an older record: no mark


def test_a_container_whose_engine_ran_it_at_sched_idle_is_marked_and_the_host_side_is_not(tmp_path):
    # What the lab recorded when its dockerd had been started from an idle-priority playbook: every cn cell's
    # workload at SCHED_IDLE, bm's (reset by its launcher) at the normal policy.
    samples = []
    for repeat in range(3):
        samples += cell_samples("bm", repeat, 100.0, harness={"sched_policy": "SCHED_OTHER", "nice": 0})
        samples += cell_samples("cn", repeat, 97.0, harness={"sched_policy": "SCHED_IDLE", "nice": 0})
    append_samples(tmp_path / "samples.jsonl", samples)
    rows, _, _ = report.summarize(report.load_samples(tmp_path), ["throughput"])
    marks = {row["platform"]: row["validity"] for row in rows}
    assert marks["bm"] == ""
    assert marks["cn"].startswith("the workload ran at SCHED_IDLE in 3 of 3 cells")


def cell_samples(platform, repeat, throughput, host_state=None, timed_seconds=20.0, host="lab1", harness=None):
    """One cnn_train cell of the fixed campaign: throughput and elapsed, with the workload's timed part and host
    (and how its harness was placed: ``harness``, metadata of its own)."""
    scenario = f"{platform}/2/pin/cpu"
    labels = {
        "workload": "cnn_train",
        "platform": platform,
        "scaleup": 2,
        "cpu_config": "pin",
        "processor": "cpu",
        "repeat": repeat,
        "scenario": scenario,
        "cell": f"{scenario}|r{repeat}",
        "host": host,
    }
    metadata = {
        "timed_seconds": timed_seconds,
        "timed_steps": 100,
        "host_state": host_state or {"steal_percent": 0.1, "throttle_events": UNAVAILABLE},
        **(harness or {}),
    }
    return [
        {"metric": name, "value": value, "unit": unit, "timestamp": 1.0, "labels": labels, "metadata": metadata}
        for name, value, unit in (("throughput", throughput, "images/sec"), ("elapsed", 30.0, "s"))
    ]


@pytest.fixture
def campaign(tmp_path):
    """bm: steady (CV 1%) and valid; cn: CV 10%; pd: a 4 s timed part; vm: 5% steal; sg: throttled; gv: its harness
    used 0.8% of a cell's CPUs."""
    samples = []
    for repeat, (bm, cn) in enumerate([(99.0, 90.0), (100.0, 100.0), (101.0, 110.0)]):
        samples += cell_samples("bm", repeat, bm)
        samples += cell_samples("cn", repeat, cn)
        samples += cell_samples("pd", repeat, bm, timed_seconds=4.0 if repeat == 1 else 20.0)
        steal = {"steal_percent": 5.0 if repeat == 2 else 0.2, "throttle_events": UNAVAILABLE}
        samples += cell_samples("vm", repeat, bm, host_state=steal)
        samples += cell_samples("sg", repeat, bm, host_state={"steal_percent": 0.0, "throttle_events": repeat})
        share = 0.008 if repeat == 0 else 0.001
        samples += cell_samples("gv", repeat, bm, harness={"harness_isolated": True, "harness_cpu_share": share})
    append_samples(tmp_path / "samples.jsonl", samples)
    return tmp_path


def test_the_rows_of_a_fixed_campaign_carry_their_marks(campaign):
    rows, keys, _ = report.summarize(report.load_samples(campaign), ["throughput"])
    assert "timed_seconds" not in keys and "steal_percent" not in keys  # never row keys
    assert {row["platform"]: row["validity"] for row in rows} == {
        "bm": "",
        "cn": "throughput CV 10% > 5%: raise repeats to 18",
        "pd": "timed part 4 s < 10 s: raise steps to 250",
        "vm": "CPU steal 5.0% on host lab1",
        "sg": "frequency throttled (3 event(s) on host lab1)",
        "gv": "the harness used 0.8% of the cell's CPUs during its timed part (> 0.5%)",
    }


def test_the_table_csv_and_note_show_the_marks_and_the_options_move_the_thresholds(campaign, capsys):
    assert report.main([str(campaign), "--metric", "throughput"]) == 0
    answer, table, *notes = capsys.readouterr().out.split("\n\n")
    assert answer.startswith("Answer: throughput")  # the answer first, then the table
    (note,) = [note for note in notes if note.startswith("validity:")]
    assert table.splitlines()[0].split()[-1] == "validity"
    assert "raise repeats to 18" in table and "CPU steal 5.0% on host lab1" in table
    assert note.startswith("validity: a row is marked when a metric's CV is above 5%")
    with open(campaign / "report.csv", newline="") as stream:
        marks = {row["platform"]: row["validity"] for row in csv.DictReader(stream)}
    assert marks["pd"] == "timed part 4 s < 10 s: raise steps to 250" and marks["bm"] == ""
    assert "validity: a row is marked" in (campaign / "report.md").read_text()

    options = ["--cv-threshold", "15", "--min-timed-seconds", "3", "--max-steal-percent", "6"]
    options += ["--max-harness-percent", "1"]
    assert report.main([str(campaign), "--metric", "throughput", "--format", "csv", *options]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    # Only the throttled row is left: no threshold moves "any throttle event".
    assert header.endswith(",validity")
    with open(campaign / "report.csv", newline="") as stream:
        marks = {row["platform"]: row["validity"] for row in csv.DictReader(stream)}
    assert [platform for platform, mark in marks.items() if mark] == ["sg"]


def test_a_valid_campaign_keeps_its_tables_as_they_were(tmp_path, capsys):
    append_samples(
        tmp_path / "samples.jsonl",
        [sample for repeat in range(3) for sample in cell_samples("bm", repeat, 100.0 + repeat / 10)],
    )
    assert report.main([str(tmp_path), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "validity" not in out
