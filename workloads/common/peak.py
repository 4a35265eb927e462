"""The machine's matrix-multiply peak as this very process sees it: a square GEMM in the
workload's own framework, on its own CPUs, threads and dtype. MFU is measured against it.

A measurement takes a few seconds, so it is cached per scenario in a JSON file on the host
(``PLATBENCH_CACHE_DIR``, default ``~/.cache/platbench``; keep it on a local disk, not a home
shared between hosts); the key holds everything that changes the peak (CPU model, allowed CPUs,
CFS quota, virtualization, threads, device, dtype, framework and its version), so a new
scenario measures again. Where the cache is not writable, every run measures.

The peak is the best rate of the timed products, the rate the machine showed it can reach: a median peak
would make every utilisation figure divided by it (MFU, hpl_gemm_ratio) read high. The median is recorded
beside it, so a noisy measurement shows. Cache entries hold both (``flops_best``, ``flops_median``); an
entry of an older platbench, which held only the median (``flops``), is never taken for a best: it is
measured again and replaced.
"""

import hashlib
import json
import os
import statistics
import tempfile
import time
from typing import NamedTuple

# CPUs: 4096^3 (137 GFLOP in fp32), where the rate of a 2-core AVX-512 host levels off (2048^3
# gives about 10% less); GPUs need larger products to be busy.
GEMM_MAX_SIZE = 4096
GEMM_MAX_SIZE_GPU = 8192
GEMM_MIN_SIZE = 256
GEMM_SECONDS = 0.5  # products up to this long: emulated guests get small ones, fast hosts big ones
GEMM_REPEATS = 7  # timed products; the peak is their best rate
CACHE_FILE = "gemm_peak.json"
# The cache entry's field the peak is read from: an entry without it (a median-only entry) is measured again.
CACHE_PEAK_FIELD = "flops_best"


class GemmRate(NamedTuple):
    """FLOP/s of the timed products: the best (the peak) and the median."""

    best: float
    median: float


