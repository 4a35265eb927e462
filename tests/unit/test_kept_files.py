"""Files a run keeps beside the campaign's samples (loadgen's logs, its per-step figures): the record's schema, the
record_cell action and the callback that writes them per cell before the samples (the workload side:
test_workload_harness.py)."""

import json

import pytest
from ansible.executor.task_result import _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import SERIES_MIN_ITEMS
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import cell_folder, write_cell_files
from record_cell_run import record_cell, record_line

from workloads.common.record import KEPT_FILES_CHARS, RecordError, emit_record, metric, parse_result_lines


def record_with_files(files):
    """A record line of one ok run that keeps ``files``."""
    line = record_line()
    record = json.loads(line.split(" ", 1)[1])
    record["files"] = files
    return "PLATBENCH_RESULT " + json.dumps(record)


@pytest.mark.parametrize(
    "files, problem",
    [
        ({"../escape.txt": "x"}, "'../escape.txt' must be a plain file name"),
        ({".hidden": "x"}, "'.hidden' must be a plain file name"),
        ({"a.txt": 3}, "\"files\"['a.txt']: a string"),
        ({"a.txt": "x" * (KEPT_FILES_CHARS + 1)}, f"{KEPT_FILES_CHARS} characters at most"),
    ],
)
def test_the_record_schema_refuses_files_that_cannot_be_kept_safely(files, problem):
    with pytest.raises(RecordError, match="does not follow record schema") as refused:
        parse_result_lines(record_with_files(files))
    assert problem in str(refused.value)
    with pytest.raises(ValueError, match="must be|a string|at most"):
        emit_record("demo", {}, [metric("x", 1, "s")], {}, files=files)


def test_cell_folders_are_file_names_that_keep_alike_ids_apart():
    assert cell_folder("bm/2/pin/cpu|app=ic|r0").startswith("files/bm_2_pin_cpu_app=ic_r0-")
    assert cell_folder("a/b|r0") != cell_folder("a|b/r0")
    with pytest.raises(ValueError, match="inside the results directory"):
        write_cell_files("/tmp/x", {"../outside.txt": "x"})


def test_the_callback_writes_an_ok_cells_files_before_its_samples_which_name_them(tmp_path, monkeypatch):
    callback = callback_loader.get("platbench.lab.results")
    callback.set_options()
    monkeypatch.setattr(callback, "_display", type("Quiet", (), {"display": print, "warning": print})())
    results_dir = tmp_path / "campaign"
    cell_id = "bm/2/pin/cpu|app=ic|r0"
    output = record_with_files({"mlperf_log_summary.txt": "Result is : INVALID\n"}) + "\n"
    result = record_cell(results_dir, cell_id, output=output)
    folder = cell_folder(cell_id)
    assert result["platbench_files"] == {f"{folder}/mlperf_log_summary.txt": "Result is : INVALID\n"}
    task = Task.load({"name": "Record the cell", "platbench.lab.record_cell": {}}, loader=DataLoader())
    callback.v2_runner_on_ok(_RawTaskResult(Host("lab1"), task, result, {}).as_callback_task_result())
    assert (results_dir / folder / "mlperf_log_summary.txt").read_text() == "Result is : INVALID\n"
    samples = [json.loads(line) for line in (results_dir / "samples.jsonl").read_text().splitlines()]
    assert {json.dumps(s["metadata"]["kept_files"]) for s in samples} == {
        json.dumps({"mlperf_log_summary.txt": f"{folder}/mlperf_log_summary.txt"})
    }
    # A failed cell keeps none of its record's files, even when its output held a record with files: only its own
    # output (test_records_failed_output.py).
    failed = record_cell(results_dir, "cn/2/pin/cpu|r0", output=output, error="docker run exited with 137")
    assert list(failed["platbench_files"]) == [failed["platbench_samples"][0]["metadata"]["output_file"]]


def record_with_series(step_times, **labels):
    """A record line of one ok run whose metadata holds a figure per timed step, and a short list."""
    record = json.loads(record_line().split(" ", 1)[1])
    record["labels"].update(labels)
    record["metadata"].update(step_times=step_times, losses=[1.0] * len(step_times), cpus=[0, 1])
    return "PLATBENCH_RESULT " + json.dumps(record)


def test_a_records_per_step_figures_go_once_to_a_file_of_its_cell_that_each_of_its_samples_names(tmp_path, monkeypatch):
    callback = callback_loader.get("platbench.lab.results")
    callback.set_options()
    monkeypatch.setattr(callback, "_display", type("Quiet", (), {"display": print, "warning": print})())
    results_dir, cell_id = tmp_path / "campaign", "bm/1/pin/cpu|r3"
    alone, shared = [0.004] * SERIES_MIN_ITEMS, [0.005] * 2100
    output = record_with_series(alone, share="alone") + "\n" + record_with_series(shared, share="shared") + "\n"
    result = record_cell(results_dir, cell_id, output=output)
    folder = cell_folder(cell_id)
    assert sorted(result["platbench_files"]) == [f"{folder}/series-1.json", f"{folder}/series-2.json"]
    task = Task.load({"name": "Record the cell", "platbench.lab.record_cell": {}}, loader=DataLoader())
    callback.v2_runner_on_ok(_RawTaskResult(Host("lab1"), task, result, {}).as_callback_task_result())
    samples = [json.loads(line) for line in (results_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 5  # throughput and elapsed of each record, and the degradation
    for sample in samples:
        metadata = sample["metadata"]
        assert "step_times" not in metadata and "losses" not in metadata and metadata["cpus"] == [0, 1]
        series = json.loads((results_dir / metadata["series_file"]).read_text())
        expected = shared if sample["labels"].get("share") != "alone" else alone
        assert series == {"losses": [1.0] * len(expected), "step_times": expected}
    # A shorter list stays where it was.
    short = record_cell(results_dir, "bm/1/pin/cpu|r4", output=record_with_series([0.004] * (SERIES_MIN_ITEMS - 1)))
    assert short["platbench_files"] == {}
    assert {len(s["metadata"]["step_times"]) for s in short["platbench_samples"]} == {SERIES_MIN_ITEMS - 1}
