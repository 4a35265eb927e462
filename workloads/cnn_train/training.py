"""One cnn_train training process: the timed loop and its metrics, single mode or --mode ps."""

import contextlib
import importlib
import math
import os
import time
from typing import NamedTuple

from ..common import duet
from ..common.clock import process_elapsed
from ..common.environment import set_thread_env
from ..common.harness import FlopCount, Outcome, WorkloadFailed
from ..common.record import metric
from ..common.stats import step_time_metrics
from .settings import (
    AUTO_MARGIN,
    AUTO_STEPS,
    FRAMEWORK_BACKENDS,
    PROBE_MAX_STEPS,
    PROBE_MIN_STEPS,
    PROBE_SECONDS,
)


class StepRun(NamedTuple):
    startup: float  # seconds from launch to the first training step
    losses: list  # every step's loss, warmup included
    step_times: list  # seconds per timed step: waiting for its batch + training on it
    data_waits: list  # seconds per timed step spent waiting for its batch
    first_batch: float  # seconds the very first batch took to arrive once asked for
    calibration: object = None  # --steps auto: the Calibration that chose the timed steps
    duet_start: object = None  # a duet pair's side: its wait at the start line (common/duet.py)
    spun: float = 0.0  # seconds the timed steps spent in an injected spin (spin_from_env)
    discarded: int = 0  # timed steps left out of the throughput by an injected discard (fraction_from_env)


class Calibration(NamedTuple):
    """--steps auto: the steps chosen for the timed part, from ``probe_steps`` untimed steps of ``probe_seconds``."""

    steps: int
    probe_steps: int
    probe_seconds: float
    target_seconds: float


# An injected known overhead (the experiment's inject: {discard: D} or {spin: S}, plugin_utils/experiment/inject.py):
# the plan puts the fraction in the workload's environment; the workload cannot import the collection (it runs in guests
# and images without it).
DISCARD_ENV = "PLATBENCH_INJECT_DISCARD"
SPIN_ENV = "PLATBENCH_INJECT_SPIN"


def fraction_from_env(variable, what, environ=os.environ):
    """An injected overhead's fraction (0 without one); a bad value is the plan's fault, said as such."""
    text = environ.get(variable, "")
    try:
        fraction = float(text) if text else 0.0
    except ValueError:
        fraction = -1.0
    if not 0.0 <= fraction < 1.0:
        raise WorkloadFailed(f"{variable}={text!r}: the injected {what} must be a fraction from 0 up to, not incl. 1")
    return fraction


def spin_from_env(environ=os.environ):
    """The injected spin's fraction of each step (0 without one)."""
    return fraction_from_env(SPIN_ENV, "spin", environ)


def discard_from_env(environ=os.environ):
    """The injected discard's fraction of the timed steps (0 without one)."""
    return fraction_from_env(DISCARD_ENV, "discard", environ)


def discarded_steps(steps, fraction):
    """How many of ``steps`` timed steps a discard of ``fraction`` leaves out of the throughput: the nearest whole
    number to steps x fraction, so that the kept steps' share is 1 - fraction to within half a step. Every step is
    trained and timed alike (the host and a duet partner see the same load); only the count changes."""
    return min(steps - 1, math.floor(steps * fraction + 0.5)) if steps > 0 else 0


def spin_for(seconds, fraction, clock=time.perf_counter, since=None):
    """Busy-spins on this thread after a step of ``seconds`` (which ended at ``since``, default now) so that the spin
    is ``fraction`` of the step and the spin together: throughput (1 - fraction) of the step alone, by construction.
    Returns the seconds spun."""
    if fraction <= 0.0:
        return 0.0
    started = clock() if since is None else since
    until = started + seconds * fraction / (1.0 - fraction)
    while clock() < until:
        pass
    return clock() - started


def calibrated_steps(one_step, first_index, target_seconds, clock=time.perf_counter):
    """The timed steps that make the timed part last at least ``target_seconds``: ``one_step(index)`` run untimed
    (after the warmup) for PROBE_SECONDS, at least PROBE_MIN_STEPS and at most PROBE_MAX_STEPS, then the target over
    the probe's time per step, with AUTO_MARGIN to spare."""
    started, count = clock(), 0
    while count < PROBE_MIN_STEPS or (count < PROBE_MAX_STEPS and clock() - started < PROBE_SECONDS):
        one_step(first_index + count)
        count += 1
    elapsed = max(clock() - started, 1e-9)
    chosen = max(1, math.ceil(target_seconds * AUTO_MARGIN * count / elapsed))
    return Calibration(chosen, count, elapsed, target_seconds)


