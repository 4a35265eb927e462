"""The timed GPU benchmarks of micro_gpu (torch on CUDA; only the body imports this module).

Each benchmark runs its operation `warmup` times untimed, then `repeats` times, each between two CUDA
events on the current stream (the device's own clock, no host overhead), and reports the median.
The result of the last timed run is then checked against its CPU reference (reference.py) before
any metric is reported. Each returns (metrics, metadata); `release` then frees its GPU memory.
"""

from typing import NamedTuple

from ..common.harness import WorkloadFailed
from ..common.record import metric
from . import reference
from .settings import MIB, TRANSPOSE_VARIANTS


class Timing(NamedTuple):
    torch: object
    device: object  # torch.device of the GPU
    warmup: int
    repeats: int
    seed: int

    def milliseconds(self, operation):
        """Every timed run's milliseconds, after the warm-up runs."""
        cuda = self.torch.cuda
        for _ in range(self.warmup):
            operation()
        cuda.synchronize(self.device)
        times = []
        for _ in range(self.repeats):
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            operation()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return times

    def generator(self):
        return self.torch.Generator(device=self.device).manual_seed(self.seed)


def _rounded(times):
    return [round(value, 4) for value in times]


def require_free(torch, device, nbytes, what, option):
    """WorkloadFailed, before any allocation, when the GPU has less free memory than `nbytes`."""
    free, total = torch.cuda.mem_get_info(device)
    if nbytes > free:
        raise WorkloadFailed(
            f"{what} needs {nbytes / 2**30:.2f} GiB of GPU memory but {device} has {free / 2**30:.2f} GiB free "
            f"of {total / 2**30:.2f} GiB (another process may hold the rest): lower {option}"
        )


