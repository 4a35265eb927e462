"""Argument types and checks shared by the workloads' command lines (stdlib only).

Every workload and dataset generator takes ``--check-args``: the controller runs
``python -m workloads.<name> --check-args ARGS...`` at plan time to validate a cell's parameters
with the workload's own parser, without training and without importing a framework.
"""

import argparse
import json
import math
import os

from .environment import format_cpuset


def _number(text, convert, accept, expected):
    """``convert(text)`` when ``accept`` takes it, else the argparse error "expected <expected>, got <text>"."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text):
    return _number(text, int, lambda value: value > 0, "a positive integer")


def non_negative_int(text):
    return _number(text, int, lambda value: value >= 0, "a non-negative integer")


def positive_float(text):
    return _number(text, float, lambda value: math.isfinite(value) and value > 0, "a positive number")


def non_negative_float(text):
    return _number(text, float, lambda value: math.isfinite(value) and value >= 0, "a number >= 0")


def positive_int_list(text, what="positive integers", example="1,16,256"):
    """Comma-separated positive integers, in the given order, each once: "1,16,256" -> [1, 16, 256].
    ``what`` and ``example`` name them in the message ("positive sizes in MiB", "1,16,256")."""
    parts = [part.strip() for part in str(text).split(",")]
    try:
        values = [positive_int(part) for part in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} such as {example}, got {text!r}") from None
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected each value once, got {text!r}")
    return values


def reject_non_finite(constant):
    raise ValueError(f"{constant} is not allowed in a result record")


def json_object(text):
    try:
        value = json.loads(text, parse_constant=reject_non_finite)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got invalid JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def add_check_args(add, not_checked=None):
    """--check-args; ``not_checked`` names the checks left out because they depend on the host that runs the job."""
    add(
        "--check-args",
        action="store_true",
        help="only check the other arguments, with every check of this program that does not depend on the "
        "host it runs on, then exit: 0 and no output when they are valid, 2 and the reason on stderr when not. "
        "Runs nothing (no training, no file written) and imports no deep-learning framework."
        + (f" Not checked here: {not_checked}" if not_checked else ""),
    )


def add_run_arguments(add):
    """--threads, --seed, --labels-json and --peak-gflops, which every workload takes; ``add`` is add_argument."""
    add("--threads", type=positive_int, help="compute threads (default: every CPU this process may use)")
    add("--seed", type=int, default=0)
    add("--labels-json", type=json_object, default={}, help="extra labels for the record, as a JSON object")
    add(
        "--peak-gflops",
        type=non_negative_float,
        help="the peak MFU is measured against, in GFLOP/s (default: a GEMM measured after the run on its "
        "CPUs, threads and dtype, cached per scenario; 0: no MFU)",
    )


def resolve_threads(parser, args):
    """Default --threads to the CPUs this process may use, and refuse more; returns those CPUs.

    With --check-args the CPUs are the runner's, not known here: --threads stays as given (None
    when absent) and None is returned."""
    if args.check_args:
        return None
    allowed_cpus = os.sched_getaffinity(0)
    if args.threads is None:
        args.threads = len(allowed_cpus)
    if args.threads > len(allowed_cpus):
        parser.error(
            f"--threads must be at most {len(allowed_cpus)}, the CPUs this process may use "
            f"({format_cpuset(allowed_cpus)}), got {args.threads}"
        )
    return allowed_cpus


def check_extra_labels(parser, extra, own_labels):
    """--labels-json may add labels, never contradict the run's own."""
    if own_labels.get("threads", 0) is None:
        own_labels = {key: value for key, value in own_labels.items() if key != "threads"}  # --check-args
    clashes = sorted(key for key, value in extra.items() if own_labels.get(key, value) != value)
    if clashes:
        parser.error(f"--labels-json must not contradict the run's own labels: {', '.join(clashes)}")
