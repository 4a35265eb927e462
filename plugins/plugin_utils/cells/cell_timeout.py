# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The cell timeout (``platform_run_cell_timeout``): what it may be, and how a process cell is stopped by it.

Ansible's task ``timeout:`` fails the task but leaves the command it started running: a process cell stopped
that way ran on to its end, beside the next cells. So a process cell's command carries its own deadline:
coreutils' ``timeout`` runs the workload in a process group of its own, sends SIGTERM to the whole group when
the cell's seconds are up and SIGKILL ``KILL_AFTER`` seconds later, on the machine the workload runs on (the
host, a guest, a micro-VM, an instance). Its ``--verbose`` line on stderr tells a stop by the deadline from a
workload that died of a signal of its own (the OOM killer's SIGKILL also exits 137). The task's own timeout
stays, ``BACKSTOP`` seconds later, for a machine that stops answering.
"""

from __future__ import annotations

SETTING = "platform_run_cell_timeout"
# Seconds between the SIGTERM of the deadline and the SIGKILL for a workload that ignores it.
KILL_AFTER = 10
# Seconds after the deadline and its SIGKILL before Ansible gives up on the task itself.
BACKSTOP = 30
# What coreutils' timeout --verbose prints before each signal it sends ("timeout: sending signal TERM to command").
VERBOSE_MARK = "timeout: sending signal"


class CellTimeoutError(ValueError):
    """A cell timeout that is no positive whole number of seconds."""


def seconds(value, setting=SETTING):
    """``value`` as a positive number of seconds, or CellTimeoutError saying what to set."""
    text = str(value).strip() if value is not None else ""
    try:
        number = float(text)
    except ValueError:
        raise CellTimeoutError(
            f"{setting}={value!r} is not a number of seconds: set it to a whole number above 0 (the default is 3600)"
        ) from None
    if number != number or number in (float("inf"), float("-inf")) or number != int(number):
        raise CellTimeoutError(f"{setting}={value!r} is not a whole number of seconds: set it to one above 0")
    if number <= 0:
        raise CellTimeoutError(
            f"{setting}={value!r}: a cell needs more than 0 seconds; set it above 0 (the default is 3600)"
        )
    return int(number)


def problems(value, setting=SETTING):
    """The plan's problem with ``value``, as a list of at most one message."""
    try:
        seconds(value, setting)
    except CellTimeoutError as exc:
        return [str(exc)]
    return []


def deadline_argv(limit):
    """What goes in front of a process cell's argv so that it is stopped, with its children, after ``limit`` s."""
    return ["timeout", "--verbose", f"--kill-after={KILL_AFTER}", str(int(limit))]


def task_timeout(limit):
    """The Ansible task timeout behind the deadline: only reached when the machine itself stops answering."""
    return int(limit) + KILL_AFTER + BACKSTOP


def deadline_stop(result):
    """How coreutils' timeout stopped a failed process task's workload: ``"term"`` (it ended on the SIGTERM),
    ``"kill"`` (the SIGKILL was needed), or None when the deadline did not stop it.

    Read from timeout's --verbose lines, not from the exit status alone: with the command exec'd, the status is
    124 or 137 in a shell's words, -9 in Python's (the local connection, sudo) and 255 from ssh."""
    if not isinstance(result, dict) or result.get("rc") in (None, 0):
        return None
    texts = []
    for key in ("stderr", "stdout"):  # a raw command over SSH with a tty merges stderr into stdout
        value = result.get(key) or ""
        texts.append("\n".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
    lines = [line.strip() for text in texts for line in text.splitlines() if line.strip().startswith(VERBOSE_MARK)]
    if not lines:
        return None
    return "kill" if any(line.startswith(f"{VERBOSE_MARK} KILL") for line in lines) else "term"
