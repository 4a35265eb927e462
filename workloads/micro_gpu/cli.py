"""Command line and result record of micro_gpu, the GPU micro-benchmarks of Xu 2017.

One run measures, on one CUDA device: host<->device and device<->device copy bandwidth (pinned and pageable
host memory), SGEMM sized to a fraction of the GPU's memory, a large 2D convolution, 64- and 256-bin byte
histograms and the matrix-transpose variants (Triton kernels). Every figure is checked against a CPU
reference on a slice of its result first. Without a CUDA device the record is `skipped`, with the reason:
the plan runs micro_gpu only in GPU cells; this path is for runs by hand.
"""

import argparse
import importlib
import importlib.metadata
import os
import re
import shutil
import sysconfig

from ..common import gpus, tools
from ..common.args import json_object, positive_int
from ..common.harness import Outcome, WorkloadFailed, WorkloadSkipped
from ..common.workload import Workload
from .settings import (
    BENCHMARKS,
    DEFAULT_CONV_KERNEL,
    DEFAULT_CONV_SIZE,
    DEFAULT_DEVICE,
    DEFAULT_HISTOGRAM_MB,
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_REPEATS,
    DEFAULT_TRANSFER_MB,
    DEFAULT_TRANSPOSE_SIZE,
    DEFAULT_WARMUP,
    HISTOGRAM_BINS,
    MAX_MEMORY_FRACTION,
    TRANSPOSE_VARIANTS,
)

WORKLOAD = "micro_gpu"
_CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?")
DRIVER_QUERY_TIMEOUT = 15


def _cuda_device(text):
    match = _CUDA_DEVICE.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"expected a CUDA device such as cuda or cuda:1, got {text!r}")
    return f"cuda:{int(match.group(1) or 0)}"


def _memory_fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_MEMORY_FRACTION:  # also refuses NaN
        raise argparse.ArgumentTypeError(
            f"expected a fraction of the GPU's memory in (0, {MAX_MEMORY_FRACTION}], got {text!r}"
        )
    return value


def _choice_list(choices, what):
    def parse(text):
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} from {', '.join(choices)}, got {text!r}"
                + (f" ({', '.join(unknown)} unknown)" if unknown else "")
            )
        return [name for name in choices if name in names]  # the canonical order, each once

    return parse


def _arguments(parser):
    add = parser.add_argument
    add("--device", type=_cuda_device, default=DEFAULT_DEVICE, help=f"the CUDA device (default {DEFAULT_DEVICE})")
    add(
        "--benchmarks",
        type=_choice_list(BENCHMARKS, "benchmarks"),
        default=list(BENCHMARKS),
        metavar="B1,B2,...",
        help=f"which to run, of {', '.join(BENCHMARKS)} (default: all)",
    )
    add(
        "--transfer-mb",
        type=positive_int,
        default=DEFAULT_TRANSFER_MB,
        help=f"MiB per copy of the transfer benchmarks (default {DEFAULT_TRANSFER_MB})",
    )
    add(
        "--memory-fraction",
        type=_memory_fraction,
        default=DEFAULT_MEMORY_FRACTION,
        help="fraction of the GPU's total memory that SGEMM's three square float32 matrices fill, in "
        f"(0, {MAX_MEMORY_FRACTION}] (default {DEFAULT_MEMORY_FRACTION})",
    )
    add(
        "--conv-size",
        type=positive_int,
        default=DEFAULT_CONV_SIZE,
        help=f"side of the square single-channel float32 image of the 2D convolution (default {DEFAULT_CONV_SIZE})",
    )
    add(
        "--conv-kernel",
        type=positive_int,
        default=DEFAULT_CONV_KERNEL,
        help=f"side of the square convolution filter, odd (default {DEFAULT_CONV_KERNEL})",
    )
    add(
        "--histogram-mb",
        type=positive_int,
        default=DEFAULT_HISTOGRAM_MB,
        help=f"MiB of random bytes the histograms count (default {DEFAULT_HISTOGRAM_MB}: 64M bytes)",
    )
    add(
        "--transpose-size",
        type=positive_int,
        default=DEFAULT_TRANSPOSE_SIZE,
        help=f"side of the square float32 matrix the transposes move (default {DEFAULT_TRANSPOSE_SIZE})",
    )
    add(
        "--transpose-variants",
        type=_choice_list(tuple(TRANSPOSE_VARIANTS), "transpose variants"),
        default=list(TRANSPOSE_VARIANTS),
        metavar="V1,V2,...",
        help=f"which transpose kernels to run, of {', '.join(TRANSPOSE_VARIANTS)} (default: all)",
    )
    add(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help="timed runs of each benchmark; the median is reported",
    )
    add(
        "--warmup",
        type=positive_int,
        default=DEFAULT_WARMUP,
        help="untimed runs of each benchmark before those, at least 1: the first run compiles the Triton kernels and "
        f"lets cuDNN choose its algorithm (default {DEFAULT_WARMUP})",
    )


