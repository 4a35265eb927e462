"""Command line and result record of micro_cpu: HPL, DGEMM and STREAM from one HPC Challenge run, or HPCG.

--suite hpcc runs Debian's ``hpcc`` once over the HPL problem sizes (one MPI process, the BLAS on
--threads threads) and reports, parsed from its output file:

- ``hpl_gflops`` and ``hpl_time`` per problem size (labels ``hpl_n``): with ``--hpl-solves K`` HPL solves each
  size K times in the run, and they are the K solves' combined rate and mean time; ``hpl_gflops_best`` per size is
  the fastest solve's rate (with one solve, that solve's);
- ``dgemm_gflops`` (SingleDGEMM) and ``star_dgemm_gflops`` (StarDGEMM);
- ``stream_copy``/``scale``/``add``/``triad`` (SingleSTREAM, GB/s).

As a duet pair's side (schedule: duet) it waits at the pair's start line (common/duet.py) before it starts hpcc,
so that both sides' hpcc runs begin together; ``metadata.duet_start`` holds the wait.

It adds the GEMM peak the training workloads measure, in fp64 because HPL is fp64 (``gemm_peak_fp64``:
torch, this process's threads, cached per scenario like theirs), and ``hpl_gemm_ratio`` per size: the ratio
of two measured figures, HPL's GFLOP/s over that peak (computed here, as is the combined rate of several
solves). It grows
with N: one process factorises each panel serially, a share of the work that falls as N grows.

--suite hpcg runs HPCG (``xhpcg``, built from the upstream release by platbench.lab.micro_tools: no
distribution packages it) and reports its GFLOP/s rating; where it is not installed, the record is
skipped with the reason.
"""

import time

from ..common import duet, hpcc, tools
from ..common.args import positive_int, positive_int_list
from ..common.harness import Outcome, Terminated, WorkloadFailed, WorkloadSkipped, attempt, error_line
from ..common.record import metric
from ..common.workload import Workload
from . import hpcg

WORKLOAD = "micro_cpu"
SUITES = ("hpcc", "hpcg")
# Xu et al. ran HPL from N = 2,000 to 45,000; "auto" takes those whose matrix fits the instance.
STUDY_HPL_SIZES = (2000, 5000, 10000, 15000, 20000, 30000, 45000)


def hpl_sizes(text):
    """--hpl-n: "auto" or comma-separated positive sizes, e.g. 2000,5000 (given order, each once)."""
    if text.strip() == "auto":
        return "auto"
    return positive_int_list(text, "positive integers (or auto)", "2000,5000")


def _arguments(parser):
    add = parser.add_argument
    add("--suite", choices=SUITES, default="hpcc", help="hpcc: HPL, DGEMM, STREAM (default); hpcg: HPCG's rating")
    add(
        "--hpl-n",
        type=hpl_sizes,
        default="auto",
        metavar="auto|N1,N2,...",
        help="HPL problem sizes of the hpcc run; auto (default): the study's sizes "
        f"{', '.join(map(str, STUDY_HPL_SIZES))} whose N x N matrix of doubles fits in "
        f"{hpcc.MEMORY_FRACTION:.0%}% of the instance's memory (its cgroup limit, else MemTotal). The largest N "
        "also sizes hpcc's DGEMM, STREAM, RandomAccess and FFT, and so the run's length",
    )
    add(
        "--hpl-solves",
        type=positive_int,
        default=1,
        help="how many times HPL solves each size in the one hpcc run (default 1); hpl_gflops is the solves' "
        "combined rate, their total work over their total time. A small N solves in under 0.1 s, and one "
        f"solve's rate moves by percents from the next's. At most {hpcc.MAX_HPL_PROBLEMS} sizes x solves",
    )
    add("--hpl-nb", type=positive_int, default=hpcc.DEFAULT_NB, help=f"HPL block size NB (default {hpcc.DEFAULT_NB})")
    add(
        "--hpcg-size",
        type=hpcg.grid_size,
        default=hpcg.DEFAULT_SIZE,
        help=f"HPCG's local grid nx = ny = nz, a multiple of 8 >= 16 (default {hpcg.DEFAULT_SIZE})",
    )
    add(
        "--hpcg-seconds",
        type=positive_int,
        default=hpcg.DEFAULT_SECONDS,
        help=f"HPCG's timed run in seconds (default {hpcg.DEFAULT_SECONDS}; an official rating needs 1800)",
    )


def _validate(parser, args, _allowed_cpus):
    # Given sizes are known here; "auto" ones only on the instance (run start checks them there).
    if args.suite == "hpcc" and args.hpl_n != "auto":
        try:
            hpcc.solve_list(args.hpl_n, args.hpl_solves)
        except ValueError as error:
            parser.error(f"--hpl-n with --hpl-solves: {error}")


def resolve_hpl_sizes(requested, environment):
    """(sizes, how they were chosen): "auto" filtered to the instance's memory, or the given sizes if they
    fit; WorkloadFailed saying which size does not fit and the largest that would."""
    memory = hpcc.instance_memory(environment)
    if requested != "auto":
        for size in requested:
            problem = hpcc.size_problem("--hpl-n", size, environment)
            if problem is not None:
                raise WorkloadFailed(problem)
        return list(requested), "--hpl-n"
    if memory is None:
        raise WorkloadFailed(
            "--hpl-n auto needs the instance's memory, and neither a cgroup limit nor MemTotal could be read: "
            "give --hpl-n sizes"
        )
    sizes = [size for size in STUDY_HPL_SIZES if hpcc.size_problem("--hpl-n", size, environment) is None]
    if not sizes:
        raise WorkloadFailed(
            f"--hpl-n auto: not even the study's smallest size {STUDY_HPL_SIZES[0]} fits in "
            f"{hpcc.MEMORY_FRACTION:.0%} of this instance's {hpcc.describe_memory(environment)}; "
            f"give --hpl-n sizes <= {hpcc.largest_fitting_n(memory)}"
        )
    share = f"{hpcc.MEMORY_FRACTION:.0%} of {hpcc.describe_memory(environment)}"
    return sizes, f"auto: the study's sizes whose matrix fits in {share}"


