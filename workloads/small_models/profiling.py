"""GPU profile of a few training batches, CUDA only: device activities as metrics, and a roofline point.

Runs after the timed epochs, on extra batches, so that profiling never slows what is timed.

Where each figure comes from (the record's metadata says it again, under "profile_sources"):
- measured by CUPTI through torch.profiler, read from its Chrome trace: the device time of every
  memset, memcpy (by direction, with its bytes) and kernel, the kernel names and counts;
- measured by Nsight Compute (common/ncu.py), when ncu runs and the host permits its counters: DRAM
  bytes read and written, kernel durations and the SASS floating-point instructions (FLOPs); these
  give the DRAM throughput, the achieved FLOP/s and the arithmetic intensity;
- without ncu: achieved FLOP/s = the run's own model FLOPs (3 x forward FLOPs per sample, as for MFU)
  over the profiled kernel time, and the arithmetic intensity is an estimate (the FLOPs torch.profiler
  attributes to matrix operators over their input tensor bytes), named as such; no DRAM throughput,
  and "dram_counters_reason" says why;
- the peaks of the roofline are measured on the device (common/roofline.py).
"""

import json
import os
import tempfile
import time
from typing import NamedTuple

from ..common.record import metric
from ..common.roofline import roofline_point

# Element sizes of the dtype names the profiler records; unknown names count as 4 bytes.
DTYPE_BYTES = {
    "double": 8,
    "long int": 8,
    "c10::complex<float>": 8,
    "float": 4,
    "int": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "short int": 2,
    "bool": 1,
    "signed char": 1,
    "unsigned char": 1,
}
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COPY_DIRECTIONS = {"HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d"}
SOURCE_NCU_FLOPS = (
    "ncu: SASS add + mul + 2 x fma instructions (fp16, fp32, fp64) over gpu__time_duration of the same kernels; "
    "tensor-core (MMA) work is not in these counters"
)
SOURCE_MODEL_FLOPS = (
    "model FLOPs (3 x forward FLOPs per sample, as for MFU) of the profiled samples / their kernel time"
)
SOURCE_NCU_INTENSITY = "ncu: SASS FLOPs / (dram__bytes_read.sum + dram__bytes_write.sum) of the same kernels"
SOURCE_ESTIMATED_INTENSITY = (
    "estimate, no DRAM counters: torch.profiler with_flops FLOPs of the matrix operators / the bytes of their "
    "input tensors (compulsory traffic, not DRAM traffic)"
)


class Activity(NamedTuple):
    kind: str  # kernel, memset, h2d, d2h, d2d or copy (another memcpy)
    name: str
    seconds: float
    bytes: int | None  # memcpy only, when the trace says


def skipped_reason(device):
    """Why there is no profile on this device, or None when there will be one."""
    import torch

    if device.type == "cuda":
        return None
    if not torch.cuda.is_available():
        return "CUDA is not available: the profile covers GPU memsets, copies and kernels only"
    return f"the run used device {device.type}, not cuda"


def activity_kind(name, category=None):
    """What a device activity is, from its trace category (when known) or its CUPTI name."""
    if category == "gpu_memset" or (category is None and name.startswith("Memset")):
        return "memset"
    if category == "gpu_memcpy" or (category is None and name.startswith("Memcpy")):
        return next((kind for direction, kind in COPY_DIRECTIONS.items() if f"Memcpy {direction}" in name), "copy")
    return "kernel"


def trace_activities(trace):
    """[Activity] of the GPU events of a torch.profiler Chrome trace: a path or the loaded JSON object."""
    if not isinstance(trace, dict):
        with open(trace, encoding="utf-8") as handle:
            trace = json.load(handle)
    activities = []
    for event in trace.get("traceEvents", []):
        category = event.get("cat")
        if event.get("ph") != "X" or category not in GPU_CATEGORIES:
            continue
        name = event.get("name", "")
        size = (event.get("args") or {}).get("bytes") if category == "gpu_memcpy" else None
        activities.append(Activity(activity_kind(name, category), name, float(event["dur"]) / 1e6, size))
    return activities


