"""Command line and result record of micro_mem: memory bandwidth and latency.

- Bandwidth: ``stream_copy``/``scale``/``add``/``triad`` (GB/s), hpcc's SingleSTREAM figures parsed from
  its output file. hpcc sizes its STREAM arrays from the largest HPL problem size (N^2/3 doubles
  each; hpccmemf.txt is not honoured by Debian's build), so the run's one HPL size --stream-n is what
  makes the arrays larger than the caches: 8000 gives three arrays of 171 MB.
- Latency: ``mem_latency`` (ns per dependent load) of a pointer chase per working set (labels
  ``working_set_mb``, MiB): one chain, so one thread, whatever --threads says (common/chase.py).
"""

import os
import time

from ..common import hpcc, tools
from ..common.args import non_negative_int, positive_int_list
from ..common.harness import Outcome, WorkloadFailed
from ..common.record import metric
from ..common.workload import Workload

WORKLOAD = "micro_mem"
DEFAULT_STREAM_N = 8000
DEFAULT_CHASE_MB = (1, 16, 256, 1024)  # L2, L3, then DRAM-sized working sets on current servers


def working_sets(text):
    """--chase-mb: comma-separated positive sizes in MiB, e.g. 1,16,256 (given order, each once)."""
    return positive_int_list(text, "positive sizes in MiB", "1,16,256")


def _arguments(parser):
    add = parser.add_argument
    add(
        "--stream-n",
        type=non_negative_int,
        help=f"the HPL size of the hpcc run, which sizes its STREAM arrays (N^2/3 doubles each); default "
        f"{DEFAULT_STREAM_N}, or the largest whose matrix fits in {hpcc.MEMORY_FRACTION:.0%}% of the instance's "
        "memory; 0: no hpcc run, latency only",
    )
    add(
        "--chase-mb",
        type=working_sets,
        default=list(DEFAULT_CHASE_MB),
        metavar="MB1,MB2,...",
        help=f"working sets of the pointer chase in MiB (default {','.join(map(str, DEFAULT_CHASE_MB))})",
    )


def resolve_stream_n(requested, environment):
    """The hpcc run's N: --stream-n if it fits (else WorkloadFailed), or the default capped by the memory."""
    if requested is not None:
        problem = hpcc.size_problem("--stream-n", requested, environment) if requested else None
        if problem is not None:
            raise WorkloadFailed(problem)
        return requested
    memory = hpcc.instance_memory(environment)
    return DEFAULT_STREAM_N if memory is None else min(DEFAULT_STREAM_N, hpcc.largest_fitting_n(memory))


def check_working_sets(sizes_mb, environment):
    """WorkloadFailed when a chase's array would take more than the memory share HPL's matrix may."""
    from ..common.chase import MIB

    memory = hpcc.instance_memory(environment)
    for size in sizes_mb:
        if memory is not None and size * MIB > memory * hpcc.MEMORY_FRACTION:
            raise WorkloadFailed(
                f"--chase-mb {size} needs {size * MIB / hpcc.GB:.1f} GB, more than {hpcc.MEMORY_FRACTION:.0%} of "
                f"this instance's {hpcc.describe_memory(environment)}; pick sizes <= "
                f"{int(memory * hpcc.MEMORY_FRACTION // MIB)} MiB"
            )


def _measure(args, run):
    os.environ["NUMBA_NUM_THREADS"] = "1"  # the chase is one dependent chain: one thread (numba reads it on import)
    stream_n = resolve_stream_n(args.stream_n, run.metadata)
    check_working_sets(args.chase_mb, run.metadata)
    metrics = []
    run.metadata["stream_n"] = stream_n
    if stream_n:
        hpcc_path = tools.require(["hpcc"])["hpcc"]
        run.metadata.update(tool_versions=tools.versions(["hpcc"]), **hpcc.blas_metadata(hpcc_path))
        started = time.perf_counter()
        output, _ = hpcc.run([stream_n], args.threads, hpcc_path=hpcc_path)
        run.metadata.update(
            hpcc.run_metadata(output, hpcc.DEFAULT_NB), hpcc_seconds=round(time.perf_counter() - started, 3)
        )
        metrics += hpcc.stream_metrics(output)
    metrics += _chase(args, run.metadata)
    return Outcome(metrics)


def _chase(args, metadata):
    from ..common import chase  # numba and numpy after the thread variables

    compile_seconds = chase.compile_kernels()
    results = [chase.measure(size, seed=args.seed) for size in args.chase_mb]
    metadata["chase"] = {
        "threads": 1,
        "compile_seconds": round(compile_seconds, 3),
        "steps_per_pass": chase.TIMED_STEPS,
        "line_bytes": chase.LINE_BYTES,
        **chase.page_metadata(),
        "working_sets": [
            {
                "working_set_mb": result.working_set_mb,
                "passes_ns": [round(value, 3) for value in result.passes_ns],
                "build_seconds": round(result.build_seconds, 3),
            }
            for result in results
        ],
    }
    return [
        metric("mem_latency", result.ns_per_load, "ns", {"working_set_mb": result.working_set_mb}) for result in results
    ]


SPEC = Workload(
    name=WORKLOAD,
    description="Memory micro-benchmarks of Xu et al. (2017): STREAM bandwidth from an HPC Challenge run "
    "(Debian's hpcc) and the latency of a dependent-load pointer chase; prints one PLATBENCH_RESULT line.",
    arguments=_arguments,
    own_labels=lambda args: {},
    body=_measure,
    not_checked="--threads against the CPUs, and --stream-n and --chase-mb against the memory of the instance running "
    "the job",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
