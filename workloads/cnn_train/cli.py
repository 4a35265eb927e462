"""Command line of cnn_train: arguments, their checks, and which process this one is."""

import argparse
import importlib.util
import os
import time

from ..common.args import check_extra_labels, non_negative_int, positive_float, positive_int
from ..common.workload import Workload
from .devices import visible_gpus
from .labels import WORKLOAD, own_labels
from .ranks import MIN_RANKS, PLACE_READERS, RankEnvError
from .settings import (
    AUTO_STEPS,
    DATA_FORMATS,
    DATA_SOURCES,
    DEFAULT_AUTO_SECONDS,
    DEFAULT_CPU_WORKERS,
    DEFAULT_LAUNCH_TIMEOUT,
    DEFAULT_NET_TIMEOUT,
    DTYPES,
    FRAMEWORK_BACKENDS,
    MODELS,
    MODES,
    OPTIMIZERS,
    SGD_LEARNING_RATE,
    SGD_MOMENTUM,
)

DEFAULT_NUM_CLASSES = 1000


def steps_or_auto(text):
    """--steps: a positive number of timed steps, or ``auto`` (training.calibrated_steps picks them)."""
    if str(text) == AUTO_STEPS:
        return AUTO_STEPS
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or {AUTO_STEPS}, got {text!r}") from None


def _arguments(parser):
    add = parser.add_argument
    add("--framework", choices=FRAMEWORK_BACKENDS, default="tensorflow")
    add("--model", choices=MODELS, default="resnet50")
    add("--batch-size", type=positive_int, help="images per step and per device (default: per model)")
    add("--image-size", type=positive_int, help="square input side in pixels (default: per model)")
    add("--num-classes", type=positive_int, help="default: the class folders found with --data real (JPEG), else 1000")
    add("--warmup-steps", type=non_negative_int, default=10, help="untimed steps before the timed ones")
    add(
        "--steps",
        type=steps_or_auto,
        default=100,
        help="timed steps, or auto: as many as make the timed part last --auto-seconds, from a probe after warmup",
    )
    add(
        "--auto-seconds",
        type=positive_float,
        default=DEFAULT_AUTO_SECONDS,
        help="--steps auto: the timed part's least duration (default: the report's validity rule, 10 s)",
    )
    add(
        "--data",
        choices=DATA_SOURCES,
        default="synthetic",
        help="synthetic: one fixed batch in memory; real: --data-dir",
    )
    add("--optimizer", choices=OPTIMIZERS, default="sgd", help=f"sgd: lr {SGD_LEARNING_RATE}, momentum {SGD_MOMENTUM}")
    add("--dtype", choices=DTYPES, default="float32")
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

    parallel = parser.add_argument_group("devices and distributed training")
    padd = parallel.add_argument
    # --variable-update is the same switch under tf_cnn_benchmarks' name; experiments use it,
    # because their own `mode` (single/distributed/shared) names the study's scenario instead.
    padd(
        "--mode",
        "--variable-update",
        dest="mode",
        choices=MODES,
        default="single",
        help="single: one process, one device; ps: TensorFlow's CentralStorageStrategy, this instance's devices "
        "data-parallel around variables on the CPU; distributed: DistributedDataParallel (torch) or "
        "MultiWorkerMirroredStrategy (tensorflow) ranks, started by --launch-local, torchrun or TF_CONFIG",
    )
    padd("--num-gpus", type=non_negative_int, help="GPUs to use (default: every visible one, at most 1 in single mode)")
    padd(
        "--cpu-workers",
        type=positive_int,
        help=f"--mode ps without GPUs: CPU replicas, each a logical CPU device (default {DEFAULT_CPU_WORKERS})",
    )
    padd(
        "--launch-local",
        type=positive_int,
        metavar="N",
        help="--mode distributed: start N ranks here on 127.0.0.1, each pinned to its share of the CPUs, "
        "--threads each (torch: one torchrun node each; tensorflow: one worker each, with its TF_CONFIG)",
    )
    padd(
        "--net-timeout",
        type=positive_float,
        default=DEFAULT_NET_TIMEOUT,
        help="seconds a rendezvous or a collective may wait for the other ranks",
    )
    padd(
        "--launch-timeout",
        type=positive_float,
        default=DEFAULT_LAUNCH_TIMEOUT,
        help="--launch-local: seconds for all ranks together; then they are stopped",
    )


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
    """Validates --mode and its options; fills args.gpus, args.workers (replicas or ranks) and args.place."""
    # --check-args runs on the controller: assume the runner has exactly the GPUs asked for.
    gpus = [str(index) for index in range(args.num_gpus or 0)] if args.check_args else visible_gpus()
    args.gpus_seen = bool(gpus)
    if args.num_gpus is not None and args.num_gpus > len(gpus):
        parser.error(f"--num-gpus {args.num_gpus}: only {len(gpus)} GPU(s) visible here")
    args.gpus, args.workers, args.place = [], 0, None
    misplaced = [
        name
        for name, value, mode in (
            ("--launch-local", args.launch_local, "distributed"),
            ("--cpu-workers", args.cpu_workers, "ps"),
        )
        if value is not None and args.mode != mode
    ]
    if misplaced:
        wanted = {"--launch-local": "--mode distributed", "--cpu-workers": "--mode ps"}
        parser.error("; ".join(f"{name} is for {wanted[name]}" for name in misplaced))
    if args.mode == "single":
        if args.num_gpus is not None and args.num_gpus > 1:
            parser.error("--mode single uses one device; --mode ps or distributed spread a run over several GPUs")
        args.gpus = gpus[: 1 if args.num_gpus is None else args.num_gpus]
        return
    args.gpus = gpus[: len(gpus) if args.num_gpus is None else args.num_gpus]
    if args.mode == "ps":
        _check_ps(parser, args, gpus)
    elif args.launch_local is not None:
        _check_local_launch(parser, args, allowed_cpus)
    else:
        _check_rank_env(parser, args)


