"""The results callback, loaded by Ansible's plugin loader and fed real task results."""

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible.executor.task_result import CallbackTaskResult, _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader
from record_cell_run import make_campaign, make_cell, record_cell, record_line, run_record_cell

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


def cell_result(results_dir, cell_id="cn/2/pin/cpu|r0", **args):
    """What the record_cell action really returns for a cell (see test_record_cell.py)."""
    return record_cell(results_dir, cell_id, **args)


def task_result(data, host="lab1", task=None):
    """What Ansible hands a callback: the worker's raw result, cleaned (and censored under no_log)."""
    raw = _RawTaskResult(Host(host), task or make_task(), data, {})
    return raw.as_callback_task_result()


def samples(results_dir):
    path = Path(results_dir) / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_json(results_dir):
    return json.loads((Path(results_dir) / "run.json").read_text())


ENV = {
    "host": "lab1",
    "hostname": "lab1",
    "kernel": "6.8.0",
    "os": "Debian 12",
    "cpu_model": "Xeon",
    "cpu_count": 8,
    "threads_per_core": None,
    "numa_nodes": 1,
    "gpu_count": None,
    "host_virt": None,
    "docker_version": "27.3.1",
}


def test_loaded_by_fqcn_as_an_aggregate_callback_that_must_be_enabled(callback):
    assert callback.CALLBACK_TYPE == "aggregate"
    assert callback.CALLBACK_NEEDS_ENABLED is True
    assert callback._load_name.endswith("platbench.lab.plugins.callback.results")


def test_two_cells_are_appended_in_order_and_run_json_follows(callback, tmp_path):
    results_dir = tmp_path / "smoke-20261122"
    first_cell = cell_result(results_dir, "bm/2/pin/cpu|r0")
    callback.v2_runner_on_ok(task_result(first_cell))

    run = run_json(results_dir)
    assert run["campaign"] == "smoke-20261122"
    assert run["experiment"] == {"name": "smoke", "repeats": 1}
    assert run["finished"] is None
    [(host, env)] = run["hosts"].items()
    assert host == "lab1" and {key: env[key] for key in ENV} == ENV and env["ansible_version"]
    galaxy = yaml.safe_load((Path(__file__).resolve().parents[2] / "galaxy.yml").read_text())
    assert run["platbench_version"] == galaxy["version"]
    assert run["ansible_version"] and run["python_version"] and run["controller"]

    callback.v2_runner_on_ok(task_result(cell_result(results_dir, "cn/2/pin/cpu|r0"), host="lab2"))
    written = samples(results_dir)
    # Exactly what the action decided, in order.
    assert written[:2] == first_cell["platbench_samples"]
    assert [(s["labels"]["cell"], s["metric"]) for s in written] == [
        ("bm/2/pin/cpu|r0", "throughput"),
        ("bm/2/pin/cpu|r0", "elapsed"),
        ("cn/2/pin/cpu|r0", "throughput"),
        ("cn/2/pin/cpu|r0", "elapsed"),
    ]
    assert set(run_json(results_dir)["hosts"]) == {"lab1", "lab2"}
    assert callback.recorder.lines == [
        "platbench: bm/2/pin/cpu|r0 throughput=41.7 images/sec, elapsed=9.5 sec",
        "platbench: cn/2/pin/cpu|r0 throughput=41.7 images/sec, elapsed=9.5 sec",
    ]

    callback.v2_playbook_on_stats(stats=None)
    run = run_json(results_dir)
    assert run["finished"] is not None
    assert run["cells"] == {"ok": 2}
    assert not (results_dir / "run.json.tmp").exists()
    assert callback.recorder.lines[2:] == [
        f"platbench: campaign smoke-20261122: cells ok: 2, failed: 0; samples in {results_dir}/samples.jsonl"
    ]


def test_failed_cell_is_persisted_as_handed_and_listed_at_the_end(callback, tmp_path):
    data = cell_result(tmp_path, "cn/2/pin/cpu|r0", output="Killed", error="docker run exited with 137\nmore")
    callback.v2_runner_on_ok(task_result(data))
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, "bm/2/pin/cpu|r0")))
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, "cn/1/pin/cpu|r0", output="no record")))
    callback.v2_playbook_on_stats(stats=None)

    assert samples(tmp_path)[0] == data["platbench_samples"][0]
    assert run_json(tmp_path)["cells"] == {"failed": 2, "ok": 1}
    assert callback.recorder.lines[0] == "platbench: cn/2/pin/cpu|r0 FAILED: docker run exited with 137"
    assert callback.recorder.lines[-3:] == [
        f"platbench: campaign smoke-20261122: cells ok: 1, failed: 2; samples in {tmp_path}/samples.jsonl",
        "platbench:   FAILED cn/2/pin/cpu|r0: docker run exited with 137",
        "platbench:   FAILED cn/1/pin/cpu|r0: the workload output holds no PLATBENCH_RESULT line",
    ]


