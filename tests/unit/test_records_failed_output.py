"""A failed cell keeps its whole output: its sample holds the tail (records.TAIL_CHARS) and names a file of the cell's
folder, beside the campaign's samples, that holds all of it, however long (record_cell parses only its last
MAX_OUTPUT_CHARS); the results callback writes that file before the sample."""

from __future__ import annotations

import json

from ansible.executor.task_result import _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader
from ansible_collections.platbench.lab.plugins.action.record_cell import MAX_OUTPUT_CHARS
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    TAIL_CHARS,
    cell_folder,
    failed_output_path,
)
from record_cell_run import record_cell, record_line

CELL = "cn/2/pin/cpu|r0"


def long_output():
    """A framework's log far past what record_cell parses, its first line the one that says what went wrong."""
    lines = ["E0000 the first error: libcuda.so.1 not found"]
    lines += [f"W step {number}: retrying with the CPU allocator" for number in range(MAX_OUTPUT_CHARS // 20)]
    return "\n".join(lines + ["Killed"])


def test_a_failed_cells_sample_keeps_the_tail_and_names_the_file_of_its_whole_output(tmp_path):
    output = long_output()
    assert len(output) > MAX_OUTPUT_CHARS
    result = record_cell(tmp_path, CELL, output=output, error="docker run exited with 137")
    [sample] = result["platbench_samples"]
    path = sample["metadata"]["output_file"]
    assert result["platbench_files"] == {path: output}  # all of it, its first line too
    assert path == failed_output_path(CELL, sample["timestamp"])
    assert path.startswith(cell_folder(CELL) + "/failed-output-") and path.endswith("Z.log")
    tail = sample["metadata"]["output_tail"]
    assert len(tail) <= TAIL_CHARS and tail.endswith("Killed") and "the first error" not in tail


def test_the_callback_writes_the_whole_output_before_the_failed_sample(tmp_path, monkeypatch):
    callback = callback_loader.get("platbench.lab.results")
    callback.set_options()
    monkeypatch.setattr(callback, "_display", type("Quiet", (), {"display": print, "warning": print})())
    results_dir = tmp_path / "campaign"
    output = long_output()
    result = record_cell(results_dir, CELL, output=output)  # no record line: failed
    assert result["platbench_status"] == "failed"
    task = Task.load({"name": "Record the cell", "platbench.lab.record_cell": {}}, loader=DataLoader())
    callback.v2_runner_on_ok(_RawTaskResult(Host("lab1"), task, result, {}).as_callback_task_result())
    [sample] = [json.loads(line) for line in (results_dir / "samples.jsonl").read_text().splitlines()]
    assert (results_dir / sample["metadata"]["output_file"]).read_text() == output


def test_each_failure_has_a_file_of_its_own_and_an_ok_or_silent_cell_keeps_none(tmp_path):
    # Named by the failed sample's time, to the millisecond: a rerun's failure never overwrites the first one's.
    assert failed_output_path(CELL, 1764000000.5) != failed_output_path(CELL, 1764000000.0)
    assert failed_output_path(CELL, 1764000000.25).endswith("/failed-output-20251124T160000.250Z.log")
    ok = record_cell(tmp_path, CELL, output=record_line() + "\n")
    assert ok["platbench_files"] == {} and "output_file" not in ok["platbench_samples"][0]["metadata"]
    silent = record_cell(tmp_path, CELL, output="", error="the plan was refused")
    assert silent["platbench_files"] == {} and "output_file" not in silent["platbench_samples"][0]["metadata"]