def _hpcc_body(args, run):
    sizes, chosen = resolve_hpl_sizes(args.hpl_n, run.metadata)
    hpcc_path = tools.require(["hpcc"])["hpcc"]
    run.metadata.update(
        hpl_sizes=sizes,
        hpl_sizes_chosen=chosen,
        tool_versions=tools.versions(["hpcc"]),
        **hpcc.blas_metadata(hpcc_path),
    )
    pair = duet.pair_from_env()
    if pair is not None:
        # A duet pair's sides start hpcc together: its tests run in one order, so their HPL solves then overlap.
        run.metadata["duet_start"] = duet.start_line(*pair)
    started = time.perf_counter()
    output, _ = hpcc.run(sizes, args.threads, args.hpl_nb, hpcc_path, solves=args.hpl_solves)
    run.metadata.update(
        hpcc.run_metadata(output, args.hpl_nb),
        hpl_solves=args.hpl_solves,
        hpcc_seconds=round(time.perf_counter() - started, 3),
    )
    hpl = hpcc.combined_by_size(output.hpl)
    best = hpcc.best_by_size(output.hpl)
    metrics = []
    for n, (gflops, seconds) in hpl.items():
        metrics += [
            metric("hpl_gflops", gflops, "GFLOP/s", {"hpl_n": n}),
            metric("hpl_gflops_best", best[n], "GFLOP/s", {"hpl_n": n}),
            metric("hpl_time", seconds, "s", {"hpl_n": n}),
        ]
    metrics += [
        metric("dgemm_gflops", output.number("SingleDGEMM_Gflops"), "GFLOP/s"),
        metric("star_dgemm_gflops", output.number("StarDGEMM_Gflops"), "GFLOP/s"),
        *hpcc.stream_metrics(output),
    ]
    peak_gflops = _fp64_peak_gflops(args, run.metadata)
    if peak_gflops is not None:
        metrics.append(metric("gemm_peak_fp64", peak_gflops, "GFLOP/s"))
        # A ratio of two measured figures (hpcc's HPL rate, the GEMM peak).
        metrics += [
            metric("hpl_gemm_ratio", gflops / peak_gflops, "ratio", {"hpl_n": n}) for n, (gflops, _) in hpl.items()
        ]
    return Outcome(metrics)


def _fp64_peak_gflops(args, metadata):
    """The fp64 GEMM peak in GFLOP/s (--peak-gflops when given; 0: none), or None with the reason in metadata."""
    if args.peak_gflops is not None:
        if args.peak_gflops == 0:
            metadata["gemm_peak_reason"] = "--peak-gflops 0"
            return None
        metadata["peak_source"] = "--peak-gflops"
        return args.peak_gflops
    peak, error = attempt(_measure_fp64_peak, args.threads, metadata)
    if isinstance(error, Terminated):
        raise error
    if error is not None:
        metadata["gemm_peak_reason"] = f"measuring the fp64 GEMM peak failed: {error_line(error)}"
        return None
    return peak


def _measure_fp64_peak(threads, metadata):
    """The training workloads' GEMM peak (common.peak: torch's faster of mm and a 1x1 convolution, cached
    per scenario), in float64 on this process's threads."""
    import torch  # after set_thread_env: its OpenMP pool reads the variables when it loads

    from ..common import peak

    torch.set_num_threads(threads)
    flops, provenance = peak.gemm_peak(
        lambda: peak.measure_best(peak.framework_gemms("torch", "float64", "cpu")),
        "torch",
        torch.__version__,
        "float64",
        "cpu",
        threads,
        metadata,
    )
    metadata.update(provenance, peak_framework=f"torch {torch.__version__}")
    return flops / 1e9


def _hpcg_body(args, run):
    path = hpcg.find()
    if path is None:
        raise WorkloadSkipped(hpcg.NOT_INSTALLED)
    run.metadata.update(hpcg_path=path, tool_versions=tools.versions(["xhpcg"]))
    result = hpcg.run(path, args.hpcg_size, args.hpcg_seconds, args.threads)
    run.metadata.update(hpcg=result.summary_metadata())
    return Outcome([metric("hpcg_gflops", result.gflops, "GFLOP/s")])


def _body(args, run):
    return (_hpcc_body if args.suite == "hpcc" else _hpcg_body)(args, run)


SPEC = Workload(
    name=WORKLOAD,
    description="CPU micro-benchmarks of Xu et al. (2017): HPL, DGEMM and STREAM from one HPC Challenge run "
    "(Debian's hpcc), against the fp64 GEMM peak of this process, or HPCG; prints one PLATBENCH_RESULT line.",
    arguments=_arguments,
    own_labels=lambda args: {"suite": args.suite},
    body=_body,
    validate=_validate,
    not_checked="--threads against the CPUs, and --hpl-n against the memory of the instance that runs the job",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
