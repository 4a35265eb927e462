"""The roofline of a device from peaks measured on it, and where a run's point lies under it.

Peaks: the GEMM peak of common/peak.py (same measurement and cache as MFU) and the device-to-device
memory bandwidth of a timed large copy (a copy reads and writes every byte: 2 x bytes / time, the
median of repeats), cached per scenario like the GEMM peak. No data-sheet figures.

The maths are plain functions: ridge point = peak FLOP/s / peak bandwidth; the roof at arithmetic
intensity ai is min(peak FLOP/s, ai x bandwidth); left of the ridge a run is memory-bound.
"""

import statistics
import time

from . import peak
from .record import metric

COPY_BYTES = 1 << 30  # 1 GiB per buffer: far beyond any L2, so the copy streams from DRAM/HBM
COPY_MIN_BYTES = 64 << 20
COPY_REPEATS = 7
BANDWIDTH_CACHE_FILE = "copy_bandwidth_peak.json"


def ridge_point(peak_flops, peak_bandwidth):
    """Arithmetic intensity (FLOP/B) where the memory roof meets the compute roof."""
    return peak_flops / peak_bandwidth


def attainable_flops(intensity, peak_flops, peak_bandwidth):
    """The roof at ``intensity`` FLOP/B: what the device can reach at best, in FLOP/s."""
    return min(peak_flops, intensity * peak_bandwidth)


def bound(intensity, peak_flops, peak_bandwidth):
    """ "memory" left of the ridge point, "compute" from it on."""
    return "memory" if intensity < ridge_point(peak_flops, peak_bandwidth) else "compute"


def efficiency(achieved_flops, attainable):
    """Achieved over attainable FLOP/s: 1.0 is on the roof."""
    return achieved_flops / attainable


def roofline_point(intensity, achieved_flops, peak_flops, peak_bandwidth):
    """(metrics, summary) of a run at ``intensity`` FLOP/B and ``achieved_flops`` FLOP/s under the roofs."""
    attainable = attainable_flops(intensity, peak_flops, peak_bandwidth)
    metrics = [
        metric("roofline_arithmetic_intensity", intensity, "FLOP/B"),
        metric("roofline_peak_flops", peak_flops, "FLOP/s"),
        metric("roofline_peak_bandwidth", peak_bandwidth, "B/s"),
        metric("roofline_attainable_flops", attainable, "FLOP/s"),
    ]
    summary = {
        "ridge_point_flop_per_byte": ridge_point(peak_flops, peak_bandwidth),
        "bound": bound(intensity, peak_flops, peak_bandwidth),
        "efficiency": efficiency(achieved_flops, attainable) if attainable else None,
    }
    return metrics, summary


def time_copy(copy, nbytes, repeats=COPY_REPEATS, clock=time.perf_counter):
    """Bandwidth in B/s of ``copy()``, which copies ``nbytes`` and returns once done: it reads and writes
    each byte, so 2 x nbytes over the time; the median of ``repeats`` timed copies after one warm-up."""
    copy()
    rates = []
    for _ in range(repeats):
        started = clock()
        copy()
        rates.append(2.0 * nbytes / (clock() - started))
    return statistics.median(rates)


def torch_device_copy(nbytes, device):
    """A ``copy`` for time_copy: ``nbytes`` from one buffer to another on ``device``, synchronized."""
    import torch

    source = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    target = torch.empty_like(source)
    synchronize = torch.cuda.synchronize if source.is_cuda else (lambda: None)

    def copy():
        target.copy_(source)
        synchronize()

    return copy


def copy_size(free_bytes):
    """Bytes per buffer: COPY_BYTES, or a quarter of the free memory on smaller devices (two buffers)."""
    return max(COPY_MIN_BYTES, min(COPY_BYTES, free_bytes // 4))


def bandwidth_peak(measure, framework, framework_version, device, environment):
    """(B/s, metadata): the cached copy bandwidth of this scenario, or ``measure()``'s (B/s, bytes), then cached.

    The cache key is the GEMM peak's (common/peak.py), in a file of its own."""
    key, parts = peak.cache_key(framework, framework_version, "copy", device, None, environment)

    def measure_fields():
        bytes_per_s, nbytes = measure()
        return bytes_per_s, {"bytes": nbytes}

    bytes_per_s, entry, source = peak.cached_measurement(
        BANDWIDTH_CACHE_FILE, key, parts, "bytes_per_s", measure_fields
    )
    return bytes_per_s, {"bandwidth_source": source, "bandwidth_copy_bytes": entry.get("bytes")}


def torch_device_peaks(device, dtype, threads, environment):
    """(peak FLOP/s, peak B/s, provenance) of a torch ``device``, both measured there (or cached)."""
    import torch

    version = torch.__version__
    peak_flops, gemm_metadata = peak.gemm_peak(
        lambda: peak.measure_best(peak.framework_gemms("torch", dtype, device)),
        "torch",
        version,
        dtype,
        str(device),
        threads,
        environment,
    )

    def measure_bandwidth():
        free = torch.cuda.mem_get_info(device)[0] if torch.device(device).type == "cuda" else COPY_BYTES * 4
        nbytes = copy_size(free)
        return time_copy(torch_device_copy(nbytes, device), nbytes), nbytes

    peak_bandwidth, bandwidth_metadata = bandwidth_peak(measure_bandwidth, "torch", version, str(device), environment)
    return peak_flops, peak_bandwidth, {**gemm_metadata, "peak_dtype": dtype, **bandwidth_metadata}
