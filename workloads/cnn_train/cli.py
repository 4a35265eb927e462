"""Command line, timed training loop and result record of cnn_train."""

import argparse
import importlib
import json
import math
import os
import sys
import time
import traceback
from typing import NamedTuple

from ..common import (
    emit_record,
    format_cpuset,
    metric,
    probe_environment,
    process_elapsed,
    set_thread_env,
    step_time_metrics,
)
from .settings import DATA_SOURCES, DTYPES, FRAMEWORK_BACKENDS, MODELS, OPTIMIZERS, SGD_LEARNING_RATE, SGD_MOMENTUM

WORKLOAD = "cnn_train"


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _reject_non_finite(constant):
    raise ValueError(f"{constant} is not allowed in a result record")


def _json_object(text):
    try:
        value = json.loads(text, parse_constant=_reject_non_finite)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got invalid JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m workloads.cnn_train",
        description="Train an image classifier on one fixed synthetic batch and print one PLATBENCH_RESULT line.",
    )
    add = parser.add_argument
    add("--framework", choices=FRAMEWORK_BACKENDS, default="tensorflow")
    add("--model", choices=MODELS, default="resnet50")
    add("--batch-size", type=_positive_int, help="images per step (default: per model)")
    add("--image-size", type=_positive_int, help="square input side in pixels (default: per model)")
    add("--num-classes", type=_positive_int, default=1000)
    add("--warmup-steps", type=_non_negative_int, default=10, help="untimed steps before the timed ones")
    add("--steps", type=_positive_int, default=100, help="timed steps")
    add("--threads", type=_positive_int, help="compute threads (default: every CPU this process may use)")
    add("--data", choices=DATA_SOURCES, default="synthetic")
    add("--optimizer", choices=OPTIMIZERS, default="sgd", help=f"sgd: lr {SGD_LEARNING_RATE}, momentum {SGD_MOMENTUM}")
    add("--dtype", choices=DTYPES, default="float32")
    add("--seed", type=int, default=0)
    add("--labels-json", type=_json_object, default={}, help="extra labels for the record, as a JSON object")
    return parser


def parse_args(argv=None):
    """Parsed and validated arguments, per-model defaults filled in; exits 2 on bad input."""
    parser = build_parser()
    args = parser.parse_args(argv)
    defaults = MODELS[args.model]
    if args.batch_size is None:
        args.batch_size = defaults.batch_size
    if args.image_size is None:
        args.image_size = defaults.image_size
    if args.image_size < defaults.min_image_size:
        parser.error(f"--image-size for {args.model} must be at least {defaults.min_image_size}, got {args.image_size}")
    allowed_cpus = os.sched_getaffinity(0)
    if args.threads is None:
        args.threads = len(allowed_cpus)
    if args.threads > len(allowed_cpus):
        parser.error(
            f"--threads must be at most {len(allowed_cpus)}, the CPUs this process may use "
            f"({format_cpuset(allowed_cpus)}), got {args.threads}"
        )
    own_labels = _own_labels(args)
    clashes = sorted(key for key, value in args.labels_json.items() if own_labels.get(key, value) != value)
    if clashes:
        parser.error(f"--labels-json must not contradict the run's own labels: {', '.join(clashes)}")
    return args


def _own_labels(args):
    return {
        "workload": WORKLOAD,
        "framework": args.framework,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "data": args.data,
        "dtype": args.dtype,
        "threads": args.threads,
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
    }


class StepRun(NamedTuple):
    startup: float  # seconds from launch to the first training step
    losses: list  # every step's loss, warmup included
    step_times: list  # seconds per timed step


def run_steps(step, warmup_steps, steps):
    """Runs warmup then timed steps; `step()` must return its loss only once it has finished."""
    startup = process_elapsed()
    losses, step_times = [], []
    for index in range(warmup_steps + steps):
        started = time.perf_counter()
        loss = step()
        duration = time.perf_counter() - started
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {index}")
        losses.append(loss)
        if index >= warmup_steps:
            step_times.append(duration)
    return StepRun(startup, losses, step_times)


def _metrics(run, batch_size):
    return [
        metric("throughput", batch_size * len(run.step_times) / sum(run.step_times), "images/sec"),
        metric("startup", run.startup, "s"),
        *step_time_metrics(run.step_times),
        metric("loss_first", run.losses[0], "loss"),
        metric("loss_last", run.losses[-1], "loss"),
    ]


def main(argv=None):
    args = parse_args(argv)
    labels = {**args.labels_json, **_own_labels(args)}
    metadata = {
        **probe_environment(),
        "num_classes": args.num_classes,
        "optimizer": {"name": args.optimizer, "learning_rate": SGD_LEARNING_RATE, "momentum": SGD_MOMENTUM},
        "seed": args.seed,
    }
    try:
        set_thread_env(args.threads)
        backend = importlib.import_module(f".{FRAMEWORK_BACKENDS[args.framework]}", __package__)
        step, backend_metadata = backend.build_trainer(args)
        run = run_steps(step, args.warmup_steps, args.steps)
        metadata.update(backend_metadata(), step_times=[round(t, 6) for t in run.step_times])
        # `elapsed` is taken last so that it covers launch to exit.
        metrics = _metrics(run, args.batch_size) + [metric("elapsed", process_elapsed(), "s")]
        emit_record(WORKLOAD, labels, metrics, metadata)
        return 0
    except Exception as error:  # noqa: BLE001 - a failed run must still leave its record
        traceback.print_exc(file=sys.stderr)
        emit_record(WORKLOAD, labels, [], metadata, status="failed", error=f"{type(error).__name__}: {error}")
        return 1
