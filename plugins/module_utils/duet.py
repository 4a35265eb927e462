# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Both sides of a duet pair (plugins/plugin_utils/schedule.py, schedule: duet) started at the same moment on the
runner host, each waited for, each stopped at the pair's timeout: the work of the platbench.lab.duet_run module.

A side is a process cell's shell line (its plan's ``process.command``, which enters the cell's CPU quota cgroup
itself, and stops itself at the cell's timeout) or a container the engine has created but not started (``docker
start --attach`` or ``podman start --attach`` runs it to its end, its output on ours). Both are started before
either is waited for, so the two timed parts overlap but for the difference in their warmups; ``overlap_seconds``
says how long both ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time

ENGINES = ("docker", "podman")


class DuetError(Exception):
    """A side that cannot be started: what it is, and why."""


def argv_of(side):
    """The command line that runs ``side``: ``{"command": shell line}`` or ``{"container": {"engine", "name"}}``."""
    if side.get("command"):
        return ["/bin/sh", "-c", side["command"]]
    container = side.get("container") or {}
    if container.get("engine") not in ENGINES or not container.get("name"):
        raise DuetError(f"a side is a shell line (command) or a created container (container: engine, name): {side!r}")
    return [container["engine"], "start", "--attach", container["name"]]


def _stop(process, side):
    """Stop a side past its timeout: its process group, and its container through the engine."""
    container = side.get("container") or {}
    if container.get("name"):
        subprocess.run([container["engine"], "kill", container["name"]], capture_output=True, check=False, timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_pair(sides, timeout, popen=subprocess.Popen):
    """Start every side of ``sides``, then wait for each (at most ``timeout`` seconds from the start): ``(results,
    overlap_seconds)``, a result per side ``{"rc", "stdout", "stderr", "started", "ended", "timed_out"}`` (times
    in seconds since the epoch; rc -9 for a side stopped at the timeout)."""
    argvs = [argv_of(side) for side in sides]
    processes, results = [], []
    for argv in argvs:
        started = time.time()
        try:
            process = popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: the timeout stops the whole side
            )
        except OSError as exc:
            for earlier, side in zip(processes, sides):
                _stop(earlier, side)
            raise DuetError(f"{argv[0]} could not be started: {exc}") from None
        processes.append(process)
        results.append({"started": started})
    deadline = time.monotonic() + timeout

    def wait(index):
        process, result = processes[index], results[index]
        try:
            stdout, stderr = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
            result["timed_out"] = False
        except subprocess.TimeoutExpired:
            _stop(process, sides[index])
            stdout, stderr = process.communicate()
            result["timed_out"] = True
        result.update(
            rc=process.returncode,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            ended=time.time(),
        )

    waiters = [threading.Thread(target=wait, args=(index,)) for index in range(len(processes))]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    overlap = min(result["ended"] for result in results) - max(result["started"] for result in results)
    return results, max(0.0, overlap)
