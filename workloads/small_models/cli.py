"""Command line, timed epoch(s) and result record of small_models (Chopra, Ranjan, Sinha 2022).

The study times whole runs (real, user and system time, as `time` reports them) of one epoch after
choosing the fastest batch size; on a GPU it adds a profile (memsets, copies, kernels, FLOPs, roofline).
"""

import argparse
import functools
import importlib
import os
import time

from ..common.args import non_negative_int, positive_int
from ..common.flops import TRAINING_PASSES, torch_forward_flops
from ..common.harness import FlopCount, Outcome, Terminated, attempt, error_line
from ..common.record import metric
from ..common.stats import step_time_metrics
from ..common.workload import Workload
from .settings import (
    DEFAULT_BATCH_SIZE,
    DEVICES,
    NCU_LAUNCH_COUNT,
    NETS,
    PROFILE_BATCHES,
    PROFILE_TOP_KERNELS,
    SEARCH_BATCHES,
)

WORKLOAD = "small_models"


def _batch_size_list(text):
    sizes = []
    for part in text.split(","):
        try:
            size = int(part)
        except ValueError:
            size = 0
        if size <= 0:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive integers such as 64,128, got {text!r}")
        if size not in sizes:
            sizes.append(size)
    return sizes


def _arguments(parser):
    add = parser.add_argument
    add("--net", choices=NETS, required=True)
    add("--data-dir", required=True, help="folder holding MNIST idx files (mnist_cnn) or aclImdb (imdb_rnn)")
    add("--epochs", type=positive_int, default=1)
    add("--batch-size", type=positive_int, help=f"samples per batch (default {DEFAULT_BATCH_SIZE})")
    add(
        "--batch-size-search",
        type=_batch_size_list,
        metavar="B1,B2,...",
        help="time a short trial of each batch size and train with the fastest (the study: 64,128)",
    )
    add(
        "--search-batches",
        type=positive_int,
        default=SEARCH_BATCHES,
        help=f"timed batches per trial of --batch-size-search, after one untimed (default {SEARCH_BATCHES})",
    )
    samples = ", ".join(f"{name} {spec.samples}" for name, spec in NETS.items())
    add("--samples", type=positive_int, help=f"training samples, the first ones of the set (default: {samples})")
    add("--device", choices=DEVICES, default="auto", help="auto: cuda when available, else cpu")
    add(
        "--profile-batches",
        type=non_negative_int,
        default=PROFILE_BATCHES,
        help=f"extra batches profiled after the timed epochs, CUDA only; 0: none (default {PROFILE_BATCHES})",
    )


def _check_batch_sizes(parser, args, _allowed_cpus):
    if args.batch_size is not None and args.batch_size_search:
        parser.error("--batch-size and --batch-size-search exclude each other: give one")
    if args.samples is None:
        args.samples = NETS[args.net].samples
    if not args.batch_size_search and args.batch_size is None:
        args.batch_size = DEFAULT_BATCH_SIZE
    for size in args.batch_size_search or [args.batch_size]:
        if size > args.samples:
            parser.error(f"batch size {size} is larger than the {args.samples} training samples (--samples)")


def _own_labels(args):
    """The run's labels; batch_size (when searched) and device (when auto) are known only once resolved."""
    return {
        "framework": "torch",
        "net": args.net,
        "batch_size": args.batch_size,
        "batch_size_search": ",".join(map(str, args.batch_size_search)) if args.batch_size_search else None,
        "data": NETS[args.net].dataset,
        "samples": args.samples,
        "epochs": args.epochs,
        "device": None if args.device == "auto" else args.device,
    }


def _metrics(run, samples, unit, data_load, search_time):
    user, system = (sum(times) for times in zip(*run.epoch_cpu, strict=False))
    return [
        metric("epoch_time", sum(run.epoch_times) / len(run.epoch_times), "s"),
        metric("throughput", samples * len(run.epoch_times) / sum(run.epoch_times), f"{unit}/sec"),
        metric("epoch_user_time", user, "s"),
        metric("epoch_system_time", system, "s"),
        metric("data_load", data_load, "s"),
        *([metric("search_time", search_time, "s")] if search_time is not None else []),
        *step_time_metrics(run.batch_times),
        metric("loss_first", run.losses[0], "loss"),
        metric("loss_last", run.losses[-1], "loss"),
    ]


