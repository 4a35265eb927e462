"""The micro-benchmarks' tools: the runners' precheck script and the workloads' own message name what to install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import tool_checks

from workloads.common import tools
from workloads.common.harness import WorkloadFailed

REPO = Path(__file__).resolve().parents[2]


def test_the_precheck_script_prints_exactly_the_missing_tools():
    done = subprocess.run(
        ["sh", "-c", tool_checks.SCRIPT, "sh", "sh", "platbench-no-such-tool", "ls", "platbench-nor-this"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["platbench-no-such-tool", "platbench-nor-this"]


def test_a_missing_tool_names_its_package_and_the_roles_that_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(WorkloadFailed) as failed:
        tools.require(["dd"], where="the container")
    message = str(failed.value)
    assert message.startswith("dd is not installed on the container: it comes from the package 'coreutils'")
    for fix in ("platbench.lab.micro_tools", "workload_image_micro_packages", "guest_image_micro_packages"):
        assert fix in message


def test_a_failing_tool_run_quotes_its_command_and_output():
    with pytest.raises(WorkloadFailed, match=r"sh exited with 3: sh -c .*: boom"):
        tools.run(["sh", "-c", "echo boom >&2; exit 3"], timeout=10)
    with pytest.raises(WorkloadFailed, match=r"sleep did not finish within 0.2 s"):
        tools.run(["sleep", "5"], timeout=0.2)


def test_versions_come_from_the_package_database_where_there_is_one():
    found = tools.versions(["dd"])
    assert set(found) == {"dd"}
    assert found["dd"] is None or found["dd"][0].isdigit()


PLAN = {"platforms": ["bm", "cn", "vm"], "tools": ["dd", "iperf3"]}


def test_the_runner_looks_on_the_host_and_in_the_image_of_each_ready_engine():
    checks = tool_checks.checks(PLAN, {"cn": {"ready": True}}, "platbench/workload:abc")
    assert [check["where"] for check in checks] == [
        "on the host (bm)",
        "in the workload image platbench/workload:abc (cn)",
    ]
    assert checks[0]["argv"] == ["sh", "-c", tool_checks.SCRIPT, "sh", "dd", "iperf3"]
    assert checks[1]["argv"][:8] == [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "sh",
        "platbench/workload:abc",
    ]
    assert checks[1]["argv"][-3:] == ["sh", "dd", "iperf3"]
    # A container platform that is not ready is not asked; guests never are.
    assert [check["where"] for check in tool_checks.checks(PLAN, {}, "img")] == ["on the host (bm)"]
    assert tool_checks.checks({"platforms": ["vm"], "tools": ["dd"]}, {}, "img") == []


def test_a_missing_tool_is_named_with_its_package_and_the_fix():
    checks = tool_checks.checks(PLAN, {"cn": {"ready": True}}, "img")
    results = [{"item": checks[0], "stdout": "dd\niperf3\n"}, {"item": checks[1], "stdout": ""}]
    assert tool_checks.problems(results, PLAN["tools"], "lab1") == [
        "dd, iperf3 not installed on the host (bm) on lab1, and the experiment's workloads run dd, iperf3. "
        "Install the Debian package(s) coreutils, iperf3: the role platbench.lab.micro_tools installs them on lab "
        "hosts (playbooks/lab_host.yml, run by site.yml)."
    ]
