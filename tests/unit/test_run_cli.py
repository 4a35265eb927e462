"""platbench run: its options and the overrides they make, bad input (exit 2, the message alone), the campaign
followed through ansible-runner's events (progress, ETA per kind, summary, exit status), the live and plain
displays, and stopping what an interrupted playbook leaves running."""

import argparse
import datetime
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence
from record_cell_run import make_cell, record_line
from rich.console import Console

from platbench import cli, run
from platbench.campaign import Campaign, SamplesTail, human
from platbench.processes import kill_sessions, process_table, sessions_below
from platbench.progress import LiveDisplay, PlainDisplay

# Acts on the host where a live lab would see it or suffer from it: real `platbench run`s whose playbooks run under
# /tmp/platbench-run-*, and fake dead runs' playbooks. `make test` runs it first, before the lab is up (marker `host`,
# docs/src/tests.md).
pytestmark = pytest.mark.host


def parse(*argv):
    parser = argparse.ArgumentParser(prog="platbench run")
    run.add_arguments(parser)
    return parser.parse_args(argv)


def refused(capsys, *argv):
    """Run ``platbench run ARGV``, which must stop before any playbook: ``(stdout, stderr)``."""
    code = cli.main(["run", *argv])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    return out, err


@pytest.fixture(autouse=True)
def no_playbook(monkeypatch):
    """Bad input never reaches ansible-runner; the tests that run a playbook undo this."""

    def refuse(**kwargs):
        raise AssertionError(f"a playbook was started: {kwargs.get('playbook')}")

    monkeypatch.setattr(run.ansible_runner, "run_async", refuse)


# -- options -> experiment_overrides -------------------------------------------------------------------------


def test_options_and_settings_make_the_overrides():
    args = parse(
        "smoke",
        "--platforms",
        "bm,cn",
        "--repeats",
        "2",
        "--set",
        "params.steps=3",
        "--set",
        "params.model=tiny",
        "--set",
        "scaleup=[1, 2]",
        "--set",
        "emulated.params.steps=1",
        "--set",
        "params.learning_rate=0.5",
    )
    assert run.build_overrides(args) == {
        "params": {"steps": 3, "model": "tiny", "learning_rate": 0.5},
        "scaleup": [1, 2],
        "emulated": {"params": {"steps": 1}},
        "platforms": ["bm", "cn"],
        "repeats": 2,
    }
    assert run.build_overrides(parse("smoke")) == {}
    assert run.build_overrides(parse("xu2017-micro", "--workloads", "micro_cpu")) == {"workload": ["micro_cpu"]}


def test_the_playbook_variables_name_the_experiment_campaign_results_and_size(tmp_path):
    args = parse("xu2017-micro", "--size", "tiny", "--workloads", "micro_mem", "--results-dir", str(tmp_path))
    plan, warnings, variables = run.prepare(args)
    assert variables == {
        "experiment": "xu2017-micro",
        "campaign": args.campaign,
        "platbench_results_dir": str(tmp_path),
        "experiment_overrides": {"workload": ["micro_mem"]},
        "size": "tiny",
    }
    assert args.campaign.startswith("xu2017-micro-") and len(args.campaign) == len("xu2017-micro-YYYYmmdd-HHMMSS")
    assert {cell["labels"]["workload"] for cell in plan["cells"]} == {"micro_mem"}
    assert warnings == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--set", "params.steps"], "--set params.steps: give KEY=VALUE"),
        (["--set", "params=3"], "params is a mapping; set its keys one by one: params.NAME"),
        (["--set", "repeats.x=3"], "repeats is a value, it has no key 'x'"),
        (["--set", "params.steps={a: 1}"], "the value must be a scalar or a list, not a mapping"),
        (["--set", "params.steps=[1"], "the value is not valid YAML"),
        (["--set", "repeats=1", "--set", "repeats=2"], "repeats is already set by --set repeats=1"),
        (
            ["--set", "inject=[none, {discard: 0.5}]", "--set", "inject.discard=0.2"],
            "inject is already set by --set inject=[none, {discard: 0.5}]: give one of the two",
        ),
        (["--repeats", "2", "--set", "repeats=3"], "--repeats and --set repeats=3 both set repeats: give one"),
        (["-e", "campaign=x"], "-e campaign=x: campaign is set by platbench run itself"),
        (["-e", "platform_run_cell_timeout=0"], "-e platform_run_cell_timeout=0: a cell needs more than 0 seconds"),
        (["-e", "platform_run_cell_timeout=soon"], "-e platform_run_cell_timeout='soon' is not a number of seconds"),
        (["--campaign", "../x"], "--campaign ../x: use letters, digits"),
        (["--inventory", "/nonexistent/inventory"], "--inventory /nonexistent/inventory: no such file"),
    ],
)
def test_bad_options_are_named(capsys, argv, expected):
    out, err = refused(capsys, "smoke", *argv)
    assert expected in err and out == ""


def test_the_command_to_resume_names_the_campaign():
    args = parse("smoke", "--set", "params.steps=3")
    args.argv = ["smoke", "--set", "params.steps=3"]
    args.campaign = "smoke-20261125-101500"
    assert run.rerun_command(args) == "platbench run smoke --set params.steps=3 --campaign smoke-20261125-101500"
    args.argv = ["smoke", "--campaign=mine"]
    assert run.rerun_command(args) == "platbench run smoke --campaign=mine"


def test_inject_is_set_whole_as_a_dimension_or_by_its_knobs():
    whole = parse("smoke", "--set", "inject=[none, {discard: 0.5}]")
    assert run.build_overrides(whole)["inject"] == ["none", {"discard": 0.5}]
    knobs = parse("smoke", "--set", "inject.discard=0.2", "--set", "inject_into=[cn]")
    assert run.build_overrides(knobs)["inject"] == {"discard": 0.2}


