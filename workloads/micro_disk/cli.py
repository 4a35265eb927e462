"""Command line and result record of micro_disk: the disk micro-benchmarks of Xu 2017.

- dd: sequential writes of each --dd-sizes-mb (MiB) from /dev/zero, bs 64 KiB, conv=fdatasync, each size
  --dd-writes times in a row: ``dd_write`` is their combined rate (bytes over seconds), ``dd_time`` their mean
  time, ``dd_write_best`` the fastest write (the study's Table XI gives the best and the mean of 20 runs);
- ioping: `-c 10` (default mode), `-C -R -w 5` (cached random), `-D -R -w 5` (direct random); the default
  mode also reports its median request (``ioping_latency_median``) beside ioping's mean;
- fio (--fio): sequential and random reads and writes with direct I/O, each bounded in time.

Files go to --dir, a directory on the platform's own disk (a container's writable layer, a guest's disk),
and are removed after each run and on failure. ``metadata.disk`` says what backs the directory.
"""

import argparse
import os

from ..common import tools
from ..common.args import positive_int, positive_int_list
from ..common.harness import Outcome, WorkloadFailed
from ..common.record import metric
from ..common.workload import Workload
from . import measure
from .mounts import describe_this_disk

WORKLOAD = "micro_disk"
DEFAULT_DIR = "/var/tmp/platbench-disk"
DEFAULT_DD_SIZES_MB = "1,100,512,1024"  # the study's 1 MB, 100 MB, 512 MB and 1 GB
DEFAULT_DD_BLOCK_SIZE = "64k"
_BLOCK_SUFFIXES = {"": 1, "k": 1024, "K": 1024, "M": 1024**2, "G": 1024**3}
FIX_DIR = (
    "give --dir a directory on the platform's own disk that this user may write "
    f"(default {DEFAULT_DIR}), or create it and let this user write there (chown/chmod, or a writable mount)"
)


def size_list(text):
    """--dd-sizes-mb: comma-separated positive sizes in MiB, each once."""
    return positive_int_list(text, "positive sizes in MiB", "1,100,512")


def block_size(text):
    """dd's block size in bytes: "64k" -> 65536 (k/K, M, G are powers of 1024, as dd reads them)."""
    number, suffix = text.strip(), ""
    if number and number[-1] in _BLOCK_SUFFIXES:
        number, suffix = number[:-1], number[-1]
    if not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"expected a block size like 64k, 512, 1M, got {text!r}")
    return int(number) * _BLOCK_SUFFIXES[suffix]


def _arguments(parser):
    add = parser.add_argument
    add("--dir", default=DEFAULT_DIR, help=f"where the test files go, created if missing (default {DEFAULT_DIR})")
    add(
        "--dd-sizes-mb",
        type=size_list,
        default=size_list(DEFAULT_DD_SIZES_MB),
        help=f"sizes of the dd writes in MiB, comma-separated (default {DEFAULT_DD_SIZES_MB})",
    )
    add(
        "--dd-block-size",
        type=block_size,
        default=block_size(DEFAULT_DD_BLOCK_SIZE),
        help=f"dd's bs (default {DEFAULT_DD_BLOCK_SIZE}, as in the study); each size must be a multiple of it",
    )
    add(
        "--dd-writes",
        type=positive_int,
        default=1,
        help="writes of each size, one after the other (default 1); a 1 MiB write with fdatasync lasts a few "
        "milliseconds, so one write is one flush's latency",
    )
    add("--ioping-count", type=positive_int, default=10, help="requests of ioping's default mode, -c (default 10)")
    add(
        "--ioping-deadline",
        type=positive_int,
        default=5,
        help="seconds of ioping's cached and direct random modes, -w (default 5)",
    )
    add("--fio", action="store_true", help="also run fio's direct-I/O profiles: seqread, seqwrite, randread, randwrite")
    add("--fio-runtime", type=positive_int, default=5, help="seconds of each fio profile (default 5)")
    add("--fio-size-mb", type=positive_int, default=256, help="size of fio's file in MiB (default 256)")


def _check_block_size(parser, args, _allowed_cpus):
    uneven = [size for size in args.dd_sizes_mb if size * measure.MIB % args.dd_block_size]
    if uneven:
        parser.error(
            f"--dd-sizes-mb {', '.join(map(str, uneven))} MiB is not a whole number of --dd-block-size "
            f"({args.dd_block_size} bytes) blocks"
        )


def needed_bytes(args):
    """The most the run has on disk at once: one dd file, ioping's working set, or fio's file (one at a time)."""
    sizes = [max(args.dd_sizes_mb) * measure.MIB, measure.IOPING_RAPID_WORK_BYTES]
    if args.fio:
        sizes.append(args.fio_size_mb * measure.MIB)
    return max(sizes)


