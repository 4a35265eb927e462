import json
import os

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import OK, SKIPPED, cell_outcome
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    RESULT_PREFIX,
    SKIPPED_METRIC,
    RecordError,
    Sample,
    append_samples,
    done_cells,
    failed_sample,
    parse_result_lines,
    read_samples,
    room_problem,
    samples_from_record,
    skipped_sample,
)


def make_record(**changes):
    record = {
        "schema": 1,
        "workload": "cnn_train",
        "status": "ok",
        "error": None,
        "timestamp": 1764000000.5,
        "labels": {
            "workload": "cnn_train",
            "framework": "tensorflow",
            "model": "tiny",
            "batch_size": 32,
            "platform": "guessed-by-workload",
        },
        "metrics": [
            {"metric": "throughput", "value": 41.7, "unit": "images/sec"},
            {"metric": "elapsed", "value": 12.25, "unit": "sec"},
        ],
        "metadata": {"hostname": "c0ffee", "cpuset": "0-1", "virt": "docker", "step_times": [0.1, 0.2]},
    }
    record.update(changes)
    return record


def result_line(record):
    return RESULT_PREFIX + json.dumps(record)


CELL_LABELS = {
    "experiment": "smoke",
    "platform": "cn",
    "scaleup": 2,
    "cpu_config": "pin",
    "processor": "cpu",
    "repeat": 1,
    "scenario": "cn/2/pin/cpu",
    "cell": "cn/2/pin/cpu|r1",
    "campaign": "smoke-1",
}
ENV = {"host": "lab1", "kernel": "6.8", "cpu_model": "Xeon", "cpuset": "host-wide"}
RUNTIME = {"container_id": "abc", "cpuset": "2-3", "launcher": "docker"}


def test_result_line_found_among_noise_and_carriage_returns():
    text = "\n".join(
        [
            "2026-11-22 04:30:00.1 I tensorflow/core: oneDNN custom operations are on.",
            "WARNING: something noisy",
            "  " + result_line(make_record()) + "\r",
            "Epoch done",
        ]
    )
    records = parse_result_lines(text)
    assert len(records) == 1
    assert records[0]["metrics"][0] == {"metric": "throughput", "value": 41.7, "unit": "images/sec"}


def test_prefix_after_log_noise_is_not_a_result_line():
    assert parse_result_lines("worker-1 | " + result_line(make_record())) == []
    assert parse_result_lines("") == []


def test_every_result_line_is_returned_in_order():
    text = result_line(make_record(timestamp=1.0)) + "\nlog\n" + result_line(make_record(timestamp=2.0))
    assert [record["timestamp"] for record in parse_result_lines(text)] == [1.0, 2.0]


def test_bad_json_quotes_the_line_and_says_what_was_expected():
    with pytest.raises(RecordError) as caught:
        parse_result_lines("ok\nPLATBENCH_RESULT {not json at all")
    message = str(caught.value)
    assert "{not json at all" in message
    assert "JSON object" in message


def test_long_offending_line_is_truncated_in_the_message():
    line = "PLATBENCH_RESULT {" + "x" * 5000
    with pytest.raises(RecordError) as caught:
        parse_result_lines(line)
    assert len(str(caught.value)) < 600


def test_nan_metric_value_is_rejected():
    text = result_line(make_record()).replace("41.7", "NaN")
    with pytest.raises(RecordError, match=r'"metrics"\[0\]: .*finite number'):
        parse_result_lines(text)


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"metrics": None}, '"metrics": a list'),
        ({"metrics": []}, "at least one metric"),
        ({"metrics": [{"metric": "throughput", "value": "fast", "unit": "images/sec"}]}, "finite number"),
        ({"metrics": [{"metric": "throughput", "value": True, "unit": "images/sec"}]}, "finite number"),
        ({"metrics": [{"metric": "throughput", "value": 1.0}]}, '"unit": str'),
        ({"schema": 2}, '"schema": 1'),
        ({"status": "done"}, '"status": one of ok, failed'),
        ({"labels": []}, '"labels": an object'),
        ({"metadata": "none"}, '"metadata": an object'),
        ({"timestamp": None}, '"timestamp": a finite number'),
    ],
)
def test_schema_violations_name_the_field(changes, expected):
    with pytest.raises(RecordError) as caught:
        parse_result_lines(result_line(make_record(**changes)))
    assert expected in str(caught.value)
    assert "cnn_train" in str(caught.value)  # the offending line is quoted