def test_an_unknown_set_key_lists_the_allowed_keys(capsys):
    _, err = refused(capsys, "smoke", "--set", "param.steps=3")
    assert err.startswith("--set param.steps=3: unknown key 'param.steps'; allowed keys: ")
    allowed = err.split("allowed keys: ", 1)[1]
    for key in ("platforms", "repeats", "params.NAME", "workload_params.WORKLOAD.NAME", "emulated.repeats"):
        assert key in allowed
    assert "sizes" not in allowed and "name," not in allowed
    refused(capsys, "smoke", "--set", "emulated.steps=3")  # emulated has no such field


def test_platforms_and_workloads_must_be_the_experiments_own(capsys):
    _, err = refused(capsys, "smoke", "--platforms", "bm,pd")
    assert err.strip() == (
        "--platforms bm,pd: experiment smoke does not list pd; its platforms: bm, cn, vm, vmcn "
        "(--set platforms=[...] replaces the list instead)"
    )
    _, err = refused(capsys, "xu2017-micro", "--workloads", "micro_cpu,cnn_train")
    assert "experiment xu2017-micro does not list cnn_train; its workloads: micro_cpu, micro_mem" in err


def test_a_refused_experiment_prints_its_message_alone_once(capsys):
    out, err = refused(capsys, "smoke", "--set", "platforms=[bm, xx, xx]")
    assert out == ""
    assert err.count("platforms: unknown value 'xx'") == 1
    assert err.startswith(f"{run.EXPERIMENTS / 'smoke.yml'} (with overrides ")
    for wrapping in ("Task failed", "lookup plugin", "set_fact", "Traceback"):
        assert wrapping not in err
    assert len(err.splitlines()) == len(set(err.splitlines()))
    # The workloads' own parsers, as the playbook's lookup asks them.
    _, err = refused(capsys, "smoke", "--set", "params.steps=0")
    assert err.count("params.steps: 0 is refused by workloads.cnn_train: argument --steps") == 1


def test_an_unknown_experiment_lists_the_available_ones(capsys):
    _, err = refused(capsys, "smokey")
    assert "unknown experiment 'smokey'" in err and "available: " in err and "smoke," in err


def test_narrowing_a_multi_workload_experiment_is_accepted(tmp_path):
    """xu2017-micro narrowed to one workload, with parameters of its own and of the emulated subset."""
    args = parse(
        "xu2017-micro",
        "--workloads",
        "micro_cpu",
        "--set",
        "workload_params.micro_cpu.hpl_n=1000",
        "--set",
        "emulated.repeats=1",
        "--results-dir",
        str(tmp_path),
    )
    plan, _, variables = run.prepare(args)
    assert plan["workload_params"] == {"micro_cpu": {"suite": ["hpcc", "hpcg"], "hpl_n": 1000}}
    assert plan["emulated"]["workloads"] == ["micro_cpu"]
    assert set(plan["emulated"]["workload_params"]) == {"micro_cpu"}
    assert {cell["labels"]["workload"] for cell in plan["cells"]} == {"micro_cpu"}
    assert variables["experiment_overrides"]["workload"] == ["micro_cpu"]


# -- the campaign, from ansible-runner's events -----------------------------------------------------------

T0 = datetime.datetime(2026, 11, 25, 10, 0, 0, tzinfo=datetime.timezone.utc).timestamp()


def event(kind, at, host="localhost", **data):
    created = datetime.datetime.fromtimestamp(T0 + at, datetime.timezone.utc).isoformat()
    return {"event": kind, "created": created, "pid": 4242, "event_data": {"host": host, **data}}


def fact(at, name, value, host="localhost"):
    res = {"ansible_facts": {name: value}, "changed": False}
    return event("runner_on_ok", at, host, task_action="ansible.builtin.set_fact", res=res)


def check(at, skipped=None, problems=None, host="localhost", sizing=None):
    checked = {"skipped": skipped or {}, "problems": problems or []}
    return fact(at, "platform_run_check", {**checked, "sizing": sizing} if sizing else checked, host)


def selection(at, ids, done=0, host="localhost"):
    return fact(at, "platform_run_selection", {"cells": [make_cell(i) for i in ids], "done": done}, host)


def record(at, cell_id, status="ok", error=None, host="localhost", reason=None):
    res = {
        "platbench_cell": {"id": cell_id, "labels": make_cell(cell_id)["labels"]},
        "platbench_status": status,
        "platbench_error": error,
        "platbench_campaign": {"name": "c1", "results_dir": "/data/results/c1"},
        "platbench_samples": [{"metric": "skipped", "metadata": {"reason": reason}}] if reason else [],
    }
    return event("runner_on_ok", at, host, task_action="platbench.lab.record_cell", res=res)


CELLS = ["bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0", "bm/2/pin/cpu|r0", "cn/2/pin/cpu|r0"]


def fed(campaign, *events):
    return [line for item in events for line in campaign.feed(item)]


def test_what_the_relative_scale_ups_became_and_the_numa_warning_are_said_before_the_cells():
    campaign = Campaign("c1", [make_cell(i) for i in CELLS])
    sizing = [
        "Experiment 'x' on localhost: scale-up half = 1 of 2 usable cores.",
        "Experiment 'x' asks for numa: spill, but localhost has one NUMA node, so nothing spills.",
    ]
    lines = fed(campaign, check(0, skipped={"k8s": "no kubeconfig"}, sizing=sizing))
    assert lines == [*sizing, "skipping k8s on localhost: no kubeconfig"]


