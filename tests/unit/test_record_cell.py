"""The record_cell action, run as Ansible runs it: it parses, validates and decides, then returns the samples."""

import pytest
import yaml
from ansible.errors import AnsibleActionFail, AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter import experiments
from playbook_run import REPO
from record_cell_run import RUNTIME, make_campaign, make_cell, record_cell, record_line, run_record_cell


def test_ok_cell_returns_one_sample_per_metric_with_layered_labels_and_metadata(tmp_path):
    result = record_cell(tmp_path / "smoke", "bm/2/pin/cpu|r0")
    assert result["changed"] is False and "warnings" not in result and not result.get("failed")
    assert (result["platbench_status"], result["platbench_error"]) == ("ok", None)
    assert result["platbench_cell"]["id"] == "bm/2/pin/cpu|r0"
    assert result["platbench_campaign"] == {
        "name": "smoke-20261122",
        "results_dir": str(tmp_path / "smoke"),
        "experiment": {"name": "smoke", "repeats": 1},
    }
    assert result["platbench_env"]["host"] == "lab1" and result["platbench_env"]["os"] == "Debian 12"
    samples = result["platbench_samples"]
    assert [s["metric"] for s in samples] == ["throughput", "elapsed"]
    first = samples[0]
    assert first["value"] == 41.7 and first["unit"] == "images/sec" and first["timestamp"] == 1764000000.0
    assert first["labels"]["cell"] == "bm/2/pin/cpu|r0" and first["labels"]["campaign"] == "smoke-20261122"
    assert first["labels"]["scenario"] == "bm/2/pin/cpu"
    assert first["labels"]["platform"] == "bm" and first["labels"]["framework"] == "tensorflow"
    assert first["metadata"]["container_id"] == "abc123"  # runtime
    assert first["metadata"]["kernel"] == "6.8.0"  # host environment
    assert first["metadata"]["cpuset"] == "2-3"  # what the workload saw


def test_results_dir_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record_cell("results/x")["platbench_campaign"]["results_dir"] == str(tmp_path / "results" / "x")


def test_the_experiment_reaches_run_json_without_its_expanded_cells(tmp_path):
    campaign = make_campaign(tmp_path)
    campaign["experiment"] = {**campaign["experiment"], "cells": [make_cell("bm/2/pin/cpu|r0")]}
    result = run_record_cell(
        {"cell": make_cell("bm/2/pin/cpu|r0"), "campaign": campaign, "output": record_line() + "\n"}
    )
    assert result["platbench_campaign"]["experiment"] == {"name": "smoke", "repeats": 1}


def _tasks(tasks):
    """Every task of a task file, those in blocks, rescues and always included."""
    for task in tasks:
        yield task
        for part in ("block", "rescue", "always"):
            yield from _tasks(task.get(part) or [])


def test_each_cell_record_takes_the_definition_made_once_not_the_whole_plan():
    # Templating the whole plan (every cell) into each record made a record's cost grow with the campaign's cells.
    role = REPO / "roles/platform_run/tasks"
    records = [
        task["platbench.lab.record_cell"]
        for name in ("cell.yml", "duet.yml")
        for task in _tasks(yaml.safe_load((role / name).read_text()))
        if "platbench.lab.record_cell" in task
    ]
    assert len(records) == 4  # a cell and a failed cell; both sides of a duet pair, and of a failed one
    for args in records:
        assert args["campaign"]["experiment"] == "{{ platform_run_experiment_definition }}"
        assert "platform_run_plan " not in yaml.safe_dump(args) and "platform_run_plan}" not in yaml.safe_dump(args)
    main = yaml.safe_load((role / "main.yml").read_text())
    made = [
        index
        for index, task in enumerate(main)
        if "platform_run_experiment_definition" in task.get("ansible.builtin.set_fact", {})
    ]
    runs = [index for index, task in enumerate(main) if "block" in task]
    assert made and runs and made[0] < runs[0]
    # The fact materializes the role variable, which holds the one expression (a play including cell.yml alone reads
    # the variable itself).
    fact = main[made[0]]["ansible.builtin.set_fact"]["platform_run_experiment_definition"]
    assert fact == "{{ platform_run_experiment_definition }}"
    role_vars = yaml.safe_load((REPO / "roles/platform_run/vars/main.yml").read_text())
    assert role_vars["platform_run_experiment_definition"] == (
        "{{ platform_run_plan | platbench.lab.experiment_definition }}"
    )


def test_the_definition_filter_drops_the_cells_and_refuses_what_is_not_a_plan():
    plan = {"name": "smoke", "repeats": 1, "cells": [make_cell("bm/2/pin/cpu|r0")]}
    assert experiments.experiment_definition(plan) == {"name": "smoke", "repeats": 1}
    assert plan["cells"]  # the plan itself is left whole
    with pytest.raises(AnsibleFilterError, match="expected the campaign's plan, got list"):
        experiments.experiment_definition([plan])


