# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Both sides of a duet pair (plugin_utils/experiment/schedule.py, schedule: duet) started at the same moment on the
runner host, each waited for, each stopped at the pair's timeout: the work of the platbench.lab.duet_run module.

A side is a process cell's shell line (its plan's ``process.command``, which enters the cell's CPU quota cgroup
itself, and stops itself at the cell's timeout) or a container the engine has created but not started (``docker
start --attach`` or ``podman start --attach`` runs it to its end, its output on ours). Both are started before
either is waited for, so the two timed parts overlap but for the difference in their warmups; ``overlap_seconds``
says how long both ran.

A side may name its record file (its plan's ``record_file``: the workload writes its record line there too,
workloads/common/record.py): one an earlier try left is removed before the sides start, and what the file holds once
the side ended is returned beside its output, and the file removed, so that a line the attach stream lost is not lost.
The pair's start-line folder (``duet_dir``, where the sides meet and their record files are) is removed before the
sides start, so that an earlier try's marks cannot let one side start its window alone, and after they end. A
container side is inspected through its engine once it ended (``inspect``), for its record. A process side's cgroup of
its own (``cgroup``: the plan's ``process.cgroup``, which its shell line enters) is created before the sides start and
removed once they ended (module_utils/cpu_quota.py). Each of these was a task of its own, which cost every pair a
second or more of the controller's time.

The process waiting on the sides runs at SCHED_IDLE, so that it never takes a CPU from them. What it starts inherits
that policy: the process sides set their own back in their shell line; a Podman side's CLI is started through
``chrt --other 0``, since conmon, and through it the container, inherit the CLI's policy (Docker's containers are
started by containerd, which does not).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota, quiet

ENGINES = ("docker", "podman")
# The engines whose container inherits the policy of the CLI that starts it, and the command that gives it the
# default policy back.
INHERITS_POLICY = ("podman",)
NORMAL_POLICY_ARGV = quiet.NORMAL_POLICY_ARGV
# workloads/common/record.py writes the record file through this temporary file (RECORD_FILE_TEMPORARY_SUFFIX; a
# unit test checks both agree): module_utils cannot import the workloads' code.
RECORD_TEMPORARY_SUFFIX = ".tmp"
# More than a record line holds (its kept files included): a file past it is not a record.
RECORD_FILE_MAX_CHARS = 1_000_000
IDLE = "idle"
# Seconds an engine's inspect of an ended container may take.
INSPECT_TIMEOUT = 60
# Seconds a side's cgroup may take to empty once the side ended (cpu_quota.remove kills what is left in it).
CGROUP_GRACE = 10.0


class DuetError(Exception):
    """A side that cannot be started: what it is, and why."""


def argv_of(side):
    """The command line that runs ``side``: ``{"command": shell line}`` or ``{"container": {"engine", "name"}}``."""
    if side.get("command"):
        return ["/bin/sh", "-c", side["command"]]
    container = side.get("container") or {}
    if container.get("engine") not in ENGINES or not container.get("name"):
        raise DuetError(f"a side is a shell line (command) or a created container (container: engine, name): {side!r}")
    start = [container["engine"], "start", "--attach", container["name"]]
    return NORMAL_POLICY_ARGV + start if container["engine"] in INHERITS_POLICY else start


def wait_at_idle_priority():
    """Put this process at SCHED_IDLE: ``idle``, or ``unchanged: why`` where the kernel refused it."""
    refused = quiet.lower_policy()
    return f"unchanged: {refused}" if refused else IDLE


def _remove_record_file(path):
    for stale in (path, path + RECORD_TEMPORARY_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)


def take_record_file(path):
    """What the record file ``path`` holds, and the file removed: ``(text or None, error or None)``; None for a
    file the side did not write, and the error where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            text = stream.read(RECORD_FILE_MAX_CHARS)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the record file {path} could not be read: {exc}"
    try:
        _remove_record_file(path)
    except OSError as exc:
        return text, f"the record file {path} was read but not removed: {exc}"
    return text, None


def clear_duet_dir(path):
    """Remove the pair's start-line folder ``path`` and what is in it; DuetError where it cannot go."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise DuetError(f"the pair's start-line folder {path} cannot be removed: {exc}") from None


def inspect_container(container, run=subprocess.run):
    """The engine's inspect of a container side (``{"engine", "name"}``), as its info module returns it:
    ``(inspect or None, error or None)``."""
    argv = [container["engine"], "inspect", "--type", "container", container["name"]]
    try:
        done = run(argv, capture_output=True, check=False, timeout=INSPECT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(argv)} failed: {exc}"
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        return None, f"{' '.join(argv)} failed: {error}"
    try:
        found = json.loads(done.stdout)
    except ValueError as exc:
        return None, f"{' '.join(argv)} printed no JSON: {exc}"
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return None, f"{' '.join(argv)} printed no container"
    return found[0], None


