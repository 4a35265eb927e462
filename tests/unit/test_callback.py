"""The results callback, loaded by Ansible's plugin loader and fed real task results."""

import json
from pathlib import Path

import pytest
from ansible.executor.task_result import CallbackTaskResult, _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader

SECRET = "hunter2-do-not-leak"



class DisplayRecorder:
    def __init__(self):
        self.lines, self.warnings = [], []

    def display(self, message, *args, **kwargs):
        self.lines.append(message)

    def warning(self, message, *args, **kwargs):
        self.warnings.append(message)


@pytest.fixture
def callback(monkeypatch):
    plugin = callback_loader.get("platbench.lab.results")
    plugin.set_options()
    recorder = DisplayRecorder()
    monkeypatch.setattr(plugin, "_display", recorder)
    plugin.recorder = recorder
    return plugin


def make_task(action="platbench.lab.record_cell", **keywords):
    return Task.load({"name": "Record the cell", action: {}, **keywords}, loader=DataLoader())


def record_line(status="ok", error=None, throughput=41.7):
    record = {"schema": 1, "workload": "cnn_train", "status": status, "error": error, "timestamp": 1764000000.0,
              "labels": {"workload": "cnn_train", "framework": "tensorflow", "model": "tiny"},
              "metrics": [{"metric": "throughput", "value": throughput, "unit": "images/sec"},
                          {"metric": "elapsed", "value": 9.5, "unit": "sec"}] if status == "ok" else [],
              "metadata": {"cpuset": "2-3", "framework_version": "2.20"}}
    return "PLATBENCH_RESULT " + json.dumps(record)


def cell_result(results_dir, cell_id="cn/2/pin/cpu|r0", output=None, error=None, **extra):
    scenario = cell_id.split("|")[0]
    platform, scaleup, cpu_config, processor = scenario.split("/")
    return {
        "changed": False,
        "platbench_cell": {"id": cell_id, "scenario": scenario,
                           "labels": {"experiment": "smoke", "platform": platform, "scaleup": int(scaleup),
                                      "cpu_config": cpu_config, "processor": processor, "repeat": 0,
                                      "model": "tiny"}},
        "platbench_campaign": {"name": "smoke-20261122", "results_dir": str(results_dir),
                               "experiment": {"name": "smoke", "repeats": 1, "cells": [{"id": cell_id}]}},
        "platbench_output": record_line() + "\n" if output is None else output,
        "platbench_error": error,
        "platbench_env": {"host": "lab1", "kernel": "6.8.0", "cpu_model": "Xeon", "ansible_version": "2.19"},
        "platbench_runtime": {"container_id": "abc123", "cpuset_requested": "2-3", "launcher": "docker", "rc": 0},
        **extra,
    }


def task_result(data, host="lab1", task=None):
    """What Ansible hands a callback: the worker's raw result, cleaned (and censored under no_log)."""
    raw = _RawTaskResult(Host(host), task or make_task(), data, {})
    return raw.as_callback_task_result()


def samples(results_dir):
    path = Path(results_dir) / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_json(results_dir):
    return json.loads((Path(results_dir) / "run.json").read_text())


def test_loaded_by_fqcn_as_an_aggregate_callback_that_must_be_enabled(callback):
    assert callback.CALLBACK_TYPE == "aggregate"
    assert callback.CALLBACK_NEEDS_ENABLED is True
    assert callback._load_name.endswith("platbench.lab.plugins.callback.results")


