"""The quiet instrument's placement of the harness (plugins/module_utils/quiet.py, platbench/quiet.py), the CPU time
it counts, and the marks a cell's record gets (plugins/plugin_utils/records/harness_marks.py), on fake cgroup trees."""

from __future__ import annotations

import json
import os

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import quiet
from ansible_collections.platbench.lab.plugins.plugin_utils.records import harness_marks


def _tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def v1_tree(tmp_path, idle=True, shared=False):
    cpu = "cpu,cpuacct" if shared else "cpu"
    files = {f"{cpu}/cpu.shares": "1024", f"{cpu}/cgroup.procs": ""}
    if idle:
        files[f"{cpu}/cpu.idle"] = "0"
    files["cpu,cpuacct/cpuacct.usage" if shared else "cpuacct/cpuacct.usage"] = "0"
    return _tree(tmp_path, files)


def v2_tree(tmp_path):
    return _tree(
        tmp_path,
        {"cgroup.controllers": "cpuset cpu io memory", "cgroup.subtree_control": "", "system.slice/cpu.idle": "0"},
    )


def test_cgroup_v1_puts_the_harness_in_an_idle_cpu_group_and_counts_it_per_cpu_in_cpuacct(tmp_path):
    root = v1_tree(tmp_path)
    found = quiet.layout(root, pid1_comm="init")
    assert found == {"version": "v1", "cpu": f"{root}/cpu", "cpuacct": f"{root}/cpuacct", "systemd": False}
    chosen = quiet.placement(found, 4242)
    assert chosen["method"] == "cgroup-v1"
    assert chosen["policy"] == "SCHED_IDLE"
    assert chosen["cgroups"] == [
        {"path": f"{root}/cpu/platbench-harness-4242", "files": [("cpu.idle", "1")]},
        {"path": f"{root}/cpuacct/platbench-harness-4242", "files": []},
    ]
    assert chosen["accounting"] == {
        "kind": "percpu",
        "path": f"{root}/cpuacct/platbench-harness-4242/cpuacct.usage_percpu",
    }
    assert chosen["cpus"] is None


def test_cgroup_v1_without_cpu_idle_falls_back_to_the_least_cpu_shares_and_a_shared_mount_is_made_once(tmp_path):
    root = v1_tree(tmp_path, idle=False, shared=True)
    chosen = quiet.placement(quiet.layout(root, pid1_comm="init"), 7)
    assert chosen["cgroups"] == [{"path": f"{root}/cpu,cpuacct/platbench-harness-7", "files": [("cpu.shares", "2")]}]
    assert chosen["accounting"]["path"] == f"{root}/cpu,cpuacct/platbench-harness-7/cpuacct.usage_percpu"


def test_cgroup_v2_puts_the_harness_in_a_cpu_idle_group_enabling_the_controller_and_counts_its_total(tmp_path):
    root = v2_tree(tmp_path)
    chosen = quiet.placement(quiet.layout(root, pid1_comm="init"), 9, spare_cpus=[0])
    assert chosen["method"] == "cgroup-v2"
    assert chosen["cgroups"] == [
        {"path": f"{root}/platbench-harness-9", "files": [("cpu.idle", "1")], "enable_cpu": True}
    ]
    assert chosen["accounting"] == {"kind": "total", "path": f"{root}/platbench-harness-9/cpu.stat"}
    assert chosen["cpus"] == "0"


def test_systemd_as_pid_1_gets_a_transient_scope_at_idle_weight_on_the_spare_cpus(tmp_path):
    found = quiet.layout(v2_tree(tmp_path), pid1_comm="systemd")
    chosen = quiet.placement(found, 11, spare_cpus=[0, 1, 3])
    assert chosen["method"] == "systemd-scope"
    assert chosen["cgroups"] == []
    assert chosen["scope_argv"] == [
        "systemd-run",
        "--scope",
        "--quiet",
        "--collect",
        "--unit=platbench-harness-11",
        "--property=CPUWeight=idle",
        "--property=AllowedCPUs=0-1,3",
    ]
    inside = quiet.placement(found, 11, spare_cpus=[0], in_scope=True)
    assert inside["scope_argv"] is None  # re-executed already: the scope's own cgroup counts it


def test_a_host_without_a_cpu_controller_is_placed_by_policy_only_and_the_state_says_it_is_not_isolated(tmp_path):
    chosen = quiet.placement(quiet.layout(str(tmp_path), pid1_comm="init"), 5)
    assert chosen["method"] == "policy-only"
    state = quiet.apply(chosen)
    try:
        assert state["isolated"] is False
        assert "no cgroup cpu controller" in "; ".join(state["problems"])
    finally:
        quiet.release(state)
    assert os.sched_getscheduler(0) == state["previous"]["policy"]  # the caller's own policy is back


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_IDLE and back needs root")
def test_apply_enters_the_group_at_sched_idle_and_release_restores_the_policy_and_removes_the_groups(tmp_path):
    root = v1_tree(tmp_path)
    chosen = quiet.placement(quiet.layout(root, pid1_comm="init"), os.getpid())
    before = os.sched_getscheduler(0)
    state = quiet.apply(chosen, pid=os.getpid())
    try:
        assert state["isolated"], state["problems"]
        assert os.sched_getscheduler(0) == os.SCHED_IDLE
        group = f"{root}/cpu/platbench-harness-{os.getpid()}"
        assert (tmp_path / "cpu" / f"platbench-harness-{os.getpid()}" / "cpu.idle").read_text() == "1"
        assert (tmp_path / "cpu" / f"platbench-harness-{os.getpid()}" / "cgroup.procs").read_text() == str(os.getpid())
        assert "SCHED_IDLE" in state["how"] and group in state["how"]
    finally:
        for path in state["cgroups"]:  # a fake tree: the kernel would have emptied the group's files itself
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
        problems = quiet.release(state)
    assert problems == []
    assert os.sched_getscheduler(0) == before
    assert not (tmp_path / "cpu" / f"platbench-harness-{os.getpid()}").exists()