def _tensor_bytes(shapes, dtypes):
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=False):
        if isinstance(shape, (list, tuple)) and shape and all(isinstance(size, int) for size in shape):
            count = 1
            for size in shape:
                count *= size
            total += count * DTYPE_BYTES.get(dtype, 4)
    return total


def operator_costs(events):
    """[(name, flops, input bytes)] of the host-side operators the profiler counted FLOPs for."""
    from torch.autograd import DeviceType

    return [
        (event.name, event.flops, _tensor_bytes(event.input_shapes or [], getattr(event, "input_dtypes", None) or []))
        for event in events
        if event.device_type == DeviceType.CPU and event.flops
    ]


def summarize(activities, operators, wall_seconds, batches, samples, top_n):
    """The profile summary (the record's metadata) from [Activity] and counted operators [(name, flops, bytes)]."""
    by_kind = {}
    for activity in activities:
        by_kind.setdefault(activity.kind, []).append(activity)

    def seconds(kind):
        return sum(activity.seconds for activity in by_kind.get(kind, []))

    kernels = {}
    for activity in by_kind.get("kernel", []):
        count, total = kernels.get(activity.name, (0, 0.0))
        kernels[activity.name] = (count + 1, total + activity.seconds)
    kernel_time = seconds("kernel")
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])
    return {
        "batches": batches,
        "samples": samples,
        "wall_time_s": wall_seconds,
        "memset_time_s": seconds("memset"),
        "memset_count": len(by_kind.get("memset", [])),
        "h2d_copy_time_s": seconds("h2d"),
        "h2d_copy_count": len(by_kind.get("h2d", [])),
        "h2d_bytes": sum(activity.bytes or 0 for activity in by_kind.get("h2d", [])),
        "d2h_copy_time_s": seconds("d2h"),
        "d2h_copy_count": len(by_kind.get("d2h", [])),
        "d2d_copy_time_s": seconds("d2d"),
        "kernel_time_s": kernel_time,
        "kernel_launches": len(by_kind.get("kernel", [])),
        "distinct_kernels": len(kernels),
        "top_kernels": [
            {"name": name, "count": count, "time_s": total, "share": total / kernel_time if kernel_time else None}
            for name, (count, total) in ranked[:top_n]
        ],
        # torch.profiler's with_flops shape formulas: the intensity estimate's inputs, never the achieved FLOP/s.
        "operator_flops_estimate": sum(flops for _, flops, _ in operators),
        "operator_bytes_estimate": sum(size for _, _, size in operators),
    }


def ncu_summary(report, launch_count, top_n):
    """The metadata of an ncu run: totals and the kernels that moved the most DRAM bytes."""
    ranked = sorted(report.kernels, key=lambda kernel: -(kernel.dram_read_bytes + kernel.dram_write_bytes))
    return {
        "kernels": len(report.kernels),
        "launch_count_limit": launch_count,
        "duration_s": report.duration_s,
        "dram_read_bytes": report.dram_read_bytes,
        "dram_write_bytes": report.dram_write_bytes,
        "flops": report.flops,
        "top_dram_kernels": [
            {"name": kernel.name, "dram_bytes": kernel.dram_read_bytes + kernel.dram_write_bytes}
            for kernel in ranked[:top_n]
        ],
    }