def test_error_makes_one_failed_sample_with_error_and_output_tail_and_a_warning(tmp_path):
    output = "\n".join(f"log line {number}" for number in range(200)) + "\nKilled"
    result = record_cell(tmp_path, output=output, error="docker run exited with 137")
    assert result["platbench_status"] == "failed" and result["platbench_error"] == "docker run exited with 137"
    assert not result.get("failed")  # the campaign goes on
    assert result["warnings"] == ["cell cn/2/pin/cpu|r0 failed and is recorded as failed: docker run exited with 137"]
    [sample] = result["platbench_samples"]
    assert (sample["metric"], sample["value"], sample["unit"]) == ("failed", 1, "cell")
    assert sample["labels"]["cell"] == "cn/2/pin/cpu|r0"
    assert sample["metadata"]["error"] == "docker run exited with 137"
    assert sample["metadata"]["output_tail"].endswith("log line 199\nKilled")
    assert "log line 100" not in sample["metadata"]["output_tail"]
    assert sample["metadata"]["container_id"] == "abc123"


def test_output_without_result_line_is_failed(tmp_path):
    result = record_cell(tmp_path, output="Traceback...\nImportError: no tf\n")
    [sample] = result["platbench_samples"]
    assert result["platbench_status"] == "failed" and sample["metric"] == "failed"
    assert "no PLATBENCH_RESULT line" in sample["metadata"]["error"]
    assert "ImportError: no tf" in sample["metadata"]["output_tail"]


def test_invalid_result_line_is_failed_with_the_reason(tmp_path):
    [sample] = record_cell(tmp_path, output="PLATBENCH_RESULT {oops\n")["platbench_samples"]
    assert sample["metric"] == "failed"
    assert "{oops" in sample["metadata"]["error"] and "not valid JSON" in sample["metadata"]["error"]


def test_record_with_failed_status_is_failed(tmp_path):
    result = record_cell(tmp_path, output=record_line(status="failed", error="CUDA out of memory"))
    [sample] = result["platbench_samples"]
    assert sample["metric"] == "failed" and sample["metadata"]["error"] == "CUDA out of memory"
    assert "CUDA out of memory" in result["warnings"][0]


def test_failure_of_a_killed_container_names_the_signal(tmp_path):
    # What community.docker.docker_container returns for a container killed by SIGKILL (detach: false).
    failed = {
        "changed": True,
        "failed": True,
        "msg": "",
        "status": 137,
        "container": {
            "Id": "c0ffee",
            "Output": "step 1\nstep 2\n",
            "State": {"ExitCode": 137, "OOMKilled": False, "Status": "exited"},
        },
    }
    result = record_cell(
        tmp_path, output="", failure={"task": "Run the workload container to completion", "result": failed}
    )
    error = result["platbench_error"]
    assert "killed by SIGKILL (signal 9)" in error and "OOM killer" in error
    assert "Run the workload container to completion" in error
    [sample] = result["platbench_samples"]
    assert sample["metadata"]["error"] == error
    assert sample["metadata"]["output_tail"] == "step 1\nstep 2"  # taken from the failed result


def test_failure_of_a_workload_that_printed_a_failed_record_says_what_it_reported(tmp_path):
    # ansible.builtin.command running a workload that printed its failed record and exited 1.
    failed = {
        "failed": True,
        "msg": "non-zero return code",
        "rc": 1,
        "stdout": record_line("failed", "ValueError: x"),
        "stderr": "Traceback ...\nValueError: x",
        "stderr_lines": ["Traceback ...", "ValueError: x"],
    }
    result = record_cell(
        tmp_path, output="", failure={"task": "Run the workload as a process on the host", "result": failed}
    )
    assert result["platbench_error"] == (
        "the workload failed: ValueError: x (at 'Run the workload as a process on the host', rc=1)"
    )
    assert result["platbench_samples"][0]["metadata"]["output_tail"].endswith("Traceback ...\nValueError: x")


def test_error_wins_over_failure_and_both_are_accepted(tmp_path):
    result = record_cell(tmp_path, error="given", failure={"task": "t", "result": {"rc": 137}})
    assert result["platbench_error"] == "given"


def test_bad_failure_argument_says_what_it_needs(tmp_path):
    with pytest.raises(AnsibleActionFail, match="'failure' must be a mapping with 'task'"):
        record_cell(tmp_path, failure="rc=137")


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"campaign": {"name": "c", "results_dir": "/tmp"}}, "needs 'cell'"),
        ({"cell": make_cell()}, "needs 'campaign'"),
        ({"cell": make_cell(), "campaign": {"name": "c"}}, "needs 'campaign'"),
        ({"cell": make_cell(), "campaign": make_campaign("/tmp"), "colour": "red"}, "colour"),
    ],
)
def test_bad_arguments_fail_the_task_with_what_is_needed(args, expected):
    with pytest.raises(AnsibleActionFail, match=expected):
        run_record_cell(args)


def test_missing_facts_leave_the_environment_empty_not_broken(tmp_path):
    result = run_record_cell(
        {"cell": make_cell(), "campaign": make_campaign(tmp_path), "output": record_line(), "runtime": RUNTIME},
        task_vars={},
    )
    assert result["platbench_status"] == "ok"
    assert result["platbench_env"]["host"] is None and result["platbench_env"]["numa_nodes"] is None