def test_each_finished_cell_gets_a_line_with_its_time_and_the_eta_per_kind():
    campaign = Campaign("c1", [make_cell(i) for i in CELLS + ["k8s/1/pin/cpu|r0"]], "/fallback/samples.jsonl")
    assert fed(campaign, check(0, skipped={"k8s": "no kubeconfig at /etc/kubernetes/admin.conf"})) == [
        "skipping k8s on localhost: no kubeconfig at /etc/kubernetes/admin.conf"
    ]
    assert fed(campaign, selection(1, CELLS)) == ["localhost: 4 cells to run"]
    assert campaign.eta(T0 + 2) is None  # nothing finished yet
    assert campaign.running(T0 + 3) == [(1, "bm/1/pin/cpu|r0", "localhost", 2.0)]
    # bm (process) took 3 s: the container cells have no mean of their own yet, they get the overall one.
    assert fed(campaign, record(4, CELLS[0])) == ["[1/4] bm/1/pin/cpu|r0 ok 3.0 s, ETA 9 s"]
    assert campaign.running(T0 + 5) == [(2, "cn/1/pin/cpu|r0", "localhost", 1.0)]
    # cn took 11 s: what is left is one bm (3 s) and one cn (11 s).
    assert fed(campaign, record(15, CELLS[1], "failed", "the container exited 137\nits last lines")) == [
        "[2/4] cn/1/pin/cpu|r0 failed 11.0 s, ETA 14 s"
    ]
    # The running cell's time is taken off its kind's mean.
    assert campaign.eta(T0 + 17) == pytest.approx(1 + 11)
    assert campaign.eta(T0 + 30) == pytest.approx(11)  # never below zero for the running cell
    fed(campaign, record(18, CELLS[2]), record(30, CELLS[3], "skipped", reason="no GPU on this host"))
    assert campaign.running() == [] and campaign.eta() == 0
    code, lines = campaign.outcome(0)
    assert code == 1
    assert lines == [
        "campaign c1: 2 ok, 1 failed, 1 skipped of 4 cells run",
        "failed:",
        "  cn/1/pin/cpu|r0 on localhost: the container exited 137",
        "skipped:",
        "  k8s on localhost (1 cells of the plan): no kubeconfig at /etc/kubernetes/admin.conf",
        "  cn/2/pin/cpu|r0 on localhost: no GPU on this host",
        "samples: /data/results/c1/samples.jsonl",
    ]


def test_every_cell_ok_exits_0_and_a_resumed_campaign_counts_from_what_it_held():
    campaign = Campaign("c1", [make_cell(i) for i in CELLS])
    lines = fed(campaign, check(0), selection(0, CELLS[2:], done=2), record(2, CELLS[2]), record(5, CELLS[3]))
    assert lines == [
        "localhost: 2 cells to run, 2 already measured",
        "[3/4] bm/2/pin/cpu|r0 ok 2.0 s, ETA 2 s",
        "[4/4] cn/2/pin/cpu|r0 ok 3.0 s, ETA 0 s",
    ]
    assert campaign.outcome(0) == (
        0,
        [
            "campaign c1: 2 ok, 0 failed, 0 skipped of 2 cells run; 2 measured before",
            "samples: /data/results/c1/samples.jsonl",
        ],
    )


def test_a_resumed_campaign_with_nothing_left_exits_0():
    campaign = Campaign("c1", [make_cell(i) for i in CELLS], "/r/c1/samples.jsonl")
    fed(campaign, check(0), selection(0, [], done=4))
    assert campaign.outcome(0) == (
        0,
        ["campaign c1: nothing left to run, its 4 cells were measured before", "samples: /r/c1/samples.jsonl"],
    )


def test_no_host_able_to_run_a_cell_exits_2_saying_which_platform_where_and_why():
    campaign = Campaign("c1", [make_cell("k8s/1/pin/cpu|r0")])
    fed(campaign, check(0, skipped={"k8s": "no kubeconfig at /etc/kubernetes/admin.conf"}), selection(0, []))
    fed(campaign, check(0, skipped={"k8s": "kubelet is not running"}, host="node2"), selection(0, [], host="node2"))
    assert campaign.outcome(0) == (
        2,
        [
            "no host can run any planned cell:",
            "  k8s on localhost: no kubeconfig at /etc/kubernetes/admin.conf",
            "  k8s on node2: kubelet is not running",
        ],
    )


def test_a_precheck_refusal_prints_its_problems_alone_and_exits_2():
    problem = "Experiment 'smoke' asks for scale-up 4, but localhost offers 2 CPUs (2 allowed, 0 reserved)."
    campaign = Campaign("c1")
    fed(
        campaign,
        check(0, problems=[problem]),
        event("runner_on_failed", 1, task="Fail on anything the host cannot run", res={"msg": problem}),
    )
    assert campaign.outcome(2) == (2, [problem])


