"""One table of every metric a workload emits: its unit, which direction is better, its component.

The report reads it to sign Diff% (``better``) and to split the Diff% tables by component; it never
guesses a direction from a name. A workload that adds a metric adds its entry here (the test
tests/unit/test_metric_table.py fails otherwise). Stdlib only: workloads and the report import it.

- ``unit``: the unit the record gives; ``*`` stands for any text (``*/sec``: images/sec, samples/sec...).
- ``better``: ``"higher"``, ``"lower"``, or None for a descriptive figure (bytes, counts, a loss, a
  job's own FLOP count), which gets no Diff%.
- ``component``: one of COMPONENTS; the report writes one Diff% table per component.
"""

import fnmatch
from typing import NamedTuple

HIGHER = "higher"
LOWER = "lower"
DIRECTIONS = (HIGHER, LOWER, None)
COMPONENTS = ("training", "inference", "cpu", "memory", "disk", "gpu", "network", "profile")


class MetricInfo(NamedTuple):
    unit: str
    better: str | None
    component: str


def _entry(unit, better, component):
    return MetricInfo(unit, better, component)


# inference_e2e's phases (inference_e2e/phases.py): each timed per request; e2e is the three together.
INFERENCE_PHASES = ("pre", "inference", "post", "e2e")
INFERENCE_PHASE_STATISTICS = ("time", "p50", "p90")  # the total over the requests, and percentiles per request

# The statistics common.stats.step_time_metrics reports, and the prefixes the workloads give them.
STEP_STATISTICS = ("mean", "std", "p50", "p90", "min", "max")
STEP_TIME_PREFIXES = ("step_time", "batch_time_epoch1", "batch_time_later")

