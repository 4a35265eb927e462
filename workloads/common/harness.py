"""The run-and-record wrapper every workload uses: one record per run, whatever happens.

A workload parses its arguments, builds its labels and metadata, then hands its own logic to
``run_workload``::

    def body(run):
        ...train...
        run.on_failure(client.abort)          # optional: told why, if the run fails later
        return Outcome(metrics, flops=FlopCount(count, args.peak_gflops, "torch", "float32", threads))

    return run_workload("my_workload", labels, metadata, body)   # the process's exit code

The harness owns what every workload needs and none should re-implement:
- SIGTERM and SIGINT become a failed record naming the signal (a launcher or an orchestrator
  stopping the run still leaves a record);
- ``elapsed``: seconds from the process's launch to the end of ``body``, appended after the
  body's own metrics;
- the FLOP metrics (common/flops.py), counted after ``elapsed``: the peak's GEMM is not part of
  the job; then ``Outcome.after_elapsed()``'s metrics, for work that must not count in
  ``elapsed`` either (small_models' GPU profile, ncu re-run and roofline peaks);
- any exception becomes a failed record whose error is the traceback's last line
  (``TypeName: message``), the traceback itself going to stderr; ``WorkloadFailed`` carries a
  ready-made error (no traceback);
- the devices (common/gpus.py): every record carries ``metadata.devices``, the GPUs the run
  used (``[]`` for none). A body that knows them better than a probe of this process (a
  launcher whose children trained) sets ``run.devices``; otherwise the harness probes after the
  body and the FLOP metrics. When the plan set ``PLATBENCH_EXPECTED_GPUS`` and the devices differ
  from it (count, or bus ids when given), the run is failed with what was planned and what was
  seen; a malformed value fails the run before the body starts;
- kept files (``run.keep_file``): a tool's own logs (loadgen's), carried by the ok record and written by the
  controller beside the campaign's samples, in a folder per cell;
- ``WorkloadSkipped`` becomes a ``skipped`` record (no metrics, the reason as its error), exit code 0;
- ``metadata.host_state`` (common/host_state.py): the CPU steal and frequency throttling the host showed while the
  run was timed, read before and after the timed part a body marks with ``run.timed_part(steps)`` (which also
  records ``metadata.timed_seconds`` and ``timed_steps``), or around the whole body when it marks none; the report
  marks a row whose host stole CPU or throttled (platbench/validity.py);
- ``metadata.launched_at``: the wall-clock time the process was launched, so that the controller can tell
  its own overhead (decision to launch, exit to sample on disk) from the workload's time;
- exactly one ``PLATBENCH_RESULT`` line; the exit code is 0 for an ok or skipped record, 1 for a failed one.
  Where the plan set ``PLATBENCH_RECORD_FILE`` (a duet pair's sides), the line goes to that file too
  (common/record.py), for the controller to read where the stream lost it.
A usage error found by the body (``parser.error``, a SystemExit) is not a run: no record, exit 2.

Stdlib only: frameworks are imported by the body.
"""

import contextlib
import hashlib
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import NamedTuple

from . import gpus, host_state
from .clock import launched_at, process_elapsed
from .flops import TRAINING_PASSES, training_flop_metrics
from .record import KEPT_FILE_NAME, KEPT_FILES_CHARS, emit_record, metric, metric_value

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Terminated(Exception):
    """A stop signal arrived: the run is recorded as failed, with the signal's name."""


class WorkloadFailed(Exception):
    """The body's own verdict that the run failed; its message is the record's error as it is."""


class WorkloadSkipped(Exception):
    """The body's verdict that this run cannot measure here by design (a GPU benchmark in a CPU cell, a
    tool this host cannot build): a ``skipped`` record, no metrics, the message as its reason, exit 0."""