def test_a_failed_playbook_exits_1_with_the_task_and_its_message_and_rescued_cells_are_no_failure():
    campaign = Campaign("c1", [make_cell(i) for i in CELLS], "/r/c1/samples.jsonl")
    fed(campaign, check(0), selection(0, CELLS))
    # A cell's task failing inside its block is rescued and recorded: not the playbook's failure.
    fed(campaign, event("runner_on_failed", 2, task="Run the workload", res={"msg": "non-zero return code"}))
    fed(campaign, record(3, CELLS[0], "failed", "rc 1"))
    lookup = (
        "Task failed: Finalization of task args for 'ansible.builtin.set_fact' failed: Error while resolving "
        "value for 'x': The lookup plugin 'platbench.lab.engines' failed: the Docker engine does not answer\nline 2"
    )
    fed(campaign, event("runner_on_failed", 4, task="Find the engines", res={"msg": lookup, "stderr": "e1\ne2"}))
    code, lines = campaign.outcome(2)
    assert code == 1
    assert lines[:5] == [
        "the playbook failed:",
        "  localhost, task 'Find the engines':",
        "    the Docker engine does not answer",
        "    line 2",
        "    e1",
    ]
    assert "campaign c1: 0 ok, 1 failed, 0 skipped of 1 cells run" in lines
    assert lines[lines.index("not run (the playbook stopped first):") + 1 :][:3] == [
        "  cn/1/pin/cpu|r0 on localhost",
        "  bm/2/pin/cpu|r0 on localhost",
        "  cn/2/pin/cpu|r0 on localhost",
    ]
    ignored = Campaign("c2")
    fed(ignored, check(0), selection(0, CELLS[:1]), event("runner_on_failed", 1, task="t", ignore_errors=True, res={}))
    fed(ignored, record(2, CELLS[0]))
    assert ignored.outcome(0)[0] == 0


def test_a_playbook_failure_without_a_message_shows_the_end_of_ansibles_output():
    campaign = Campaign("c1")
    code, lines = campaign.outcome(4, output_tail="PLAY [x]\nERROR! the inventory is not readable")
    assert code == 1 and lines[:3] == [
        "the playbook failed (ansible-playbook exited with 4):",
        "  PLAY [x]",
        "  ERROR! the inventory is not readable",
    ]


def test_a_cell_counts_by_its_samples_on_disk_when_its_record_event_is_lost(tmp_path):
    """ansible-runner may hand over an event without its data: the samples this run appends are read too."""
    path = tmp_path / "samples.jsonl"
    earlier = {"metric": "failed", "labels": {"cell": CELLS[1], "host": "localhost"}, "metadata": {"error": "old"}}
    path.write_text(json.dumps(earlier) + "\n")
    tail = SamplesTail(path)  # made before the run: the earlier run's sample is not this run's
    campaign = Campaign("c1", [make_cell(i) for i in CELLS[:3]])
    fed(campaign, check(0), selection(0, CELLS[:3]))

    def append(text):
        with path.open("a") as stream:
            stream.write(text)

    first = {"metric": "throughput", "value": 1.0, "labels": {"cell": CELLS[0], "host": "localhost"}}
    append(json.dumps(first) + "\n")
    assert campaign.observe(tail.new(), T0 + 3) == ["[1/3] bm/1/pin/cpu|r0 ok 3.0 s, ETA 6 s"]
    assert fed(campaign, record(3.1, CELLS[0])) == []  # its event, after its samples: counted once
    lost = event("runner_on_ok", 6, task_action="platbench.lab.record_cell", res={})  # the data never came
    failed = {"metric": "failed", "labels": {"cell": CELLS[1], "host": "localhost"}, "metadata": {"error": "rc 3\nx"}}
    other_host = {"metric": "throughput", "value": 2.0, "labels": {"cell": CELLS[1], "host": "other"}}
    append(json.dumps(failed) + "\n" + json.dumps(other_host) + "\n" + '{"metric": "throughput", "lab')
    assert fed(campaign, lost) == []
    assert campaign.observe(tail.new(), T0 + 6) == ["[2/3] cn/1/pin/cpu|r0 failed 3.0 s, ETA 3 s"]
    append('els": {"cell": "bm/2/pin/cpu|r0", "host": "localhost"}, "value": 3.0}\n')  # the line completed
    assert campaign.observe(tail.new(), T0 + 10) == ["[3/3] bm/2/pin/cpu|r0 ok 4.0 s, ETA 0 s"]
    assert campaign.observe(tail.new()) == []
    code, lines = campaign.outcome(0)
    assert code == 1 and campaign.unrecorded() == []
    assert lines[:3] == [
        "campaign c1: 2 ok, 1 failed, 0 skipped of 3 cells run",
        "failed:",
        f"  {CELLS[1]} on localhost: rc 3",
    ]


def test_several_hosts_run_side_by_side_and_the_eta_is_the_longest_hosts():
    campaign = Campaign("c1")
    fed(campaign, selection(0, CELLS[:2], host="a"), selection(0, CELLS, host="b"))
    assert campaign.total == 6
    assert fed(campaign, record(4, CELLS[0], host="a")) == ["[1/6] bm/1/pin/cpu|r0 on a ok 4.0 s, ETA 12 s"]
    assert campaign.running(T0 + 5) == [(2, "cn/1/pin/cpu|r0", "a", 1.0), (3, "bm/1/pin/cpu|r0", "b", 5.0)]


def test_durations_read_well():
    assert [human(s) for s in (None, 0, 42.4, 59.6, 240, 3599, 3600, 7500)] == [
        "?",
        "0 s",
        "42 s",
        "1 min",
        "4 min",
        "60 min",
        "1 h 00 min",
        "2 h 05 min",
    ]


# -- displays -----------------------------------------------------------------------------------------------


def test_the_plain_display_prints_the_lines_and_nothing_moves():
    stream = io.StringIO()
    display = PlainDisplay(Campaign("c1"), stream)
    with display:
        display.line("[1/4] bm/1/pin/cpu|r0 ok 3.0 s, ETA 9 s")
        display.refresh()
    assert stream.getvalue() == "[1/4] bm/1/pin/cpu|r0 ok 3.0 s, ETA 9 s\n"


