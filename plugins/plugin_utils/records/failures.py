# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Why a cell failed, in words: the cause read from the failed task's result.

The rescue of a cell hands over ``ansible_failed_task.name`` and ``ansible_failed_result``.
The failed task is not always the cause: when the Docker engine stops mid-cell, the task that
fails last is the clean-up. So the message names the cause first (a signal, the engine gone,
the cell timeout) and the task where it was seen after it.
"""

from __future__ import annotations

import re
import signal

from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout

MAX_MESSAGE_CHARS = 2000
_LINE_CHARS = 300
TIMEOUT_SETTING = cell_timeout.SETTING

# What usually sends each signal to a benchmark process, so the message says where to look.
SIGNAL_CAUSES = {
    signal.SIGKILL: "the kernel's OOM killer, `docker kill` or the cell timeout",  # kill -9 for a bare process
    signal.SIGTERM: "`docker stop`, the engine or the host shutting down, or a `kill` by someone",
    signal.SIGINT: "an interrupt (Ctrl-C)",
    signal.SIGSEGV: "a crash in native code (segmentation fault)",
    signal.SIGABRT: "an abort in native code (a framework library gave up)",
    signal.SIGBUS: "a bus error (for example /dev/shm too small for the data loader)",
    signal.SIGHUP: "the session that started it went away",
}

# What community.docker and the docker CLI say when they cannot reach the engine at all.
# ("Error connecting container to network ..." is a different, real error, hence the colon.)
_ENGINE_GONE = re.compile(
    r"Error connecting: |trying to talk to the Docker daemon|Cannot connect to the Docker daemon"
    r"|Error while fetching server API version|docker\.sock.*(No such file|Connection refused)",
    re.I,
)
_TIMED_OUT = re.compile(r"Timed out after (\d+) second")


def _text(value):
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(item) for item in value)
    return str(value)


def _last_line(text):
    lines = [line.strip() for line in _text(text).splitlines() if line.strip()]
    return lines[-1][:_LINE_CHARS] if lines else ""


def _first_line(text):
    lines = [line.strip() for line in _text(text).splitlines() if line.strip()]
    return lines[0][:_LINE_CHARS] if lines else ""


def _as_int(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def exit_code(result):
    """The exit status a failed task reports: ``rc`` (command, shell), ``status`` (docker_container
    with ``detach: false``) or the container's ``State.ExitCode``; None when there is none."""
    for value in (
        result.get("rc"),
        result.get("status"),
        ((result.get("container") or {}).get("State") or {}).get("ExitCode"),
    ):
        code = _as_int(value)
        if code is not None:
            return code
    return None


def signal_of(code):
    """The signal that ended a process with exit status ``code``, or None.

    A negative rc is how Python's subprocess (ansible.builtin.command) reports a signal;
    128 + N is how a shell, ``ssh`` and Docker report it.
    """
    if code is None:
        return None
    number = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else None
    if number is None:
        return None
    try:
        return signal.Signals(number)
    except ValueError:
        return None


def signal_message(code, oom_killed=False, container=True):
    """``killed by SIGKILL (signal 9): <who usually sends it>``, or None when ``code`` is no signal.

    ``container``: the process ran in a container (else `docker kill` cannot have been the sender)."""
    sig = signal_of(code)
    if sig is None:
        return None
    if oom_killed:
        return (
            f"killed by {sig.name} (signal {sig.value}): the kernel's OOM killer (Docker reports OOMKilled); "
            "the cell needs more memory than it was given"
        )
    cause = SIGNAL_CAUSES.get(sig)
    if sig == signal.SIGKILL and not container:
        cause = "the kernel's OOM killer, a `kill -9` or the cell timeout"
    return f"killed by {sig.name} (signal {sig.value})" + (f": {cause}" if cause else "")


def _failure_texts(result):
    return [_text(result.get(key)) for key in ("msg", "stderr", "module_stderr", "module_stdout", "exception")]


