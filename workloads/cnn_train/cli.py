"""Command line of cnn_train: arguments, their checks, and which process this one is."""

import argparse
import importlib.util
import os
import time

from ..common.args import (
    add_check_args,
    add_run_arguments,
    check_extra_labels,
    non_negative_int,
    positive_float,
    positive_int,
    resolve_threads,
)
from ..common.environment import format_cpuset, probe_environment
from ..common.harness import run_workload
from .cluster.addresses import AddressError, parse_host_list
from .devices import visible_gpus
from .labels import WORKLOAD, own_labels, record_labels
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

DEFAULT_NUM_CLASSES = 1000


def _host_list(text):
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
    add_check_args(
        add,
        "--threads and worker processes against the CPUs, --num-gpus against the GPUs, Pillow for --framework "
        "torch --data real, and --data-dir's contents when the directory does not exist where the check runs",
    )

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
    padd("--num-gpus", type=non_negative_int, help="GPUs to use (default: every visible one, at most 1 in single mode)")
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

    if args.check_args and args.data_dir and not os.path.exists(args.data_dir):
        return  # the runner's directory, not the controller's: read where the job runs
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
    if args.framework == "torch" and not args.check_args and importlib.util.find_spec("PIL") is None:
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
    cluster_options = {
        "--role": args.role,
        "--ps-hosts": args.ps_hosts,
        "--worker-hosts": args.worker_hosts,
        "--task-index": args.task_index,
        "--launch-local": args.launch_local or None,
        "--num-workers": args.num_workers,
        "--cpu-workers": args.cpu_workers,
    }
    # --check-args runs on the controller: assume the runner has exactly the GPUs asked for.
    gpus = [str(index) for index in range(args.num_gpus or 0)] if args.check_args else visible_gpus()
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
                f"--cpu-workers is for hosts without GPUs ({len(gpus)} visible); "
                "add --num-gpus 0 to train on CPU workers"
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
    # allowed_cpus is None with --check-args: the runner's CPUs are not known here.
    if allowed_cpus is not None and not args.gpus and args.workers > len(allowed_cpus):
        parser.error(
            f"{what} need a CPU each: this process may use {len(allowed_cpus)} CPU(s) ({format_cpuset(allowed_cpus)})"
        )
    if args.threads is not None and args.threads < args.workers:
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
    check_extra_labels(parser, args.labels_json, own_labels(args, always_mode=True))
    return args


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


def main(argv=None):
    args = parse_args(argv)
    if args.check_args:
        return 0
    labels = record_labels(args)
    metadata = base_metadata(args)
    if args.mode != "single" and args.role is None:
        from .cluster.launcher import launch_local as body
    elif args.role == "ps":
        from .cluster.server import serve_ps as body
    else:
        from .training import train as body
    return run_workload(WORKLOAD, labels, metadata, lambda run: body(args, run))