def test_many_failed_cells_are_summarised_not_all_listed(callback, tmp_path):
    for number in range(25):
        callback.v2_runner_on_ok(task_result(cell_result(tmp_path, f"cn/2/pin/cpu|r{number}", error="boom")))
    callback.v2_playbook_on_stats(stats=None)
    assert callback.recorder.lines[-1].endswith("... and 5 more failed cells (metric 'failed' in samples.jsonl)")


def test_the_callback_decides_nothing(callback, tmp_path):
    # Samples it is handed are written as they are: no parsing of output, no status of its own.
    data = cell_result(tmp_path)
    data["platbench_samples"][0]["value"] = 1.5
    data["platbench_output"] = "PLATBENCH_RESULT {oops"
    callback.v2_runner_on_failed(task_result({**data, "failed": True, "msg": "ignored"}), ignore_errors=True)
    assert [s["value"] for s in samples(tmp_path)] == [1.5, 9.5]
    assert callback.recorder.lines == ["platbench: cn/2/pin/cpu|r0 throughput=1.5 images/sec, elapsed=9.5 sec"]
    callback.v2_playbook_on_stats(stats=None)
    assert run_json(tmp_path)["cells"] == {"ok": 1}  # the action's status, though the task failed


def test_a_cell_result_without_samples_is_warned_about_not_invented(callback, tmp_path):
    data = cell_result(tmp_path)
    del data["platbench_samples"]
    callback.v2_runner_on_failed(task_result({**data, "failed": True, "msg": "ssh: connection reset"}))
    assert list(tmp_path.iterdir()) == []
    assert len(callback.recorder.warnings) == 1 and "carries no platbench_samples" in callback.recorder.warnings[0]


def test_loop_items_are_recorded_and_the_loop_summary_is_ignored(callback, tmp_path):
    items = [cell_result(tmp_path, f"{platform}/1/vnl/cpu|r0") for platform in ("bm", "cn")]
    for item in items:
        callback.v2_runner_item_on_ok(task_result(item))
    callback.v2_runner_on_ok(task_result({"changed": False, "results": items}))
    assert [s["labels"]["cell"] for s in samples(tmp_path)] == ["bm/1/vnl/cpu|r0"] * 2 + ["cn/1/vnl/cpu|r0"] * 2


def test_failed_loop_item_is_recorded(callback, tmp_path):
    callback.v2_runner_item_on_failed(task_result({**cell_result(tmp_path, error="timeout"), "failed": True}))
    assert samples(tmp_path)[0]["metadata"]["error"] == "timeout"


def test_results_of_other_tasks_are_ignored(callback, tmp_path):
    callback.v2_runner_on_ok(
        task_result({"changed": True, "stdout": record_line()}, task=make_task("ansible.builtin.command"))
    )
    callback.v2_runner_on_failed(task_result({"failed": True, "msg": "nope"}))
    callback.v2_playbook_on_stats(stats=None)
    assert list(tmp_path.iterdir()) == []
    assert callback.recorder.lines == [] and callback.recorder.warnings == []


def test_no_log_cell_is_not_recorded_and_warned_about_once(callback, tmp_path):
    data = cell_result(
        tmp_path,
        output=record_line() + f"\nOS_PASSWORD={SECRET}\n",
        runtime={"token": SECRET},
        error=f"failed with {SECRET}",
    )
    assert SECRET in json.dumps(data)
    # As Ansible runs it: the task's no_log keeps the error out of the warning, which no_log does not censor.
    data["warnings"] = run_record_cell(
        {"cell": make_cell(), "campaign": make_campaign(tmp_path), "output": "", "error": f"failed with {SECRET}"},
        no_log=True,
    )["warnings"]
    assert data["warnings"] == ["cell cn/2/pin/cpu|r0 failed and is recorded as failed: (error hidden by no_log)"]
    hidden = task_result({**data, "_ansible_no_log": True})
    assert isinstance(hidden, CallbackTaskResult)
    assert "censored" in hidden._result and SECRET not in json.dumps(hidden._result)

    callback.v2_runner_on_ok(hidden)
    callback.v2_runner_on_failed(task_result({**data, "failed": True, "_ansible_no_log": True}))
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
    callback.v2_runner_on_ok(
        task_result(
            {"changed": True, "password": SECRET, "_ansible_no_log": True}, task=make_task("ansible.builtin.command")
        )
    )
    assert callback.recorder.warnings == []