def _check_ps(parser, args, gpus):
    if args.framework != "tensorflow":
        parser.error(
            "--mode ps is TensorFlow's CentralStorageStrategy (variables on the CPU, one replica per device); "
            "with --framework torch use --mode distributed (DistributedDataParallel ranks)"
        )
    if args.gpus and args.cpu_workers is not None:
        parser.error(
            f"--cpu-workers is for hosts without GPUs ({len(gpus)} visible); add --num-gpus 0 to train on CPU replicas"
        )
    args.workers = len(args.gpus) or args.cpu_workers or DEFAULT_CPU_WORKERS


def _check_local_launch(parser, args, allowed_cpus):
    """--launch-local N: --threads is each rank's (default: this process's CPUs divided among the ranks)."""
    ranks = args.workers = args.launch_local
    if ranks < MIN_RANKS:
        parser.error(f"--launch-local {ranks}: a distributed run needs at least {MIN_RANKS} ranks")
    if args.gpus and len(args.gpus) < ranks:
        parser.error(f"--launch-local {ranks} needs a GPU per rank: {len(args.gpus)} GPU(s) to use here")
    # allowed_cpus is None with --check-args: the runner's CPUs are not known here.
    if allowed_cpus is not None and not args.threads_given:
        args.threads = max(1, len(allowed_cpus) // ranks)


def _check_rank_env(parser, args):
    """A rank started by torchrun or with TF_CONFIG; the engine reads the rest of that environment itself."""
    try:
        args.place = PLACE_READERS[args.framework](os.environ)
    except RankEnvError as error:
        parser.error(f"--mode distributed: {error}")
    if args.place is None:
        if args.check_args:
            return  # the runner's environment, not the controller's, says which rank a process is
        started_by = "torchrun (RANK, WORLD_SIZE, ...)" if args.framework == "torch" else "TF_CONFIG set"
        parser.error(f"--mode distributed needs --launch-local N (N ranks here), or to be started by {started_by}")
    args.workers = args.place.world_size


def _validate(parser, args, allowed_cpus):
    """Per-model defaults filled in; the checks argparse cannot make."""
    defaults = MODELS[args.model]
    if args.batch_size is None:
        args.batch_size = defaults.batch_size
    if args.image_size is None:
        args.image_size = defaults.image_size
    if args.image_size < defaults.min_image_size:
        parser.error(f"--image-size for {args.model} must be at least {defaults.min_image_size}, got {args.image_size}")
    if args.steps == AUTO_STEPS and args.data == "real":
        parser.error(
            "--steps auto trains on --data synthetic only: a real input pipeline is sized for its steps before the "
            "probe that would choose them; give a number of steps"
        )
    if args.steps == AUTO_STEPS and args.mode == "distributed":
        parser.error(
            "--steps auto probes this process's own speed, and the ranks of --mode distributed must agree on their "
            "steps: give them a number of steps"
        )
    _check_parallelism(parser, args, allowed_cpus)
    _check_data(parser, args)
    if args.num_classes is None:
        args.num_classes = DEFAULT_NUM_CLASSES
    # `mode` is a label of single-process records only when --labels-json names it: checked against the real one.
    check_extra_labels(parser, args.labels_json, own_labels(args, always_mode=True))


def _metadata(args):
    metadata = {
        "num_classes": args.num_classes,
        "optimizer": {"name": args.optimizer, "learning_rate": SGD_LEARNING_RATE, "momentum": SGD_MOMENTUM},
    }
    if args.data == "real" and args.data_dir is not None:
        metadata["data_dir"] = os.path.abspath(args.data_dir)
        if getattr(args, "dataset", None) is not None:
            metadata["data_format"] = args.dataset.format
    if args.gpus:
        metadata["gpus"] = args.gpus
    return metadata


def _body(args, run):
    """The process this one is: the launcher of --launch-local ranks, one distributed rank, or the one trainer."""
    if args.launch_local is not None:
        from .local_launch import launch_local as body
    elif args.mode == "distributed":
        from .distributed import train_rank as body
    else:
        from .training import train as body
    return body(args, run)


SPEC = Workload(
    name=WORKLOAD,
    description="Train an image classifier (synthetic batch in memory, or an ImageNet-layout directory) and print "
    "one PLATBENCH_RESULT line.",
    arguments=_arguments,
    validate=_validate,
    own_labels=own_labels,
    metadata=_metadata,
    body=_body,
    not_checked="--threads and local ranks against the CPUs, torchrun's or TF_CONFIG's rank environment, --num-gpus "
    "against the GPUs, Pillow for --framework torch --data real, and --data-dir's contents when the directory does "
    "not exist where the check runs",
    sets_thread_env=False,  # each framework backend sets its threads (and a launcher's ranks their own)
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
