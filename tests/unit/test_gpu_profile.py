"""small_models' GPU profile as metrics, from a torch.profiler Chrome trace and an ncu report written by hand in
those tools' formats (tests/unit/data/handmade_*: no GPU here has produced them)."""

import json
from pathlib import Path

import pytest

from workloads.common import ncu
from workloads.common.record import emit_record
from workloads.small_models import profiling

DATA = Path(__file__).parent / "data"
TRACE = DATA / "handmade_torch_profiler_trace.json"
NCU_REPORT = DATA / "handmade_ncu_raw_small_models.csv"
PEAKS = (50e12, 3e12)  # FLOP/s, B/s: ridge at 16.7 FLOP/B
OPERATORS = [("aten::addmm", 2_000_000, 40_000), ("aten::conv2d", 6_000_000, 60_000)]  # 80 FLOP/B
US = 1e-6


@pytest.fixture
def summary():
    return profiling.summarize(
        profiling.trace_activities(TRACE), OPERATORS, wall_seconds=0.002, batches=2, samples=128, top_n=2
    )


def values(metrics):
    return {entry["metric"]: entry["value"] for entry in metrics}


def test_the_trace_gives_each_gpu_activity_its_kind_time_and_bytes():
    activities = profiling.trace_activities(json.loads(TRACE.read_text()))
    assert [activity.kind for activity in activities] == [
        "h2d",
        "h2d",
        "memset",
        "memset",
        *["kernel"] * 6,
        "d2d",
        "d2h",
    ]
    assert activities[0].seconds == pytest.approx(30 * US) and activities[0].bytes == 200_704
    assert activities[2].bytes is None  # host-side events (cpu_op, cuda_runtime) and flows are not GPU activities


def test_the_summary_of_the_trace(summary):
    assert (summary["memset_time_s"], summary["memset_count"]) == (pytest.approx(4 * US), 2)
    assert (summary["h2d_copy_time_s"], summary["h2d_copy_count"]) == (pytest.approx(40 * US), 2)
    assert summary["h2d_bytes"] == 200_704 + 512
    assert (summary["d2h_copy_time_s"], summary["d2d_copy_time_s"]) == (pytest.approx(3 * US), pytest.approx(5 * US))
    assert summary["kernel_time_s"] == pytest.approx(280 * US)
    assert (summary["kernel_launches"], summary["distinct_kernels"]) == (6, 3)
    top = summary["top_kernels"]
    assert [(kernel["name"], kernel["count"]) for kernel in top] == [
        ("ampere_sgemm_32x32_sliced1x4_tn", 2),
        (top[1]["name"], 1),
    ]
    assert top[0]["time_s"] == pytest.approx(200 * US) and top[0]["share"] == pytest.approx(200 / 280)
    assert top[1]["name"].startswith("sm90_xmma_fprop_implicit_gemm")
    assert (summary["operator_flops_estimate"], summary["operator_bytes_estimate"]) == (8_000_000, 100_000)


def test_with_ncu_the_flops_and_dram_traffic_are_measured(summary):
    report = ncu.parse_csv(NCU_REPORT.read_text())
    metrics, metadata = profiling.profile_metrics(summary, 2.8e9, report, None, PEAKS)
    got = values(metrics)
    seconds = 46_080e-9
    assert got["gpu_memset_time"] == pytest.approx(4 * US) and got["gpu_kernel_count"] == 6
    assert got["gpu_h2d_copy_time"] == pytest.approx(40 * US) and got["gpu_d2h_copy_time"] == pytest.approx(3 * US)
    assert got["gpu_kernel_time"] == pytest.approx(280 * US)
    assert got["gpu_dram_read_throughput"] == pytest.approx(10_223_296 / seconds)
    assert got["gpu_dram_write_throughput"] == pytest.approx(6_685_240 / seconds)
    # Not the model's 2.8 GFLOP over 280 us: ncu's own counts over ncu's kernel time.
    assert got["gpu_achieved_flops"] == pytest.approx(99_310_024 / seconds)
    intensity = 99_310_024 / (10_223_296 + 6_685_240)
    assert got["roofline_arithmetic_intensity"] == pytest.approx(intensity)
    assert got["roofline_attainable_flops"] == pytest.approx(intensity * 3e12)
    assert (got["roofline_peak_flops"], got["roofline_peak_bandwidth"]) == PEAKS
    assert metadata["roofline"]["bound"] == "memory"
    assert metadata["roofline"]["efficiency"] == pytest.approx((99_310_024 / seconds) / (intensity * 3e12))
    sources = metadata["profile_sources"]
    assert sources["achieved_flops"].startswith("ncu:") and sources["arithmetic_intensity"].startswith("ncu:")
    assert "dram_counters_reason" not in metadata
    units = {entry["metric"]: entry["unit"] for entry in metrics}
    assert units["gpu_dram_read_throughput"] == "B/s" and units["roofline_arithmetic_intensity"] == "FLOP/B"
    assert units["gpu_achieved_flops"] == "FLOP/s" and units["gpu_kernel_count"] == "count"
    emit_record("small_models", {}, metrics, metadata)  # finite numbers: a valid record


def test_without_ncu_the_model_flops_and_an_estimated_intensity_are_named(summary):
    metrics, metadata = profiling.profile_metrics(summary, 2.8e9, None, ncu.NOT_PERMITTED_REASON, PEAKS)
    got = values(metrics)
    assert "gpu_dram_read_throughput" not in got and "gpu_dram_write_throughput" not in got
    assert metadata["dram_counters_reason"] == ncu.NOT_PERMITTED_REASON
    assert got["gpu_achieved_flops"] == pytest.approx(2.8e9 / (280 * US))  # 10 TFLOP/s
    assert got["roofline_arithmetic_intensity"] == 80.0
    assert got["roofline_attainable_flops"] == 50e12 and metadata["roofline"]["bound"] == "compute"
    sources = metadata["profile_sources"]
    assert sources["achieved_flops"] == profiling.SOURCE_MODEL_FLOPS
    assert sources["arithmetic_intensity"].startswith("estimate, no DRAM counters")


def test_ncu_without_sass_flops_keeps_its_dram_figures_and_says_what_it_fell_back_to(summary):
    report = ncu.parse_csv(NCU_REPORT.read_text())
    no_flops = report._replace(flops={"fp32": 0.0, "fp64": 0.0, "fp16": 0.0})
    metrics, metadata = profiling.profile_metrics(summary, 2.8e9, no_flops, None, PEAKS)
    got = values(metrics)
    assert got["gpu_dram_read_throughput"] == pytest.approx(10_223_296 / 46_080e-9)
    assert got["gpu_achieved_flops"] == pytest.approx(1e13)
    assert "ncu counted no SASS FLOPs" in metadata["profile_sources"]["achieved_flops"]
    assert metadata["profile_sources"]["arithmetic_intensity"].startswith("estimate")


def test_without_peaks_there_is_no_roofline_point_and_the_reason_is_given(summary):
    metrics, metadata = profiling.profile_metrics(summary, 2.8e9, None, "ncu is not installed", None)
    assert not any(entry["metric"].startswith("roofline_") for entry in metrics)
    assert metadata["roofline_reason"] == "the device's peaks were not measured"
    nothing = {**summary, "operator_flops_estimate": 0}
    _, metadata = profiling.profile_metrics(nothing, 2.8e9, None, "ncu is not installed", PEAKS)
    assert metadata["roofline_reason"].startswith("no arithmetic intensity")