def test_the_live_display_shows_the_campaign_bar_and_the_running_cell():
    now = [T0 + 6]
    campaign = Campaign("c1", clock=lambda: now[0])
    fed(campaign, selection(0, CELLS), record(4, CELLS[0]))
    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    display = LiveDisplay(campaign, console)
    with display:
        display.line("[1/4] bm/1/pin/cpu|r0 ok 4.0 s, ETA 12 s")
        display.refresh()
        screen = console.file.getvalue()
        assert "[1/4] bm/1/pin/cpu|r0 ok 4.0 s, ETA 12 s" in screen
        assert "campaign c1" in screen and "1/4, ETA 10 s" in screen
        assert "[2/4] cn/1/pin/cpu|r0" in screen and "0:02" in screen
        # The next cell replaces the finished one's line.
        now[0] = T0 + 9
        fed(campaign, record(8, CELLS[1]))
        display.refresh()
        assert "[3/4] bm/2/pin/cpu|r0" in console.file.getvalue()[len(screen) :]
        assert [cell for cell, _ in display._cells.values()] == ["bm/2/pin/cpu|r0"]


# -- stopping what an interrupted playbook leaves ------------------------------------------------------------

# A parent in a session of its own (as pexpect starts ansible-playbook) with two children: one in the parent's
# session, one that makes a session of its own (as Ansible's workers do) and runs a grandchild there.
TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    same = subprocess.Popen(["sleep", "301"])
    worker = subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess; os.setsid(); subprocess.Popen(['sleep', '302']).wait()"]
    )
    print(same.pid, worker.pid, flush=True)
    time.sleep(300)
    """
)


def _descendants(root):
    table = process_table()
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        children = [child for child, (ppid, _) in table.items() if ppid == pid]
        found.update(children)
        stack += children
    return found


def test_the_sessions_below_a_process_are_found_and_stopped():
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True)
    same, worker = map(int, parent.stdout.readline().split())
    deadline = time.monotonic() + 10
    while len(_descendants(parent.pid)) < 3 and time.monotonic() < deadline:  # the worker's sleep too
        time.sleep(0.05)
    tree = _descendants(parent.pid) | {parent.pid}
    assert len(tree) == 4 and {same, worker} < tree
    sessions = sessions_below(parent.pid)
    assert sessions == {parent.pid, worker} and os.getsid(0) not in sessions
    parent.kill()  # as ansible-runner's cancel kills the playbook's process group: what it started lives on
    parent.wait()
    assert set(process_table()) & tree == tree - {parent.pid}
    signalled = kill_sessions(sessions, grace=5)
    assert set(signalled) == tree - {parent.pid}
    assert not set(process_table()) & tree


def test_a_cancelled_playbook_leaves_no_process_behind(tmp_path, monkeypatch):
    """Through ansible-runner for real: a task's command (in an Ansible worker's own session) is stopped."""
    monkeypatch.undo()
    marker = f"{300 + os.getpid() % 1000}.{time.time_ns() % 1000:03d}"
    (tmp_path / "sleep.yml").write_text(
        textwrap.dedent(
            f"""\
            - name: Sleep
              hosts: localhost
              gather_facts: false
              tasks:
                - name: Sleep long
                  ansible.builtin.command: sleep {marker}
                  changed_when: false
            """
        )
    )
    started = []

    def sleeping():
        return [pid for pid in process_table() if _cmdline(pid) == ["sleep", marker]]

    def stop():
        if not started and sleeping():
            started.append(time.monotonic())
        return bool(started)

    try:
        runner, stopped = run.drive(
            tmp_path / "sleep.yml",
            "localhost,",
            {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            tmp_path / "private",
            stop=stop,
        )
        assert stopped and runner.status == "canceled"
        assert sleeping() == []
    finally:
        for pid in sleeping():  # what a failure left
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            return [part.decode() for part in stream.read().split(b"\0") if part]
    except OSError:
        return []


# -- a playbook that keeps the contract, run for real --------------------------------------------------------


def _cells_playbook(tmp_path, monkeypatch):
    """A playbook that records cells as experiment.yml does (the set_facts and platbench.lab.record_cell
    through an include loop), made run's PLAYBOOK."""
    monkeypatch.undo()
    (tmp_path / "cell.yml").write_text(
        textwrap.dedent(
            """\
            - name: Record {{ cell.id }}
              platbench.lab.record_cell:
                cell: "{{ cell }}"
                campaign:
                  name: "{{ campaign }}"
                  results_dir: "{{ platbench_results_dir }}/{{ campaign }}"
                output: "{{ outputs[cell.id] | default('') }}"
                error: "{{ errors[cell.id] | default(omit) }}"
            """
        )
    )
    (tmp_path / "play.yml").write_text(
        textwrap.dedent(
            """\
            - name: Cells as platform_run runs them
              hosts: localhost
              gather_facts: false
              tasks:
                - name: Check
                  ansible.builtin.set_fact:
                    platform_run_check: {skipped: {k8s: no kubeconfig}, problems: []}
                - name: Choose
                  ansible.builtin.set_fact:
                    platform_run_selection: {cells: "{{ cells }}", done: 0}
                - name: Run
                  ansible.builtin.include_tasks: cell.yml
                  loop: "{{ platform_run_selection.cells }}"
                  loop_control:
                    loop_var: cell
            """
        )
    )
    monkeypatch.setattr(run, "PLAYBOOK", tmp_path / "play.yml")