METRICS = {
    # Training (cnn_train, dl_tools, small_models): the job's own speed.
    "throughput": _entry("*/sec", HIGHER, "training"),
    "elapsed": _entry("s", LOWER, "training"),
    "startup": _entry("s", LOWER, "training"),
    "data_load": _entry("s", LOWER, "training"),
    "data_first_batch": _entry("s", LOWER, "training"),
    "epoch_time": _entry("s", LOWER, "training"),
    "epoch1_time": _entry("s", LOWER, "training"),
    "search_time": _entry("s", LOWER, "training"),
    **{
        f"{prefix}_{statistic}": _entry("s", LOWER, "training")
        for prefix in STEP_TIME_PREFIXES
        for statistic in STEP_STATISTICS
    },
    # A distributed cell's network path, measured before it trains (platbench.lab.network_path_measure).
    "path_throughput": _entry("Gbit/s", HIGHER, "network"),
    "path_rtt": _entry("ms", LOWER, "network"),
    "path_mtu": _entry("bytes", None, "network"),
    # A shared cell (Lin 2018): how much longer the foreground took beside the background than alone, in %.
    "degradation": _entry("%", LOWER, "training"),
    # Loss values: the same job learns the same on every platform; not a speed.
    "loss_first": _entry("loss", None, "training"),
    "loss_last": _entry("loss", None, "training"),
    # The process's CPU times (small_models), as `time` reports them.
    "user_time": _entry("s", LOWER, "cpu"),
    "system_time": _entry("s", LOWER, "cpu"),
    "epoch_user_time": _entry("s", LOWER, "cpu"),
    "epoch_system_time": _entry("s", LOWER, "cpu"),
    # FLOP accounting (common/flops.py): the job's count is descriptive, what it achieved is a speed.
    "model_flops": _entry("GFLOP/sample", None, "profile"),
    "achieved_flops": _entry("GFLOP/s", HIGHER, "profile"),
    "peak_flops": _entry("GFLOP/s", HIGHER, "profile"),
    "mfu": _entry("ratio", HIGHER, "profile"),
    # Roofline (common/roofline.py): the measured roofs of the device, the job's intensity.
    "roofline_arithmetic_intensity": _entry("FLOP/B", None, "profile"),
    "roofline_peak_flops": _entry("FLOP/s", HIGHER, "profile"),
    "roofline_peak_bandwidth": _entry("B/s", HIGHER, "profile"),
    "roofline_attainable_flops": _entry("FLOP/s", HIGHER, "profile"),
    # Host-to-device input copies (cnn_train/h2d.py).
    "h2d_time": _entry("s", LOWER, "gpu"),
    "h2d_bytes": _entry("B", None, "gpu"),
    # GPU profile of a small_models section (small_models/profiling.py).
    "gpu_memset_time": _entry("s", LOWER, "gpu"),
    "gpu_h2d_copy_time": _entry("s", LOWER, "gpu"),
    "gpu_d2h_copy_time": _entry("s", LOWER, "gpu"),
    "gpu_kernel_time": _entry("s", LOWER, "gpu"),
    "gpu_kernel_count": _entry("count", None, "gpu"),
    "gpu_dram_read_throughput": _entry("B/s", HIGHER, "gpu"),
    "gpu_dram_write_throughput": _entry("B/s", HIGHER, "gpu"),
    "gpu_achieved_flops": _entry("FLOP/s", HIGHER, "gpu"),
    # End-to-end inference (inference_e2e, Samani 2022): `throughput` (above) is requests over the loadgen-timed
    # run; <phase>_time the phase's seconds summed over the requests, <phase>_p50/_p90 per request (a batch's
    # inference time shared by its requests); inference_throughput: requests per second of inference alone.
    **{
        f"{phase}_{statistic}": _entry("s", LOWER, "inference")
        for phase in INFERENCE_PHASES
        for statistic in INFERENCE_PHASE_STATISTICS
    },
    "inference_throughput": _entry("*/sec", HIGHER, "inference"),
    # MLPerf loadgen's own figures: its samples/s and the query samples it issued. The run's state (VALID, INVALID
    # or scaled-down) is metadata.loadgen.result, with its reasons. loadgen_valid (1 when loadgen said VALID) is no
    # longer written; its entry stays for the campaigns that hold it.
    "loadgen_samples_per_sec": _entry("*/sec", HIGHER, "inference"),
    "loadgen_queries": _entry("samples", None, "inference"),
    "loadgen_valid": _entry("bool", None, "inference"),
    # Micro-benchmarks of Xu 2017 (workloads/micro_*). Metric labels (record.metric's ``labels``) tell
    # apart the entries of one run: hpl_n, working_set_mb, size_mb, ioping_mode, fio_profile, transfer,
    # bins, variant, streams.
    # micro_cpu: HPC Challenge's HPL and DGEMM, HPCG, and HPL against the fp64 GEMM peak of this process.
    "hpl_gflops": _entry("GFLOP/s", HIGHER, "cpu"),
    "hpl_gflops_best": _entry("GFLOP/s", HIGHER, "cpu"),
    "hpl_time": _entry("s", LOWER, "cpu"),
    "dgemm_gflops": _entry("GFLOP/s", HIGHER, "cpu"),
    "star_dgemm_gflops": _entry("GFLOP/s", HIGHER, "cpu"),
    "gemm_peak_fp64": _entry("GFLOP/s", HIGHER, "cpu"),
    "hpl_gemm_ratio": _entry("ratio", HIGHER, "cpu"),
    "hpcg_gflops": _entry("GFLOP/s", HIGHER, "cpu"),
    # micro_mem (and micro_cpu's HPC Challenge run): STREAM, and the latency of a dependent-load chase.
    "stream_copy": _entry("GB/s", HIGHER, "memory"),
    "stream_scale": _entry("GB/s", HIGHER, "memory"),
    "stream_add": _entry("GB/s", HIGHER, "memory"),
    "stream_triad": _entry("GB/s", HIGHER, "memory"),
    "mem_latency": _entry("ns", LOWER, "memory"),
    # micro_disk: dd with fdatasync, ioping, fio.
    "dd_write": _entry("MB/s", HIGHER, "disk"),
    "dd_time": _entry("s", LOWER, "disk"),
    "dd_write_best": _entry("MB/s", HIGHER, "disk"),
    "ioping_latency": _entry("us", LOWER, "disk"),
    "ioping_latency_median": _entry("us", LOWER, "disk"),
    "ioping_iops": _entry("iops", HIGHER, "disk"),
    "fio_bandwidth": _entry("MB/s", HIGHER, "disk"),
    "fio_iops": _entry("iops", HIGHER, "disk"),
    "fio_latency": _entry("us", LOWER, "disk"),
    # micro_gpu: transfers, SGEMM, convolution, histogram, transposes.
    "gpu_h2d_bandwidth": _entry("GB/s", HIGHER, "gpu"),
    "gpu_d2h_bandwidth": _entry("GB/s", HIGHER, "gpu"),
    "gpu_d2d_bandwidth": _entry("GB/s", HIGHER, "gpu"),
    "gpu_sgemm": _entry("GFLOP/s", HIGHER, "gpu"),
    "gpu_conv2d": _entry("Mpixels/s", HIGHER, "gpu"),
    "gpu_histogram": _entry("GB/s", HIGHER, "gpu"),
    "gpu_transpose": _entry("GB/s", HIGHER, "gpu"),
    # micro_net: iperf3 between two instances, and a small-message ping-pong.
    "net_throughput": _entry("Gbit/s", HIGHER, "network"),
    "net_retransmits": _entry("count", None, "network"),
    "net_rtt": _entry("us", LOWER, "network"),
}


