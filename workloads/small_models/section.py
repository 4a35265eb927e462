"""The profiled section of small_models alone, to run under Nsight Compute (common/ncu.py).

``python -m workloads.small_models.section ...`` builds the same job as the run (net, data, batch size,
seed, threads), trains a few warm-up batches, then trains the profiled batches between
cudaProfilerStart and cudaProfilerStop, the range ncu collects with ``--profile-from-start off``.
It prints no result record: the run that started it records the counters.
"""

import argparse
import os
import sys

from ..common.args import positive_int
from ..common.environment import set_thread_env
from .settings import NETS

WARMUP_BATCHES = 2  # cuDNN picks its algorithms on the first batches: not part of the section
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m workloads.small_models.section", description=__doc__)
    add = parser.add_argument
    add("--net", choices=NETS, required=True)
    add("--data-dir", required=True)
    add("--samples", type=positive_int, required=True)
    add("--batch-size", type=positive_int, required=True)
    add("--batches", type=positive_int, required=True, help="batches trained inside the profiled range")
    add("--threads", type=positive_int, required=True)
    add("--seed", type=int, default=0)
    add("--device", choices=("cpu", "cuda"), default="cuda", help="cpu: the same batches, no profiled range")
    return parser


def section_argv(args, batches, python=sys.executable):
    """argv of this module for the job of a small_models run's ``args``, ``batches`` profiled batches."""
    return [
        python,
        "-m",
        "workloads.small_models.section",
        "--net",
        args.net,
        "--data-dir",
        os.path.abspath(args.data_dir),
        "--samples",
        str(args.samples),
        "--batch-size",
        str(args.batch_size),
        "--batches",
        str(batches),
        "--threads",
        str(args.threads),
        "--seed",
        str(args.seed),
        "--device",
        "cuda",
    ]


def section_env(environ=None):
    """The run's environment, with this repository first on PYTHONPATH so that the child finds the package."""
    environ = dict(os.environ if environ is None else environ)
    environ["PYTHONPATH"] = os.pathsep.join(part for part in (REPO_ROOT, environ.get("PYTHONPATH")) if part)
    return environ


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_thread_env(args.threads)
    from . import train
    from .data import load

    train.setup(args.threads, args.seed)
    device = train.resolve_device(args.device)
    data = load(NETS[args.net].dataset, args.data_dir, args.samples)
    job = train.Job(args.net, data, device, args.batch_size, args.seed)
    batches = job.endless_batches()
    for _ in range(WARMUP_BATCHES):
        job.train_batch(*next(batches))
    cuda = device.type == "cuda"
    if cuda:
        train.torch.cuda.synchronize(device)
        train.torch.cuda.profiler.start()
    samples = 0
    for _ in range(args.batches):
        inputs, targets = next(batches)
        job.train_batch(inputs, targets)  # returns after .item(): the batch's kernels are done
        samples += len(targets)
    if cuda:
        train.torch.cuda.synchronize(device)
        train.torch.cuda.profiler.stop()
    print(f"profiled section: {args.batches} batches, {samples} samples of {args.net} on {device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