def make_cgroups(sides, create=cpu_quota.create, remove=cpu_quota.remove):
    """Create the cgroup of each side that has one (``{"path", "version", "quota_us", "period_us"}``), in order; on a
    failure, remove those made before it and raise DuetError naming the cgroup and why."""
    made = []
    for side in sides:
        cgroup = side.get("cgroup")
        if not cgroup:
            continue
        try:
            create(
                cgroup["path"], cgroup["version"], cgroup["quota_us"], cgroup.get("period_us") or cpu_quota.PERIOD_US
            )
        except (cpu_quota.QuotaError, OSError) as exc:
            for path in made:
                with contextlib.suppress(cpu_quota.QuotaError, OSError):
                    remove(path, CGROUP_GRACE)
            raise DuetError(f"the cgroup {cgroup['path']} of a side cannot be made: {exc}") from None
        made.append(cgroup["path"])


def remove_cgroups(sides, results, remove=cpu_quota.remove):
    """Remove the cgroup of each side that has one, once the sides ended: the paths that could not go, each side's
    error in its result's ``cgroup_error``."""
    left = []
    for side, result in zip(sides, results):
        cgroup = side.get("cgroup")
        if not cgroup:
            continue
        try:
            remove(cgroup["path"], CGROUP_GRACE)
        except (cpu_quota.QuotaError, OSError) as exc:
            result["cgroup_error"] = str(exc)
            left.append(cgroup["path"])
    return left


def _stop(process, side):
    """Stop a side past its timeout: its process group, and its container through the engine."""
    container = side.get("container") or {}
    if container.get("name"):
        subprocess.run([container["engine"], "kill", container["name"]], capture_output=True, check=False, timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_pair(
    sides,
    timeout,
    popen=subprocess.Popen,
    idle=wait_at_idle_priority,
    duet_dir=None,
    inspect=inspect_container,
    cgroups=(cpu_quota.create, cpu_quota.remove),
):
    """Start every side of ``sides``, then wait for each (at most ``timeout`` seconds from the start), at the
    policy ``idle()`` sets: ``{"sides", "overlap_seconds", "waiter_policy"}``, a result per side ``{"rc",
    "stdout", "stderr", "started", "ended", "timed_out"}`` (times in seconds since the epoch; rc -9 for a side
    stopped at the timeout), with ``record_text`` (what its record file held, or None) for a side that names
    a ``record_file`` and ``record_file_error`` where that file could not be read or removed, and ``inspect`` (the
    engine's inspect of it, by ``inspect``: inspect_container) or ``inspect_error`` for a container side. The
    folder ``duet_dir`` is removed before the sides start and once they ended (``duet_dir_error`` in the result
    where it could not be then). A side's ``cgroup`` is made before the sides start and removed once they ended, by
    ``cgroups`` (create, remove: cpu_quota's); one that could not go is in the result's ``cgroups_left`` and its
    side's ``cgroup_error``. The policy stays with the calling thread and what it starts after: a caller that goes on
    (a test) passes its own ``idle``."""
    argvs = [argv_of(side) for side in sides]
    if duet_dir:
        clear_duet_dir(duet_dir)
    for side in sides:
        if side.get("record_file"):
            try:
                _remove_record_file(side["record_file"])
            except OSError as exc:
                raise DuetError(f"the record file {side['record_file']} an earlier try left cannot go: {exc}") from None
    create_cgroup, remove_cgroup = cgroups
    make_cgroups(sides, create_cgroup, remove_cgroup)
    waiter_policy = idle()
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
            remove_cgroups(sides, [{} for _ in sides], remove_cgroup)
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
        if sides[index].get("record_file"):
            result["record_text"], error = take_record_file(sides[index]["record_file"])
            if error:
                result["record_file_error"] = error

    waiters = [threading.Thread(target=wait, args=(index,)) for index in range(len(processes))]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    # Once both ended: the engine's daemon answers at its own policy, which must not meet a side still timing.
    for side, result in zip(sides, results):
        if side.get("container"):
            found, error = inspect(side["container"])
            if found is not None:
                result["inspect"] = found
            else:
                result["inspect_error"] = error
    overlap = min(result["ended"] for result in results) - max(result["started"] for result in results)
    pair = {"sides": results, "overlap_seconds": max(0.0, overlap), "waiter_policy": waiter_policy}
    left = remove_cgroups(sides, results, remove_cgroup)
    if left:
        pair["cgroups_left"] = left
    if duet_dir:
        try:
            clear_duet_dir(duet_dir)
        except DuetError as exc:
            pair["duet_dir_error"] = str(exc)
    return pair
