"""Command line, timed epochs and result record of dl_tools (Xu, Shi, Chu 2017).

Seconds per batch are reported for the first epoch and for the later ones separately: the first
includes the warm-up (page cache, tf.function tracing, allocator and oneDNN primitive creation).
Each timed batch covers the host-side gather and conversion of the batch and the training step.
"""

import importlib
import math
import os
import time
from typing import NamedTuple

from ..common.args import positive_int
from ..common.clock import process_elapsed
from ..common.harness import FlopCount, Outcome
from ..common.record import metric
from ..common.stats import step_time_metrics
from ..common.workload import Workload
from .settings import FRAMEWORK_BACKENDS, NETS

WORKLOAD = "dl_tools"


def _arguments(parser):
    add = parser.add_argument
    add("--net", choices=NETS, required=True)
    add("--framework", choices=FRAMEWORK_BACKENDS, default="tensorflow")
    defaults = ", ".join(f"{name} {spec.default_batch_size} of {spec.study_batch_sizes}" for name, spec in NETS.items())
    add("--batch-size", type=positive_int, help=f"samples per batch (default: the study's middle size: {defaults})")
    add("--epochs", type=positive_int, default=2, help="epochs over the training set (the first is reported apart)")
    add("--max-batches-per-epoch", type=positive_int, help="cap on the batches of each epoch, for scaled-down runs")
    add("--data-dir", required=True, help="folder holding the net's dataset (MNIST idx, CIFAR-10 binary, PTB text)")


def _default_batch_size(_parser, args, _allowed_cpus):
    if args.batch_size is None:
        args.batch_size = NETS[args.net].default_batch_size


def _own_labels(args):
    return {
        "framework": args.framework,
        "net": args.net,
        "batch_size": args.batch_size,
        "data": NETS[args.net].dataset,
        "epochs": args.epochs,
        "max_batches_per_epoch": args.max_batches_per_epoch,
    }


def _metadata(args):
    spec = NETS[args.net]
    return {
        "data_dir": os.path.abspath(args.data_dir),
        "study_batch_sizes": list(spec.study_batch_sizes),
        "optimizer": {
            "name": "sgd",
            "learning_rate": spec.learning_rate,
            "momentum": spec.momentum,
            "global_clipnorm": spec.clip_norm,
        },
    }


class EpochRun(NamedTuple):
    startup: float  # seconds from launch to the first batch
    losses: list  # per epoch, every batch's loss
    batch_times: list  # per epoch, seconds per batch


def run_epochs(step, data, batch_size, epochs, batches_per_epoch, orders):
    """Trains `epochs` times over the batches of each order in `orders` (a permutation of the samples per epoch);
    `step()` must return its loss only once it has finished."""
    startup = process_elapsed()
    losses, batch_times = [], []
    for epoch, order in zip(range(epochs), orders, strict=False):
        losses.append([])
        batch_times.append([])
        for index in range(batches_per_epoch):
            started = time.perf_counter()
            loss = step(*data.batch(order[index * batch_size : (index + 1) * batch_size]))
            duration = time.perf_counter() - started
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at batch {index} of epoch {epoch + 1}")
            losses[-1].append(loss)
            batch_times[-1].append(duration)
    return EpochRun(startup, losses, batch_times)


def _renamed(metrics, prefix):
    return [{**entry, "metric": entry["metric"].replace("step_time", prefix, 1)} for entry in metrics]


def _metrics(run, batch_size, unit, data_load):
    first = run.batch_times[0]
    later = [duration for epoch in run.batch_times[1:] for duration in epoch]
    timed = later or first  # throughput excludes the warm-up epoch when there is a later one
    return [
        metric("throughput", batch_size * len(timed) / sum(timed), f"{unit}/sec"),
        metric("data_load", data_load, "s"),
        metric("startup", run.startup, "s"),
        metric("epoch1_time", sum(first), "s"),
        *_renamed(step_time_metrics(first), "batch_time_epoch1"),
        *(_renamed(step_time_metrics(later), "batch_time_later") if later else []),
        metric("loss_first", run.losses[0][0], "loss"),
        metric("loss_last", run.losses[-1][-1], "loss"),
    ]


def _train(args, run):
    """The harness body: load the net's data, train, return the metrics and how to count FLOPs."""
    spec = NETS[args.net]
    # numpy (and so the data) only after the thread variables: its BLAS reads them when it loads.
    from .data import epoch_orders, load

    data, data_load = SPEC.load_data(load, args.net, args.data_dir, args.batch_size)
    batches_per_epoch = min(data.samples // args.batch_size, args.max_batches_per_epoch or math.inf)
    run.metadata.update(dataset=data.info, batches_per_epoch=batches_per_epoch)
    backend = importlib.import_module(f".{FRAMEWORK_BACKENDS[args.framework]}", __package__)
    step, backend_metadata, costs = backend.build_trainer(args, spec, data.num_outputs)
    orders = epoch_orders(data.samples, args.seed)
    epochs = run_epochs(step, data, args.batch_size, args.epochs, batches_per_epoch, orders)
    run.metadata.update(
        backend_metadata(),
        batch_times=[[round(t, 6) for t in epoch] for epoch in epochs.batch_times],
        epoch_times=[round(sum(epoch), 6) for epoch in epochs.batch_times],
        epoch_loss_mean=[sum(epoch) / len(epoch) for epoch in epochs.losses],
    )
    # FLOPs are counted on one real sample.
    flops = FlopCount(lambda: costs(data.batch([0])[0]), args.peak_gflops, args.framework, "float32", args.threads)
    return Outcome(_metrics(epochs, args.batch_size, spec.sample_unit, data_load), flops)


SPEC = Workload(
    name=WORKLOAD,
    description="Train one of Xu et al.'s four networks on its real-format dataset for a few epochs and "
    "print one PLATBENCH_RESULT line with seconds per batch, first epoch and later epochs apart.",
    arguments=_arguments,
    validate=_default_batch_size,
    own_labels=_own_labels,
    metadata=_metadata,
    body=_train,
    not_checked="--threads against the CPUs, and --data-dir, which is read where the job runs",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
