"""Command line, timed training loop and result record of cnn_train."""

import argparse
import importlib
import importlib.util
import math
import os
import signal
import sys
import time
import traceback
from typing import NamedTuple

from ..common.args import (
    add_run_arguments,
    check_extra_labels,
    non_negative_int,
    positive_float,
    positive_int,
    resolve_threads,
)
from ..common import (
    emit_record,
    format_cpuset,
    metric,
    metric_value,
    probe_environment,
    process_elapsed,
    set_thread_env,
    step_time_metrics,
)
from ..common.flops import training_flop_metrics
from .settings import (
    DATA_FORMATS,
    DATA_SOURCES,
    DEFAULT_CPU_WORKERS,
    DEFAULT_LAUNCH_TIMEOUT,
    DEFAULT_NET_TIMEOUT,
    DEFAULT_NUM_WORKERS,
    DTYPES,
    FRAMEWORK_BACKENDS,
    MODELS,
    MODES,
    OPTIMIZERS,
    ROLES,
    SGD_LEARNING_RATE,
    SGD_MOMENTUM,
)

WORKLOAD = "cnn_train"
DEFAULT_NUM_CLASSES = 1000


def _host_list(text):
    from .distributed import AddressError, parse_host_list

    try:
        return parse_host_list(text)
    except AddressError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m workloads.cnn_train",
        description=(
            "Train an image classifier (synthetic batch in memory, or an ImageNet-layout directory) "
            "and print one PLATBENCH_RESULT line."
        ),
    )
    add = parser.add_argument
    add("--framework", choices=FRAMEWORK_BACKENDS, default="tensorflow")
    add("--model", choices=MODELS, default="resnet50")
    add("--batch-size", type=positive_int, help="images per step and per device (default: per model)")
    add("--image-size", type=positive_int, help="square input side in pixels (default: per model)")
    add("--num-classes", type=positive_int, help="default: the class folders found with --data real (JPEG), else 1000")
    add("--warmup-steps", type=non_negative_int, default=10, help="untimed steps before the timed ones")
    add("--steps", type=positive_int, default=100, help="timed steps")
    add(
        "--data",
        choices=DATA_SOURCES,
        default="synthetic",
        help="synthetic: one fixed batch in memory; real: --data-dir",
    )
    add("--optimizer", choices=OPTIMIZERS, default="sgd", help=f"sgd: lr {SGD_LEARNING_RATE}, momentum {SGD_MOMENTUM}")
    add("--dtype", choices=DTYPES, default="float32")
    add_run_arguments(add)

    data = parser.add_argument_group("real data (--data real)")
    data.add_argument(
        "--data-dir", help="ImageNet layout: DIR/train/<class>/*.JPEG, or TFRecord shards DIR/train-*-of-*"
    )
    data.add_argument("--data-format", choices=DATA_FORMATS, default="auto", help="auto: JPEG folders when present")
    data.add_argument(
        "--data-workers",
        type=non_negative_int,
        help="input parallelism: DataLoader worker processes (torch, default min(4, CPUs)); "
        "parallel decode calls (tensorflow, default autotuned)",
    )

    parallel = parser.add_argument_group("devices and parameter server")
    padd = parallel.add_argument
    # --variable-update is the same switch under tf_cnn_benchmarks' name; experiments use it,
    # because their own `mode` (single/distributed/shared) names the study's scenario instead.
    padd(
        "--mode",
        "--variable-update",
        dest="mode",
        choices=MODES,
        default="single",
        help="single: one process, one device; ps: this instance's devices data-parallel around one "
        "parameter-server process; distributed: 1 PS + N workers (--role ..., or --launch-local)",
    )
    padd(
        "--num-gpus", type=non_negative_int, help="GPUs to use (default: every visible one, at most 1 in single mode)"
    )
    padd(
        "--cpu-workers",
        type=positive_int,
        help=f"--mode ps without GPUs: CPU worker processes (default {DEFAULT_CPU_WORKERS})",
    )
    padd("--role", choices=ROLES, help="this process's part in a PS cluster (chief: worker 0)")
    padd("--ps-hosts", type=_host_list, help="host:port of the parameter server (one)")
    padd("--worker-hosts", type=_host_list, help="host:port,host:port,... of the workers, chief first")
    padd("--task-index", type=non_negative_int, help="this process's index in its role's host list (default 0)")
    padd("--launch-local", action="store_true", help="start 1 PS + --num-workers workers here on 127.0.0.1")
    padd("--num-workers", type=positive_int, help=f"--launch-local: worker processes (default {DEFAULT_NUM_WORKERS})")
    padd(
        "--net-timeout", type=positive_float, default=DEFAULT_NET_TIMEOUT, help="seconds any one network wait may take"
    )
    padd(
        "--launch-timeout", type=positive_float, default=DEFAULT_LAUNCH_TIMEOUT, help="seconds for all local processes"
    )
    # Internal: the launcher hands its parameter server an already-listening socket (no port race).
    padd("--ps-listen-fd", type=non_negative_int, help=argparse.SUPPRESS)
    return parser


