"""Nsight Compute: finding ncu, its command line, and reading a raw-page CSV report (written by hand in ncu's
--csv --page raw format: no GPU here has produced one)."""

import os
import stat
import sys
from pathlib import Path

import pytest

from workloads.common import ncu

DATA = Path(__file__).parent / "data"
REPORT = DATA / "handmade_ncu_raw_small_models.csv"


def executable(path, text="#!/bin/sh\nexit 0\n"):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_report_gives_per_kernel_rows_and_totals():
    report = ncu.parse_csv(REPORT.read_text())
    assert [kernel.name.split("(")[0][:31] for kernel in report.kernels] == [
        "void at::native::vectorized_ele",
        "sm90_xmma_fprop_implicit_gemm_f",
        "void at::native::",
        "ampere_sgemm_32x32_sliced1x4_tn",
        "void at::native::vectorized_ele",
    ]
    conv = report.kernels[1]
    # 2,359,296 B read, 1,179,648 written in 20,480 ns; fp32: 100,000 adds + 2 x 40,000,000 FMAs.
    assert (conv.dram_read_bytes, conv.dram_write_bytes) == (2_359_296, 1_179_648)
    assert conv.duration_s == pytest.approx(20.48e-6)
    assert conv.flops == {"fp32": 80_100_000, "fp64": 0, "fp16": 0}
    sgemm, half_add = report.kernels[3], report.kernels[4]
    assert sgemm.flops == {"fp32": 5_000 + 1_000 + 2 * 9_600_000, "fp64": 4 + 2 * 10, "fp16": 0}
    assert half_add.flops == {"fp32": 0, "fp64": 0, "fp16": 1_000 + 2_000 + 2 * 500}
    assert report.dram_read_bytes == 2_359_296 + 3_000_000 + 4_800_000 + 64_000
    assert report.dram_write_bytes == 4_718_592 + 1_179_648 + 750_000 + 5_000 + 32_000
    assert report.duration_s == pytest.approx(46_080e-9)
    assert report.flops == {"fp32": 99_306_000, "fp64": 24, "fp16": 4_000}
    assert report.total_flops == 99_310_024


def test_scaled_units_are_read_in_base_units():
    text = (
        '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum",'
        '"sm__sass_thread_inst_executed_op_ffma_pred_on.sum"\n'
        '"","","Mbyte","Kbyte","usecond","Minst"\n'
        '"0","k","1.5","2","3.25","4"\n'
    )
    (kernel,) = ncu.parse_csv(text).kernels
    assert (kernel.dram_read_bytes, kernel.dram_write_bytes) == (1.5e6, 2e3)
    assert kernel.duration_s == pytest.approx(3.25e-6) and kernel.flops["fp32"] == 8e6


@pytest.mark.parametrize(
    "text, reason",
    [
        (
            "==PROF== Connected to process 77 (/usr/bin/python3)\n"
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
            "Counters on the target device 0.\n",
            "ERR_NVGPUCTRPERM",
        ),
        ("==PROF== Connected to process 77\n==WARNING== No kernels were profiled.\n", "profiled no kernel"),
        ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n"0","k","5"\n', "dram__bytes_read.sum"),
    ],
    ids=["counters-not-permitted", "no-kernel", "missing-metric"],
)
def test_unusable_reports_raise_with_their_reason(text, reason):
    with pytest.raises(ncu.NcuError, match=reason):
        ncu.parse_csv(text)


def test_command_limits_ncu_to_the_profiled_range_and_a_few_kernels():
    command = ncu.ncu_command("/opt/ncu", [sys.executable, "-m", "x"], "/tmp/out.csv", launch_count=250)
    assert command[0] == "/opt/ncu" and command[-3:] == [sys.executable, "-m", "x"]
    options = dict(zip(command[1:-3:], command[2:-3:], strict=False))
    assert options["--profile-from-start"] == "off" and options["--launch-count"] == "250"
    assert options["--page"] == "raw" and options["--print-units"] == "base" and "--csv" in command
    assert options["--log-file"] == "/tmp/out.csv"
    metrics = options["--metrics"].split(",")
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"} <= set(metrics)
    assert len([name for name in metrics if name.startswith("sm__sass_thread_inst_executed_op_")]) == 9


def test_ncu_is_found_on_the_path_or_in_the_cuda_folder(tmp_path):
    on_path, toolkit = tmp_path / "path", tmp_path / "cuda-bin"
    on_path.mkdir()
    toolkit.mkdir()
    assert ncu.find_ncu(path=str(on_path), fallback_dirs=[str(toolkit)]) is None
    in_toolkit = executable(toolkit / "ncu")
    assert ncu.find_ncu(path=str(on_path), fallback_dirs=[str(toolkit)]) == str(in_toolkit)
    first = executable(on_path / "ncu")
    assert ncu.find_ncu(path=str(on_path), fallback_dirs=[str(toolkit)]) == str(first)


def fake_ncu(tmp_path, body):
    """An ``ncu`` executable that writes ``body`` (shell) output: it stands in for Nsight Compute's CLI."""
    script = f'#!/bin/sh\nwhile [ "$1" != "--log-file" ]; do shift; done\nlog="$2"\n{body}\n'
    return str(executable(tmp_path / "ncu", script))


def test_profile_program_reads_the_log_file_ncu_wrote(tmp_path):
    fake = fake_ncu(tmp_path, f'cp "{REPORT}" "$log"; echo "program output"')
    report, reason = ncu.profile_program(["true"], ncu=fake)
    assert reason is None and report.total_flops == 99_310_024 and len(report.kernels) == 5


def test_counters_not_permitted_and_missing_ncu_are_skips_with_a_reason(tmp_path, monkeypatch):
    fake = fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission" > "$log"; exit 1')
    report, reason = ncu.profile_program(["true"], ncu=fake)
    assert report is None and reason == ncu.NOT_PERMITTED_REASON and "NVreg_RestrictProfilingToAdminUsers" in reason
    broken = fake_ncu(tmp_path, 'echo "==ERROR== The application returned an error code (1)." > "$log"; exit 9')
    report, reason = ncu.profile_program(["true"], ncu=broken)
    assert report is None and reason.startswith("ncu profiled no kernel: The application returned an error code")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu, "FALLBACK_DIRS", (os.fspath(tmp_path / "no-cuda"),))
    report, reason = ncu.profile_program(["true"])
    assert report is None and reason.startswith("ncu (Nsight Compute) is not installed")