def profile_metrics(summary, model_flops, ncu_report=None, ncu_reason=None, peaks=None):
    """(metrics, metadata) of a profile: the device times and counts, achieved FLOP/s, DRAM throughput when
    ncu counted it, and the roofline point when ``peaks`` = (peak FLOP/s, peak B/s) are known.

    ``model_flops``: the run's own FLOP count of the profiled samples; ``ncu_report``: a common.ncu.NcuReport
    of the same section, or None with ``ncu_reason``."""
    kernel_time = summary["kernel_time_s"]
    metrics = [
        metric("gpu_memset_time", summary["memset_time_s"], "s"),
        metric("gpu_h2d_copy_time", summary["h2d_copy_time_s"], "s"),
        metric("gpu_d2h_copy_time", summary["d2h_copy_time_s"], "s"),
        metric("gpu_kernel_time", kernel_time, "s"),
        metric("gpu_kernel_count", summary["kernel_launches"], "count"),
    ]
    sources, metadata = {}, {}
    achieved = intensity = None
    if ncu_report is not None and ncu_report.duration_s > 0:
        metrics += [
            metric("gpu_dram_read_throughput", ncu_report.dram_read_bytes / ncu_report.duration_s, "B/s"),
            metric("gpu_dram_write_throughput", ncu_report.dram_write_bytes / ncu_report.duration_s, "B/s"),
        ]
        sources["dram_throughput"] = "ncu: dram__bytes_read.sum, dram__bytes_write.sum over gpu__time_duration.sum"
        dram_bytes = ncu_report.dram_read_bytes + ncu_report.dram_write_bytes
        if ncu_report.total_flops > 0:
            achieved = ncu_report.total_flops / ncu_report.duration_s
            sources["achieved_flops"] = SOURCE_NCU_FLOPS
            if dram_bytes > 0:
                intensity = ncu_report.total_flops / dram_bytes
                sources["arithmetic_intensity"] = SOURCE_NCU_INTENSITY
    else:
        metadata["dram_counters_reason"] = ncu_reason or "ncu reported no kernel time"
    if achieved is None and model_flops and kernel_time > 0:
        achieved = model_flops / kernel_time
        sources["achieved_flops"] = SOURCE_MODEL_FLOPS + (
            "; ncu counted no SASS FLOPs (tensor-core kernels only?)" if ncu_report is not None else ""
        )
    if achieved is not None:
        metrics.append(metric("gpu_achieved_flops", achieved, "FLOP/s"))
    if intensity is None and summary["operator_flops_estimate"] and summary["operator_bytes_estimate"]:
        intensity = summary["operator_flops_estimate"] / summary["operator_bytes_estimate"]
        sources["arithmetic_intensity"] = SOURCE_ESTIMATED_INTENSITY
    if peaks is None or intensity is None or achieved is None:
        metadata["roofline_reason"] = (
            "the device's peaks were not measured"
            if peaks is None
            else "no arithmetic intensity (no FLOPs or bytes counted)"
            if intensity is None
            else "no achieved FLOP/s (no FLOPs or kernel time)"
        )
    else:
        point, metadata["roofline"] = roofline_point(intensity, achieved, *peaks)
        metrics += point
    metadata["profile_sources"] = sources
    return metrics, metadata


def profile_batches(train_batch, batches, top_n, device):
    """The summary of ``batches`` calls of train_batch() (each returns the samples it trained on)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    samples = 0
    started = time.perf_counter()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_flops=True
    ) as profiler:
        for _ in range(batches):
            samples += train_batch()
        torch.cuda.synchronize(device)
    wall_seconds = time.perf_counter() - started
    # The device activities come from the exported trace: the same reader as for a saved trace.
    with tempfile.TemporaryDirectory(prefix="platbench-profile-") as folder:
        path = os.path.join(folder, "trace.json")
        profiler.export_chrome_trace(path)
        activities = trace_activities(path)
    summary = summarize(activities, operator_costs(profiler.events()), wall_seconds, batches, samples, top_n)
    properties = torch.cuda.get_device_properties(device)
    summary["device"] = {
        "name": properties.name,
        "multiprocessors": properties.multi_processor_count,
        "memory_bytes": properties.total_memory,
        "capability": f"{properties.major}.{properties.minor}",
    }
    return summary
