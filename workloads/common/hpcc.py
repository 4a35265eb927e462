"""One run of the HPC Challenge suite (Debian's ``hpcc``) and the figures of its output file.

hpcc reads ``hpccinf.txt`` (HPL's input format plus PTRANS sizes) from its working directory and
writes ``hpccoutf.txt`` there: per-test sections, then a ``Summary`` of ``key=value`` lines. Every
figure the micro-benchmarks report comes from that file, as hpcc printed it, except that a size HPL
solved several times (``solves``) reports the solves' combined rate (``combined_by_size``) and the best solve's
(``best_by_size``).

How we run it: one MPI process (P = Q = 1) whose BLAS runs ``threads`` threads
(OPENBLAS_NUM_THREADS = OMP_NUM_THREADS). HPL's panel factorisation is then serial and its
updates are the BLAS's threaded DGEMM/DTRSM. DGEMM, STREAM, RandomAccess and FFT are sized from
the largest HPL N (this build ignores hpccmemf.txt), so the largest N sets the whole run's length.

Stdlib only.
"""

import math
import os
import re
import shutil
import tempfile
from typing import NamedTuple

from . import tools
from .harness import WorkloadFailed
from .record import metric

# NB, HPL's block size: 192 beat 128 and 256 at N = 4000 and 8000 on the 2-core Sapphire Rapids
# development guest (OpenBLAS 0.3.21, pthread, SkylakeX kernels); --hpl-nb changes it.
DEFAULT_NB = 192
INPUT_FILE = "hpccinf.txt"
OUTPUT_FILE = "hpccoutf.txt"
DOUBLE_BYTES = 8
# HPL's matrix may take this share of the instance's memory: the rest is the OS, the page cache,
# hpcc's other tests' buffers and, in a container or guest, what the platform itself holds.
MEMORY_FRACTION = 0.5
GB = 1e9
# hpcc's own sections besides HPL (RandomAccess, FFT, PTRANS...) take about as long as HPL again on
# small N; the bound is generous so that only a hung run trips it.
TIMEOUT_BASE_S = 600
# HPL reads at most this many problem sizes from its input file (HPL_MAX_PARAM in its hpl_ptest.h); a size
# solved several times counts once per solve.
MAX_HPL_PROBLEMS = 20
TIMEOUT_MIN_GFLOPS_PER_THREAD = 1.0

# HPL's input lines after the sizes and block sizes are those of Debian's example file, which
# are HPL's usual defaults (right-looking, Crout recursion, 1-ring modified broadcast, depth 1).
_INPUT_TEMPLATE = """\
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
{count}            # of problems sizes (N)
{sizes}         Ns
1            # of NBs
{nb}          NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
1            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""

# One HPL result: "WR11C2R4  2000  192  1  1  0.12  4.343e+01", then its residual line
# "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=  0.0035020 ...... PASSED".
_HPL_RESULT = re.compile(
    r"^(?P<variant>W[RC]\w+)\s+(?P<n>\d+)\s+(?P<nb>\d+)\s+(?P<p>\d+)\s+(?P<q>\d+)\s+"
    r"(?P<time>[-+.\deE]+)\s+(?P<gflops>[-+.\deE]+)\s*$"
)
_HPL_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|\S*=\s*(?P<residual>[-+.\deE]+)\s+\.+\s+(?P<check>PASSED|FAILED)\s*$")
_SUMMARY_LINE = re.compile(r"^(?P<key>[A-Za-z_][\w]*)=(?P<value>.*)$")


class HplResult(NamedTuple):
    n: int
    nb: int
    p: int
    q: int
    time: float  # seconds, as printed (two decimals)
    gflops: float
    variant: str  # HPL's encoded variant, e.g. WR11C2R4
    residual: float | None  # the scaled residual; None when hpcc printed no check line for it
    check: str | None  # PASSED, FAILED, or None when missing


class HpccOutput(NamedTuple):
    hpl: list  # HplResult per HPL problem size, in the order hpcc ran them
    summary: dict  # the Summary section: key -> value text, as printed

    def number(self, key):
        """The Summary value ``key`` as a float; WorkloadFailed when it is absent or not a number."""
        text = self.summary.get(key)
        try:
            return float(text)
        except (TypeError, ValueError):
            raise WorkloadFailed(
                f"{OUTPUT_FILE} has no numeric {key} in its Summary section (found {text!r})"
            ) from None

    @property
    def version(self):
        """hpcc's version as its Summary gives it: VersionMajor.Minor.Micro + Release, e.g. 1.5.0f."""
        parts = [self.summary.get(f"Version{part}") for part in ("Major", "Minor", "Micro")]
        if None in parts:
            return None
        return ".".join(parts) + self.summary.get("VersionRelease", "")