def _check_data(parser, args):
    """Scans --data-dir (stdlib only, before any framework import); exits 2 on a bad directory."""
    args.dataset, args.data_scan_seconds = None, 0.0
    if args.data != "real":
        if args.data_dir is not None:
            parser.error("--data-dir is read only with --data real")
        return
    from ..datasets.base import DatasetError
    from ..datasets.imagenet import scan

    started = time.perf_counter()
    try:
        args.dataset = scan(args.data_dir, args.data_format)
    except DatasetError as error:
        parser.error(f"--data-dir: {error}")
    args.data_scan_seconds = time.perf_counter() - started
    if args.dataset.format == "tfrecord" and args.framework == "torch":
        parser.error(
            "--data-dir holds TFRecord shards, which only --framework tensorflow reads; "
            "the torch input pipeline reads the JPEG folder layout DIR/train/<class_name>/*.JPEG"
        )
    if args.framework == "torch" and importlib.util.find_spec("PIL") is None:
        parser.error("--framework torch --data real decodes JPEGs with Pillow, which is not installed")
    if args.dataset.format == "jpeg":
        classes = len(args.dataset.class_names)
        if args.num_classes is None:
            args.num_classes = classes
        elif args.num_classes < classes:
            parser.error(
                f"--num-classes {args.num_classes} is fewer than the {classes} class folders in {args.dataset.root}"
            )