def run_steps(
    next_batch,
    step,
    warmup_steps,
    steps,
    timed_part=None,
    auto_seconds=None,
    pair=None,
    spin=0.0,
    discard=0.0,
    clock=time.perf_counter,
):
    """Runs warmup then timed steps.

    next_batch() hands over the next input batch; step(batch) trains on it and must return
    its loss only once it has finished. A timed step is both: waiting for data is part of
    the step (an input pipeline slower than the model lowers throughput, as it would in
    production), and `data_waits` says how much of it was waiting. ``timed_part``: the
    harness's WorkloadRun.timed_part, which brackets the timed steps (the host's steal and
    throttling are read around them). ``steps`` "auto": as many as make the timed part last
    ``auto_seconds`` (``calibrated_steps``, a probe after the warmup; StepRun.calibration says so). ``pair``: a
    duet pair's (directory, side) (common/duet.py): after the warmup both sides meet at a start line, and with
    ``auto`` each times a window of ``auto_seconds`` instead of a probe's steps, so that the windows coincide.
    ``spin``: an injected known overhead, the fraction of every step (warmup and probe too, so that the probe sizes
    the timed part as it will run) spent busy-spinning after it (``spin_for``). ``discard``: an injected known
    overhead, the fraction of the timed steps left out of the throughput (``discarded_steps``; StepRun.discarded).
    ``clock``: the one clock that times the steps, the probe and the window.
    """
    startup = process_elapsed()
    losses, step_times, data_waits, spun = [], [], [], []
    first_batch = 0.0

    def one_step(index):
        started = clock()
        batch = next_batch()
        fetched = clock()
        loss = step(batch)
        finished = clock()
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {index}")
        losses.append(loss)
        if spin:
            spun.append(spin_for(finished - started, spin, clock, since=finished))
            finished += spun[-1]  # the spin's end, as it read it
        return started, fetched, finished

    for index in range(warmup_steps):
        started, fetched, _ = one_step(index)
        if index == 0:
            first_batch = fetched - started
    calibration, duet_start = None, None
    if steps == AUTO_STEPS and pair is None:
        calibration = calibrated_steps(one_step, warmup_steps, auto_seconds, clock)
        warmup_steps, steps = warmup_steps + calibration.probe_steps, calibration.steps
    if pair is not None:
        duet_start = duet.start_line(*pair)

    def timed_step(index):
        nonlocal first_batch
        started, fetched, finished = one_step(index)
        if index == 0:
            first_batch = fetched - started
        step_times.append(finished - started)
        data_waits.append(fetched - started)

    # A duet side with steps auto times a window of auto_seconds, as its partner does; its steps are counted after.
    windowed = pair is not None and steps == AUTO_STEPS
    spun.clear()  # from here on, the timed steps' spin only
    with contextlib.nullcontext() if timed_part is None else timed_part(None if windowed else steps):
        if windowed:
            steps = duet.timed_window(timed_step, warmup_steps, auto_seconds, clock)
        else:
            for index in range(warmup_steps, warmup_steps + steps):
                timed_step(index)
    discarded = discarded_steps(len(step_times), discard)
    return StepRun(startup, losses, step_times, data_waits, first_batch, calibration, duet_start, sum(spun), discarded)


def step_metrics(run, batch_size, data_setup):
    """Every metric of one training process but `elapsed` (taken last, at exit)."""
    return [
        # An injected discard leaves some timed steps' images out, never their time (discarded_steps).
        metric("throughput", batch_size * (len(run.step_times) - run.discarded) / sum(run.step_times), "images/sec"),
        metric("startup", run.startup, "s"),
        *step_time_metrics(run.step_times),
        metric("data_load", sum(run.data_waits), "s"),
        # Data setup (directory scan, pipeline construction) plus the wait for the first batch.
        metric("data_first_batch", data_setup + run.first_batch, "s"),
        metric("loss_first", run.losses[0], "loss"),
        metric("loss_last", run.losses[-1], "loss"),
    ]


