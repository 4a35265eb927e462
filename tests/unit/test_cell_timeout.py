"""The cell timeout: what it may be, the deadline a process cell carries, and that the deadline really stops a
process group (a real coreutils `timeout` on a real shell line, as ansible.builtin.raw runs it)."""

import os
import shlex
import subprocess
import time

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.process import shell_command


@pytest.mark.parametrize("value, expected", [(3600, 3600), ("90", 90), (" 5 ", 5), (2.0, 2)])
def test_a_whole_positive_number_of_seconds_is_taken(value, expected):
    assert cell_timeout.seconds(value) == expected
    assert cell_timeout.problems(value) == []


@pytest.mark.parametrize(
    "value, words",
    [
        (0, "more than 0 seconds"),
        (-5, "more than 0 seconds"),
        ("ten", "is not a number of seconds"),
        ("", "is not a number of seconds"),
        (None, "is not a number of seconds"),
        (1.5, "not a whole number"),
        ("nan", "not a whole number"),
    ],
)
def test_a_timeout_that_is_no_positive_whole_number_is_refused_naming_the_setting(value, words):
    [problem] = cell_timeout.problems(value)
    assert problem.startswith(f"platform_run_cell_timeout={value!r}") and words in problem, problem
    with pytest.raises(cell_timeout.CellTimeoutError):
        cell_timeout.seconds(value)


def test_the_task_timeout_comes_after_the_deadline_and_its_kill():
    assert cell_timeout.task_timeout(60) == 60 + cell_timeout.KILL_AFTER + cell_timeout.BACKSTOP


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: its parent has not reaped it yet.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("ignores_term", [False, True], ids=["term", "kill"])
def test_the_deadline_stops_the_workload_and_every_child_it_started(tmp_path, monkeypatch, ignores_term):
    # The workload starts a child of its own (as a data loader or a launcher does), writes both pids and sleeps: the
    # deadline must end both, the child included, with the exit status and line the record reads.
    monkeypatch.setattr(cell_timeout, "KILL_AFTER", 1)
    pids = tmp_path / "pids"
    trap = "trap '' TERM; " if ignores_term else ""
    script = f"{trap}sleep 300 & echo $$ $! > {shlex.quote(str(pids))}; wait"
    line = shell_command({"chdir": str(tmp_path), "env": {"A": "1"}, "argv": ["sh", "-c", script]}, deadline=1)
    assert shlex.split(line)[3:8] == ["exec", "timeout", "--verbose", "--kill-after=1", "1"]
    started = time.monotonic()
    result = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    shell, child = map(int, pids.read_text().split())
    # The shell exec'd timeout: Python sees its own SIGKILL as -9, or its exit status 124 after a SIGTERM.
    assert result.returncode == (-9 if ignores_term else 124), result
    expected = "kill" if ignores_term else "term"
    assert cell_timeout.deadline_stop({"rc": result.returncode, "stderr": result.stderr}) == expected
    deadline = time.monotonic() + 10
    while (_alive(shell) or _alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell) and not _alive(child)


def test_without_a_deadline_the_line_is_the_plain_command():
    line = shell_command({"chdir": "/opt/x", "env": {"B": "2"}, "argv": ["python", "-m", "w"]})
    assert shlex.split(line) == ["cd", "/opt/x", "&&", "exec", "env", "B=2", "python", "-m", "w"]
