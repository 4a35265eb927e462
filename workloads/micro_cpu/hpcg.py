"""HPCG: finding ``xhpcg``, one run, and the rating parsed from its report file.

No distribution packages HPCG. The role platbench.lab.micro_tools builds the pinned upstream
release from source (checksum verified) into /opt/platbench/hpcg/bin/xhpcg on hosts that can
download it (micro_tools_hpcg: true); elsewhere the run is skipped, never faked.

xhpcg reads ``hpcg.dat`` from its working directory (two header lines, the local grid
``nx ny nz``, the run time in seconds) and writes ``HPCG-Benchmark_<version>_<date>.txt``: a
flat ``Section::Key=value`` listing whose ``Final Summary`` gives the validity and the rating.

Stdlib only.
"""

import argparse
import glob
import os
import re
import shutil
import tempfile
from typing import NamedTuple

from ..common import hpcc, tools
from ..common.harness import WorkloadFailed

INSTALL_PATH = "/opt/platbench/hpcg/bin/xhpcg"
DEFAULT_SIZE = 104  # HPCG's own example grid: 104^3 points, about 1 GB with its multigrid levels
DEFAULT_SECONDS = 60
TIMEOUT_EXTRA_S = 900  # set-up, the reference run and validation before the timed run, on slow guests
NOT_INSTALLED = (
    "HPCG is not installed here: no distribution package exists; platbench.lab.micro_tools builds it from "
    f"the pinned upstream release into {INSTALL_PATH} on hosts that can download it (micro_tools_hpcg: true). "
    "Enable it where the release can be fetched, or leave --suite hpcg out of this platform's experiment"
)
_VALID = re.compile(r"^Final Summary::HPCG result is VALID with a GFLOP/s rating of=\s*(?P<gflops>[-+.\deE]+)\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[^=]+)=(?P<value>.*)$")
# The report's keys kept in the record: what ran, how big, and HPCG's own verdicts.
SUMMARY_KEYS = (
    "version",
    "Machine Summary::Distributed Processes",
    "Machine Summary::Threads per processes",
    "Global Problem Dimensions::Global nx",
    "Global Problem Dimensions::Global ny",
    "Global Problem Dimensions::Global nz",
    "Benchmark Time Summary::Total",
    "Final Summary::HPCG 2.4 rating for historical reasons is",
    "Final Summary::Results are valid but execution time (sec) is",
    "Final Summary::Official results execution time (sec) must be at least",
)


def grid_size(text):
    """--hpcg-size: HPCG's local grid edge, a multiple of 8 of at least 16 (its multigrid halves it 3 times)."""
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 16 or size % 8:
        raise argparse.ArgumentTypeError(f"expected a multiple of 8 of at least 16 (e.g. 32, 104), got {text!r}")
    return size


def find():
    """The path of xhpcg: on PATH, else where micro_tools installs it; None when neither has it."""
    on_path = shutil.which("xhpcg")
    if on_path:
        return on_path
    return INSTALL_PATH if os.access(INSTALL_PATH, os.X_OK) else None


class HpcgResult(NamedTuple):
    gflops: float
    fields: dict  # every Section::Key=value line of the report

    def summary_metadata(self):
        return {key: self.fields[key] for key in SUMMARY_KEYS if key in self.fields}


def parse_report(text):
    """HpcgResult of an HPCG report file; WorkloadFailed when HPCG did not call the result VALID."""
    fields = {}
    gflops = None
    for raw in text.splitlines():
        line = raw.strip()
        match = _VALID.match(line)
        if match:
            gflops = float(match.group("gflops"))
        match = _KEY_VALUE.match(line)
        if match:
            fields[match.group("key").strip()] = match.group("value").strip()
    if gflops is None:
        verdict = [f"{key}={value}" for key, value in fields.items() if key.startswith("Final Summary::")]
        raise WorkloadFailed(
            "HPCG did not report a VALID result: "
            + ("; ".join(verdict) if verdict else "its report has no Final Summary")
        )
    return HpcgResult(gflops, fields)


def input_text(size, seconds):
    return f"HPCG benchmark input file\nwritten by platbench micro_cpu\n{size} {size} {size}\n{seconds}\n"


def run(path, size, seconds, threads):
    """HpcgResult of one xhpcg run (one MPI process, ``threads`` OpenMP threads) in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="platbench-hpcg-") as workdir:
        with open(os.path.join(workdir, "hpcg.dat"), "w", encoding="utf-8") as handle:
            handle.write(input_text(size, seconds))
        done = tools.run([path], timeout=seconds * 2 + TIMEOUT_EXTRA_S, cwd=workdir, env=hpcc.run_environment(threads))
        reports = sorted(glob.glob(os.path.join(workdir, "HPCG-Benchmark*.txt")))
        if not reports:
            raise WorkloadFailed(
                f"xhpcg wrote no HPCG-Benchmark*.txt report in {workdir}; its output: "
                + (tools.output_tail(done.stdout) or tools.output_tail(done.stderr) or "none")
            )
        with open(reports[-1], encoding="utf-8", errors="replace") as handle:
            return parse_report(handle.read())