class FlopCount(NamedTuple):
    """How to count the FLOP metrics of a finished run (see flops.training_flop_metrics): training by default;
    an inference run gives ``passes=1`` (one forward pass a sample) and the rate of its inference phase."""

    count: Callable  # () -> (forward FLOPs of one sample, the device it ran on)
    peak_gflops: float | None  # the --peak-gflops argument
    framework: str
    dtype: str
    threads: int
    passes: int = TRAINING_PASSES  # forward passes' worth of matrix work per sample
    rate_metric: str = "throughput"  # the metric (samples/sec) the achieved FLOP/s are counted at


class Outcome(NamedTuple):
    """What a body returns: its metrics (``elapsed`` excluded) and, for training, how to count FLOPs."""

    metrics: list
    flops: FlopCount | None = None
    # () -> more metrics, measured after `elapsed` is taken (a profile, peaks): work that is not the job.
    after_elapsed: Callable | None = None


class WorkloadRun:
    """What a body may use: the record's labels and metadata (update them in place), on_failure, and
    ``devices``: the GPUs the run used, as gpus.probe_devices lists them, when the body knows them
    better than a probe of this process (None: the harness probes)."""

    def __init__(self, workload, labels, metadata, expected_gpus=None):
        self.workload, self.labels, self.metadata = workload, labels, metadata
        self.expected_gpus = expected_gpus  # gpus.ExpectedGpus from the plan, or None (a run by hand)
        self.devices = None
        self.failure_hooks = []
        self.files = {}  # kept beside the campaign's samples: see keep_file
        # False: an ok run prints no record (a distributed run's rank other than 0, whose figures rank 0's
        # record carries); a failed run still prints its own.
        self.record_when_ok = True
        self.host_before = None  # host_state.Snapshot at the start of the first timed part, None until then

    @contextlib.contextmanager
    def timed_part(self, steps=None):
        """Marks the timed part of the run (``with run.timed_part(args.steps): ...timed loop...``): the host's
        steal and throttling are read before and after it, and ``metadata.timed_seconds`` (its wall time) and
        ``timed_steps`` (``steps``, when the run has steps) are recorded; the report tells a part too short to
        trust by them. Several parts add up, and the host state then spans from the first to the last."""
        if self.host_before is None:
            self.host_before = _host_snapshot()
        started, wall_started = time.perf_counter(), time.time()
        yield
        seconds = time.perf_counter() - started
        # The wall-clock span of the timed parts: the controller counts its own CPU time within it (harness_cpu).
        window = self.metadata.get("timed_window") or [round(wall_started, 3)]
        self.metadata["timed_window"] = [window[0], round(time.time(), 3)]
        self.metadata["timed_seconds"] = round(self.metadata.get("timed_seconds", 0.0) + seconds, 6)
        if steps is not None:
            self.metadata["timed_steps"] = self.metadata.get("timed_steps", 0) + steps
        self.metadata["host_state"] = _host_state(self.host_before, "timed part")

    def keep_file(self, name, text):
        """Keep ``text`` as the file ``name`` (a plain file name) beside the campaign's samples: an ok record
        carries it and the controller writes it under the cell's folder (records.write_cell_files). A file that
        would take the kept files over record.KEPT_FILES_CHARS is left out, ``metadata.files_not_kept`` says
        why, and the run goes on: the record line must stay within what the controller reads."""
        if not KEPT_FILE_NAME.match(name):
            raise ValueError(f"keep_file: {name!r} is not a plain file name")
        kept = sum(len(kept) for other, kept in self.files.items() if other != name)
        if kept + len(text) > KEPT_FILES_CHARS:
            self.metadata.setdefault("files_not_kept", {})[name] = (
                f"{len(text)} characters, more than the {KEPT_FILES_CHARS - kept} left of the record's "
                f"{KEPT_FILES_CHARS} for kept files"
            )
            return False
        self.files[name] = text
        return True

    def on_failure(self, hook):
        """``hook(error)`` runs if the run fails after this call, e.g. to tell peers why or stop children."""
        self.failure_hooks.append(hook)


