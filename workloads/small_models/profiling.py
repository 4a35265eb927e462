"""GPU profile of a few training batches, CUDA only: a torch.profiler summary and a roofline point.

Runs after the timed epochs, on extra batches, so that profiling never slows what is timed.

What is measured and what is estimated (the summary repeats this under "estimates"):
- measured by CUPTI through torch.profiler: device time of every memset, memcpy and kernel activity,
  kernel names and counts, and the wall time of the profiled batches;
- estimated: FLOPs (with_flops: formulas from the input shapes of the operators that have one, matrix
  products and forward convolutions; convolution backward and elementwise work count zero, so FLOPs are
  a lower bound), bytes moved (the input tensors of those same operators, from their recorded shapes
  and dtypes: compulsory traffic, not DRAM counters), host-to-device bytes (the batch tensors copied);
- not measured: DRAM read/write throughput and HBM transactions, which torch.profiler cannot read
  (Nsight Compute metrics dram__bytes_read.sum and dram__bytes_write.sum give them).

The roofline point is (arithmetic intensity = FLOPs / bytes moved, achieved FLOP/s = FLOPs / kernel
time); the GPU's peak FLOP/s and memory bandwidth are not queryable from torch and are left to the report.
"""

import time

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
ESTIMATES = {
    "flops": "torch.profiler with_flops: shape formulas of matmul and forward convolution operators only (lower bound)",
    "bytes_moved": "input tensor sizes of the FLOP-counted operators (compulsory traffic, not DRAM counters)",
    "h2d_bytes": "sizes of the batch tensors copied to the device",
    "arithmetic_intensity": "flops / bytes_moved of the same operators",
    "achieved_flops_per_s": "flops / total kernel time",
}
NOT_MEASURED = {
    "dram_read_throughput": "needs hardware counters (Nsight Compute dram__bytes_read.sum); torch.profiler has none",
    "dram_write_throughput": "needs hardware counters (Nsight Compute dram__bytes_write.sum); torch.profiler has none",
    "hbm_transactions": "needs hardware counters (Nsight Compute); torch.profiler has none",
    "peak_flops_per_s": "not queryable from torch: take it from the GPU's datasheet",
    "peak_memory_bandwidth": "not queryable from torch: take it from the GPU's datasheet",
}


def skipped_reason(device):
    """Why there is no profile on this device, or None when there will be one."""
    import torch

    if device.type == "cuda":
        return None
    if not torch.cuda.is_available():
        return "CUDA is not available: the profile covers GPU memsets, copies and kernels only"
    return f"the run used device {device.type}, not cuda"


def _tensor_bytes(shapes, dtypes):
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=False):
        if isinstance(shape, (list, tuple)) and shape and all(isinstance(size, int) for size in shape):
            count = 1
            for size in shape:
                count *= size
            total += count * DTYPE_BYTES.get(dtype, 4)
    return total


def device_activities(events):
    """[(name, seconds)] of the activities that ran on the GPU (kernels, memcpy, memset)."""
    from torch.autograd import DeviceType

    return [
        (event.name, event.time_range.elapsed_us() / 1e6) for event in events if event.device_type == DeviceType.CUDA
    ]


def operator_costs(events):
    """[(name, flops, input bytes)] of the host-side operators the profiler counted FLOPs for."""
    from torch.autograd import DeviceType

    return [
        (event.name, event.flops, _tensor_bytes(event.input_shapes or [], getattr(event, "input_dtypes", None) or []))
        for event in events
        if event.device_type == DeviceType.CPU and event.flops
    ]


def summarize(activities, operators, wall_seconds, batches, h2d_bytes, top_n):
    """The profile summary from device activities [(name, s)] and counted operators [(name, flops, bytes)]."""
    memsets = [seconds for name, seconds in activities if name.startswith("Memset")]
    copies = {
        kind: [s for name, s in activities if name.startswith(f"Memcpy {kind}")] for kind in ("HtoD", "DtoH", "DtoD")
    }
    kernels = {}
    for name, seconds in activities:
        if not name.startswith(("Memset", "Memcpy")):
            count, total = kernels.get(name, (0, 0.0))
            kernels[name] = (count + 1, total + seconds)
    kernel_time = sum(total for _, total in kernels.values())
    flops = sum(flops for _, flops, _ in operators)
    bytes_moved = sum(size for _, _, size in operators)
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])
    return {
        "batches": batches,
        "wall_time_s": wall_seconds,
        "memset_time_s": sum(memsets),
        "memset_count": len(memsets),
        "h2d_copy_time_s": sum(copies["HtoD"]),
        "h2d_copy_count": len(copies["HtoD"]),
        "h2d_bytes": h2d_bytes,
        "d2h_copy_time_s": sum(copies["DtoH"]),
        "d2d_copy_time_s": sum(copies["DtoD"]),
        "kernel_time_s": kernel_time,
        "kernel_launches": sum(count for count, _ in kernels.values()),
        "distinct_kernels": len(kernels),
        "top_kernels": [
            {"name": name, "count": count, "time_s": total, "share": total / kernel_time if kernel_time else None}
            for name, (count, total) in ranked[:top_n]
        ],
        "flops": flops,
        "bytes_moved": bytes_moved,
        "roofline": {
            "arithmetic_intensity_flop_per_byte": flops / bytes_moved if bytes_moved else None,
            "achieved_flops_per_s": flops / kernel_time if kernel_time else None,
            "achieved_flops_per_s_wall": flops / wall_seconds if wall_seconds else None,
        },
        "estimates": ESTIMATES,
        "not_measured": NOT_MEASURED,
    }


def profile_batches(train_batch, batches, top_n, device):
    """Profiles `batches` calls of train_batch() (each returns the bytes it copied to the device)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    h2d_bytes = 0
    started = time.perf_counter()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_flops=True
    ) as profiler:
        for _ in range(batches):
            h2d_bytes += train_batch()
        torch.cuda.synchronize(device)
    wall_seconds = time.perf_counter() - started
    events = profiler.events()
    summary = summarize(device_activities(events), operator_costs(events), wall_seconds, batches, h2d_bytes, top_n)
    properties = torch.cuda.get_device_properties(device)
    summary["device"] = {
        "name": properties.name,
        "multiprocessors": properties.multi_processor_count,
        "memory_bytes": properties.total_memory,
        "capability": f"{properties.major}.{properties.minor}",
    }
    return summary