def _check_parallelism(parser, args, allowed_cpus):
    """Validates --mode and its cluster options; fills args.gpus and args.workers for launchers."""
    from .distributed import visible_gpus

    cluster_options = {
        "--role": args.role,
        "--ps-hosts": args.ps_hosts,
        "--worker-hosts": args.worker_hosts,
        "--task-index": args.task_index,
        "--launch-local": args.launch_local or None,
        "--num-workers": args.num_workers,
        "--cpu-workers": args.cpu_workers,
    }
    gpus = visible_gpus()
    args.gpus_seen = bool(gpus)
    if args.num_gpus is not None and args.num_gpus > len(gpus):
        parser.error(f"--num-gpus {args.num_gpus}: only {len(gpus)} GPU(s) visible here")
    args.gpus, args.workers = [], 0
    if args.mode == "single":
        given = [name for name, value in cluster_options.items() if value is not None]
        if given:
            parser.error(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --mode ps or --mode distributed")
        if args.num_gpus is not None and args.num_gpus > 1:
            parser.error("--mode single uses one device; --mode ps spreads a run over several GPUs")
        args.gpus = gpus[: 1 if args.num_gpus is None else args.num_gpus]
        return
    if args.role is not None:
        _check_role(parser, args)
        return
    for name in ("--ps-hosts", "--worker-hosts", "--task-index"):
        if cluster_options[name] is not None:
            parser.error(
                f"{name} goes with --role ps|worker|chief; without --role this process launches the others itself"
            )
    if args.mode == "ps":
        if args.launch_local or args.num_workers is not None:
            parser.error(
                "--launch-local and --num-workers are for --mode distributed; --mode ps starts one worker per device"
            )
        args.gpus = gpus[: len(gpus) if args.num_gpus is None else args.num_gpus]
        if args.gpus and args.cpu_workers is not None:
            parser.error(
                f"--cpu-workers is for hosts without GPUs ({len(gpus)} visible); add --num-gpus 0 to train on CPU workers"
            )
        args.workers = len(args.gpus) or args.cpu_workers or DEFAULT_CPU_WORKERS
        what = f"{args.workers} CPU worker processes"
    else:
        if not args.launch_local:
            parser.error(
                "--mode distributed needs --role ps|worker|chief with --ps-hosts HOST:PORT and "
                "--worker-hosts HOST:PORT,... (one process per role), or --launch-local"
            )
        if args.cpu_workers is not None:
            parser.error("--cpu-workers is for --mode ps; --mode distributed --launch-local takes --num-workers")
        args.workers = args.num_workers or DEFAULT_NUM_WORKERS
        args.gpus = gpus[: len(gpus) if args.num_gpus is None else args.num_gpus]
        if args.gpus and len(args.gpus) < args.workers:
            parser.error(f"--num-workers {args.workers} needs a GPU each: {len(args.gpus)} GPU(s) to use here")
        what = f"--num-workers {args.workers} (worker processes)"
    if not args.gpus and args.workers > len(allowed_cpus):
        parser.error(
            f"{what} need a CPU each: this process may use {len(allowed_cpus)} CPU(s) ({format_cpuset(allowed_cpus)})"
        )
    if args.threads < args.workers:
        parser.error(f"--threads {args.threads} is fewer than the {args.workers} worker processes to share them")


def _check_role(parser, args):
    if args.launch_local or args.num_workers is not None or args.cpu_workers is not None:
        parser.error("--launch-local, --num-workers and --cpu-workers are for the launching process, not with --role")
    missing = [
        name for name, value in (("--ps-hosts", args.ps_hosts), ("--worker-hosts", args.worker_hosts)) if not value
    ]
    if missing:
        parser.error(f"--role {args.role} needs {' and '.join(missing)} (host:port lists, e.g. 127.0.0.1:2222)")
    if len(args.ps_hosts) != 1:
        parser.error(f"--ps-hosts: exactly one parameter server is supported, got {len(args.ps_hosts)}")
    if args.task_index is None:
        args.task_index = 0
    hosts = args.ps_hosts if args.role == "ps" else args.worker_hosts
    if args.role == "chief" and args.task_index != 0:
        parser.error("--role chief is worker 0: --task-index must be 0")
    if args.task_index >= len(hosts):
        parser.error(f"--task-index {args.task_index} is out of range: {len(hosts)} {args.role} host(s) given")
    if args.role == "worker" and args.task_index == 0:
        args.role = "chief"  # tf_cnn_benchmarks' convention: worker 0 is the chief
    args.workers = len(args.worker_hosts)


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
    allowed_cpus = resolve_threads(parser, args)
    _check_parallelism(parser, args, allowed_cpus)
    if args.role == "ps":
        args.dataset, args.data_scan_seconds = None, 0.0  # the parameter server reads no data
    else:
        _check_data(parser, args)
    if args.num_classes is None:
        args.num_classes = DEFAULT_NUM_CLASSES
    own_labels = _own_labels(args, always_mode=True)
    check_extra_labels(parser, args.labels_json, own_labels)
    return args


def _own_labels(args, always_mode=False):
    labels = {
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
    # `mode` joins the labels when it is not the default, so single-process records keep their
    # label set; --labels-json may still carry "mode": "single" (checked against the real mode).
    if always_mode or args.mode != "single":
        labels["mode"] = args.mode
    if args.mode != "single":
        labels["num_workers"] = args.workers
    if args.role is not None:
        labels.update(role=args.role, task_index=args.task_index)
    return labels


def record_labels(args):
    return {**args.labels_json, **_own_labels(args)}


def base_metadata(args):
    metadata = {
        **probe_environment(),
        "num_classes": args.num_classes,
        "optimizer": {"name": args.optimizer, "learning_rate": SGD_LEARNING_RATE, "momentum": SGD_MOMENTUM},
        "seed": args.seed,
    }
    if args.data == "real" and args.data_dir is not None:
        metadata["data_dir"] = os.path.abspath(args.data_dir)
        if getattr(args, "dataset", None) is not None:
            metadata["data_format"] = args.dataset.format
    if args.gpus:
        metadata["gpus"] = args.gpus
    return metadata


class StepRun(NamedTuple):
    startup: float  # seconds from launch to the first training step
    losses: list  # every step's loss, warmup included
    step_times: list  # seconds per timed step: waiting for its batch + training on it
    data_waits: list  # seconds per timed step spent waiting for its batch
    first_batch: float  # seconds the very first batch took to arrive once asked for


def run_steps(next_batch, step, warmup_steps, steps):
    """Runs warmup then timed steps.

    next_batch() hands over the next input batch; step(batch) trains on it and must return
    its loss only once it has finished. A timed step is both: waiting for data is part of
    the step (an input pipeline slower than the model lowers throughput, as it would in
    production), and `data_waits` says how much of it was waiting.
    """
    startup = process_elapsed()
    losses, step_times, data_waits = [], [], []
    first_batch = 0.0
    clock = time.perf_counter
    for index in range(warmup_steps + steps):
        started = clock()
        batch = next_batch()
        fetched = clock()
        loss = step(batch)
        finished = clock()
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {index}")
        losses.append(loss)
        if index == 0:
            first_batch = fetched - started
        if index >= warmup_steps:
            step_times.append(finished - started)
            data_waits.append(fetched - started)
    return StepRun(startup, losses, step_times, data_waits, first_batch)


def step_metrics(run, batch_size, data_setup):
    """Every metric of one training process but `elapsed` (taken last, at exit)."""
    return [
        metric("throughput", batch_size * len(run.step_times) / sum(run.step_times), "images/sec"),
        metric("startup", run.startup, "s"),
        *step_time_metrics(run.step_times),
        metric("data_load", sum(run.data_waits), "s"),
        # Data setup (directory scan, pipeline construction) plus the wait for the first batch.
        metric("data_first_batch", data_setup + run.first_batch, "s"),
        metric("loss_first", run.losses[0], "loss"),
        metric("loss_last", run.losses[-1], "loss"),
    ]


def _hide_unused_gpus(args):
    """Before any framework import: in single mode CUDA_VISIBLE_DEVICES names exactly the GPU used.

    Cluster members get theirs from the launcher (or from whoever started them).
    """
    if args.mode == "single" and args.gpus_seen:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(args.gpus)


def train(args, labels, metadata):
    """One training process: single mode, or a worker/chief of a parameter-server cluster."""
    client = None
    try:
        _hide_unused_gpus(args)
        set_thread_env(args.threads)
        backend = importlib.import_module(f".{FRAMEWORK_BACKENDS[args.framework]}", __package__)
        if args.role is None:
            trainer = backend.build_trainer(args)
            step = trainer.step
        else:
            from .distributed import PsClient

            trainer = backend.build_trainer(args, shard_index=args.task_index, shard_count=args.workers)
            client = PsClient(args, trainer)
            step = client.step
        run = run_steps(trainer.next_batch, step, args.warmup_steps, args.steps)
        if client is not None:
            client.finish()
            metadata["ps_client"] = client.metadata()
        metadata.update(
            trainer.metadata(),
            step_times=[round(t, 6) for t in run.step_times],
            data_waits=[round(t, 6) for t in run.data_waits],
            losses=[round(loss, 6) for loss in run.losses],
            data_scan_seconds=round(args.data_scan_seconds, 6),
        )
        metrics = step_metrics(run, args.batch_size, args.data_scan_seconds + trainer.data_setup)
        # `elapsed` covers launch to the end of training; measuring the peak comes after it.
        metrics.append(metric("elapsed", process_elapsed(), "s"))
        metrics += training_flop_metrics(metric_value(metrics, "throughput"),
                                         lambda: (trainer.forward_flops(), trainer.device),
                                         args.peak_gflops, args.framework, args.dtype, args.threads, metadata)
        emit_record(WORKLOAD, labels, metrics, metadata)
        return 0
    except Exception as error:  # noqa: BLE001 - a failed run must still leave its record
        traceback.print_exc(file=sys.stderr)
        if client is not None:
            client.abort(f"{type(error).__name__}: {error}")
        emit_record(WORKLOAD, labels, [], metadata, status="failed", error=f"{type(error).__name__}: {error}")
        return 1


class Terminated(Exception):
    """SIGTERM arrived (a launcher or an orchestrator stopping the run): recorded as a failure."""


def _raise_terminated(signum, frame):
    raise Terminated(f"stopped by signal {signal.Signals(signum).name}")


def main(argv=None):
    args = parse_args(argv)
    # A run stopped from outside still leaves its (failed) record, and tells its PS peers.
    signal.signal(signal.SIGTERM, _raise_terminated)
    labels = record_labels(args)
    metadata = base_metadata(args)
    if args.mode != "single" and args.role is None:
        from .distributed import launch_local

        return launch_local(args, labels, metadata)
    if args.role == "ps":
        from .distributed import serve_ps

        return serve_ps(args, labels, metadata)
    return train(args, labels, metadata)