def release(torch):
    """After a benchmark has returned (its tensors gone with its frame): give the cached blocks back, so that the
    next one finds the GPU's memory free."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def transfers(timing, transfer_mb):
    """Host-to-device and device-to-host copies from/to pinned and pageable host memory, and a device-to-device
    copy. H2D and D2H move the buffer once; D2D reads and writes it on the device (2 x bytes, as the CUDA
    sample's bandwidthTest counts it, comparable with the memory's bandwidth)."""
    torch, device = timing.torch, timing.device
    nbytes = transfer_mb * MIB
    require_free(torch, device, 2 * nbytes, f"the transfers of {transfer_mb} MiB", "--transfer-mb")
    on_device = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device, generator=timing.generator())
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(nbytes, dtype=torch.uint8)
    pinned.copy_(on_device)
    pageable.copy_(pinned)
    landing = torch.empty_like(on_device)
    cases = [
        # (name, operation, source, destination): each destination is zeroed first, so that the check sees
        # what the timed copies wrote.
        ("h2d_pinned", lambda: landing.copy_(pinned, non_blocking=True), pinned, landing),
        ("h2d_pageable", lambda: landing.copy_(pageable), pageable, landing),
        ("d2h_pinned", lambda: pinned.copy_(on_device, non_blocking=True), on_device, pinned),
        ("d2h_pageable", lambda: pageable.copy_(on_device), on_device, pageable),
        ("d2d", lambda: landing.copy_(on_device), on_device, landing),
    ]
    times = {}
    for name, operation, source, destination in cases:
        destination.zero_()
        times[name] = timing.milliseconds(operation)
        torch.cuda.synchronize(device)
        reference.check_copy(f"transfer {name}", source, destination)
    medians = {name: reference.median(values) for name, values in times.items()}
    metrics = [
        metric(
            "gpu_h2d_bandwidth", reference.bandwidth_gbs(nbytes, medians["h2d_pinned"]), "GB/s", {"transfer": "pinned"}
        ),
        metric(
            "gpu_h2d_bandwidth",
            reference.bandwidth_gbs(nbytes, medians["h2d_pageable"]),
            "GB/s",
            {"transfer": "pageable"},
        ),
        metric(
            "gpu_d2h_bandwidth", reference.bandwidth_gbs(nbytes, medians["d2h_pinned"]), "GB/s", {"transfer": "pinned"}
        ),
        metric(
            "gpu_d2h_bandwidth",
            reference.bandwidth_gbs(nbytes, medians["d2h_pageable"]),
            "GB/s",
            {"transfer": "pageable"},
        ),
        metric("gpu_d2d_bandwidth", reference.bandwidth_gbs(2 * nbytes, medians["d2d"]), "GB/s"),
    ]
    return metrics, {"transfer_bytes": nbytes, "timings_ms": {name: _rounded(v) for name, v in times.items()}}


def sgemm(timing, memory_fraction):
    """C = A @ B on three n x n float32 matrices filling `memory_fraction` of the GPU's memory; TF32 is off
    (the caller sets it), so this is the real single-precision GEMM."""
    torch, device = timing.torch, timing.device
    total = torch.cuda.get_device_properties(device).total_memory
    n = reference.sgemm_size(total, memory_fraction)
    if n == 0:
        raise WorkloadFailed(
            f"sgemm: --memory-fraction {memory_fraction} of {total / 2**30:.2f} GiB leaves no room for three "
            f"256 x 256 float32 matrices: raise --memory-fraction"
        )
    require_free(
        torch, device, 3 * n * n * 4, f"sgemm ({n} x {n}, --memory-fraction {memory_fraction})", "--memory-fraction"
    )
    generator = timing.generator()
    a = torch.randn(n, n, device=device, generator=generator)
    b = torch.randn(n, n, device=device, generator=generator)
    c = torch.empty(n, n, device=device)
    times = timing.milliseconds(lambda: torch.mm(a, b, out=c))
    reference.check_sgemm(a, b, c)
    return [metric("gpu_sgemm", reference.sgemm_gflops(n, reference.median(times)), "GFLOP/s")], {
        "sgemm_n": n,
        "timings_ms": {"sgemm": _rounded(times)},
    }


def conv2d(timing, size, kernel_size):
    """A size x size single-channel float32 image convolved with a kernel_size^2 filter (zero padding: the output
    is as large as the image), through cuDNN with its fastest algorithm (cudnn.benchmark, chosen in the warm-up)."""
    torch, device = timing.torch, timing.device
    functional = torch.nn.functional
    require_free(torch, device, 2 * size * size * 4, f"conv2d ({size} x {size} float32, in and out)", "--conv-size")
    generator = timing.generator()
    image = torch.randn(1, 1, size, size, device=device, generator=generator)
    weight = torch.randn(1, 1, kernel_size, kernel_size, device=device, generator=generator)
    outputs = []

    def convolve():
        outputs[:] = [functional.conv2d(image, weight, padding=kernel_size // 2)]

    times = timing.milliseconds(convolve)
    reference.check_conv2d(image, weight, outputs[0])
    rate = reference.mpixels_per_second(size, size, reference.median(times))
    return [metric("gpu_conv2d", rate, "Mpixels/s")], {"timings_ms": {"conv2d": _rounded(times)}}


def histograms(timing, histogram_mb, bins_list):
    """Histograms of histogram_mb MiB of random bytes (torch.bincount on uint8); GB/s of input bytes."""
    torch, device = timing.torch, timing.device
    nbytes = histogram_mb * MIB
    require_free(torch, device, 2 * nbytes, f"the histograms of {histogram_mb} MiB", "--histogram-mb")
    data = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device, generator=timing.generator())
    metrics, times = [], {}
    for bins in bins_list:
        counts = []

        def count(bins=bins, counts=counts):
            counts[:] = [reference.histogram_counts(data, bins)]

        times[f"histogram{bins}"] = timing.milliseconds(count)
        reference.check_histogram(data, counts[0], bins)
        rate = reference.bandwidth_gbs(nbytes, reference.median(times[f"histogram{bins}"]))
        metrics.append(metric("gpu_histogram", rate, "GB/s", {"bins": bins}))
    return metrics, {"histogram_bytes": nbytes, "timings_ms": {name: _rounded(v) for name, v in times.items()}}


def transposes(timing, kernels, size, variant_names):
    """Each transpose variant (and the copy) of a size x size float32 matrix; GB/s = 2 x bytes / time."""
    torch, device = timing.torch, timing.device
    nbytes = size * size * 4
    require_free(torch, device, 2 * nbytes, f"the transposes of a {size} x {size} float32 matrix", "--transpose-size")
    source = torch.rand(size, size, device=device, generator=timing.generator())
    destination = torch.empty(size, size, device=device)
    metrics, times = [], {}
    for name in variant_names:
        destination.zero_()
        times[name] = timing.milliseconds(lambda name=name: kernels.launch(name, source, destination))
        reference.check_transpose(f"transpose {name}", source, destination, transposed=name != "copy")
        rate = reference.transpose_gbs(nbytes, reference.median(times[name]))
        metrics.append(metric("gpu_transpose", rate, "GB/s", {"variant": name}))
    variants = {name: TRANSPOSE_VARIANTS[name].description for name in variant_names}
    return metrics, {
        "transpose_variants": variants,
        "timings_ms": {f"transpose_{k}": _rounded(v) for k, v in times.items()},
    }