def test_missing_metrics_key_is_rejected():
    record = make_record()
    del record["metrics"]
    with pytest.raises(RecordError, match='"metrics": a list'):
        parse_result_lines(result_line(record))


def test_failed_record_may_have_no_metrics():
    records = parse_result_lines(result_line(make_record(status="failed", error="OOM", metrics=[])))
    assert records[0]["error"] == "OOM"


def test_samples_follow_the_design_shape_and_precedence():
    samples = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    assert [sample["metric"] for sample in samples] == ["throughput", "elapsed"]
    sample = samples[0]
    assert set(sample) == {"metric", "value", "unit", "timestamp", "labels", "metadata"}
    assert (sample["value"], sample["unit"], sample["timestamp"]) == (41.7, "images/sec", 1764000000.5)
    assert sample["labels"]["platform"] == "cn"  # the cell wins over the workload
    assert sample["labels"]["framework"] == "tensorflow"  # workload labels kept
    assert sample["labels"]["cell"] == "cn/2/pin/cpu|r1"
    assert sample["metadata"]["cpuset"] == "0-1"  # what the workload saw wins
    assert sample["metadata"]["container_id"] == "abc"  # runtime kept
    assert sample["metadata"]["kernel"] == "6.8"  # host environment kept
    samples[0]["labels"]["platform"] = "changed"
    assert samples[1]["labels"]["platform"] == "cn"  # samples do not share label dicts


def test_failed_sample_keeps_error_and_only_the_output_tail():
    output = "\n".join(f"line {number}" for number in range(100))
    sample = failed_sample(CELL_LABELS, "docker run exited 137", output, ENV, RUNTIME)
    assert (sample["metric"], sample["value"], sample["unit"]) == ("failed", 1, "cell")
    assert sample["labels"] == CELL_LABELS
    assert sample["metadata"]["error"] == "docker run exited 137"
    tail = sample["metadata"]["output_tail"].splitlines()
    assert tail[0] == "line 60" and tail[-1] == "line 99"
    assert sample["metadata"]["container_id"] == "abc"
    assert len(failed_sample(CELL_LABELS, "x", "y" * 10000, ENV, RUNTIME)["metadata"]["output_tail"]) == 4000


def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "new" / "dir" / "samples.jsonl"
    first = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    second = [failed_sample({**CELL_LABELS, "cell": "bm/2/pin/cpu|r1"}, "boom", "", ENV, RUNTIME)]
    append_samples(path, first)
    append_samples(path, second)
    assert read_samples(path) == first + second
    assert len(path.read_text().splitlines()) == 3


def test_non_finite_metadata_is_written_as_null(tmp_path):
    record = make_record(metadata={"step_times": [0.1, float("nan")]})
    path = tmp_path / "samples.jsonl"
    append_samples(path, samples_from_record(record, CELL_LABELS, ENV, RUNTIME))
    assert "NaN" not in path.read_text()
    assert read_samples(path)[0]["metadata"]["step_times"] == [0.1, None]


def test_truncated_last_line_is_skipped_and_reported(tmp_path):
    path = tmp_path / "samples.jsonl"
    samples = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    append_samples(path, samples)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('{"metric": "throughput", "val')  # a crash in the middle of a write
    skipped = []
    assert read_samples(path, on_bad_line=lambda number, line: skipped.append((number, line))) == samples
    assert skipped == [(3, '{"metric": "throughput", "val')]

    # The next append starts on a fresh line, so the new samples survive.
    append_samples(path, samples[:1])
    assert read_samples(path) == samples + samples[:1]


