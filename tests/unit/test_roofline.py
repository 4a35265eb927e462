"""The roofline maths on known figures, the copy-bandwidth timing and its cache."""

import json

from workloads.common import peak, roofline

TFLOPS, TBPS = 1e12, 1e12
ENVIRONMENT = {"cpu_model": "Some CPU", "cpuset": "0-15", "cgroup_cpu_quota": None, "virt": None}


def test_ridge_attainable_bound_and_efficiency_on_known_figures():
    peak_flops, bandwidth = 100 * TFLOPS, 2 * TBPS
    assert roofline.ridge_point(peak_flops, bandwidth) == 50.0
    # Left of the ridge the memory roof: 10 FLOP/B x 2 TB/s = 20 TFLOP/s.
    assert roofline.attainable_flops(10.0, peak_flops, bandwidth) == 20 * TFLOPS
    assert roofline.bound(10.0, peak_flops, bandwidth) == "memory"
    # Right of it the compute roof.
    assert roofline.attainable_flops(200.0, peak_flops, bandwidth) == 100 * TFLOPS
    assert roofline.bound(200.0, peak_flops, bandwidth) == "compute"
    assert roofline.bound(50.0, peak_flops, bandwidth) == "compute"  # on the ridge both roofs meet
    assert roofline.efficiency(5 * TFLOPS, 20 * TFLOPS) == 0.25


def test_a_roofline_point_is_metrics_in_si_units_and_its_summary():
    metrics, summary = roofline.roofline_point(10.0, 5 * TFLOPS, 100 * TFLOPS, 2 * TBPS)
    assert {entry["metric"]: (entry["value"], entry["unit"]) for entry in metrics} == {
        "roofline_arithmetic_intensity": (10.0, "FLOP/B"),
        "roofline_peak_flops": (100 * TFLOPS, "FLOP/s"),
        "roofline_peak_bandwidth": (2 * TBPS, "B/s"),
        "roofline_attainable_flops": (20 * TFLOPS, "FLOP/s"),
    }
    assert summary == {"ridge_point_flop_per_byte": 50.0, "bound": "memory", "efficiency": 0.25}


def test_copy_bandwidth_counts_read_and_write_and_takes_the_median():
    ticks = iter([0.0, 0.5, 1.0, 1.25, 2.0, 3.0])  # three timed copies: 0.5 s, 0.25 s, 1 s
    copies = []
    rate = roofline.time_copy(lambda: copies.append(1), 1e9, repeats=3, clock=lambda: next(ticks))
    assert len(copies) == 4  # one warm-up
    assert rate == 2 * 1e9 / 0.5


def test_copy_size_stays_within_a_quarter_of_free_memory():
    assert roofline.copy_size(80 << 30) == roofline.COPY_BYTES
    assert roofline.copy_size(2 << 30) == 512 << 20
    assert roofline.copy_size(1 << 20) == roofline.COPY_MIN_BYTES


def test_the_bandwidth_is_measured_once_per_scenario_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATBENCH_CACHE_DIR", str(tmp_path))
    calls = []

    def measure():
        calls.append(1)
        return 3.0e12, 1 << 30

    first = roofline.bandwidth_peak(measure, "torch", "2.13.0", "cuda", ENVIRONMENT)
    again = roofline.bandwidth_peak(measure, "torch", "2.13.0", "cuda", ENVIRONMENT)
    other = roofline.bandwidth_peak(measure, "torch", "2.13.0", "cuda:1", ENVIRONMENT)
    assert first == (3.0e12, {"bandwidth_source": "measured", "bandwidth_copy_bytes": 1 << 30})
    assert again == (3.0e12, {"bandwidth_source": "cache", "bandwidth_copy_bytes": 1 << 30})
    assert other[1]["bandwidth_source"] == "measured" and len(calls) == 2
    cached = json.loads((tmp_path / roofline.BANDWIDTH_CACHE_FILE).read_text())
    assert sorted(entry["device"] for entry in cached.values()) == ["cuda", "cuda:1"]
    assert not (tmp_path / peak.CACHE_FILE).exists()  # the GEMM peaks keep their own file