def test_two_cells_are_appended_in_order_and_run_json_follows(callback, tmp_path):
    results_dir = tmp_path / "smoke-20261122"
    callback.v2_runner_on_ok(task_result(cell_result(results_dir, "bm/2/pin/cpu|r0")))

    run = run_json(results_dir)
    assert run["campaign"] == "smoke-20261122"
    assert run["experiment"] == {"name": "smoke", "repeats": 1}  # the definition, not the expanded cells
    assert run["finished"] is None
    assert run["hosts"] == {"lab1": {"host": "lab1", "kernel": "6.8.0", "cpu_model": "Xeon", "ansible_version": "2.19"}}
    assert run["platbench_version"] == "0.3.0"
    assert run["ansible_version"] and run["python_version"] and run["controller"]

    callback.v2_runner_on_ok(task_result(cell_result(results_dir, "cn/2/pin/cpu|r0"), host="lab2"))
    written = samples(results_dir)
    assert [(s["labels"]["cell"], s["metric"]) for s in written] == [
        ("bm/2/pin/cpu|r0", "throughput"), ("bm/2/pin/cpu|r0", "elapsed"),
        ("cn/2/pin/cpu|r0", "throughput"), ("cn/2/pin/cpu|r0", "elapsed")]
    first = written[0]
    assert first["value"] == 41.7 and first["unit"] == "images/sec" and first["timestamp"] == 1764000000.0
    assert first["labels"]["campaign"] == "smoke-20261122"
    assert first["labels"]["scenario"] == "bm/2/pin/cpu"
    assert first["labels"]["framework"] == "tensorflow"
    assert first["metadata"]["container_id"] == "abc123"
    assert first["metadata"]["kernel"] == "6.8.0"
    assert set(run_json(results_dir)["hosts"]) == {"lab1", "lab2"}
    assert callback.recorder.lines == [
        "platbench: bm/2/pin/cpu|r0 throughput=41.7 images/sec, elapsed=9.5 sec",
        "platbench: cn/2/pin/cpu|r0 throughput=41.7 images/sec, elapsed=9.5 sec"]

    callback.v2_playbook_on_stats(stats=None)
    run = run_json(results_dir)
    assert run["finished"] is not None
    assert run["cells"] == {"ok": 2}
    assert not (results_dir / "run.json.tmp").exists()


def test_failed_task_is_one_failed_sample_with_error_and_output_tail(callback, tmp_path):
    output = "\n".join(f"log line {number}" for number in range(200)) + "\nKilled"
    data = cell_result(tmp_path, output=output, error="docker run exited with 137", failed=True)
    callback.v2_runner_on_failed(task_result(data), ignore_errors=True)
    callback.v2_playbook_on_stats(stats=None)

    [sample] = samples(tmp_path)
    assert (sample["metric"], sample["value"], sample["unit"]) == ("failed", 1, "cell")
    assert sample["labels"]["cell"] == "cn/2/pin/cpu|r0"
    assert sample["metadata"]["error"] == "docker run exited with 137"
    assert sample["metadata"]["output_tail"].endswith("log line 199\nKilled")
    assert "log line 100" not in sample["metadata"]["output_tail"]
    assert run_json(tmp_path)["cells"] == {"failed": 1}
    assert callback.recorder.lines == ["platbench: cn/2/pin/cpu|r0 FAILED: docker run exited with 137"]


def test_failed_task_without_platbench_error_uses_the_task_message(callback, tmp_path):
    callback.v2_runner_on_failed(task_result(cell_result(tmp_path, msg="ssh: connection reset", failed=True)))
    assert samples(tmp_path)[0]["metadata"]["error"] == "ssh: connection reset"


def test_output_without_result_line_is_recorded_as_failed(callback, tmp_path):
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, output="Traceback...\nImportError: no tf\n")))
    [sample] = samples(tmp_path)
    assert sample["metric"] == "failed"
    assert "no PLATBENCH_RESULT line" in sample["metadata"]["error"]
    assert "ImportError: no tf" in sample["metadata"]["output_tail"]


def test_invalid_result_line_is_recorded_as_failed_with_the_reason(callback, tmp_path):
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, output="PLATBENCH_RESULT {oops\n")))
    [sample] = samples(tmp_path)
    assert sample["metric"] == "failed"
    assert "{oops" in sample["metadata"]["error"] and "not valid JSON" in sample["metadata"]["error"]


def test_record_with_failed_status_is_recorded_as_failed(callback, tmp_path):
    output = record_line(status="failed", error="CUDA out of memory")
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, output=output)))
    [sample] = samples(tmp_path)
    assert sample["metric"] == "failed"
    assert sample["metadata"]["error"] == "CUDA out of memory"