def test_the_cpu_between_two_moments_is_interpolated_on_the_cells_cpus_only():
    series = [(100.0, [1.0, 10.0]), (101.0, [1.2, 10.0]), (102.0, [1.4, 10.6])]
    assert quiet.cpu_between(series, 100.5, 101.5, cpus=[0]) == pytest.approx(0.2)
    assert quiet.cpu_between(series, 100.5, 101.5, cpus=[1]) == pytest.approx(0.3)
    assert quiet.cpu_between(series, 100.0, 102.0) == pytest.approx(1.0)
    assert quiet.cpu_between(series, 99.0, 101.0) is None  # before the first reading: not covered


def test_a_total_reading_counts_every_cpu_and_the_series_skips_a_torn_line(tmp_path):
    stat = tmp_path / "cpu.stat"
    stat.write_text("usage_usec 2500000\nuser_usec 2000000\n")
    series_path = tmp_path / "harness-cpu.jsonl"
    assert quiet.append_reading(str(series_path), {"kind": "total", "path": str(stat)}, 50.0)
    stat.write_text("usage_usec 3000000\n")
    assert quiet.append_reading(str(series_path), {"kind": "total", "path": str(stat)}, 60.0)
    with open(series_path, "a") as stream:
        stream.write('{"t": 70.0, "cpu": [')  # cut short by a crash
    series = quiet.read_series(str(series_path))
    assert series == [(50.0, [2.5]), (60.0, [3.0])]
    assert quiet.cpu_between(series, 50.0, 60.0, cpus=[3]) == pytest.approx(0.5)


def test_a_cells_record_gets_the_harness_share_of_its_cpus_over_its_timed_part(tmp_path):
    usage = tmp_path / "cpuacct.usage_percpu"
    usage.write_text("3000000000 1000000000\n")  # the latest reading, taken by the marks themselves
    series = tmp_path / quiet.SERIES_FILE
    series.write_text(json.dumps({"t": 100.0, "cpu": [1.0, 1.0]}) + "\n" + json.dumps({"t": 110.0, "cpu": [2.0, 1.0]}))
    harness = {
        "isolated": True,
        "how": "SCHED_IDLE; cgroup ...",
        "series": str(series),
        "accounting": {"kind": "percpu", "path": str(usage)},
    }
    marks = harness_marks.marks(harness, {"timed_window": [100.0, 110.0]}, cpuset="0", now=120.0)
    assert marks == {
        "harness_isolated": True,
        "harness_isolation": "SCHED_IDLE; cgroup ...",
        "harness_cpu_seconds": 1.0,
        "harness_cpu_share": 0.1,
    }
    other_side = harness_marks.marks(harness, {"timed_window": [100.0, 110.0]}, cpuset="1", now=120.0)
    assert other_side["harness_cpu_seconds"] == 0.0


def test_a_playbook_not_started_by_platbench_run_is_marked_not_isolated_and_a_remote_cell_is_not_counted():
    marks = harness_marks.marks(None, {"timed_window": [1.0, 2.0]})
    assert marks["harness_isolated"] is False
    assert "platbench run" in marks["harness_isolation"]
    remote = harness_marks.marks(
        {"isolated": True, "how": "x", "series": "/nope"}, {"timed_window": [1, 2]}, local=False
    )
    assert "controller only" in remote["harness_cpu_error"]


def test_platbench_run_finds_the_inventorys_reserved_cpus_of_its_local_hosts(tmp_path):
    from platbench import quiet as run_side

    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      platbench_reserved_cpus: [0]\n"
        "    far:\n      ansible_host: 198.18.0.9\n      platbench_reserved_cpus: [1]\n"
    )
    assert run_side.reserved_cpus(inventory) == [0]
    assert run_side.reserved_cpus(tmp_path / "missing.yml") == []


def test_the_quiet_waits_callback_polls_slowly_while_a_cells_task_runs_and_restores_the_pace_after():
    import ansible.constants as C
    from ansible.plugins.loader import callback_loader

    plugin = callback_loader.get("platbench.lab.quiet_waits")
    plugin.set_options()
    normal = C.DEFAULT_INTERNAL_POLL_INTERVAL

    class Task:
        def __init__(self, runs_a_cell):
            self.vars = {"platbench_runs_a_cell": True} if runs_a_cell else {}

    class Result:
        def __init__(self, task):
            self._task = task

    cell, other = Task(True), Task(False)
    try:
        plugin.v2_playbook_on_task_start(other, False)
        assert normal == C.DEFAULT_INTERNAL_POLL_INTERVAL  # a short task keeps Ansible's pace
        plugin.v2_playbook_on_task_start(cell, False)
        assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.2
        plugin.v2_runner_on_ok(Result(cell))
        assert normal == C.DEFAULT_INTERNAL_POLL_INTERVAL
        plugin.v2_playbook_on_task_start(cell, False)
        plugin.v2_playbook_on_stats(None)  # a play that ends mid-task gives the pace back too
        assert normal == C.DEFAULT_INTERNAL_POLL_INTERVAL
    finally:
        C.DEFAULT_INTERNAL_POLL_INTERVAL = normal