def _train(args, run):
    """The harness body: resolve the device, load the data, search the batch size, train one job."""
    spec = NETS[args.net]
    # torch and numpy only after the thread variables: their math libraries read them when they load.
    train = importlib.import_module(".train", __package__)
    from .data import load

    train.setup(args.threads, args.seed)
    try:
        device = train.resolve_device(args.device)
    except train.DeviceUnavailable as error:
        SPEC.usage_error(f"--device {args.device}: {error}; use --device cpu or auto")
    run.labels.update(device=device.type)
    data, data_load = SPEC.load_data(load, spec.dataset, args.data_dir, args.samples)
    run.metadata["dataset"] = data.info

    def make_job(batch_size):
        return train.Job(args.net, data, device, batch_size, args.seed)

    search_time = None
    if args.batch_size_search:
        started = time.perf_counter()
        args.batch_size, trials = train.search_batch_size(make_job, args.batch_size_search, args.search_batches)
        search_time = time.perf_counter() - started
        run.labels.update(batch_size=args.batch_size)
        run.metadata["batch_size_search"] = {
            "candidates": args.batch_size_search,
            "trials": trials,
            "chosen": args.batch_size,
        }
    job = make_job(args.batch_size)
    epochs = train.run_epochs(job, args.epochs)
    # FLOPs are counted on one real sample, once: for the profile's achieved FLOP/s and for MFU.
    forward_flops = functools.cache(lambda: torch_forward_flops(job.model, data.inputs[:1].to(device)))
    run.metadata.update(
        framework_version=train.torch.__version__,
        model_params=job.parameters(),
        optimizer=type(job.optimizer).__name__,
        batches_per_epoch=len(job.loader),
        epoch_times=epochs.epoch_times,
        batch_times=[round(t, 6) for t in epochs.batch_times],
    )
    # The process's CPU times as `time` reports them, taken last; the harness adds `elapsed` right after.
    user, system = train.cpu_times()
    metrics = _metrics(epochs, data.samples, spec.sample_unit, data_load, search_time)
    metrics += [metric("user_time", user, "s"), metric("system_time", system, "s")]
    flops = FlopCount(
        lambda: (forward_flops(), str(device)),
        args.peak_gflops,
        "torch",
        "float32",
        args.threads,
    )

    def profile():
        # After `elapsed`: the profiled batches, the ncu re-run and the peaks are not the job.
        metadata, profile_metrics = _profile(train, job, device, args, forward_flops, run.metadata)
        run.metadata.update(metadata)
        return profile_metrics

    return Outcome(metrics, flops, after_elapsed=profile)


def _profile(train, job, device, args, forward_flops, environment):
    """(metadata, metrics) of the GPU profile on CUDA; ({"profile": None, "profile_reason": why}, []) elsewhere."""
    from . import profiling

    reason = profiling.skipped_reason(device) if args.profile_batches else "--profile-batches 0"
    if reason is not None:
        return {"profile": None, "profile_reason": reason}, []
    # CUDA only from here: the GPU path, not exercised on CPU-only machines.
    from ..common import ncu, roofline
    from .section import section_argv, section_env

    batch_stream = job.endless_batches()

    def train_batch():
        inputs, targets = next(batch_stream)
        job.train_batch(inputs, targets)
        return len(targets)

    summary = profiling.profile_batches(train_batch, args.profile_batches, PROFILE_TOP_KERNELS, device)
    section = section_argv(args, args.profile_batches)
    ncu_report, ncu_reason = ncu.profile_program(section, env=section_env(), launch_count=NCU_LAUNCH_COUNT)
    peaks, peak_error = attempt(roofline.torch_device_peaks, device, "float32", args.threads, environment)
    if isinstance(peak_error, Terminated):
        raise peak_error
    model_flops = TRAINING_PASSES * forward_flops() * summary["samples"]
    metrics, metadata = profiling.profile_metrics(
        summary, model_flops, ncu_report, ncu_reason, peaks[:2] if peaks else None
    )
    metadata["roofline_device"] = summary["device"]["name"]
    if peaks:
        metadata["roofline_peaks"] = peaks[2]
    elif peak_error is not None:
        metadata["roofline_reason"] = f"measuring the peaks failed: {error_line(peak_error)}"
    if ncu_report is not None:
        metadata["ncu"] = profiling.ncu_summary(ncu_report, NCU_LAUNCH_COUNT, PROFILE_TOP_KERNELS)
    return {"profile": summary, **metadata}, metrics


SPEC = Workload(
    name=WORKLOAD,
    description="Train one of Chopra et al.'s small PyTorch jobs (by default one epoch) and print one "
    "PLATBENCH_RESULT line with real, user and system time.",
    arguments=_arguments,
    validate=_check_batch_sizes,
    own_labels=_own_labels,
    metadata=lambda args: {"data_dir": os.path.abspath(args.data_dir)},
    body=_train,
    not_checked="--threads against the CPUs, --device cuda against the GPUs, and --data-dir, which is read where "
    "the job runs",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
