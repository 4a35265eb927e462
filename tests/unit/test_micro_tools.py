"""The micro-benchmarks' tools: the runners' precheck script and the workloads' own message name what to install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from workloads.common import tools
from workloads.common.harness import WorkloadFailed

REPO = Path(__file__).resolve().parents[2]


def test_the_precheck_script_prints_exactly_the_missing_tools():
    script = yaml.safe_load((REPO / "roles/platform_run/defaults/main.yml").read_text())["platform_run_tools_script"]
    done = subprocess.run(
        ["sh", "-c", script, "sh", "sh", "platbench-no-such-tool", "ls", "platbench-nor-this"],
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
