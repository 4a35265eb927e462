"""run_instances' supervisor: instances side by side in rounds, the first failure named, nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota
from ansible_collections.platbench.lab.plugins.module_utils.supervisor import run_rounds
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process as process_kind

from tests import skips

# Acts on the host where a live lab would see it or suffer from it: a real platbench-cell-* cgroup, which a lab cell's
# precheck refuses to start beside. `make test` runs it first, before the lab is up (marker `host`,
# docs/src/tests.md).
pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[2]


def python(code):
    return [sys.executable, "-c", code]


def instance(name, code, index=0, role="worker", **extra):
    return {"name": name, "role": role, "index": index, "argv": python(code), **extra}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours is gone for every purpose but its entry.
    with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
        return stream.read().split(") ", 1)[1][0] != "Z"


def all_gone(pids, limit=5):
    """Every one of ``pids`` has ended (a killed process may need a moment to be scheduled and die)."""
    deadline = time.monotonic() + limit
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(pid) for pid in pids)


def pids_in(tmp_path):
    """The pids the test's instances wrote (each writes its own and its child's)."""
    return [int(line) for path in tmp_path.glob("*.pid") for line in path.read_text().split()]


# An instance that starts a child (as a launcher starts its ranks), writes both pids, then sleeps.
SPAWN = (
    "import subprocess, sys, os, time; "
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}'); time.sleep(60)"
)


def spawning(name, tmp_path, **extra):
    spec = instance(name, SPAWN, **extra)
    spec["argv"] = [*spec["argv"], str(tmp_path / f"{name}.pid")]
    return spec


def wait_for_pids(tmp_path, count, limit=10):
    deadline = time.monotonic() + limit
    while len(pids_in(tmp_path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_instances_of_a_round_run_together_and_each_ones_output_is_kept():
    results, error = run_rounds(
        [
            [
                instance("a", "print('from a')", 0, "chief"),
                instance("b", "import sys; print('from b', file=sys.stderr)", 1),
            ]
        ],
        timeout=30,
    )
    assert error is None
    assert [(r["name"], r["role"], r["index"], r["rc"], r["stopped"]) for r in results] == [
        ("a", "chief", 0, 0, False),
        ("b", "worker", 1, 0, False),
    ]
    assert results[0]["stdout"] == "from a\n" and results[1]["stderr"] == "from b\n"


def test_the_first_instance_to_die_is_named_and_the_others_are_stopped_with_their_children(tmp_path):
    """Rank 1 dies of SIGKILL mid-run; rank 0 (and the child it started) must not be left running."""
    survivor = spawning("rank0", tmp_path, index=0, role="chief")
    dying = instance("rank1", "import os, signal, time; time.sleep(1); os.kill(os.getpid(), signal.SIGKILL)", 1)
    started = time.monotonic()
    results, error = run_rounds([[survivor, dying]], timeout=60, grace=1)
    assert time.monotonic() - started < 20  # not the timeout: the death ended the round
    assert error.startswith("worker 1 (rank1) was killed by SIGKILL")
    by_name = {r["name"]: r for r in results}
    assert by_name["rank1"]["rc"] == -signal.SIGKILL and by_name["rank0"]["stopped"]
    assert len(pids_in(tmp_path)) == 2 and all_gone(pids_in(tmp_path))


def test_a_failing_instance_fails_the_round_with_its_own_output():
    failing = instance("b", "import sys; sys.exit('rank 1: gloo: connection reset')", 1)
    results, error = run_rounds([[instance("a", "import time; time.sleep(30)", 0, "chief"), failing]], 60, grace=1)
    assert error.startswith("worker 1 (b) exited with status 1") and "rank 1: gloo: connection reset" in error


def test_a_background_instance_runs_before_and_during_the_foreground_and_is_stopped_after(tmp_path):
    marker = tmp_path / "bg-started"
    background = instance(
        "bg", f"import time; open({str(marker)!r}, 'w').close(); time.sleep(60)", 1, "background", background=True
    )
    foreground = instance("fg", f"import os; print(os.path.exists({str(marker)!r}))", 0, "foreground")
    results, error = run_rounds([[foreground], [background, foreground]], timeout=60, settle=0.5, grace=1)
    assert error is None
    assert [(r["round"], r["name"]) for r in results] == [(0, "fg"), (1, "bg"), (1, "fg")]
    assert results[0]["stdout"] == "False\n"  # alone: the background had not started
    assert results[2]["stdout"] == "True\n"  # shared: it ran first
    assert results[1]["stopped"] and results[1]["rc"] is not None


def test_a_background_that_ends_before_the_foreground_fails_the_round():
    background = instance("bg", "import sys; sys.exit('out of memory')", 1, "background", background=True)
    results, error = run_rounds([[background, instance("fg", "pass", 0, "foreground")]], timeout=30, settle=2)
    assert "background 1 (bg) ended (status 1) before the foreground was done" in error
    assert "out of memory" in error and [r["name"] for r in results] == ["bg"]


def test_the_timeout_stops_every_instance_and_says_which_still_ran(tmp_path):
    results, error = run_rounds([[spawning("slow", tmp_path)]], timeout=1, grace=1)
    assert error == "the cell's timeout passed while worker 0 (slow) still ran"
    assert all_gone(pids_in(tmp_path)) and results[0]["stopped"]


def test_a_stop_command_runs_after_the_instance_is_stopped(tmp_path):
    stopped = tmp_path / "stop-ran"
    spec = instance("c", "import time; time.sleep(60)", stop=python(f"open({str(stopped)!r}, 'w').close()"))
    results, error = run_rounds([[spec]], timeout=1, grace=1)
    assert error and stopped.exists()


def test_sigint_to_the_module_stops_every_instance(tmp_path):
    """Ctrl-C on the controller: the module is interrupted and must leave no instance behind."""
    rounds = [[spawning("a", tmp_path, index=0), spawning("b", tmp_path, index=1)]]
    code = (
        "import json, sys; "
        "from ansible_collections.platbench.lab.plugins.module_utils.supervisor import run_rounds; "
        "print(json.dumps(run_rounds(json.loads(sys.argv[1]), timeout=60, grace=1)[1]))"
    )
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'collections'}")
    supervisor = subprocess.Popen([sys.executable, "-c", code, json.dumps(rounds)], stdout=subprocess.PIPE, env=env)
    try:
        wait_for_pids(tmp_path, 4)
        assert len(pids_in(tmp_path)) == 4
        supervisor.send_signal(signal.SIGINT)
        out, _ = supervisor.communicate(timeout=20)
    finally:
        supervisor.kill()
    assert json.loads(out) == "stopped by signal SIGINT"
    assert all_gone(pids_in(tmp_path))


@pytest.mark.parametrize("rounds", [[[]], [[{"name": "bg", "argv": ["true"], "background": True}]]])
def test_a_round_without_a_foreground_is_refused(rounds):
    results, error = run_rounds(rounds, timeout=5)
    assert error == "a round needs at least one foreground instance: nothing would end it"


# -- where an instance runs: the supervisor is the harness's, a placed instance is not -------------------------------

# What an instance reports of where it runs.
WHERE = (
    "import json, os; print(json.dumps({'policy': os.sched_getscheduler(0), 'nice': os.getpriority(os.PRIO_PROCESS, 0),"
    " 'cgroups': open('/proc/self/cgroup').read().split(), 'env': sorted(os.environ)}))"
)
BASE_ENV = dict(pair.split("=", 1) for pair in process_kind.BASE_ENV)


@pytest.fixture
def idle_supervisor():
    """This thread at SCHED_IDLE and nice 5 while the test runs, as the harness runs the supervisor; then back."""
    policy, nice = os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    os.setpriority(os.PRIO_PROCESS, 0, 5)
    yield
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    os.sched_setscheduler(0, policy, os.sched_param(0))


@skips.needs_root("the instance's cgroup is made in this host's cpu hierarchy, and nice 0 is restored")
def test_a_placed_instance_runs_in_a_cgroup_of_its_own_at_the_normal_policy_and_its_cgroup_goes_after(idle_supervisor):
    found = cpu_quota.hierarchy()
    assert found, "this host has no cgroup cpu controller (host_facts' cpu_cgroup)"
    name = cpu_quota.PREFIX + os.urandom(6).hex()
    path = os.path.join(found["directory"], name)
    place = {"cgroup": {"path": path, "version": found["version"], "leave": []}, "normal_policy": True}
    placed = instance("placed", WHERE, env={"A": "1"}, place={**place, "base_env": BASE_ENV})
    results, error = run_rounds([[placed, instance("as-is", WHERE, index=1)]], timeout=60)
    assert error is None, error
    mine, theirs = (json.loads(result["stdout"]) for result in results)
    assert (mine["policy"], mine["nice"]) == (os.SCHED_OTHER, 0)
    assert (theirs["policy"], theirs["nice"]) == (os.SCHED_IDLE, 5)  # unplaced: the supervisor's, inherited
    assert any(line.endswith(f":/{name}") for line in mine["cgroups"]), mine["cgroups"]
    assert not any(name in line for line in theirs["cgroups"])
    assert mine["env"] == ["A", "HOME", "LANG", "PATH"]  # the base and the plan's, nothing of the supervisor's
    assert "PYTEST_CURRENT_TEST" in theirs["env"]
    assert not os.path.exists(path)


def test_an_instance_that_cannot_be_placed_fails_with_why_and_runs_nothing(tmp_path):
    (tmp_path / "cpu").mkdir()
    path = tmp_path / "cpu" / "platbench-cell-0123456789ab"
    ran = tmp_path / "ran"
    gone = tmp_path / "gone" / "cgroup.procs"
    place = {"cgroup": {"path": str(path), "version": "v1", "leave": [str(gone)]}}
    results, error = run_rounds([[instance("cell", f"open({str(ran)!r}, 'w')", place=place)]], timeout=30)
    assert error.startswith("worker 0 (cell) exited with status 126; its output ends:\n"), error
    assert f"platbench: the instance could not be placed: [Errno 2] No such file or directory: '{gone}'" in error
    assert not ran.exists() and results[0]["rc"] == 126
    assert (path / "cgroup.procs").read_text().strip().isdigit()  # its own cgroup it entered first