def record_injection(metadata, steps, spin, discard):
    """What the plan asked for and what the timed steps spent on it: the known overhead, checkable."""
    if spin:
        metadata["inject_spin"] = {
            "fraction": spin,
            "seconds": round(steps.spun, 6),
            "timed_seconds": round(sum(steps.step_times), 6),
        }
    if discard:
        metadata["inject_discard"] = {
            "fraction": discard,
            "steps": steps.discarded,
            "timed_steps": len(steps.step_times),
        }


def _hide_unused_gpus(args):
    """Before any framework import: CUDA_VISIBLE_DEVICES names exactly the GPUs used.

    Distributed ranks get theirs from the launcher (or from whoever started them).
    """
    if args.mode != "distributed" and args.gpus_seen:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(args.gpus)


def check_planned_gpus(args, expected):
    """Before any work: the GPUs this process will use (args.gpus) must be as many as the cell's plan gave.

    A distributed rank uses what it sees (one GPU, or LOCAL_RANK's of those), checked after the run.
    """
    if expected is None or args.mode == "distributed" or len(args.gpus) == expected.count:
        return
    asked = "unset" if args.num_gpus is None else args.num_gpus
    raise WorkloadFailed(
        f"cnn_train --mode {args.mode} would use {len(args.gpus)} GPU(s) (--num-gpus {asked}, visible: "
        f"{','.join(args.gpus) or 'none'}) but the cell was planned with {expected.count}; "
        "set --num-gpus to the plan's count or leave it out"
    )


def train(args, run):
    """The harness body of a training process: single mode, or --mode ps (CentralStorageStrategy, TensorFlow)."""
    check_planned_gpus(args, run.expected_gpus)
    _hide_unused_gpus(args)
    set_thread_env(args.threads)
    backend = importlib.import_module(f".{FRAMEWORK_BACKENDS[args.framework]}", __package__)
    if args.mode == "ps":
        trainer = backend.build_trainer(args, strategy=backend.central_storage_strategy(args))
        run.metadata["engine"] = "tf.distribute.experimental.CentralStorageStrategy"
    else:
        trainer = backend.build_trainer(args)
    pair = duet.pair_from_env() if args.mode != "distributed" else None
    spin, discard = spin_from_env(), discard_from_env()
    steps = run_steps(
        trainer.next_batch,
        trainer.step,
        args.warmup_steps,
        args.steps,
        run.timed_part,
        args.auto_seconds,
        pair,
        spin,
        discard,
    )
    record_injection(run.metadata, steps, spin, discard)
    if steps.duet_start is not None:
        windowed = args.steps == AUTO_STEPS
        run.metadata["duet_start"] = {**steps.duet_start, "window_seconds": args.auto_seconds if windowed else None}
        if windowed:  # a window of seconds: its steps are known once it is over
            run.metadata["timed_steps"] = len(steps.step_times)
    if steps.calibration is not None:
        run.metadata["steps_auto"] = {
            "steps": steps.calibration.steps,
            "probe_steps": steps.calibration.probe_steps,
            "probe_seconds": round(steps.calibration.probe_seconds, 6),
            "target_seconds": steps.calibration.target_seconds,
        }
    run.metadata.update(
        trainer.metadata(),
        step_times=[round(t, 6) for t in steps.step_times],
        data_waits=[round(t, 6) for t in steps.data_waits],
        losses=[round(loss, 6) for loss in steps.losses],
        data_scan_seconds=round(args.data_scan_seconds, 6),
    )
    # Every replica trains on its own batch of --batch-size in each step.
    images_per_step = args.batch_size * max(args.workers, 1)
    metrics = step_metrics(steps, images_per_step, args.data_scan_seconds + trainer.data_setup)
    metrics += trainer.h2d_metrics(len(steps.step_times))
    if args.mode != "single":
        return Outcome(metrics)  # the peak would be one device's, the throughput every replica's
    flops = FlopCount(
        lambda: (trainer.forward_flops(), trainer.device), args.peak_gflops, args.framework, args.dtype, args.threads
    )
    return Outcome(metrics, flops)