def test_no_log_of_other_platbench_modules_is_not_warned_about(callback, tmp_path):
    # openstack_deploy's passwords module and openstack_instances' credentials run under no_log.
    callback.v2_runner_on_ok(
        task_result(
            {"changed": True, "password": SECRET, "_ansible_no_log": True},
            task=make_task("platbench.lab.kolla_passwords"),
        )
    )
    assert callback.recorder.warnings == []


def test_resumed_campaign_keeps_run_json_and_adds_a_resume(callback, tmp_path):
    (tmp_path / "run.json").write_text(
        json.dumps(
            {
                "campaign": "smoke-20261122",
                "experiment": {"name": "smoke", "repeats": 1},
                "started": "2026-11-22T04:30:00+00:00",
                "finished": None,
                "cells": {"ok": 3},
                "hosts": {},
            }
        )
    )
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


def test_a_skipped_cell_is_recorded_counted_and_no_failure(callback, tmp_path):
    data = cell_result(tmp_path, "bm/2/pin/cpu|r0", output=record_line("skipped", "no GPU in this cell") + "\n")
    assert data["platbench_status"] == "skipped" and "warnings" not in data
    callback.v2_runner_on_ok(task_result(data))
    callback.v2_runner_on_ok(task_result(cell_result(tmp_path, "cn/2/pin/cpu|r0")))
    callback.v2_playbook_on_stats(stats=None)

    assert [sample["metric"] for sample in samples(tmp_path)] == ["skipped", "throughput", "elapsed"]
    assert samples(tmp_path)[0]["metadata"]["reason"] == "no GPU in this cell"
    assert run_json(tmp_path)["cells"] == {"skipped": 1, "ok": 1}
    assert callback.recorder.lines[0] == "platbench: bm/2/pin/cpu|r0 SKIPPED: no GPU in this cell"
    assert callback.recorder.lines[-1] == (
        f"platbench: campaign smoke-20261122: cells ok: 1, failed: 0, skipped: 1; samples in {tmp_path}/samples.jsonl"
    )


class FakeClock:
    """time.time() of the callback, set by the test."""

    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


def test_each_cells_orchestration_overhead_is_in_run_json(callback, tmp_path, monkeypatch):
    clock = FakeClock(1764000000.0)
    monkeypatch.setattr(sys.modules[type(callback).__module__], "time", clock)
    results_dir = tmp_path / "smoke-20261125"
    selection = {"ansible_facts": {"platform_run_selection": {"cells": [], "done": 0}}}
    callback.v2_runner_on_ok(task_result(selection, task=make_task("ansible.builtin.set_fact")))

    def timed_record(launched, exited):
        record = json.loads(record_line().removeprefix("PLATBENCH_RESULT "))
        record["timestamp"] = exited
        record["metadata"]["launched_at"] = launched
        return "PLATBENCH_RESULT " + json.dumps(record) + "\n"

    # Launched 0.4 s after the selection, ran 3 s, on disk 0.25 s after its record.
    first = cell_result(results_dir, "bm/2/pin/cpu|r0", output=timed_record(1764000000.4, 1764000003.4))
    first["platbench_cell"]["kind"] = "process"
    clock.now = 1764000003.65
    callback.v2_runner_on_ok(task_result(first))
    # The next cell of the host is decided from the previous one's sample on disk.
    second = cell_result(results_dir, "cn/2/pin/cpu|r0", output=timed_record(1764000004.55, 1764000006.0))
    second["platbench_cell"]["kind"] = "container"
    clock.now = 1764000006.5
    callback.v2_runner_on_ok(task_result(second))
    # A cell that failed before its workload ran has no launch time and no entry.
    callback.v2_runner_on_ok(task_result(cell_result(results_dir, "bm/2/pin/cpu|r1", error="no such host")))

    assert run_json(results_dir)["overhead"] == {
        "bm/2/pin/cpu|r0": {"kind": "process", "platform": "bm", "before_launch_s": 0.4, "after_exit_s": 0.25},
        "cn/2/pin/cpu|r0": {"kind": "container", "platform": "cn", "before_launch_s": 0.9, "after_exit_s": 0.5},
    }


def test_a_host_without_a_selection_has_no_before_launch_figure(callback, tmp_path):
    results_dir = tmp_path / "c"
    record = json.loads(record_line().removeprefix("PLATBENCH_RESULT "))
    record["metadata"]["launched_at"] = record["timestamp"] - 9.5
    result = cell_result(results_dir, output="PLATBENCH_RESULT " + json.dumps(record) + "\n")
    callback.v2_runner_on_ok(task_result(result))
    [entry] = run_json(results_dir)["overhead"].values()
    assert entry["before_launch_s"] is None and entry["after_exit_s"] > 0