def _timeout_period(result):
    timed_out = result.get("timedout")
    if isinstance(timed_out, dict) and _as_int(timed_out.get("period")):
        return _as_int(timed_out["period"])
    match = _TIMED_OUT.search(_text(result.get("msg")))
    return int(match.group(1)) if match else None


def timeout_message(period, task, how, timeout_setting=TIMEOUT_SETTING):
    """``stopped by the cell timeout (N s)``, how, and what to change."""
    return (
        f"stopped by the cell timeout ({period} s): {how} (at '{task}'); "
        f"raise {timeout_setting} or give the workload fewer steps"
    )


def describe_failure(task, result, workload_error=None, timeout_setting=TIMEOUT_SETTING, timeout=None):
    """One message that says why a cell failed, cause first.

    ``task``: the failed task's name; ``result``: its result (``ansible_failed_result``);
    ``workload_error``: the error of a failed record the workload printed before it exited, if any;
    ``timeout``: the cell's timeout in seconds (its plan's), which a process cell's own deadline enforces.
    """
    task = str(task or "a task")
    result = result if isinstance(result, dict) else {"msg": _text(result)}
    msg = _text(result.get("msg")).strip()
    seen = f"{task}: {_first_line(msg)}" if msg else task

    stop = cell_timeout.deadline_stop(result)
    if stop is not None:
        how = (
            "the workload and its process group got SIGTERM and ended"
            if stop == "term"
            else f"the workload ignored SIGTERM and its process group was killed {cell_timeout.KILL_AFTER} s later"
        )
        return _clip(timeout_message(timeout if timeout is not None else "?", task, how, timeout_setting))

    period = _timeout_period(result)
    if period is not None:
        return _clip(
            timeout_message(
                period,
                task,
                "its task did not end within it; the cell's clean-up removed what it ran in",
                timeout_setting,
            )
        )

    if any(_ENGINE_GONE.search(text) for text in _failure_texts(result)):
        return _clip(
            f"the Docker engine stopped answering during the cell (seen at '{seen}'); "
            "check `systemctl status docker` and the engine's journal"
        )

    code = exit_code(result)
    state = (result.get("container") or {}).get("State") or {}
    in_container = (
        "container" in result or "status" in result or any(word in task.lower() for word in ("docker", "container"))
    )
    killed = signal_message(code, oom_killed=bool(state.get("OOMKilled")), container=in_container)
    if killed:
        detail = _last_line(result.get("stderr_lines") or result.get("stderr") or "")
        return _clip(
            f"the workload was {killed} (rc={code}, at '{task}')" + (f"; last stderr line: {detail}" if detail else "")
        )

    if workload_error:
        return _clip(f"the workload failed: {workload_error} (at '{task}', rc={code if code is not None else 'n/a'})")

    # docker_container puts the container's whole output in msg: its last line says most.
    container_output = _text((result.get("container") or {}).get("Output"))
    if msg and container_output and msg.strip() == container_output.strip():
        msg = f"exited with status {code}; last output line: {_last_line(msg)}"
    last_stderr = _last_line(result.get("stderr_lines") or result.get("stderr") or result.get("module_stderr") or "")
    message = f"{task} failed: {msg[:MAX_MESSAGE_CHARS] or 'no message'} (rc={code if code is not None else 'n/a'})"
    return _clip(message + (f" {last_stderr}" if last_stderr else ""))


def _clip(message):
    return message if len(message) <= MAX_MESSAGE_CHARS + 600 else message[: MAX_MESSAGE_CHARS + 600] + "..."


def failure_output(result):
    """What the failed task saw the workload print (stdout, container output, then stderr)."""
    if not isinstance(result, dict):
        return ""
    container = result.get("container") or {}
    stdout = result.get("stdout") or container.get("Output") or result.get("module_stdout") or ""
    stderr = result.get("stderr") or result.get("module_stderr") or ""
    return "\n".join(part for part in (_text(stdout), _text(stderr)) if part)