def input_text(sizes, nb=DEFAULT_NB):
    """The hpccinf.txt of one run over HPL problem sizes ``sizes`` with block size ``nb`` on a 1 x 1 grid."""
    return _INPUT_TEMPLATE.format(count=len(sizes), sizes=" ".join(str(size) for size in sizes), nb=nb)


def solve_list(sizes, solves=1):
    """HPL's list of problems for ``sizes``, each solved ``solves`` times in a row; ValueError past HPL's limit."""
    problems = [size for size in sizes for _ in range(solves)]
    if len(problems) > MAX_HPL_PROBLEMS:
        raise ValueError(
            f"{len(sizes)} HPL size(s) x {solves} solve(s) = {len(problems)} problems, more than the "
            f"{MAX_HPL_PROBLEMS} HPL reads from one input file: give fewer sizes or solves"
        )
    return problems


def combined_by_size(results):
    """{N: (GFLOP/s, mean seconds)} over the HPL results of each size, in the order the sizes first ran.

    Every solve of one N does the same work, so the combined rate is the total work over the total time:
    the harmonic mean of the printed rates. It uses the rates, printed to four digits, not the times,
    printed to hundredths (a small N solves in under 0.1 s)."""
    by_size = {}
    for result in results:
        by_size.setdefault(result.n, []).append(result)
    return {
        n: (len(solves) / sum(1 / solve.gflops for solve in solves), sum(solve.time for solve in solves) / len(solves))
        for n, solves in by_size.items()
    }


def best_by_size(results):
    """{N: GFLOP/s} of each size's fastest solve, in the order the sizes first ran: HPL's usual figure (a system's
    Rmax is its best run). A burst of load that slows some of a size's solves lowers their combined rate, and leaves
    the best one alone as long as one solve escaped it."""
    best = {}
    for result in results:
        best[result.n] = max(best.get(result.n, result.gflops), result.gflops)
    return best


def parse_output(text):
    """HpccOutput of an hpccoutf.txt's text: the HPL table's results and the Summary section."""
    hpl = []
    summary = {}
    in_summary = False
    for raw in text.splitlines():
        line = raw.strip()
        if line == "Begin of Summary section.":
            in_summary = True
            continue
        if line == "End of Summary section.":
            in_summary = False
            continue
        if in_summary:
            match = _SUMMARY_LINE.match(line)
            if match:
                summary[match.group("key")] = match.group("value").strip()
            continue
        match = _HPL_RESULT.match(line)
        if match:
            hpl.append(
                HplResult(
                    n=int(match.group("n")),
                    nb=int(match.group("nb")),
                    p=int(match.group("p")),
                    q=int(match.group("q")),
                    time=float(match.group("time")),
                    gflops=float(match.group("gflops")),
                    variant=match.group("variant"),
                    residual=None,
                    check=None,
                )
            )
            continue
        match = _HPL_RESIDUAL.match(line)
        if match and hpl and hpl[-1].check is None:
            hpl[-1] = hpl[-1]._replace(residual=float(match.group("residual")), check=match.group("check"))
    return HpccOutput(hpl, summary)