def attempt(call, *args):
    """(call's result, None), or (None, the exception it raised)."""
    try:
        return call(*args), None
    except Exception as error:  # noqa: BLE001 - the one broad except of the workloads: every run leaves its record
        return None, error


def _raise_terminated(signum, _frame):
    _ignore_stop_signals()  # one signal is enough to stop; a second must not interrupt the failed record
    raise Terminated(f"stopped by signal {signal.Signals(signum).name}")


def error_line(error):
    """The last line of the exception's traceback: ``TypeName: message``."""
    return f"{type(error).__name__}: {error}"


def _host_snapshot():
    """The host's steal and throttle counters now; None when reading them failed (never fails the run)."""
    snapshot, _ = attempt(host_state.snapshot)
    return snapshot


def _host_state(before, window):
    """metadata.host_state from ``before`` to now over ``window`` ("timed part" or "whole run"); the error when
    the counters could not be read."""
    after = _host_snapshot()
    if before is None or after is None:
        return {"window": window, "error": "the host's /proc/stat and /sys could not be read"}
    state, error = attempt(host_state.host_state, before, after, _allowed_cpus())
    return {"window": window, **state} if error is None else {"window": window, "error": error_line(error)}


def _allowed_cpus():
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


# Variables that name the cell itself, not how it runs: left out of the environment's hash.
_CELL_VARIABLES = ("HOSTNAME", "PLATBENCH_DUET_DIR", "PLATBENCH_DUET_SIDE", "PLATBENCH_RECORD_FILE")
_POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 6: "SCHED_DEADLINE"}


def placement_metadata(environ=None):
    """The process's scheduling policy and nice value, its cpu cgroup as it sees it, and a hash of its environment
    (the cell's own identifiers left out): ``{"sched_policy", "nice", "cgroup", "environment_sha256"}``."""
    environ = os.environ if environ is None else environ
    try:
        policy = _POLICIES.get(os.sched_getscheduler(0), str(os.sched_getscheduler(0)))
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except (OSError, AttributeError):
        policy, nice = None, None
    cgroup = None
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as stream:
        for line in stream.read().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(",") or (controllers == "" and cgroup is None):
                cgroup = path
    shown = "\n".join(f"{name}={value}" for name, value in sorted(environ.items()) if name not in _CELL_VARIABLES)
    return {
        "sched_policy": policy,
        "nice": nice,
        "cgroup": cgroup,
        "environment_sha256": hashlib.sha256(shown.encode("utf-8", "replace")).hexdigest(),
    }


def _run_body(run, body):
    """The body's metrics, then `elapsed`, then the FLOP metrics; signals are ignored from then on."""
    before = _host_snapshot()
    outcome = body(run)
    if run.host_before is None:  # no timed part marked: the host's state over the whole body
        run.metadata["host_state"] = _host_state(before, "whole run")
    metrics = list(outcome.metrics)
    metrics.append(metric("elapsed", process_elapsed(), "s"))
    if outcome.flops is not None:
        count = outcome.flops
        metrics += training_flop_metrics(
            metric_value(metrics, count.rate_metric),
            count.count,
            count.peak_gflops,
            count.framework,
            count.dtype,
            count.threads,
            run.metadata,
            count.passes,
        )
    if outcome.after_elapsed is not None:
        metrics += outcome.after_elapsed()
    _record_devices(run)
    if "devices_error" in run.metadata and run.expected_gpus is not None:
        raise WorkloadFailed(
            f"the GPUs the run used could not be read to check them against the plan: {run.metadata['devices_error']}"
        )
    problem = gpus.mismatch(run.expected_gpus, run.metadata["devices"])
    if problem is not None:
        raise WorkloadFailed(problem)
    _ignore_stop_signals()  # still inside the attempt: a signal up to here becomes a failed record
    return metrics


def _ignore_stop_signals():
    """From the first byte of the record on, a late signal must not cut it or add a second one."""
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, signal.SIG_IGN)


