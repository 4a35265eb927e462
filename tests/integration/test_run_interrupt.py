"""platbench run against the lab: a Ctrl-C (SIGINT) in the middle of a bm cell stops it and leaves nothing
running; the same command resumes the campaign, with no sample lost and none recorded twice. A Ctrl-C in the middle
of a distributed cn cell stops its ranks and removes its network path and its containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from playbook_run import instance_leftovers, platbench_run, wait_for

pytestmark = pytest.mark.lab

CAMPAIGN = "it-run-interrupt"
# Two bm cells (pin, vnl) of a few seconds each.
ARGV = [
    "smoke",
    "--platforms",
    "bm",
    "--repeats",
    "1",
    "--set",
    "scaleup=[1]",
    "--set",
    "params.warmup_steps=1",
    "--set",
    "params.steps=1500",
    "--campaign",
    CAMPAIGN,
]
CELLS = ["bm/1/pin/cpu|r0", "bm/1/vnl/cpu|r0"]
# A bm cell's workload, as roles/platform_run runs it (platform_run_prefix /opt/platbench).
WORKLOAD = "^/opt/platbench/venv/bin/python -m workloads[.]"


def workload_processes():
    found = subprocess.run(["pgrep", "--full", WORKLOAD], capture_output=True, text=True, check=False)
    return found.stdout.split()


def test_ctrl_c_mid_cell_leaves_nothing_and_the_rerun_resumes(lab, tmp_path):
    assert workload_processes() == [], "a workload runs already: the lab is busy"
    results = tmp_path / "results"
    first = platbench_run(ARGV, results)
    lines = []
    try:
        for line in first.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("[1/2] "):
                break
        # The campaign's rounds shuffle its two cells (its seed comes from its name): whichever runs first.
        assert lines and lines[-1].startswith("[1/2] ") and lines[-1].split()[2] == "ok", "\n".join(lines)
        first_cell = lines[-1].split()[1]
        assert first_cell in CELLS, "\n".join(lines)
        second_cell = next(cell for cell in CELLS if cell != first_cell)
        wait_for(workload_processes, 60, "workload process of the second cell")
        first.send_signal(signal.SIGINT)
        rest, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    output = "\n".join(lines) + "\n" + rest
    assert first.returncode == 130, output
    assert f"interrupted: cleaned up cell {second_cell}; rerun the same command to resume: platbench run " in output, (
        output
    )
    assert workload_processes() == []
    containers = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", "label=org.platbench.cell"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert containers.stdout.split() == []
    samples = results / CAMPAIGN / "samples.jsonl"
    assert {json.loads(line)["labels"]["cell"] for line in samples.read_text().splitlines()} == {first_cell}

    second = platbench_run(ARGV, results)
    rerun, _ = second.communicate(timeout=120)
    assert second.returncode == 0, rerun
    assert "localhost: 1 cells to run, 1 already measured" in rerun
    assert f"[2/2] {second_cell} ok " in rerun  # the resumed campaign keeps its order
    recorded = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [s for s in recorded if s["metric"] == "failed"] == []
    throughput = [s["labels"]["cell"] for s in recorded if s["metric"] == "throughput"]
    assert sorted(throughput) == CELLS  # every planned cell once: none lost, none twice
    assert os.path.exists(results / CAMPAIGN / "run.json")


# One distributed cn cell: two torch ranks in containers that join their holders' namespaces, over a VXLAN overlay
# (the most a cell builds: holders, a bridge, veths, VXLAN devices), training long enough to be interrupted.
DISTRIBUTED_CAMPAIGN = "it-run-interrupt-ranks"
DISTRIBUTED_ARGV = [
    "lin2018-distributed",
    "--size",
    "small",
    "--platforms",
    "cn",
    "--repeats",
    "1",
    "--set",
    "network=[overlay]",
    "--set",
    "params.framework=torch",
    "--set",
    "params.model=tiny",
    "--set",
    "params.steps=100000",
    "--campaign",
    DISTRIBUTED_CAMPAIGN,
]


def rank_processes():
    """The host's processes of the cell's two ranks (their records' labels are on their command lines)."""
    found = subprocess.run(["pgrep", "--full", '"instance_role":"(chief|worker)"'], capture_output=True, text=True)
    return found.stdout.split()


def test_ctrl_c_mid_distributed_cell_stops_every_rank_and_removes_its_path_and_holders(lab, tmp_path):
    assert rank_processes() == [], "ranks run already: the lab is busy"
    run = platbench_run(DISTRIBUTED_ARGV, tmp_path)
    try:
        wait_for(lambda: len(rank_processes()) >= 2, 300, "two ranks of the distributed cell")
        # Both ranks past their rendezvous and the path measured: the cell holds everything it builds.
        assert instance_leftovers(DISTRIBUTED_CAMPAIGN), "the ranks run but the cell holds no path or container"
        time.sleep(3)
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, output
    assert "interrupted: cleaned up cell cn/1/pin/cpu" in output, output
    assert rank_processes() == [], output
    assert instance_leftovers(DISTRIBUTED_CAMPAIGN) == [], output
    samples = tmp_path / DISTRIBUTED_CAMPAIGN / "samples.jsonl"
    recorded = [json.loads(line) for line in samples.read_text().splitlines()] if samples.exists() else []
    assert [s for s in recorded if s["metric"] == "throughput"] == []  # an interrupted cell records no result