def lookup(name):
    """The MetricInfo of ``name``, or None when the table has no entry for it."""
    return METRICS.get(name)


def unit_matches(info, unit):
    """True when a recorded ``unit`` is the one the table's entry gives (``*`` matches any text)."""
    return fnmatch.fnmatchcase(str(unit), info.unit)


# Which metrics each workload emits (any of its runs; some only with a parameter: the GPU profile, a timing): what
# `platbench reproduce` checks a finding's metric against before any cell. Every name here is emitted by the
# workload's own code or the common modules it runs (tests/unit/test_metric_table.py reads the code to check).
_RUN = ("elapsed", "startup", "data_load", "loss_first", "loss_last")
_FLOPS = ("model_flops", "achieved_flops", "peak_flops", "mfu")
_STEPS = tuple(f"step_time_{statistic}" for statistic in STEP_STATISTICS)
PRODUCED_BY = {
    "cnn_train": ("throughput", "data_first_batch", "h2d_time", "h2d_bytes", "degradation", *_RUN, *_FLOPS, *_STEPS),
    "dl_tools": (
        "throughput",
        "epoch1_time",
        *_RUN,
        *_FLOPS,
        *(f"{prefix}_{statistic}" for prefix in STEP_TIME_PREFIXES[1:] for statistic in STEP_STATISTICS),
    ),
    "small_models": (
        "throughput",
        "epoch_time",
        "search_time",
        "user_time",
        "system_time",
        "epoch_user_time",
        "epoch_system_time",
        "gpu_memset_time",
        "gpu_h2d_copy_time",
        "gpu_d2h_copy_time",
        "gpu_kernel_time",
        "gpu_kernel_count",
        "gpu_dram_read_throughput",
        "gpu_dram_write_throughput",
        "gpu_achieved_flops",
        "roofline_arithmetic_intensity",
        "roofline_peak_flops",
        "roofline_peak_bandwidth",
        "roofline_attainable_flops",
        *_RUN,
        *_FLOPS,
        *_STEPS,
    ),
    "inference_e2e": (
        "throughput",
        "inference_throughput",
        "loadgen_samples_per_sec",
        "loadgen_queries",
        "elapsed",
        "data_load",
        *(f"{phase}_{statistic}" for phase in INFERENCE_PHASES for statistic in INFERENCE_PHASE_STATISTICS),
    ),
    "micro_cpu": (
        "hpl_gflops",
        "hpl_gflops_best",
        "hpl_time",
        "hpcg_gflops",
        "dgemm_gflops",
        "star_dgemm_gflops",
        "gemm_peak_fp64",
        "hpl_gemm_ratio",
    ),
    "micro_mem": ("mem_latency", "stream_copy", "stream_scale", "stream_add", "stream_triad"),
    "micro_disk": (
        "dd_write",
        "dd_write_best",
        "dd_time",
        "ioping_latency",
        "ioping_latency_median",
        "ioping_iops",
        "fio_bandwidth",
        "fio_iops",
        "fio_latency",
    ),
    "micro_net": ("net_throughput", "net_retransmits", "net_rtt"),
    "micro_gpu": (
        "gpu_h2d_bandwidth",
        "gpu_d2h_bandwidth",
        "gpu_d2d_bandwidth",
        "gpu_sgemm",
        "gpu_conv2d",
        "gpu_histogram",
        "gpu_transpose",
    ),
}


# The labels a workload gives its samples itself, within one cell (a file size, a test's mode): a finding may pick
# samples by them, which no plan shows before the cell runs.
SAMPLE_LABELS = {
    "micro_disk": ("size_mb", "ioping_mode", "fio_profile"),
    "micro_mem": ("working_set_mb",),
    "micro_cpu": ("hpl_n", "suite"),
    "micro_net": ("streams", "direction"),
    "micro_gpu": ("transfer", "transfer_bytes", "variant", "histogram_bytes"),
}


# Given by the cell itself to any workload's samples: a shared cell's foreground alone and beside its background
# (plugins/plugin_utils/cells/several.py), an instance's role.
CELL_SAMPLE_LABELS = ("share", "instance_role")


def sample_labels(workloads):
    """The labels any of ``workloads`` (or its cell) gives its samples within a cell, as a set."""
    return {name for workload in workloads for name in SAMPLE_LABELS.get(workload, ())} | set(CELL_SAMPLE_LABELS)


def produced_by(workloads):
    """The metrics any of ``workloads`` emits, as a set."""
    return {name for workload in workloads for name in PRODUCED_BY.get(workload, ())}