def _record_devices(run):
    """metadata.devices: the body's run.devices, else a probe; [] and devices_error when the probe fails."""
    devices, error = (run.devices, None) if run.devices is not None else attempt(gpus.probe_devices)
    run.metadata["devices"] = devices if error is None else []
    if error is not None:
        run.metadata["devices_error"] = error_line(error)


def _emit_failed(run, message):
    if "devices" not in run.metadata:  # a failed record still says which GPUs the run had used, if known
        _record_devices(run)
    _, unprintable = attempt(emit_record, run.workload, run.labels, [], run.metadata, "failed", message)
    if unprintable is not None:
        # Metadata that is not JSON (NaN, objects) must not cost the run its record.
        metadata = {"record_error": error_line(unprintable), "devices": run.metadata["devices"]}
        emit_record(run.workload, run.labels, [], metadata, status="failed", error=message)


def run_workload(workload, labels, metadata, body):
    """Runs ``body(run)`` (a WorkloadRun; returns an Outcome) and prints its one record; returns the exit code."""
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, _raise_terminated)
    # When the process was launched, as the wall clock says: the controller times its own overhead with it.
    metadata.setdefault("launched_at", round(launched_at(), 3))
    # How it was placed, as it sees itself: both sides of a comparison must read alike (docs/src/calibrating.md).
    metadata.update(placement_metadata())
    expected, error = attempt(gpus.expected_from_env, os.environ)
    run = WorkloadRun(workload, labels, metadata, expected)
    if error is None:
        metrics, error = attempt(_run_body, run, body)
    else:
        error = WorkloadFailed(str(error))  # the message says what is wrong; a traceback would add nothing
    if error is None and not run.record_when_ok:
        return 0
    if error is None:
        # Refuses NaN: then a failed record. Kept files go with an ok record only.
        _, error = attempt(emit_record, workload, labels, metrics, metadata, "ok", None, run.files)
        if error is None:
            return 0
    _ignore_stop_signals()
    if isinstance(error, WorkloadSkipped):
        if "devices" not in run.metadata:
            _record_devices(run)
        emit_record(workload, labels, [], run.metadata, status="skipped", error=str(error))
        return 0
    if isinstance(error, WorkloadFailed):
        message = str(error)
    else:
        traceback.print_exception(error, file=sys.stderr)
        message = error_line(error)
    for hook in reversed(run.failure_hooks):
        _, hook_error = attempt(hook, message)
        if hook_error is not None:
            print(f"clean-up after the failure failed too: {error_line(hook_error)}", file=sys.stderr)
    _emit_failed(run, message)
    return 1


# The temporary directory of this process's own (private_tempdir), removed by exit_after_record.
_private_tempdir = None


def private_tempdir():
    """Give this process's temporary files (the ``tempfile`` module's) a directory of its own, which
    exit_after_record removes. TensorFlow's autograph writes a source file to the temporary directory for each
    function it converts and leaves its removal to ``atexit``, which ``os._exit`` skips: every run left its files in
    /tmp. Returns the directory."""
    global _private_tempdir  # one per process, as tempfile.tempdir is
    if _private_tempdir is None:
        _private_tempdir = tempfile.mkdtemp(prefix="platbench-workload-")
        tempfile.tempdir = _private_tempdir
    return _private_tempdir


def exit_after_record(code):
    """End the process with ``code`` as soon as its record is out: a framework's interpreter teardown (TensorFlow's
    and PyTorch's take half a second or more) measures nothing and would only make each cell longer. The body and
    its children are done by now; the streams are flushed and logging shut down first, the process's own temporary
    directory removed (private_tempdir), the rest is left to the OS."""
    import contextlib
    import logging
    import shutil

    if code is None:  # what sys.exit() makes of a main() that returns nothing
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe: the record is gone anyway, and the exit code still says how the run ended.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if _private_tempdir is not None:
        shutil.rmtree(_private_tempdir, ignore_errors=True)
    os._exit(code)
