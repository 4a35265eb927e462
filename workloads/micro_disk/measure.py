"""The runs of micro_disk: dd, ioping and fio in a scratch directory whose files are always removed.

Each run goes through common.tools.run (bounded in time, a failure names the command and its output)
and returns what the tool itself printed, parsed by .parse.
"""

import contextlib
import os
from typing import NamedTuple

from ..common import tools
from ..common.harness import WorkloadFailed
from .parse import parse_dd, parse_fio_json, parse_ioping_batch

MIB = 1024 * 1024
DD_MIN_RATE_MB_PER_S = 1  # the slowest disk a dd run waits for before it is called stuck
IOPING_INTERVAL_S = 1  # ioping's default pause between requests of the default mode
# ioping -R works on a 64 MiB temporary file (O_TMPFILE where the filesystem has it: nothing left behind).
IOPING_RAPID_WORK_BYTES = 64 * MIB
GRACE_S = 60  # start-up and clean-up time allowed to a tool around its own bound
IOPING_MODES = ("default", "cached", "direct")
IOPING_FALLBACK_FILE = "ioping.tmp"


class FioProfile(NamedTuple):
    rw: str  # fio's --rw
    block_size: str  # fio's --bs


FIO_PROFILES = {
    "seqread": FioProfile("read", "1M"),
    "seqwrite": FioProfile("write", "1M"),
    "randread": FioProfile("randread", "4k"),
    "randwrite": FioProfile("randwrite", "4k"),
}
FIO_FILE = "platbench-fio.dat"