def _run_cells(tmp_path, cells, outputs, errors=None):
    """``platbench run smoke`` on localhost over the playbook of _cells_playbook: ``(exit code, argv)``."""
    variables = {
        "cells": cells,
        "outputs": outputs,
        "errors": errors or {},
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
    }
    argv = ["run", "smoke", "--platforms", "bm,cn", "--campaign", "c1", "--results-dir", str(tmp_path / "results")]
    argv += ["-i", "localhost,"]
    argv += [arg for key, value in variables.items() for arg in ("-e", f"{key}={json.dumps(value)}")]
    return cli.main(argv)


def test_main_follows_a_real_playbook_to_its_summary_and_exit_status(tmp_path, monkeypatch, capsys):
    """ansible-runner's events of a playbook that records cells as experiment.yml does: the lines, the samples
    file and the exit status."""
    _cells_playbook(tmp_path, monkeypatch)
    code = _run_cells(
        tmp_path,
        [make_cell(cell_id) for cell_id in CELLS[:3]],
        outputs={CELLS[0]: record_line(), CELLS[2]: record_line()},
        errors={CELLS[1]: "the container exited 137\nmore"},
    )
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 1, out + err
    assert lines[:3] == [
        "platbench: campaign c1, 24 cells planned (smoke)",
        "skipping k8s on localhost: no kubeconfig",
        "localhost: 3 cells to run",
    ], out
    assert [line.split(" ")[:3] for line in lines[3:6]] == [
        ["[1/3]", CELLS[0], "ok"],
        ["[2/3]", CELLS[1], "failed"],
        ["[3/3]", CELLS[2], "ok"],
    ]
    samples = tmp_path / "results" / "c1" / "samples.jsonl"
    assert lines[6:] == [
        "campaign c1: 2 ok, 1 failed, 0 skipped of 3 cells run",
        "failed:",
        f"  {CELLS[1]} on localhost: the container exited 137",
        "skipped:",
        "  k8s on localhost: no kubeconfig",
        f"samples: {samples}",
    ]
    recorded = [json.loads(line)["labels"]["cell"] for line in samples.read_text().splitlines()]
    assert sorted(set(recorded)) == sorted(CELLS[:3])
    assert (tmp_path / "results" / "c1" / "ansible.log").read_text().count("PLAY RECAP") == 1


def emulated_cell(cell_id):
    cell = make_cell(cell_id)
    cell["labels"]["emulated"] = True
    return cell


def test_the_table_comes_once_only_emulated_guests_cells_are_left(tmp_path, monkeypatch, capsys):
    _cells_playbook(tmp_path, monkeypatch)
    guests = ["vm/1/pin/cpu|r0", "vmcn/1/pin/cpu|r0"]
    cells = [make_cell(CELLS[0]), make_cell(CELLS[1])] + [emulated_cell(cell_id) for cell_id in guests]
    throughputs = zip(cells, (40, 30, 4, 3), strict=True)
    outputs = {cell["id"]: record_line(throughput=throughput) for cell, throughput in throughputs}
    code = _run_cells(tmp_path, cells, outputs)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    lines = out.splitlines()
    starts = [next(index for index, line in enumerate(lines) if line.startswith(f"[{n}/4]")) for n in (2, 3)]
    between = lines[starts[0] + 1 : starts[1]]
    assert between[0].startswith("every cell but the emulated guests' is done: their table, while the 2 emulated")
    # The table of what is measured so far: bm and cn, not the guests still to come.
    assert between[1].split()[0] == "platform"
    assert [line.split()[0] for line in between[3:] if line.strip()][:2] == ["bm", "cn"]
    assert not any(line.startswith(("vm", "vmcn")) for line in between)
    assert out.count("every cell but the emulated guests'") == 1


def test_a_campaign_knows_when_only_emulated_cells_are_left():
    campaign = Campaign("c1")
    assert not campaign.only_emulated_left()  # no host has chosen yet
    cells = [make_cell(CELLS[0]), emulated_cell("vm/1/pin/cpu|r0")]
    fed(campaign, fact(0, "platform_run_selection", {"cells": cells, "done": 0}))
    assert not campaign.only_emulated_left()  # bm runs
    fed(campaign, record(3, CELLS[0], "failed", "exit 1"))
    assert not campaign.only_emulated_left()  # nothing measured to show
    campaign = Campaign("c1")
    fed(campaign, fact(0, "platform_run_selection", {"cells": cells, "done": 0}), record(3, CELLS[0]))
    assert campaign.only_emulated_left() and campaign.cells_left() == 1
    fed(campaign, record(9, "vm/1/pin/cpu|r0"))
    assert not campaign.only_emulated_left()  # nothing left


def test_interrupts_are_counted_not_raised():
    before = signal.getsignal(signal.SIGINT)  # Python's own, or a pytest-xdist worker's
    with run.Interrupts() as interrupts:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not interrupts.count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert interrupts.count == 1 and interrupts.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is before


# -- teardown.yml stops the workload processes a stopped cell left -------------------------------------------

