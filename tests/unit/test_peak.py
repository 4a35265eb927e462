"""The GEMM peak: how it is timed, sized and cached per scenario."""

import json
import os

import pytest

from workloads.common import peak

ENVIRONMENT = {"hostname": "lab1", "cpu_model": "Some CPU", "cpuset": "0-1", "cgroup_cpu_quota": None, "virt": None}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATBENCH_CACHE_DIR", str(tmp_path))
    return tmp_path / peak.CACHE_FILE


def measured(calls, flops=300e9, size=2048, median=None):
    def measure():
        calls.append(1)
        return peak.GemmRate(flops, flops * 0.9 if median is None else median), size, "matmul"

    return measure


def test_a_peak_is_measured_once_per_scenario_then_read_from_the_cache(cache):
    calls = []
    first = peak.gemm_peak(measured(calls), "tensorflow", "2.21.0", "float32", "/CPU:0", 2, ENVIRONMENT)
    again = peak.gemm_peak(measured(calls, flops=1.0), "tensorflow", "2.21.0", "float32", "/CPU:0", 2, ENVIRONMENT)
    assert first == (
        300e9,
        {
            "peak_source": "measured",
            "peak_gemm": "matmul",
            "peak_gemm_size": 2048,
            "peak_gemm_best_gflops": 300.0,
            "peak_gemm_median_gflops": 270.0,
        },
    )
    assert again[0] == 300e9 and again[1]["peak_source"] == "cache" and len(calls) == 1
    assert (again[1]["peak_gemm_best_gflops"], again[1]["peak_gemm_median_gflops"]) == (300.0, 270.0)
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["threads"] == 2 and entry["cpuset"] == "0-1"
    assert (entry["flops_best"], entry["flops_median"]) == (300e9, 270e9)


def test_a_cached_median_of_an_older_platbench_is_never_taken_for_the_best(cache):
    """Before the peak was the best rate, entries held the median as ``flops``: such an entry is measured again."""
    key, parts = peak.cache_key("torch", "2.13.0", "float32", "cpu", 1, ENVIRONMENT)
    cache.write_text(json.dumps({key: {"flops": 250e9, "size": 2048, "kind": "mm", "measured_at": 1.0, **parts}}))
    calls = []
    measure = measured(calls, flops=320e9)
    flops, provenance = peak.gemm_peak(measure, "torch", "2.13.0", "float32", "cpu", 1, ENVIRONMENT)
    assert (flops, provenance["peak_source"], len(calls)) == (320e9, "measured", 1)
    assert json.loads(cache.read_text())[key]["flops_best"] == 320e9


@pytest.mark.parametrize(
    "change",
    [
        {"threads": 1},
        {"dtype": "bfloat16"},
        {"device": "/GPU:0"},
        {"framework": "torch"},
        {"framework_version": "2.22.0"},
        {"environment": {**ENVIRONMENT, "cpuset": "1"}},
        {"environment": {**ENVIRONMENT, "cgroup_cpu_quota": 1.0}},
        {"environment": {**ENVIRONMENT, "virt": "docker"}},
    ],
)
def test_a_new_scenario_measures_again(cache, change):
    base = {
        "framework": "tensorflow",
        "framework_version": "2.21.0",
        "dtype": "float32",
        "device": "/CPU:0",
        "threads": 2,
        "environment": ENVIRONMENT,
    }
    calls = []
    peak.gemm_peak(measured(calls), **base)
    flops, provenance = peak.gemm_peak(measured(calls, flops=100e9), **{**base, **change})
    assert (flops, provenance["peak_source"], len(calls)) == (100e9, "measured", 2)
    assert len(json.loads(cache.read_text())) == 2


def test_an_unwritable_or_broken_cache_still_gives_a_peak(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PLATBENCH_CACHE_DIR", str(blocker / "cache"))
    flops, provenance = peak.gemm_peak(measured([]), "torch", "2.13.0", "float32", "cpu", 1, ENVIRONMENT)
    assert flops == 300e9 and provenance["peak_source"] == "measured, not cached"

    monkeypatch.setenv("PLATBENCH_CACHE_DIR", str(tmp_path))
    (tmp_path / peak.CACHE_FILE).write_text("{half a file")
    calls = []
    assert peak.gemm_peak(measured(calls), "torch", "2.13.0", "float32", "cpu", 1, ENVIRONMENT)[0] == 300e9
    assert calls and json.loads((tmp_path / peak.CACHE_FILE).read_text())  # rewritten whole


def fake_multiplier(rate, clock):
    """build(size) for measure_gemm: each product advances a fake clock by its FLOPs / rate."""

    def build(size):
        def multiply():
            clock[0] += 2.0 * size**3 / rate

        return multiply

    return build


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(peak.time, "perf_counter", lambda: now[0])
    return now


def test_steady_products_have_the_same_best_and_median_rate(clock):
    rate = peak.time_gemm(fake_multiplier(250e9, clock)(512), 512)
    assert (rate.best, rate.median) == (pytest.approx(250e9), pytest.approx(250e9))


def test_the_peak_is_the_best_rate_and_the_median_is_kept_beside_it(clock):
    """Products at 100, 200, ..., 700 GFLOP/s after the warm-up: the best is 700, the median 400."""
    rates = iter([1e12, *(gflops * 1e9 for gflops in (300, 100, 700, 400, 200, 600, 500))])

    def multiply():
        clock[0] += 2.0 * 512**3 / next(rates)

    rate = peak.time_gemm(multiply, 512)
    assert (rate.best, rate.median) == (pytest.approx(700e9), pytest.approx(400e9))


@pytest.mark.parametrize(
    "rate, max_size, expected_size",
    [
        (400e9, peak.GEMM_MAX_SIZE, 4096),  # a fast host: the largest size allowed
        (400e9, 1024, 1024),
        (100e9, peak.GEMM_MAX_SIZE, 2048),  # 2048^3 takes 0.17 s, 4096^3 would take 1.4 s
        (2e9, peak.GEMM_MAX_SIZE, 512),  # an emulated guest: 512^3 takes 0.13 s, 1024^3 would take 1 s
        (1e8, peak.GEMM_MAX_SIZE, peak.GEMM_MIN_SIZE),
    ],
)
def test_the_product_grows_only_while_it_stays_short(clock, rate, max_size, expected_size):
    flops, size = peak.measure_gemm(fake_multiplier(rate, clock), max_size)
    assert (flops.best, size) == (pytest.approx(rate), expected_size)


def test_run_peak_takes_the_given_peak_or_none(cache):
    metadata = {}
    assert peak.run_peak(500.0, "torch", "float32", "cpu", 2, metadata) == 500e9
    assert metadata == {"peak_source": "--peak-gflops"}
    assert peak.run_peak(0.0, "torch", "float32", "cpu", 2, {}) is None
    assert not os.path.exists(cache)


def test_the_fastest_way_to_multiply_is_the_peak(clock):
    gemms = {"slow": (fake_multiplier(100e9, clock), 4096), "fast": (fake_multiplier(400e9, clock), 1024)}
    rate, size, kind = peak.measure_best(gemms)
    assert (rate.best, size, kind) == (pytest.approx(400e9), 1024, "fast")
    assert list(peak.framework_gemms("torch", "float32", "cpu")) == ["mm", "conv1x1"]
    assert list(peak.framework_gemms("torch", "float32", "cuda")) == ["mm"]
    assert list(peak.framework_gemms("tensorflow", "float32", "/GPU:0")) == ["matmul"]
    assert peak.framework_gemms("tensorflow", "float32", "/GPU:0")["matmul"][1] == peak.GEMM_MAX_SIZE_GPU