def test_a_write_cut_after_its_first_lines_counts_none_of_them_and_its_cell_runs_again(tmp_path):
    path = tmp_path / "samples.jsonl"
    first = samples_from_record(make_record(), {**CELL_LABELS, "cell": "bm/2/pin/cpu|r1"}, ENV, RUNTIME)
    second = samples_from_record(make_record(timestamp=1764000099.5), CELL_LABELS, ENV, RUNTIME)
    append_samples(path, first)
    append_samples(path, second)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 40])  # a crash in the middle of the second write's last line
    cut, bad = [], []
    found = read_samples(path, on_bad_line=lambda n, line: bad.append(n), on_cut_write=lambda *a: cut.append(a))
    assert found == first
    assert bad == [4] and cut == [([3], "cn/2/pin/cpu|r1")]
    assert done_cells(path) == {"bm/2/pin/cpu|r1"}
    # The cell runs again: its new samples count, once; the cut write's stay skipped.
    append_samples(path, second)
    assert read_samples(path) == first + second
    assert done_cells(path) == {"bm/2/pin/cpu|r1", "cn/2/pin/cpu|r1"}


def test_a_write_cut_in_its_first_line_leaves_the_write_before_it_whole(tmp_path):
    path = tmp_path / "samples.jsonl"
    first = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    append_samples(path, first)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(first[0])[:50])  # the same cell's next record, cut in its first line
    cut = []
    assert read_samples(path, on_cut_write=lambda *args: cut.append(args)) == first
    assert cut == []


def test_an_append_that_fails_takes_back_what_it_wrote(tmp_path, monkeypatch):
    path = tmp_path / "samples.jsonl"
    samples = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    append_samples(path, samples)
    before = path.read_bytes()
    real_write = os.write

    def disk_full_after_some_bytes(descriptor, data):
        if len(data) > 20:
            return real_write(descriptor, data[:20])  # a short write, as the last free blocks take it
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full_after_some_bytes)
    with pytest.raises(OSError, match="No space left"):
        append_samples(path, samples)
    assert path.read_bytes() == before  # no partial line
    with pytest.raises(OSError):
        append_samples(tmp_path / "new.jsonl", samples)
    assert not (tmp_path / "new.jsonl").exists()


def test_a_results_directory_without_room_for_a_cell_is_named_with_what_to_do(tmp_path):
    samples = samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME)
    assert room_problem(tmp_path / "campaign", samples, reserve=0) is None
    problem = room_problem(tmp_path / "campaign", samples, reserve=1 << 60)
    assert problem.startswith(f"the results directory {tmp_path / 'campaign'} has only ")
    assert "too little to record this cell" in problem and "rerun the same command" in problem


def test_done_cells_are_those_with_a_successful_sample(tmp_path):
    path = tmp_path / "samples.jsonl"
    assert done_cells(path) == set()
    append_samples(path, samples_from_record(make_record(), CELL_LABELS, ENV, RUNTIME))
    append_samples(path, [failed_sample({**CELL_LABELS, "cell": "vm/2/pin/cpu|r1"}, "boom", "", ENV, RUNTIME)])
    assert done_cells(path) == {"cn/2/pin/cpu|r1"}


# Per-metric labels and skipped records (workloads/common/record.py: metric(labels=...), status skipped).


def test_a_metric_entry_labels_its_own_sample_only():
    record = make_record(
        labels={"workload": "micro_cpu", "hpl_n": "1000,2000"},
        metrics=[
            {"metric": "hpl_gflops", "value": 50.0, "unit": "GFLOP/s", "labels": {"hpl_n": 1000}},
            {"metric": "hpl_gflops", "value": 80.0, "unit": "GFLOP/s", "labels": {"hpl_n": 2000, "platform": "x"}},
            {"metric": "dgemm_gflops", "value": 100.0, "unit": "GFLOP/s"},
        ],
    )
    cell = {**CELL_LABELS, "hpl_n": "1000,2000"}  # the parameter, as the matrix labels the cell
    first, second, dgemm = samples_from_record(record, cell, ENV, RUNTIME)
    assert (first["labels"]["hpl_n"], second["labels"]["hpl_n"]) == (1000, 2000)  # the entry's own wins
    assert second["labels"]["platform"] == "cn"  # never over the scenario's labels
    assert dgemm["labels"]["hpl_n"] == "1000,2000"
    assert list(first["labels"])[: len(cell)] == list(cell)  # cell labels first, then the record's
    assert first["labels"]["workload"] == "micro_cpu"


