"""Nsight Compute (``ncu``) for a workload's profiled section: find it, build its command, read its CSV.

The workload re-runs its profiled section in a child process under ncu. The child brackets the section
with cudaProfilerStart/Stop (torch.cuda.profiler.start/stop) and ncu, started with
``--profile-from-start off``, collects only the kernels in between, at most ``--launch-count`` of them.
ncu prints its raw page as CSV: a header row (identity columns, then one column per metric), a units
row, then one row per kernel. The parser turns it into per-kernel rows and totals.

A missing ncu, counters the host does not permit (ERR_NVGPUCTRPERM) or any other ncu failure is a
skip with its reason, never a failed run. Stdlib only.
"""

import csv
import io
import os
import shutil
import subprocess
import tempfile
from typing import NamedTuple

FALLBACK_DIRS = ("/usr/local/cuda/bin",)
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DURATION = "gpu__time_duration.sum"
# SASS floating-point instructions executed per thread, by precision; an FMA is two FLOPs.
# They do not count tensor-core (MMA) instructions.
PRECISIONS = {"fp32": "f", "fp64": "d", "fp16": "h"}
FLOP_WEIGHTS = {"add": 1, "mul": 1, "fma": 2}


def _flop_counter(prefix, operation):
    return f"sm__sass_thread_inst_executed_op_{prefix}{operation}_pred_on.sum"


FLOP_COUNTERS = {
    precision: {_flop_counter(prefix, operation): weight for operation, weight in FLOP_WEIGHTS.items()}
    for precision, prefix in PRECISIONS.items()
}
METRICS = (DRAM_READ, DRAM_WRITE, DURATION, *(name for counters in FLOP_COUNTERS.values() for name in counters))
DEFAULT_LAUNCH_COUNT = 400
DEFAULT_TIMEOUT = 600
NOT_PERMITTED = "ERR_NVGPUCTRPERM"
NOT_PERMITTED_REASON = (
    "ncu ran, but this host does not let the user read the GPU performance counters (ERR_NVGPUCTRPERM): "
    "load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0, or run the cell as root"
)
# Unit prefixes ncu prints (SI, as with --print-units auto); base units carry none.
_SCALES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_BASE_UNITS = ("byte", "second", "inst", "cycle")


class NcuError(Exception):
    """ncu gave no usable counters; the message is the reason the profile records."""


class NcuKernel(NamedTuple):
    name: str
    duration_s: float
    dram_read_bytes: float
    dram_write_bytes: float
    flops: dict  # {precision: FLOPs}


class NcuReport(NamedTuple):
    kernels: list  # NcuKernel per profiled kernel launch, in launch order
    duration_s: float
    dram_read_bytes: float
    dram_write_bytes: float
    flops: dict  # {precision: FLOPs} over every kernel

    @property
    def total_flops(self):
        return sum(self.flops.values())


def find_ncu(path=None, fallback_dirs=None):
    """The ncu executable on PATH (or ``path``), else in the CUDA toolkit's bin folder; None when absent."""
    fallback_dirs = FALLBACK_DIRS if fallback_dirs is None else fallback_dirs
    found = shutil.which("ncu", path=path)
    if found:
        return found
    for folder in fallback_dirs:
        candidate = os.path.join(folder, "ncu")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_command(ncu, program, log_file, launch_count=DEFAULT_LAUNCH_COUNT):
    """argv that runs ``program`` (an argv) under ncu: the DRAM, duration and FLOP counters of at most
    ``launch_count`` kernels launched between cudaProfilerStart and cudaProfilerStop, as raw CSV in
    base units into ``log_file``. Clocks are left as the driver runs them (the peaks are measured so)."""
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(METRICS),
        "--profile-from-start",
        "off",
        "--launch-count",
        str(launch_count),
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--log-file",
        str(log_file),
        *map(str, program),
    ]


def _scale(unit):
    unit = unit.strip()
    for base in _BASE_UNITS:
        if unit.endswith(base):
            prefix = unit[: -len(base)]
            if prefix in _SCALES:
                return _SCALES[prefix]
    if unit in ("", "%"):
        return 1.0
    raise NcuError(f"ncu CSV: unit {unit!r} is not one this parser knows (expected byte, second or inst)")


def _number(text, scale):
    text = text.strip().replace(",", "")
    if text in ("", "n/a"):
        return 0.0
    try:
        return float(text) * scale
    except ValueError:
        raise NcuError(f"ncu CSV: {text!r} is not a number") from None


def parse_csv(text):
    """NcuReport from ncu's raw-page CSV (``--csv --page raw``); ncu's own ``==PROF==`` lines are skipped.

    Raises NcuError with the reason when ncu reported no counters."""
    if NOT_PERMITTED in text:
        raise NcuError(NOT_PERMITTED_REASON)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        errors = [line for line in text.splitlines() if line.startswith("==ERROR==")]
        raise NcuError(
            "ncu profiled no kernel"
            + (f": {errors[0][len('==ERROR==') :].strip()}" if errors else " (did the section call cudaProfilerStart?)")
        )
    header, units, *kernels = rows
    column = {name: index for index, name in enumerate(header)}
    missing = [name for name in (DURATION, DRAM_READ, DRAM_WRITE) if name not in column]
    if missing:
        raise NcuError(f"ncu CSV has no column {', '.join(missing)}: was it run with ncu_command's --metrics?")
    name_column = column.get("Kernel Name", column.get("Function Name"))

    def value(row, metric):
        index = column.get(metric)
        return 0.0 if index is None or index >= len(row) else _number(row[index], _scale(units[index]))

    parsed = []
    for row in kernels:
        flops = {
            precision: sum(weight * value(row, counter) for counter, weight in counters.items())
            for precision, counters in FLOP_COUNTERS.items()
        }
        parsed.append(
            NcuKernel(
                name=row[name_column] if name_column is not None else "",
                duration_s=value(row, DURATION),
                dram_read_bytes=value(row, DRAM_READ),
                dram_write_bytes=value(row, DRAM_WRITE),
                flops=flops,
            )
        )
    return NcuReport(
        kernels=parsed,
        duration_s=sum(kernel.duration_s for kernel in parsed),
        dram_read_bytes=sum(kernel.dram_read_bytes for kernel in parsed),
        dram_write_bytes=sum(kernel.dram_write_bytes for kernel in parsed),
        flops={precision: sum(kernel.flops[precision] for kernel in parsed) for precision in FLOP_COUNTERS},
    )


def profile_program(program, env=None, launch_count=DEFAULT_LAUNCH_COUNT, timeout=DEFAULT_TIMEOUT, ncu=None):
    """(NcuReport, None) for ``program`` run under ncu, or (None, why not): never raises for ncu's sake."""
    ncu = ncu or find_ncu()
    if ncu is None:
        return None, "ncu (Nsight Compute) is not installed: not on PATH, nor in " + ", ".join(FALLBACK_DIRS)
    with tempfile.TemporaryDirectory(prefix="platbench-ncu-") as folder:
        log_file = os.path.join(folder, "ncu.csv")
        command = ncu_command(ncu, program, log_file, launch_count)
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None, f"ncu did not finish the profiled section within {timeout} s"
        except OSError as error:
            return None, f"ncu could not start: {error}"
        try:
            with open(log_file, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            text = ""
        if NOT_PERMITTED in text + done.stdout + done.stderr:
            return None, NOT_PERMITTED_REASON
        try:
            return parse_csv(text), None
        except NcuError as error:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] if done.returncode else []
            return None, str(error) + (f" (ncu exit {done.returncode}: {tail[0]})" if tail else "")