FAKE_WORKLOAD = """\
import signal, sys, time
if sys.argv[1:] == ["stubborn"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def fence_left_up(tmp_path):
    """An idle_cores fence a stopped cell left: over a cgroup v1 cpuset tree of the test's own, whose group on CPU 0
    the fence widened to 0-3. Returns the group's cpuset.cpus and the fence's state file."""
    cpuset = tmp_path / "cg" / "cpuset"
    (cpuset / "system.slice").mkdir(parents=True)
    (cpuset / "cpuset.cpus").write_text("0-3\n")
    (cpuset / "system.slice" / "cpuset.cpus").write_text("0\n")
    state = tmp_path / "run" / "cpu_fence.json"
    cpu_fence.put_up("0-3", str(state), str(tmp_path / "cg"))
    assert (cpuset / "system.slice" / "cpuset.cpus").read_text().strip() == "0-3" and state.exists()
    return cpuset / "system.slice" / "cpuset.cpus", state


def test_teardown_stops_leftover_workload_processes_and_only_those(tmp_path, playbook):
    """The runner host's play of teardown.yml against workloads under a prefix of the test's own: one that
    exits on SIGTERM, one that ignores it; a `-m workloads.` process of another python stays. A CPU fence the
    stopped cell left is taken down."""
    fenced_group, fence_state = fence_left_up(tmp_path)
    prefix = tmp_path / "prefix"
    (prefix / "workloads").mkdir(parents=True)
    (prefix / "workloads" / "__init__.py").write_text("")
    (prefix / "workloads" / "fake.py").write_text(FAKE_WORKLOAD)
    (prefix / "venv" / "bin").mkdir(parents=True)
    python = prefix / "venv" / "bin" / "python"
    python.symlink_to(sys.executable)
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"children": {"platbench_runners": {"hosts": {"localhost": local}}}}}))
    env = dict(os.environ, PYTHONPATH=str(prefix))

    def start(interpreter, *argv):
        process = subprocess.Popen(
            [str(interpreter), "-m", "workloads.fake", *argv], cwd=prefix, env=env, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout.readline() == "ready\n"
        return process

    polite, stubborn, other = start(python), start(python, "stubborn"), start(sys.executable)
    try:
        reapers = [threading.Thread(target=process.wait, daemon=True) for process in (polite, stubborn)]
        for reaper in reapers:
            reaper.start()  # as init reaps the orphans of a killed run
        # Its own workloads only: a campaign running on this machine keeps its cells' network paths.
        variables = {
            "platform_run_prefix": str(prefix),
            "teardown_workload_grace": 2,
            "teardown_cell_networks": False,
            "teardown_fence_state_file": str(fence_state),
        }
        first = playbook("playbooks/teardown.yml", variables, inventory=inventory)
        assert first.rc == 0, first.output[-3000:]
        for reaper in reapers:
            reaper.join(timeout=10)
        assert polite.returncode == -signal.SIGTERM and stubborn.returncode == -signal.SIGKILL
        assert other.poll() is None
        assert fenced_group.read_text().strip() == "0" and not fence_state.exists()
        assert first.recap() == (3, 0)  # SIGTERM and SIGKILL sent, the fence taken down
        again = playbook("playbooks/teardown.yml", variables, inventory=inventory)
        assert again.rc == 0 and again.recap() == (0, 0)
    finally:
        for process in (polite, stubborn, other):
            process.kill()
            process.wait()


def test_the_table_so_far_waits_for_every_cell_it_must_show_and_leaves_the_guests_out(tmp_path):
    """The results callback writes a cell's samples about when its event arrives: before that, no table."""
    from platbench.report.command import table_so_far

    def sample(cell_id, platform, emulated=None):
        labels = {"platform": platform, "scaleup": 1, "cpu_config": "pin", "processor": "cpu", "cell": cell_id}
        if emulated:
            labels["emulated"] = True
        return json.dumps({"metric": "throughput", "value": 10.0, "unit": "images/sec", "labels": labels}) + "\n"

    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample("bm|r0", "bm") + sample("vm|r0", "vm", emulated=True))
    assert table_so_far(tmp_path, ["bm|r0", "cn|r0"]) is None  # cn's samples are not written yet
    samples.write_text(samples.read_text() + sample("cn|r0", "cn"))
    shown = table_so_far(tmp_path, ["bm|r0", "cn|r0"])
    assert [line.split()[0] for line in shown.splitlines()[2:] if line.strip()][:2] == ["bm", "cn"]
    assert not any(line.startswith("vm") for line in shown.splitlines())


# -- the campaign's lock: one run at a time, and a run that died found by the next ---------------------------