def test_loop_items_are_recorded_and_the_loop_summary_is_ignored(callback, tmp_path):
    items = [cell_result(tmp_path, f"{platform}/1/vnl/cpu|r0") for platform in ("bm", "cn")]
    for item in items:
        callback.v2_runner_item_on_ok(task_result(item))
    callback.v2_runner_on_ok(task_result({"changed": False, "results": items}))
    assert [s["labels"]["cell"] for s in samples(tmp_path)] == ["bm/1/vnl/cpu|r0"] * 2 + ["cn/1/vnl/cpu|r0"] * 2


def test_failed_loop_item_is_recorded(callback, tmp_path):
    callback.v2_runner_item_on_failed(task_result(cell_result(tmp_path, error="timeout", failed=True)))
    assert samples(tmp_path)[0]["metadata"]["error"] == "timeout"


def test_results_of_other_tasks_are_ignored(callback, tmp_path):
    callback.v2_runner_on_ok(task_result({"changed": True, "stdout": record_line()},
                                         task=make_task("ansible.builtin.command")))
    callback.v2_runner_on_failed(task_result({"failed": True, "msg": "nope"}))
    callback.v2_playbook_on_stats(stats=None)
    assert list(tmp_path.iterdir()) == []
    assert callback.recorder.lines == [] and callback.recorder.warnings == []


def test_no_log_cell_is_not_recorded_and_warned_about_once(callback, tmp_path):
    data = cell_result(tmp_path, output=record_line() + f"\nOS_PASSWORD={SECRET}\n",
                       _ansible_no_log=True)
    data["platbench_runtime"]["token"] = SECRET
    hidden = task_result(data)
    assert isinstance(hidden, CallbackTaskResult)
    assert "censored" in hidden._result and SECRET not in json.dumps(hidden._result)

    callback.v2_runner_on_ok(hidden)
    callback.v2_runner_on_failed(task_result({**data, "failed": True}))
    callback.v2_playbook_on_stats(stats=None)

    assert len(callback.recorder.warnings) == 1
    assert "no_log" in callback.recorder.warnings[0] and "not recorded" in callback.recorder.warnings[0]
    assert SECRET not in " ".join(callback.recorder.warnings + callback.recorder.lines)
    written = [path.read_text() for path in tmp_path.rglob("*") if path.is_file()]
    assert written == [] or all(SECRET not in text for text in written)
    assert not (tmp_path / "samples.jsonl").exists()


def test_no_log_task_keyword_hides_the_cell_too(callback, tmp_path):
    hidden = task_result(cell_result(tmp_path, output=f"{SECRET}\n"), task=make_task(no_log=True))
    callback.v2_runner_on_ok(hidden)
    assert len(callback.recorder.warnings) == 1
    assert list(tmp_path.iterdir()) == []


def test_no_log_elsewhere_is_not_warned_about(callback, tmp_path):
    callback.v2_runner_on_ok(task_result({"changed": True, "password": SECRET, "_ansible_no_log": True},
                                         task=make_task("ansible.builtin.command")))
    assert callback.recorder.warnings == []


def test_resumed_campaign_keeps_run_json_and_adds_a_resume(callback, tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({
        "campaign": "smoke-20261122", "experiment": {"name": "smoke", "repeats": 1},
        "started": "2026-11-22T04:30:00+00:00", "finished": None, "cells": {"ok": 3}, "hosts": {}}))
    (tmp_path / "samples.jsonl").write_text('{"metric": "throughput", "value": 1, "labels": {"cell": "old"}}\n')

    callback.v2_runner_on_ok(task_result(cell_result(tmp_path)))
    callback.v2_playbook_on_stats(stats=None)

    run = run_json(tmp_path)
    assert run["started"] == "2026-11-22T04:30:00+00:00" and run["cells"] == {"ok": 3}
    [resume] = run["resumes"]
    assert resume["cells"] == {"ok": 1} and resume["finished"] is not None
    assert "lab1" in resume["hosts"]
    assert "experiment" not in resume  # same definition as the first run
    assert samples(tmp_path)[0]["labels"]["cell"] == "old"
    assert len(samples(tmp_path)) == 3