def cache_dir():
    return os.environ.get("PLATBENCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "platbench")


def cache_key(framework, framework_version, dtype, device, threads, environment):
    """What makes a peak reusable: the same framework build, dtype, device, threads and CPUs."""
    parts = {
        "framework": framework,
        "framework_version": framework_version,
        "dtype": dtype,
        "device": device,
        "threads": threads,
        "cpu_model": environment.get("cpu_model"),
        "cpuset": environment.get("cpuset"),
        "cpu_quota": environment.get("cgroup_cpu_quota"),
        "virt": environment.get("virt"),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16], parts


def load_cache(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def store_cache(path, cache):
    """Atomic replace, so concurrent runs never read half a file; failures are silent (no cache)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, encoding="utf-8") as handle:
            json.dump(cache, handle, indent=1, sort_keys=True)
        os.replace(handle.name, path)
        return True
    except OSError:
        return False


def time_gemm(multiply, size, repeats=GEMM_REPEATS):
    """GemmRate of ``multiply()``, which must perform one size x size x size product and
    return only once it is done: the best and the median of ``repeats`` timed calls after one warm-up."""
    multiply()
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        multiply()
        rates.append(2.0 * size**3 / (time.perf_counter() - started))
    return GemmRate(max(rates), statistics.median(rates))


def measure_gemm(build, max_size=GEMM_MAX_SIZE):
    """(GemmRate, size): ``build(size)`` gives a multiply for time_gemm. The size doubles from
    GEMM_MIN_SIZE while the next product would still take under GEMM_SECONDS (8x the work),
    up to ``max_size``: fast hosts get large products, emulated guests small ones."""
    size = GEMM_MIN_SIZE
    multiply = build(size)
    while size * 2 <= max_size:
        multiply()
        started = time.perf_counter()
        multiply()
        if (time.perf_counter() - started) * 8 > GEMM_SECONDS:
            break
        size *= 2
        multiply = build(size)
    return time_gemm(multiply, size), size


def cached_measurement(file_name, key, parts, value_field, measure):
    """(value, entry, source) for ``key`` in the cache file ``file_name``: the cached entry when its
    ``value_field`` is a positive number (source "cache"), else a new entry from ``measure()``'s
    (value, extra fields), stored with ``parts`` and the time (source "measured", or "measured, not
    cached" where the cache is not writable)."""
    path = os.path.join(cache_dir(), file_name)
    cache = load_cache(path)
    entry = cache.get(key)
    if isinstance(entry, dict) and isinstance(entry.get(value_field), (int, float)) and entry[value_field] > 0:
        return float(entry[value_field]), entry, "cache"
    value, fields = measure()
    entry = cache[key] = {value_field: float(value), **fields, "measured_at": time.time(), **parts}
    return float(value), entry, "measured" if store_cache(path, cache) else "measured, not cached"


def gemm_peak(measure, framework, framework_version, dtype, device, threads, environment):
    """(FLOP/s, metadata): the cached best rate of this scenario, or else ``measure()``'s
    (GemmRate, size, kind), then cached. The metadata hold the best and the median in GFLOP/s."""
    key, parts = cache_key(framework, framework_version, dtype, device, threads, environment)

    def measure_fields():
        rate, size, kind = measure()
        return rate.best, {"flops_median": float(rate.median), "size": size, "kind": kind}

    flops, entry, source = cached_measurement(CACHE_FILE, key, parts, CACHE_PEAK_FIELD, measure_fields)
    median = entry.get("flops_median")
    metadata = {
        "peak_source": source,
        "peak_gemm": entry.get("kind"),
        "peak_gemm_size": entry.get("size"),
        "peak_gemm_best_gflops": round(flops / 1e9, 3),
        "peak_gemm_median_gflops": round(median / 1e9, 3) if isinstance(median, (int, float)) else None,
    }
    if source == "cache":
        metadata["peak_measured_at"] = entry.get("measured_at")
    return flops, metadata


def is_gpu(device):
    return any(name in str(device).lower() for name in ("gpu", "cuda"))


def framework_gemms(framework, dtype, device):
    """{kind: (build, max_size)}: the ways ``framework`` multiplies matrices on ``device``.

    PyTorch has two on CPUs: torch.mm goes to its BLAS (MKL, which may not use every
    instruction set of a non-Intel CPU), convolutions go to oneDNN; a 1x1 convolution over a
    channels-last tensor is the same M x N x K product done by oneDNN. The peak is the faster.
    """
    max_size = GEMM_MAX_SIZE_GPU if is_gpu(device) else GEMM_MAX_SIZE
    if framework == "tensorflow":
        return {"matmul": (lambda size: tensorflow_gemm(size, dtype, device), max_size)}
    gemms = {"mm": (lambda size: torch_gemm(size, dtype, device), max_size)}
    if not is_gpu(device):
        gemms["conv1x1"] = (lambda size: torch_conv1x1_gemm(size, dtype, device), max_size)
    return gemms


def measure_best(gemms):
    """(GemmRate, size, kind) of the fastest of ``gemms`` (see framework_gemms), by best rate."""
    results = [(*measure_gemm(build, max_size), kind) for kind, (build, max_size) in gemms.items()]
    return max(results, key=lambda result: result[0].best)


def run_peak(peak_gflops, framework, dtype, device, threads, metadata):
    """The peak FLOP/s a run's MFU divides by: ``peak_gflops`` (the --peak-gflops argument) when
    given, none when it is 0, else the cached or measured GEMM peak of ``framework`` on this
    scenario. Where it came from goes into ``metadata``, the run's probed environment."""
    if peak_gflops is None:
        peak, provenance = gemm_peak(
            lambda: measure_best(framework_gemms(framework, dtype, device)),
            framework,
            metadata.get("framework_version"),
            dtype,
            str(device),
            threads,
            metadata,
        )
        metadata.update(provenance)
        return peak
    if peak_gflops > 0:
        metadata["peak_source"] = "--peak-gflops"
        return peak_gflops * 1e9
    return None


def tensorflow_gemm(size, dtype="float32", device="/CPU:0"):
    """A ``multiply`` for time_gemm: one TensorFlow matmul on ``device``, in the workload's thread pools."""
    import tensorflow as tf

    with tf.device(device):
        a = tf.cast(tf.random.uniform([size, size], seed=1), tf.as_dtype(dtype))
        b = tf.cast(tf.random.uniform([size, size], seed=2), tf.as_dtype(dtype))
        # One element comes back to Python: waiting for it waits for the product, nothing more is copied.
        product = tf.function(lambda: tf.matmul(a, b)[:1, :1])
    return lambda: product().numpy()


def torch_gemm(size, dtype="float32", device="cpu"):
    """A ``multiply`` for time_gemm: one torch.mm on ``device``, in the thread pool set by the workload."""
    import torch

    generator = torch.Generator().manual_seed(1)
    a = torch.rand(size, size, generator=generator).to(device=device, dtype=getattr(torch, dtype))
    b = torch.rand(size, size, generator=generator).to(device=device, dtype=getattr(torch, dtype))
    out = torch.empty(size, size, dtype=a.dtype, device=device)
    synchronize = torch.cuda.synchronize if out.is_cuda else (lambda: None)

    def multiply():
        torch.mm(a, b, out=out)
        synchronize()

    return multiply


def torch_conv1x1_gemm(size, dtype="float32", device="cpu"):
    """A ``multiply`` for time_gemm: a size x size x size product as a 1x1 convolution (size
    positions, size channels in and out), channels-last, as the CNN workloads run convolutions."""
    import torch

    generator = torch.Generator().manual_seed(1)
    kind = {"dtype": getattr(torch, dtype), "device": device}
    x = torch.rand(1, size, size, 1, generator=generator).to(**kind).contiguous(memory_format=torch.channels_last)
    w = torch.rand(size, size, 1, 1, generator=generator).to(**kind).contiguous(memory_format=torch.channels_last)

    def multiply():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, w)

    return multiply
