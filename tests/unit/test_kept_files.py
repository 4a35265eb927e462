"""Files a run keeps beside the campaign's samples (loadgen's logs): the record's schema, the record_cell action
and the callback that writes them per cell before the samples (the workload side: test_workload_harness.py)."""

import json

import pytest
from ansible.executor.task_result import _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader
from ansible_collections.platbench.lab.plugins.plugin_utils.records import cell_folder, write_cell_files
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