def check_output(output, sizes, solves=1):
    """WorkloadFailed unless every size in ``sizes`` has ``solves`` HPL results, each with a positive rate and
    a residual check that PASSED, and the Summary says Success=1 (and no Failure other than 0)."""
    if not output.summary:
        raise WorkloadFailed(f"{OUTPUT_FILE} has no Summary section: hpcc stopped before the end of its tests")
    failure = output.summary.get("Failure")
    if output.summary.get("Success") != "1" or failure not in (None, "0"):
        raise WorkloadFailed(
            f"hpcc reports a failed run in {OUTPUT_FILE}: Success={output.summary.get('Success')}"
            + (f", Failure={failure}" if failure is not None else "")
        )
    for result in output.hpl:
        if result.check != "PASSED":
            raise WorkloadFailed(
                f"HPL at N={result.n} failed its residual check: {result.check or 'no check line'}"
                + (f" (scaled residual {result.residual})" if result.residual is not None else "")
            )
        if result.gflops <= 0:
            raise WorkloadFailed(f"HPL at N={result.n} printed a rate of {result.gflops} GFLOP/s")
    missing = sorted(set(sizes) - {result.n for result in output.hpl})
    if missing:
        raise WorkloadFailed(f"{OUTPUT_FILE} has no HPL result for N={', '.join(map(str, missing))}")
    solved = [result.n for result in output.hpl]
    counts = {size: solved.count(size) for size in sizes}
    short = [f"N={size} {count} of {solves}" for size, count in counts.items() if count < solves]
    if short:
        raise WorkloadFailed(f"{OUTPUT_FILE} has fewer HPL solves than asked: {', '.join(short)}")


def matrix_bytes(n):
    """Bytes of HPL's N x N double matrix, the bulk of its memory."""
    return n * n * DOUBLE_BYTES


def instance_memory(environment):
    """Bytes this instance may use: its cgroup memory limit where it has one, else MemTotal (what
    probe_environment read); None when neither could be read."""
    limits = [environment.get(key) for key in ("memory_limit_bytes", "memory_total_bytes")]
    limits = [limit for limit in limits if isinstance(limit, int) and limit > 0]
    return min(limits) if limits else None


def describe_memory(environment):
    limit, total = environment.get("memory_limit_bytes"), environment.get("memory_total_bytes")
    if isinstance(limit, int) and (not isinstance(total, int) or limit < total):
        return f"a memory limit of {limit / GB:.1f} GB (cgroup)"
    return f"{total / GB:.1f} GB of memory (MemTotal)"