def _run_arguments(add):
    """micro_gpu's own --threads, --seed and --labels-json: its threads run the CPU references, and it takes no
    --peak-gflops (its figures are the GPU's own rates)."""
    add(
        "--threads",
        type=positive_int,
        help="CPU threads of the reference checks (default: every CPU this process may use)",
    )
    add("--seed", type=int, default=0, help="seed of the random inputs")
    add("--labels-json", type=json_object, default={}, help="extra labels for the record, as a JSON object")


def _check_convolution(parser, args, _allowed_cpus):
    if args.conv_kernel % 2 == 0:
        parser.error(f"--conv-kernel must be odd (the output keeps the image's size), got {args.conv_kernel}")
    if args.conv_kernel > args.conv_size:
        parser.error(f"--conv-kernel {args.conv_kernel} is larger than the image (--conv-size {args.conv_size})")


def no_cuda_reason(torch):
    """Why this process cannot run micro_gpu (a skipped record), or None when a CUDA device is visible."""
    if torch.version.cuda is not None and torch.cuda.is_available():
        return None
    build = "yes" if torch.version.cuda is not None else "no"
    return (
        f"no CUDA device visible to this process (torch {torch.__version__}, CUDA build: {build}): "
        "micro_gpu runs in GPU cells (processor gpu)"
    )


def driver_version():
    """The NVIDIA driver's version: nvidia-smi's, else the kernel module's (/proc/driver/nvidia); None without."""
    if shutil.which("nvidia-smi"):
        try:
            done = tools.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                timeout=DRIVER_QUERY_TIMEOUT,
                check=False,
            )
        except WorkloadFailed:  # a hung nvidia-smi costs the record its driver version, not the run
            done = None
        lines = (done.stdout or "").split() if done is not None and done.returncode == 0 else []
        if lines:
            return lines[0]
    return gpus.driver_version()


def _package_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def python_headers_dir():
    """Where Triton looks for Python.h (its runtime/build.py: Debian's posix_local scheme read as posix_prefix)."""
    scheme = sysconfig.get_default_scheme()
    return sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]


def triton_build_problem(environ=None, headers_dir=None):
    """What is missing for Triton to build its CUDA launcher, or None. On first use on a GPU Triton compiles a C
    stub against Python.h with $CC, else gcc, else clang: without them every kernel launch fails."""
    environ = os.environ if environ is None else environ
    headers_dir = python_headers_dir() if headers_dir is None else headers_dir
    missing = []
    compiler = environ.get("CC")
    if not (shutil.which(compiler) if compiler else shutil.which("gcc") or shutil.which("clang")):
        missing.append(f"the C compiler $CC ({compiler})" if compiler else "a C compiler (gcc or clang)")
    if not os.path.isfile(os.path.join(headers_dir, "Python.h")):
        missing.append(f"Python's headers ({headers_dir}/Python.h)")
    if not missing:
        return None
    return (
        f"the transpose benchmark's Triton kernels need {' and '.join(missing)} to build Triton's CUDA launcher on "
        "first use: install them (Debian: gcc libc6-dev python3-dev, for the Python that runs the workload), "
        "or leave transpose out of --benchmarks"
    )


def _load_transpose_kernels():
    """The Triton kernels module, or WorkloadFailed saying what to install (before any benchmark runs)."""
    try:
        kernels = importlib.import_module(".transpose", __package__)
    except ImportError as error:
        raise WorkloadFailed(
            f"the transpose benchmark needs Triton, which does not import here ({error}): PyPI's CUDA torch "
            "installs it (torch 2.13.0 requires triton==3.7.1 on Linux; requirements-workload-gpu.txt); "
            "install that, or leave transpose out of --benchmarks"
        ) from error
    problem = triton_build_problem()
    if problem is not None:
        raise WorkloadFailed(problem)
    return kernels