def test_a_skipped_record_is_one_sample_with_its_reason():
    record = make_record(status="skipped", error="no GPU in this cell", metrics=[], labels={"workload": "micro_gpu"})
    (sample,) = parse_result_lines(result_line(record))  # a valid record
    skipped = skipped_sample(sample, CELL_LABELS, ENV, RUNTIME)
    assert (skipped["metric"], skipped["value"], skipped["unit"]) == (SKIPPED_METRIC, 1, "")
    assert skipped["metadata"]["reason"] == "no GPU in this cell"
    assert skipped["labels"]["cell"] == "cn/2/pin/cpu|r1" and skipped["labels"]["workload"] == "micro_gpu"


def test_a_skipped_cell_is_done_and_no_failure(tmp_path):
    labels = {**CELL_LABELS, "cell": "bm/2/pin/cpu|r0"}
    output = result_line(make_record(status="skipped", error="no GPU in this cell", metrics=[]))
    status, error, samples = cell_outcome(labels, output, None, ENV, RUNTIME)
    assert (status, error) == (SKIPPED, "no GPU in this cell")
    assert [sample["metric"] for sample in samples] == [SKIPPED_METRIC]
    path = tmp_path / "samples.jsonl"
    append_samples(path, samples)
    assert done_cells(path) == {"bm/2/pin/cpu|r0"}  # resume does not run it again


def test_ok_and_skipped_records_of_one_cell_keep_both():
    output = "\n".join(
        [result_line(make_record()), result_line(make_record(status="skipped", error="no HPCG here", metrics=[]))]
    )
    status, error, samples = cell_outcome(CELL_LABELS, output, None, ENV, RUNTIME)
    assert (status, error) == (OK, None)
    assert [sample["metric"] for sample in samples] == ["throughput", "elapsed", SKIPPED_METRIC]


def test_a_sample_is_built_by_one_constructor_and_read_back_the_same(tmp_path):
    sample = Sample.of("throughput", 12.5, "images/sec", {"platform": "bm"}, {"kernel": "6.1"}, timestamp=100.0)
    assert (sample.metric, sample.value, sample.unit, sample.timestamp) == ("throughput", 12.5, "images/sec", 100.0)
    assert (sample.labels, sample.metadata) == ({"platform": "bm"}, {"kernel": "6.1"})
    path = tmp_path / "samples.jsonl"
    append_samples(path, [sample])
    (read,) = read_samples(path)
    assert isinstance(read, Sample) and read == sample and read.labels == {"platform": "bm"}
    # A line of an older campaign without labels or metadata reads with both empty: readers need no defaults.
    assert Sample.read({"metric": "elapsed", "value": 3}).labels == {}
    derived = sample.but(metric="degradation", value=5.0, unit="%")
    assert (derived.metric, derived.labels, sample.metric) == ("degradation", {"platform": "bm"}, "throughput")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([1, 2], "a JSON list, not an object"),
        ({"value": 1}, "an object without metric"),
        ({"metric": 3, "value": 1}, "an object whose metric is not a name"),
        ({"metric": "x", "value": 1, "labels": [1]}, "an object whose labels or metadata are not a mapping"),
    ],
)
def test_what_is_not_a_sample_is_refused_with_why(data, problem, tmp_path):
    assert Sample.problem(data) == problem
    with pytest.raises(ValueError, match=problem):
        Sample.read(data)
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(data) + "\n" + json.dumps({"metric": "elapsed", "value": 1}) + "\n")
    bad = []
    assert [sample.metric for sample in read_samples(path, on_bad_line=lambda n, line: bad.append(n))] == ["elapsed"]
    assert bad == [1]