# Another `platbench run` of the campaign, as far as the lock goes: it takes the lock and holds it until killed.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from platbench import campaign_lock
    lock = campaign_lock.acquire(sys.argv[1], "c1", "platbench run smoke --campaign c1")
    print("locked", flush=True)
    time.sleep(300)
    """
)


def _holder(campaign_dir):
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(campaign_dir)], stdout=subprocess.PIPE, text=True, cwd=run.REPO
    )
    assert process.stdout.readline() == "locked\n"
    return process


def test_a_second_run_of_a_campaign_is_refused_naming_the_first_ones_pid(tmp_path, capsys):
    holder = _holder(tmp_path / "results" / "c1")
    try:
        _, err = refused(
            capsys, "smoke", "--platforms", "bm", "--campaign", "c1", "--results-dir", str(tmp_path / "results")
        )
    finally:
        holder.kill()
        holder.wait()
    assert err.startswith(f"campaign c1 is being run already, by platbench run pid {holder.pid}, started "), err
    assert f"(it holds {tmp_path / 'results' / 'c1' / 'run.lock'})" in err
    assert f"Wait for it to end, or stop it (Ctrl-C in its terminal, or kill -INT {holder.pid})" in err


def test_the_lock_file_of_a_run_that_died_makes_the_next_run_clean_up_first(tmp_path, monkeypatch, capsys):
    """A run killed with SIGKILL leaves its lock file, unheld: the next run says so, runs teardown.yml, then the
    cells; its own lock file is gone once it ends."""
    _cells_playbook(tmp_path, monkeypatch)
    campaign_dir = tmp_path / "results" / "c1"
    holder = _holder(campaign_dir)
    holder.kill()
    holder.wait()
    (tmp_path / "teardown.yml").write_text(
        textwrap.dedent(
            f"""\
            - name: Tear down
              hosts: localhost
              gather_facts: false
              tasks:
                - name: Leave a mark
                  ansible.builtin.copy:
                    content: torn down
                    dest: {tmp_path / "torn-down"}
                    mode: "0644"
            """
        )
    )
    monkeypatch.setattr(run, "TEARDOWN", tmp_path / "teardown.yml")
    code = _run_cells(tmp_path, [make_cell(CELLS[0])], outputs={CELLS[0]: record_line()})
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"the last run of campaign c1 (platbench run pid {holder.pid}, started " in out
    assert "ended without cleaning up: it was killed or its controller stopped" in out
    assert out.index("removed what the last run left; resuming campaign c1") < out.index(f"[1/1] {CELLS[0]} ok")
    assert (tmp_path / "torn-down").read_text() == "torn down"
    assert not (campaign_dir / "run.lock").exists()


def test_a_dead_runs_leftovers_are_removed_by_the_first_pass_alone(tmp_path, monkeypatch):
    """A run until decided makes a pass per step on one lock: only its first pass cleans up after the run that died,
    not every pass (each teardown.yml run costs the campaign time, and the log said it again every pass)."""
    from types import SimpleNamespace

    from platbench import campaign_lock

    holder = _holder(tmp_path / "c1")
    holder.kill()
    holder.wait()
    lock = campaign_lock.acquire(tmp_path / "c1", "c1", "platbench run smoke --campaign c1")
    assert lock.stale["pid"] == holder.pid
    cleaned = []
    monkeypatch.setattr(run, "_after_a_dead_run", lambda _args, dead, *_rest: cleaned.append(dead.stale["pid"]) or True)
    runner = SimpleNamespace(rc=0, config=SimpleNamespace(artifact_dir=str(tmp_path / "artifacts")))
    monkeypatch.setattr(run, "drive", lambda *_args, **_kwargs: (runner, False))
    args = SimpleNamespace(campaign="c1", experiment="smoke", inventory="localhost,")
    out = io.StringIO()
    for _ in range(3):
        kept = [True]
        run._run(args, {"cells": []}, {"platbench_results_dir": str(tmp_path)}, lock, kept, out, out)
        assert kept == [False]  # each pass ended: nothing of its own left to clean
    lock.release(keep=kept[0])
    assert cleaned == [holder.pid]
    assert not (tmp_path / "c1" / "run.lock").exists()


def test_a_run_ending_however_it_ends_releases_the_campaign(tmp_path):
    from platbench import campaign_lock

    lock = campaign_lock.acquire(tmp_path, "c1", "platbench run smoke")
    assert json.loads((tmp_path / "run.lock").read_text())["pid"] == os.getpid()
    lock.update(playbook_pid=4321)
    assert json.loads((tmp_path / "run.lock").read_text())["playbook_pid"] == 4321
    with pytest.raises(campaign_lock.CampaignBusy, match=f"by platbench run pid {os.getpid()}, started "):
        campaign_lock.acquire(tmp_path, "c1", "platbench run smoke")
    lock.release()
    assert not (tmp_path / "run.lock").exists()
    again = campaign_lock.acquire(tmp_path, "c1", "platbench run smoke")
    assert again.stale is None  # released cleanly: nothing to clean up
    again.release(keep=True)  # its cleanup was skipped: the next run does it
    assert campaign_lock.acquire(tmp_path, "c1", "platbench run smoke").stale["pid"] == os.getpid()


def test_what_the_playbook_of_a_dead_run_left_running_is_stopped_and_only_that(tmp_path):
    """The playbook and its workers (each in a session of its own, running a workload) name the run's private
    directory on their command lines; a process that does not, stays."""
    private = tempfile.mkdtemp(prefix="platbench-run-")
    sleeper = "import subprocess, sys, time; subprocess.Popen(['sleep', '299']); time.sleep(300)"
    playbook = subprocess.Popen(
        [sys.executable, "-c", sleeper, "ansible-playbook", "-i", f"{private}/inventory"], start_new_session=True
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", sleeper, "ansible-playbook", "-i", f"{private}/inventory"], start_new_session=True
    )
    other = subprocess.Popen([sys.executable, "-c", sleeper, "ansible-playbook"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(_descendants(worker.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        workload = _descendants(worker.pid)
        assert len(workload) == 1
        stopped = run._stop_dead_runs_playbook({"playbook_pid": playbook.pid, "private_dir": private})
        assert set(stopped) >= {playbook.pid, worker.pid} | workload
        assert playbook.wait(timeout=10) == -signal.SIGTERM and worker.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None and not os.path.exists(private)
        assert run._stop_dead_runs_playbook({"playbook_pid": other.pid}) == []  # no private directory: nothing
    finally:
        children = _descendants(other.pid) | _descendants(worker.pid) | _descendants(playbook.pid)
        for process in (playbook, worker, other):
            process.kill()
            process.wait()
        for pid in children:
            os.kill(pid, signal.SIGKILL)


def test_a_write_cut_short_is_named_before_the_run(tmp_path):
    samples = tmp_path / "samples.jsonl"
    line = json.dumps({"metric": "throughput", "value": 1.0, "timestamp": 5.0, "labels": {"cell": CELLS[1]}})
    samples.write_text(line + "\n" + line[:30])
    assert run.cut_writes(samples) == [
        f"{samples} line 2 is no whole sample (a write cut short by a crash?): skipped ({line[:30]!r})",
        f"{samples} line 1: the rest of cell {CELLS[1]}'s samples, whose write was cut short: skipped; "
        "that cell runs again",
    ]
    assert run.cut_writes(tmp_path / "none.jsonl") == []