def largest_fitting_n(memory_bytes, fraction=MEMORY_FRACTION):
    """The largest N whose matrix fits in ``fraction`` of ``memory_bytes``, rounded down to 1000 above 1000."""
    n = math.isqrt(int(memory_bytes * fraction) // DOUBLE_BYTES)
    return n - n % 1000 if n >= 1000 else n


def size_problem(option, n, environment, fraction=MEMORY_FRACTION):
    """Why problem size ``n`` (given as ``option``) cannot run on this instance, or None when it fits."""
    memory = instance_memory(environment)
    if memory is None or matrix_bytes(n) <= memory * fraction:
        return None
    return (
        f"{option} {n} needs {matrix_bytes(n) / GB:.1f} GB for its matrix ({n}^2 doubles), more than "
        f"{fraction:.0%} of this instance's {describe_memory(environment)}; "
        f"pick N <= {largest_fitting_n(memory, fraction)}"
    )


def stream_metrics(output):
    """stream_copy/scale/add/triad of one run: hpcc's SingleSTREAM figures, GB/s (10^9 bytes) as printed.

    Single: one process on one CPU while the others idle; this build has no OpenMP, so STREAM is
    single-threaded whatever the BLAS threads (the Summary's STREAM_Threads says so)."""
    return [
        metric("stream_copy", output.number("SingleSTREAM_Copy"), "GB/s"),
        metric("stream_scale", output.number("SingleSTREAM_Scale"), "GB/s"),
        metric("stream_add", output.number("SingleSTREAM_Add"), "GB/s"),
        metric("stream_triad", output.number("SingleSTREAM_Triad"), "GB/s"),
    ]


# Summary figures kept in the record's metadata: what sized the tests and hpcc's other results.
SUMMARY_METADATA_KEYS = (
    "CommWorldProcs",
    "HPL_Tflops",
    "DGEMM_N",
    "STREAM_VectorSize",
    "STREAM_Threads",
    "StarSTREAM_Copy",
    "StarSTREAM_Scale",
    "StarSTREAM_Add",
    "StarSTREAM_Triad",
    "PTRANS_GBs",
    "MPIRandomAccess_GUPs",
    "StarRandomAccess_GUPs",
    "SingleRandomAccess_GUPs",
    "MPIFFT_Gflops",
    "StarFFT_Gflops",
    "SingleFFT_Gflops",
    "M_OPENMP",
)


def run_metadata(output, nb):
    """The record's metadata of one run: hpcc's version, the HPL runs as printed, sizes and other figures."""
    return {
        "hpcc_version": output.version,
        "hpl_nb": nb,
        "hpl_runs": [result._asdict() for result in output.hpl],
        "hpcc_summary": {key: output.summary[key] for key in SUMMARY_METADATA_KEYS if key in output.summary},
    }


def timeout_for(sizes, threads):
    """A bound on one run: HPL's 2/3 N^3 flops per size at a pessimistic rate, plus the other tests."""
    flops = sum(2 / 3 * size**3 for size in sizes)
    return TIMEOUT_BASE_S + 2 * flops / (TIMEOUT_MIN_GFLOPS_PER_THREAD * 1e9 * threads)


def run_environment(threads):
    """hpcc's environment: the BLAS's threads, and Open MPI's consent to run as root (containers, guests)."""
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[name] = str(threads)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run(sizes, threads, nb=DEFAULT_NB, hpcc_path=None, keep_output=None, solves=1):
    """(HpccOutput, output text): one hpcc run over HPL sizes ``sizes``, each solved ``solves`` times, in a
    temporary directory, checked (check_output). ``keep_output``: a path to copy hpccoutf.txt to (for
    fixtures, debugging)."""
    hpcc_path = hpcc_path or tools.require(["hpcc"])["hpcc"]
    try:
        problems = solve_list(sizes, solves)
    except ValueError as error:
        raise WorkloadFailed(str(error)) from None
    with tempfile.TemporaryDirectory(prefix="platbench-hpcc-") as workdir:
        with open(os.path.join(workdir, INPUT_FILE), "w", encoding="utf-8") as handle:
            handle.write(input_text(problems, nb))
        done = tools.run([hpcc_path], timeout=timeout_for(problems, threads), cwd=workdir, env=run_environment(threads))
        output_path = os.path.join(workdir, OUTPUT_FILE)
        try:
            with open(output_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as error:
            raise WorkloadFailed(
                f"hpcc wrote no {OUTPUT_FILE} in {workdir}: {error}; its output: "
                + (tools.output_tail(done.stderr) or tools.output_tail(done.stdout) or "none")
            ) from None
        if keep_output:
            shutil.copyfile(output_path, keep_output)
    output = parse_output(text)
    check_output(output, sizes, solves)
    return output, text


def linked_library(binary, soname, ldd_output=None):
    """The real file behind ``soname`` that ``binary`` loads (ldd, then symlinks and alternatives resolved)."""
    if ldd_output is None:
        ldd_output = tools.run(["ldd", binary], timeout=30).stdout
    for line in ldd_output.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if arrow and name == soname:
            path = rest.split(" (")[0].strip()
            return os.path.realpath(path) if path and path != "not found" else None
    return None


def blas_name(library_path):
    """A short name of the BLAS behind libblas.so.3: Debian installs each under a folder of its
    own (openblas-pthread, openblas-openmp, blis-pthread, atlas...); the netlib reference is 'blas'."""
    if library_path is None:
        return None
    folder = os.path.basename(os.path.dirname(library_path))
    return "reference" if folder == "blas" else folder


def openblas_core(library_path):
    """The CPU kernel set OpenBLAS picked at load time (SkylakeX, Haswell...), or None for another
    BLAS: a guest whose CPUID hides AVX-512 gets slower kernels, which explains its HPL."""
    import ctypes

    try:
        library = ctypes.CDLL(library_path)
        corename = library.openblas_get_corename
    except (OSError, AttributeError, TypeError):
        return None
    corename.restype = ctypes.c_char_p
    return corename().decode(errors="replace")


def blas_metadata(hpcc_path):
    """metadata of the BLAS hpcc runs with: blas (short name), blas_library (real path), blas_core."""
    library = linked_library(hpcc_path, "libblas.so.3")
    return {
        "blas": blas_name(library),
        "blas_library": library,
        "blas_core": openblas_core(library) if library else None,
    }