class Scratch:
    """The run's directory and every file a tool may leave there; ``clean()`` removes them (and the
    directories this run created, when empty). Safe to call more than once."""

    def __init__(self, directory, created_dirs):
        self.directory = directory
        self.created_dirs = list(created_dirs)  # deepest first
        self.files = set()

    def file(self, name):
        path = os.path.join(self.directory, name)
        self.files.add(path)
        return path

    def remove(self, path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.files.discard(path)

    def clean(self):
        for path in sorted(self.files):
            self.remove(path)
        for directory in self.created_dirs:
            try:
                os.rmdir(directory)
            except OSError:
                break  # not empty (someone else's files) or gone: leave it and its parents


def dd_write(scratch, size_mb, block_bytes):
    """One dd write of size_mb MiB from /dev/zero with fdatasync; the file is removed whatever happens."""
    path = scratch.file(f"platbench-dd-{size_mb}mb.dat")
    argv = ["dd", "if=/dev/zero", f"of={path}", f"bs={block_bytes}", f"count={size_mb * MIB // block_bytes}"]
    argv.append("conv=fdatasync")  # the time includes the flush to the disk, as in the study
    timeout = GRACE_S + size_mb / DD_MIN_RATE_MB_PER_S
    try:
        # dd prints its summary on stderr; LC_ALL=C: a '.' decimal point and English words to parse.
        done = tools.run(argv, timeout, env={**os.environ, "LC_ALL": "C"})
    finally:
        scratch.remove(path)
    try:
        result = parse_dd(done.stderr)
    except ValueError as error:
        raise WorkloadFailed(f"dd {size_mb} MiB: {error}") from None
    if result.bytes != size_mb * MIB:
        raise WorkloadFailed(f"dd wrote {result.bytes} bytes instead of {size_mb * MIB}: {result.summary}")
    return argv, result


def ioping_argv(mode, directory, count, deadline):
    """The study's three runs: `-c 10` (default mode), `-C -R -w 5` (cached random), `-D -R -w 5` (direct random);
    -B prints ioping's raw statistics, and in the default mode -p 1 also each request's own (a handful of lines;
    the random modes make thousands of requests)."""
    if mode == "default":
        return ["ioping", "-B", "-p", "1", "-c", str(count), directory]
    flag = {"cached": "-C", "direct": "-D"}[mode]
    return ["ioping", "-B", flag, "-R", "-w", str(deadline), directory]


def refuses_direct_io(output):
    """Whether a tool's error says the filesystem refused O_DIRECT (EINVAL): tmpfs and overlayfs on older
    kernels, some FUSE filesystems. ioping: 'fcntl(O_DIRECT) failed, please retry without option -D: Invalid
    argument'; fio: 'destination does not support O_DIRECT', 'looks like your file system does not support
    direct=1/buffered=0'."""
    return "O_DIRECT" in output or "direct=1" in output or "Invalid argument" in output


class NotMeasured(NamedTuple):
    reason: str


def ioping(scratch, mode, count, deadline, filesystem):
    """(argv, IopingResult), or (argv, NotMeasured) when the direct mode's O_DIRECT is refused by the filesystem."""
    directory = scratch.directory
    # Where the filesystem has no O_TMPFILE, ioping names its file ioping.tmp and unlinks it when done:
    # a run cut short may leave it.
    scratch.file(IOPING_FALLBACK_FILE)
    argv = ioping_argv(mode, directory, count, deadline)
    bound = count * IOPING_INTERVAL_S if mode == "default" else deadline
    done = tools.run(argv, GRACE_S + bound, check=False)
    output = f"{done.stderr}\n{done.stdout}".strip()
    if done.returncode != 0:
        if mode == "direct" and refuses_direct_io(output):
            return argv, NotMeasured(
                f"ioping -D (O_DIRECT) is refused by the {filesystem} filesystem of {directory}: "
                f"{tools.output_tail(output)}"
            )
        raise WorkloadFailed(
            f"ioping exited with {done.returncode}: {' '.join(argv)}: {tools.output_tail(output) or 'no output'}"
        )
    try:
        return argv, parse_ioping_batch(done.stdout)
    except ValueError as error:
        raise WorkloadFailed(f"ioping {mode} mode: {error}") from None


def fio_argv(path, size_mb, runtime):
    """One fio run of every profile in turn (--stonewall), direct I/O on one file, each bounded by runtime."""
    argv = [
        "fio",
        "--output-format=json",
        f"--filename={path}",
        f"--size={size_mb}M",
        "--direct=1",
        "--ioengine=psync",  # synchronous reads and writes: no aio or io_uring that a container's seccomp may block
        f"--runtime={runtime}",
        "--time_based",
    ]
    for name, profile in FIO_PROFILES.items():
        argv += [f"--name={name}", f"--rw={profile.rw}", f"--bs={profile.block_size}", "--stonewall"]
    return argv


def fio(scratch, size_mb, runtime, filesystem):
    """(argv, [FioResult]) or (argv, NotMeasured) when the filesystem refuses direct I/O; its file is removed."""
    path = scratch.file(FIO_FILE)
    argv = fio_argv(path, size_mb, runtime)
    # The file is laid out once (size_mb written at the disk's pace) before the first profile.
    timeout = GRACE_S + runtime * len(FIO_PROFILES) + size_mb / DD_MIN_RATE_MB_PER_S
    try:
        done = tools.run(argv, timeout, check=False)
    finally:
        scratch.remove(path)
    errors = done.stderr.strip()
    if done.returncode != 0:
        if refuses_direct_io(errors):
            return argv, NotMeasured(
                f"fio --direct=1 (O_DIRECT) is refused by the {filesystem} filesystem of {scratch.directory}: "
                f"{tools.output_tail(errors)}"
            )
        raise WorkloadFailed(
            f"fio exited with {done.returncode}: {' '.join(argv)}: "
            + (tools.output_tail(errors) or tools.output_tail(done.stdout) or "no output")
        )
    try:
        results = parse_fio_json(done.stdout)
    except ValueError as error:
        raise WorkloadFailed(f"fio: {error}") from None
    if [result.profile for result in results] != list(FIO_PROFILES):
        raise WorkloadFailed(f"fio ran {[result.profile for result in results]}, expected {list(FIO_PROFILES)}")
    return argv, results