def _exact_fp32(torch):
    """No TF32 in matmul or cuDNN convolutions: SGEMM and the convolution are real float32. Returns the settings."""
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
        # torch >= 2.9; the legacy allow_tf32 flags must not be mixed with these (torch raises then).
        matmul.fp32_precision = "ieee"
        conv.fp32_precision = "ieee"
        settings = {"matmul_fp32_precision": matmul.fp32_precision, "cudnn_conv_fp32_precision": conv.fp32_precision}
    else:
        matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        settings = {"matmul_allow_tf32": False, "cudnn_allow_tf32": False}
    torch.backends.cudnn.benchmark = True  # cuDNN times its algorithms in the warm-up and keeps the fastest
    return {**settings, "cudnn_benchmark": True}


def _measure(args, run):
    """The harness body: skip without CUDA, else run the chosen benchmarks on --device."""
    # torch only after the thread variables: its CPU pool (the reference checks) reads them when it loads.
    import torch

    from . import benchmarks

    torch.set_num_threads(args.threads)
    run.metadata["tool_versions"] = {
        "cuda": torch.version.cuda,
        "driver": driver_version(),
        "torch": torch.__version__,
        "triton": _package_version("triton"),
    }
    reason = no_cuda_reason(torch)
    if reason is not None:
        raise WorkloadSkipped(reason)
    device = torch.device(args.device)
    visible = torch.cuda.device_count()
    if device.index >= visible:
        raise WorkloadFailed(
            f"--device {args.device}: this process sees {visible} CUDA device(s) (cuda:0 to cuda:{visible - 1}; "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        )
    kernels = _load_transpose_kernels() if "transpose" in args.benchmarks else None
    torch.cuda.set_device(device)
    properties = torch.cuda.get_device_properties(device)
    run.metadata.update(
        gpu={
            "name": properties.name,
            "total_memory_bytes": properties.total_memory,
            "compute_capability": f"{properties.major}.{properties.minor}",
            "multiprocessors": properties.multi_processor_count,
        },
        precision=_exact_fp32(torch),
        units={
            "bandwidth": "decimal GB/s (1e9 bytes)",
            "gpu_d2d_bandwidth": "2 x bytes copied / time (read and write)",
            "gpu_transpose": "2 x matrix bytes / time (read and write)",
            "gpu_histogram": "input bytes / time",
        },
        timings_ms={},
    )
    timing = benchmarks.Timing(torch, device, args.warmup, args.repeats, args.seed)
    steps = {
        "transfer": lambda: benchmarks.transfers(timing, args.transfer_mb),
        "sgemm": lambda: benchmarks.sgemm(timing, args.memory_fraction),
        "conv2d": lambda: benchmarks.conv2d(timing, args.conv_size, args.conv_kernel),
        "histogram": lambda: benchmarks.histograms(timing, args.histogram_mb, HISTOGRAM_BINS),
        "transpose": lambda: benchmarks.transposes(timing, kernels, args.transpose_size, args.transpose_variants),
    }
    metrics = []
    for name in args.benchmarks:
        step_metrics, step_metadata = steps[name]()
        benchmarks.release(torch)
        metrics += step_metrics
        run.metadata["timings_ms"].update(step_metadata.pop("timings_ms"))
        run.metadata.update(step_metadata)
    return Outcome(metrics)


SPEC = Workload(
    name=WORKLOAD,
    description="Measure one CUDA device: copy bandwidth (host<->device pinned and pageable, device<->device), "
    "SGEMM, a 2D convolution, byte histograms and matrix transposes (Triton), each checked against a CPU "
    "reference, and print one PLATBENCH_RESULT line. Without a CUDA device: a skipped record.",
    arguments=_arguments,
    run_arguments=_run_arguments,
    validate=_check_convolution,
    own_labels=lambda args: {
        "device": args.device,
        "benchmarks": ",".join(args.benchmarks),
        "transfer_mb": args.transfer_mb,
        "memory_fraction": args.memory_fraction,
        "conv_size": args.conv_size,
        "conv_kernel": args.conv_kernel,
        "histogram_mb": args.histogram_mb,
        "transpose_size": args.transpose_size,
    },
    metadata=lambda args: {"repeats": args.repeats, "warmup": args.warmup},
    body=_measure,
    not_checked="--threads against the CPUs, and --device and the sizes against the GPU, which is where the job runs",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
