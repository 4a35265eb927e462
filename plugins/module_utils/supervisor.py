# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Run the instances of one cell side by side on their host, and leave nothing behind.

A cell with several instances (ranks of a distributed job, a foreground job beside a background one) is
run in rounds. Each round starts its background instances first, confirms that each is still running
after ``settle`` seconds, then starts its foreground instances together and waits for all of them. The
round ends when every foreground instance has exited (each within the deadline), and its background
instances are then stopped. A round fails, and the cell with it, when:

- a foreground instance exits non-zero: the other instances are stopped at once, and the error is that
  instance's own (its role, index and the end of its stderr), not the symptom its peers saw after it;
- a background instance exits before the round's foregrounds are done (a shared run was not shared all along,
  a peer was gone);
- the deadline passes (the cell's timeout, for all rounds together).

Every instance runs in a session of its own, so that stopping it stops its children too (a launcher's
ranks, ``ip netns exec``'s child). An instance may name a ``stop`` command: what ends it where killing its
local process is not enough (``docker rm -f NAME`` for a container whose client is the local process; an ssh
line for an instance on another host, module_utils/remote_instance.py), within its ``stop_timeout`` seconds.
Stopping is SIGTERM to the session, then SIGKILL after ``grace`` seconds, then the ``stop`` command.
SIGTERM, SIGINT and SIGHUP received by the supervisor (Ctrl-C on the controller, a task timeout) stop
everything the same way before it exits.

The supervisor is part of the harness: it runs at ``SCHED_IDLE`` (inherited from ``platbench run`` on a local lab,
lowered by ``run_instances`` on a runner host of its own; module_utils/quiet.py), in the harness's cgroup. An
instance that names a ``place`` (a process instance on the runner host, placements/instances.py) is put back before
it execs: into a cgroup of its own without a quota (``cgroup``: path, version, ``leave``), which the supervisor
makes before it starts and removes after it is stopped, as a container instance is in its engine's; at the normal
policy and nice 0 (``normal_policy``); with ``base_env`` instead of the supervisor's environment under the plan's
variables. A step that fails is said on the instance's stderr and ends it with status 126, so that the cell fails
with that reason.

Pure Python with the standard library (and cpu_quota, for an instance's cgroup): the ``run_instances`` module wraps
it, and the tests drive it directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time

from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota

POLL_SECONDS = 0.05
TAIL_CHARS = 2000
FOREGROUND, BACKGROUND = "foreground", "background"
PLACE_FAILED = 126  # an instance's exit status when it could not be placed (its stderr says why)


class SupervisorError(Exception):
    """A round failed: ``instance`` is the one whose end decided it (None for the deadline)."""

    def __init__(self, message, instance=None):
        super().__init__(message)
        self.instance = instance


class Interrupted(Exception):
    """The supervisor was sent a signal to stop."""


def _tail(text, chars=TAIL_CHARS):
    text = (text or "").strip()
    return text if len(text) <= chars else "..." + text[-chars:]


class Instance:
    """One instance: its command, its session and its output files."""

    def __init__(self, spec, round_index, workdir):
        self.spec = spec
        self.round = round_index
        self.name = spec["name"]
        self.role = spec.get("role") or FOREGROUND
        self.index = spec.get("index", 0)
        self.background = bool(spec.get("background"))
        self.place = spec.get("place") or {}
        self.cgroup = None  # the cgroup of its own the supervisor made for it, removed after it
        self.process = None
        self.started = self.ended = None
        self.stopped = False
        # Files, not pipes: an instance that writes more than a pipe holds never blocks on a full one. They
        # live as long as the instance (close()).
        self._out = tempfile.TemporaryFile(mode="w+", dir=workdir)  # noqa: SIM115
        self._err = tempfile.TemporaryFile(mode="w+", dir=workdir)  # noqa: SIM115

    def start(self):
        base = self.place.get("base_env", os.environ)
        env = {**base, **{str(k): str(v) for k, v in (self.spec.get("env") or {}).items()}}
        cgroup = self.place.get("cgroup")
        if cgroup:
            try:
                cpu_quota.create(cgroup["path"], cgroup["version"], cpu_quota.UNLIMITED)
            except cpu_quota.QuotaError as exc:
                raise SupervisorError(f"{self.describe()} could not be given its cgroup: {exc}", self) from None
            self.cgroup = cgroup["path"]
        self.started = time.monotonic()
        self.process = subprocess.Popen(  # the plan's argv, never a shell line
            [str(arg) for arg in self.spec["argv"]],
            cwd=self.spec.get("chdir") or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
            preexec_fn=_placing(self.place) if self.place else None,  # the module starts no thread
        )

    @property
    def rc(self):
        return None if self.process is None else self.process.poll()

    def running(self):
        return self.process is not None and self.process.poll() is None

    def signal_session(self, signum):
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)

    def stop(self, grace):
        """End the instance: SIGTERM to its session, SIGKILL after ``grace`` seconds, then its stop command."""
        if self.running():
            self.stopped = True
            self.signal_session(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.running() and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
            self.signal_session(signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=max(grace, 1))
            # The session's leader is gone, its children may not be: a last SIGKILL to the group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.ended is None and self.started is not None:
            self.ended = time.monotonic()
        stop = self.spec.get("stop")
        if stop:
            # A stop that hangs (a host that no longer answers) must not keep the others from being stopped.
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run(
                    [str(arg) for arg in stop],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=self.spec.get("stop_timeout") or max(grace, 10),
                    check=False,
                )
        if self.cgroup:
            # What is still in it is killed first. One that cannot go is a leftover the next run's prechecks name
            # and playbooks/teardown.yml removes (its name is a cell cgroup's, cpu_quota.NAME).
            with contextlib.suppress(cpu_quota.QuotaError):
                cpu_quota.remove(self.cgroup, grace)
            self.cgroup = None

    def output(self, stream):
        handle = self._out if stream == "stdout" else self._err
        handle.flush()
        handle.seek(0)
        return handle.read()

    def result(self):
        ended = self.ended if self.ended is not None else (time.monotonic() if self.started else None)
        return {
            "name": self.name,
            "role": self.role,
            "index": self.index,
            "round": self.round,
            "background": self.background,
            "rc": self.rc,
            "stopped": self.stopped,
            "seconds": None if self.started is None else round(ended - self.started, 3),
            "stdout": self.output("stdout"),
            "stderr": self.output("stderr"),
        }

    def close(self):
        self._out.close()
        self._err.close()

    def describe(self):
        return f"{self.role} {self.index} ({self.name})"

    def failure(self, what):
        stderr = _tail(self.output("stderr")) or _tail(self.output("stdout")) or "(no output)"
        return f"{self.describe()} {what}; its output ends:\n{stderr}"


def _placing(place):
    """The ``preexec_fn`` that puts an instance's process where ``place`` says, between fork and exec: into each
    ``cgroup.procs`` (its cgroup's, then the ``leave`` roots'), then back at the normal policy and nice 0."""
    cgroup = place.get("cgroup")
    procs = [os.path.join(cgroup["path"], cpu_quota.PROCS), *cgroup.get("leave", [])] if cgroup else []
    normal = bool(place.get("normal_policy"))

    def place_child():
        try:
            for path in procs:
                with open(path, "w", encoding="utf-8") as stream:
                    stream.write(str(os.getpid()))
            if normal:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
                os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError as exc:
            os.write(2, f"platbench: the instance could not be placed: {exc}\n".encode())
            os._exit(PLACE_FAILED)

    return place_child


def _raise_interrupted(signum, _frame):
    raise Interrupted(f"stopped by signal {signal.Signals(signum).name}")


def run_rounds(rounds, timeout, settle=5.0, grace=5.0, workdir=None):
    """Run ``rounds`` (lists of instance specs: name, role, index, argv, env, chdir, background, stop) within
    ``timeout`` seconds; return (results, error): one result per started instance, in start order, and None or
    the message of the failure that ended the run. Whatever happened, nothing started is left running."""
    deadline = time.monotonic() + timeout
    started = []
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in _STOP_SIGNALS}
    error = None
    try:
        for round_index, specs in enumerate(rounds):
            instances = [Instance(spec, round_index, workdir) for spec in specs]
            _run_round(instances, started, deadline, settle, grace)
    except (SupervisorError, Interrupted, OSError) as exc:
        error = str(exc)
    finally:
        for instance in started:
            instance.stop(grace)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    results = [instance.result() for instance in started]
    for instance in started:
        instance.close()
    return results, error


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _run_round(instances, started, deadline, settle, grace):
    background = [instance for instance in instances if instance.background]
    foreground = [instance for instance in instances if not instance.background]
    if not foreground:
        raise SupervisorError("a round needs at least one foreground instance: nothing would end it")
    for instance in background:
        started.append(instance)
        instance.start()
    if background:
        settled = min(time.monotonic() + settle, deadline)
        while time.monotonic() < settled:
            _check_background(background)
            time.sleep(POLL_SECONDS)
        _check_background(background)
    for instance in foreground:
        started.append(instance)
        instance.start()
    while True:
        now = time.monotonic()
        for instance in foreground:
            if instance.rc is not None and instance.ended is None:
                instance.ended = now
        failed = [instance for instance in foreground if instance.rc not in (None, 0)]
        if failed:
            # The first to end is the cause, the others saw it go; within one poll, a killed one goes first.
            first = min(failed, key=lambda instance: (instance.ended, instance.rc >= 0, instance.index))
            raise SupervisorError(first.failure(_ended_how(first.rc)), first)
        if all(instance.rc == 0 for instance in foreground):
            break
        _check_background(background)
        if time.monotonic() > deadline:
            waiting = ", ".join(instance.describe() for instance in foreground if instance.running())
            raise SupervisorError(f"the cell's timeout passed while {waiting} still ran")
        time.sleep(POLL_SECONDS)
    _check_background(background)
    for instance in background:
        instance.stop(grace)


def _ended_how(rc):
    if rc < 0:
        return f"was killed by {signal.Signals(-rc).name}"
    return f"exited with status {rc}"


def _check_background(background):
    for instance in background:
        if not instance.running():
            raise SupervisorError(
                instance.failure(
                    f"ended (status {instance.rc}) before the foreground was done: the foreground did not run "
                    "beside it all along (a shared cell's background job, micro_net's peer)"
                ),
                instance,
            )