def prepare_dir(path):
    """The absolute directory, created if missing, and the directories this created (deepest first);
    WorkloadFailed saying what to do when it cannot be created or written."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise WorkloadFailed(f"--dir {path} exists and is not a directory; {FIX_DIR}")
    missing, parent = [], path
    while not os.path.exists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        _remove_dirs(missing)
        raise WorkloadFailed(
            f"--dir {path} cannot be created ({error.strerror}: {error.filename}); {FIX_DIR}"
        ) from None
    probe = os.path.join(path, f".platbench-write-probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
    except OSError as error:
        _remove_dirs(missing)
        raise WorkloadFailed(f"--dir {path} is not writable ({error.strerror}); {FIX_DIR}") from None
    return path, missing


def _remove_dirs(directories):
    """Undo the directories prepare_dir made (deepest first), where they exist and are empty."""
    for directory in directories:
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError:
            break


def check_free_space(path, args):
    stats = os.statvfs(path)
    free, needed = stats.f_bavail * stats.f_frsize, needed_bytes(args)
    if free < needed:
        parts = [f"the largest dd write {max(args.dd_sizes_mb)} MiB (--dd-sizes-mb)"]
        parts.append(f"ioping's {measure.IOPING_RAPID_WORK_BYTES // measure.MIB} MiB working set")
        if args.fio:
            parts.append(f"fio's {args.fio_size_mb} MiB file (--fio-size-mb)")
        raise WorkloadFailed(
            f"--dir {path} has {free / measure.MIB:.0f} MiB free, and this run needs {needed // measure.MIB} MiB "
            f"there (the largest of {', '.join(parts)}, written one at a time): free space there, lower the sizes, "
            "or give --dir a directory with more room"
        )


def _measure(args, run):
    """The harness body: check the directory, then dd, ioping and fio in it; every file is removed."""
    tools.require(["dd", "ioping"] + (["fio"] if args.fio else []))
    directory, created = prepare_dir(args.dir)
    scratch = measure.Scratch(directory, created)
    run.on_failure(lambda _error: scratch.clean())  # also after a stop signal cut a tool short
    try:
        check_free_space(directory, args)
        run.metadata["disk"] = describe_this_disk(directory)
        filesystem = run.metadata["disk"].get("filesystem") or "unknown"  # for the not-measured reasons
        metrics = _dd_metrics(args, scratch, run.metadata)
        metrics += _ioping_metrics(args, scratch, filesystem, run.metadata)
        if args.fio:
            metrics += _fio_metrics(args, scratch, filesystem, run.metadata)
    finally:
        scratch.clean()
    return Outcome(metrics)


def _dd_metrics(args, scratch, metadata):
    metrics, runs = [], metadata.setdefault("dd", [])
    for size_mb in args.dd_sizes_mb:
        results = []
        for write in range(args.dd_writes):
            argv, result = measure.dd_write(scratch, size_mb, args.dd_block_size)
            results.append(result)
            runs.append(
                {
                    "size_mb": size_mb,
                    "write": write,
                    "argv": argv,
                    "bytes": result.bytes,
                    "seconds": result.seconds,
                    "printed_mb_per_s": result.printed_mb_per_s,
                    "summary": result.summary,
                }
            )
        seconds = sum(result.seconds for result in results)
        labels = {"size_mb": size_mb}
        metrics += [
            metric("dd_write", sum(result.bytes for result in results) / seconds / 1e6, "MB/s", labels),
            metric("dd_time", seconds / len(results), "s", labels),
            metric("dd_write_best", max(result.mb_per_s for result in results), "MB/s", labels),
        ]
    return metrics


def _ioping_metrics(args, scratch, filesystem, metadata):
    metrics, runs = [], metadata.setdefault("ioping", {})
    for mode in measure.IOPING_MODES:
        argv, result = measure.ioping(scratch, mode, args.ioping_count, args.ioping_deadline, filesystem)
        if isinstance(result, measure.NotMeasured):
            metadata["not_measured"][f"ioping_{mode}"] = result.reason
            continue
        labels = {"ioping_mode": mode}
        metrics += [
            metric("ioping_latency", result.latency_us, "us", labels),
            metric("ioping_iops", result.iops, "iops", labels),
        ]
        if result.request_ns:
            metrics.append(metric("ioping_latency_median", result.median_latency_us, "us", labels))
        runs[mode] = {
            "argv": argv,
            "requests": result.requests,
            "min_us": result.min_ns / 1000,
            "max_us": result.max_ns / 1000,
            "mdev_us": result.mdev_ns / 1000,
            "bytes_per_s": result.bytes_per_s,
        }
    return metrics


def _fio_metrics(args, scratch, filesystem, metadata):
    argv, results = measure.fio(scratch, args.fio_size_mb, args.fio_runtime, filesystem)
    metadata["fio"] = {"argv": argv}
    if isinstance(results, measure.NotMeasured):
        metadata["not_measured"].update(dict.fromkeys((f"fio_{name}" for name in measure.FIO_PROFILES), results.reason))
        return []
    metrics = []
    for result in results:
        labels = {"fio_profile": result.profile}
        metrics += [
            metric("fio_bandwidth", result.bandwidth_mb_per_s, "MB/s", labels),
            metric("fio_iops", result.iops, "iops", labels),
            metric("fio_latency", result.clat_mean_us, "us", labels),
        ]
        metadata["fio"][result.profile] = {"direction": result.direction, "io_bytes": result.io_bytes}
    return metrics


SPEC = Workload(
    name=WORKLOAD,
    description="Disk micro-benchmarks of Xu 2017 (dd with fdatasync, ioping, optionally fio) in a directory "
    "of the platform's own disk; prints one PLATBENCH_RESULT line. Every file written is removed.",
    arguments=_arguments,
    validate=_check_block_size,
    own_labels=lambda args: {},
    metadata=lambda args: {
        "tool_versions": tools.versions(["dd", "ioping"] + (["fio"] if args.fio else [])),
        "dd_block_size_bytes": args.dd_block_size,
        "dd_writes": args.dd_writes,
        "not_measured": {},  # what could not be measured here, and why (not a failure of the run)
    },
    body=_measure,
    not_checked="--dir (writable, free space) and the tools, which depend on where the job runs",
    sets_thread_env=False,  # dd, ioping and fio: no compute threads
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
