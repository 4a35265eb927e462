"""workloads.micro_gpu without a GPU: the skip path (run as the hosts run it), the arguments, the rate formulas,
the CPU references every GPU result is checked against (and that they catch a wrong result), the benchmarks'
own code on CPU tensors through a stand-in for torch.cuda, and the Triton transpose kernels in Triton's
interpreter on GPU hosts (in the lab's workload venv, whose CUDA torch brings Triton). The GPU timings
themselves need a GPU cell."""

import math
import os
import stat
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from test_workload_check_args import check_args
from workload_run import ENV, REPO_ROOT, only_record, run_module

from tests import skips
from workloads.common.harness import WorkloadFailed
from workloads.common.metric_table import lookup
from workloads.micro_gpu import benchmarks, cli, reference
from workloads.micro_gpu.settings import MIB, TRANSPOSE_VARIANTS

# Triton comes with the CUDA build of torch, in the workload venv that the lab builds on GPU hosts (not in
# `make venv`'s: with keras imported first, triton's native library crashes the process).
WORKLOAD_PYTHON = "/opt/platbench/venv/bin/python"


# -- the skip path --------------------------------------------------------------------------------------------


@skips.needs_no_gpu("a CUDA device may be visible")
def test_without_cuda_the_run_records_one_skipped_sample_and_exits_0():
    process, records = run_module("micro_gpu", "--repeats", 1, "--threads", 1, "--labels-json", '{"repeat": 3}')
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    assert (record["workload"], record["status"], record["metrics"]) == ("micro_gpu", "skipped", [])
    build = "yes" if torch.version.cuda else "no"
    assert record["error"] == (
        f"no CUDA device visible to this process (torch {torch.__version__}, CUDA build: {build}): "
        "micro_gpu runs in GPU cells (processor gpu)"
    )
    assert record["labels"]["repeat"] == 3 and record["labels"]["device"] == "cuda:0"
    assert record["labels"]["memory_fraction"] == 0.25 and record["labels"]["transfer_mb"] == 256
    versions = record["metadata"]["tool_versions"]
    assert set(versions) == {"cuda", "driver", "torch", "triton"} and versions["torch"] == torch.__version__
    assert record["metadata"]["devices"] == []


def test_no_cuda_reason_names_the_build():
    def fake(cuda_version, available):
        return types.SimpleNamespace(
            __version__="9.9",
            version=types.SimpleNamespace(cuda=cuda_version),
            cuda=types.SimpleNamespace(is_available=lambda: available),
        )

    assert "CUDA build: no" in cli.no_cuda_reason(fake(None, False))
    assert "(torch 9.9, CUDA build: yes)" in cli.no_cuda_reason(fake("13.0", False))
    assert cli.no_cuda_reason(fake("13.0", True)) is None


def test_driver_version_comes_from_nvidia_smi(tmp_path, monkeypatch):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nprintf '580.65.06\\n580.65.06\\n'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert cli.driver_version() == "580.65.06"


def test_triton_build_prerequisites_are_named_when_missing(tmp_path):
    (tmp_path / "Python.h").write_text("")
    assert cli.triton_build_problem({"CC": sys.executable}, str(tmp_path)) is None  # any executable will do
    problem = cli.triton_build_problem({"CC": str(tmp_path / "no-cc")}, str(tmp_path / "none"))
    assert f"need the C compiler $CC ({tmp_path}/no-cc) and Python's headers ({tmp_path}/none/Python.h)" in problem
    assert "gcc libc6-dev python3-dev" in problem and "leave transpose out of --benchmarks" in problem


# -- arguments ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", ["0", "-0.1", "0.95", "1", "nan", "inf", "a quarter"])
def test_memory_fraction_outside_0_to_0_9_is_refused(fraction, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.parse_args(["--check-args", "--memory-fraction", fraction])
    assert exited.value.code == 2
    assert "--memory-fraction: expected a fraction of the GPU's memory in (0, 0.9]" in capsys.readouterr().err


@pytest.mark.parametrize("fraction", ["0.9", "0.25", "1e-3"])
def test_memory_fraction_inside_is_accepted(fraction):
    assert cli.parse_args(["--check-args", "--memory-fraction", fraction]).memory_fraction == float(fraction)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--conv-kernel", "8"], "--conv-kernel must be odd"),
        (["--conv-size", "5", "--conv-kernel", "7"], "--conv-kernel 7 is larger than the image"),
        (["--device", "gpu0"], "expected a CUDA device such as cuda or cuda:1"),
        (["--device", "cpu"], "expected a CUDA device"),
        (["--benchmarks", "sgemm,fft"], "(fft unknown)"),
        (["--benchmarks", ","], "expected comma-separated benchmarks"),
        (["--transpose-variants", "shared_memory"], "(shared_memory unknown)"),
        (["--transfer-mb", "0"], "expected a positive integer"),
        (["--histogram-mb", "-64"], "expected a positive integer"),
        (["--repeats", "0"], "expected a positive integer"),
        (["--warmup", "0"], "expected a positive integer"),
        (["--labels-json", '{"workload": "other"}'], "must not contradict the run's own labels: workload"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.parse_args(["--check-args", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_and_canonical_lists():
    args = cli.parse_args(
        [
            "--check-args",
            "--device",
            "cuda",
            "--benchmarks",
            "transpose,sgemm,sgemm",
            "--transpose-variants",
            "naive,copy",
        ]
    )
    assert args.device == "cuda:0" and args.benchmarks == ["sgemm", "transpose"]
    assert args.transpose_variants == ["copy", "naive"]
    assert (args.transfer_mb, args.memory_fraction, args.conv_size, args.conv_kernel) == (256, 0.25, 8192, 7)
    assert (args.histogram_mb, args.transpose_size, args.threads) == (64, 8192, None)
    assert cli.main(["--check-args", "--device", "cuda:3", "--threads", "64"]) == 0  # --threads is the runner's


def test_check_args_imports_no_framework_and_prints_nothing():
    code, stdout, stderr, imported = check_args("micro_gpu", "--memory-fraction", "0.5", "--benchmarks", "sgemm")
    assert (code, stdout, stderr) == (0, "", "")
    assert "workloads" in imported and not imported & {"torch", "numpy", "triton"}


# -- rates ----------------------------------------------------------------------------------------------------


def test_rate_formulas():
    assert reference.bandwidth_gbs(256 * MIB, 10.0) == pytest.approx(256 * 2**20 / 0.01 / 1e9)
    assert reference.bandwidth_gbs(1e9, 1000.0) == pytest.approx(1.0)
    assert reference.transpose_gbs(1e9, 1000.0) == pytest.approx(2.0)  # read and write
    assert reference.sgemm_gflops(1000, 1000.0) == pytest.approx(2.0)  # 2 n^3 FLOP
    assert reference.sgemm_gflops(40960, 2500.0) == pytest.approx(2 * 40960**3 / 2.5 / 1e9)
    assert reference.mpixels_per_second(8192, 8192, 10.0) == pytest.approx(8192 * 8192 / 0.01 / 1e6)
    assert reference.median([3.0, 1.0, 2.0]) == 2.0 and reference.median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_sgemm_size_fills_the_fraction_with_three_aligned_float32_matrices():
    h100 = 85_520_809_984  # bytes, as torch reports an H100 80GB
    n = reference.sgemm_size(h100, 0.25)
    assert n % 256 == 0 and 3 * n * n * 4 <= 0.25 * h100 < 3 * (n + 256) ** 2 * 4
    assert reference.sgemm_size(3 * 4 * 1024**2, 1.0) == 1024
    assert reference.sgemm_size(3 * 4 * 1023**2, 1.0) == 768
    assert reference.sgemm_size(3 * 4 * 255**2, 1.0) == 0


def test_sample_indices_cover_both_ends_and_the_middle():
    assert reference.sample_indices(100, 4) == [0, 1, 2, 3, 48, 49, 50, 51, 96, 97, 98, 99]
    assert reference.sample_indices(5, 8) == [0, 1, 2, 3, 4]


# -- CPU references: right results pass, wrong ones are caught ------------------------------------------------


def test_copy_check():
    source = torch.randint(0, 256, (3 * MIB,), dtype=torch.uint8)
    copy = source.clone()
    reference.check_copy("transfer h2d_pinned", source, copy)
    for where in (0, 3 * MIB // 2, 3 * MIB - 1):
        wrong = copy.clone()
        wrong[where] ^= 1
        with pytest.raises(WorkloadFailed, match=rf"^transfer h2d_pinned: .*element {where} is"):
            reference.check_copy("transfer h2d_pinned", source, wrong)
    with pytest.raises(WorkloadFailed, match="shape"):
        reference.check_copy("transfer d2d", source, copy[:-1])


def test_sgemm_check_passes_float32_products_and_catches_a_wrong_element():
    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(512, 512, generator=generator), torch.randn(512, 512, generator=generator)
    c = a @ b
    reference.check_sgemm(a, b, c)
    wrong = c.clone()
    wrong[511, 256] += 0.01 * c.abs().mean()  # 1% of a typical element
    with pytest.raises(WorkloadFailed, match=r"^sgemm: the GPU result differs .*C\[511, 256\]"):
        reference.check_sgemm(a, b, wrong)
    with pytest.raises(WorkloadFailed, match="sgemm"):
        reference.check_sgemm(a, b, (b @ a))  # a wrong operand order
    nan = c.clone()
    nan[0, 0] = math.nan
    with pytest.raises(WorkloadFailed, match=r"C\[0, 0\] is nan"):
        reference.check_sgemm(a, b, nan)


def test_conv2d_reference_equals_torch_conv2d_and_catches_errors_at_the_border():
    generator = torch.Generator().manual_seed(2)
    image = torch.randn(1, 1, 80, 96, generator=generator)
    weight = torch.randn(1, 1, 7, 7, generator=generator)
    output = torch.nn.functional.conv2d(image, weight, padding=3)
    expected, magnitude = reference.conv2d_crop_reference(image, weight, 0, 90, 10, 6)  # a corner: zero padding
    assert np.allclose(expected, output[0, 0, 0:10, 90:96].double().numpy(), rtol=0, atol=1e-4)
    assert (magnitude >= np.abs(expected)).all()
    reference.check_conv2d(image, weight, output)
    for row, col in ((0, 0), (79, 95), (40, 48)):  # each checked crop
        wrong = output.clone()
        wrong[0, 0, row, col] += 0.05
        with pytest.raises(WorkloadFailed, match=rf"^conv2d: .*output\[{row}, {col}\]"):
            reference.check_conv2d(image, weight, wrong)
    unpadded = torch.nn.functional.conv2d(torch.nn.functional.pad(image, (3, 3, 3, 3)), weight)
    reference.check_conv2d(image, weight, unpadded)  # the same maths written otherwise
    with pytest.raises(WorkloadFailed, match="conv2d"):
        reference.check_conv2d(image, weight.flip(-1, -2), output)  # a flipped filter (true convolution)


@pytest.mark.parametrize("bins", [64, 256])
def test_histogram_counts_match_numpy_exactly_and_a_miscount_is_caught(bins):
    data = torch.randint(0, 256, (5 * MIB + 17,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    counts = reference.histogram_counts(data, bins)
    expected = np.bincount(data.numpy() >> (8 - int(math.log2(bins))), minlength=bins)
    assert counts.tolist() == expected.tolist() and int(counts.sum()) == data.numel()
    reference.check_histogram(data, counts, bins)
    wrong = counts.clone()
    wrong[bins - 1] -= 1
    with pytest.raises(WorkloadFailed, match=rf"^histogram \({bins} bins\): .*first bin {bins - 1}"):
        reference.check_histogram(data, wrong, bins)
    with pytest.raises(WorkloadFailed, match="bins instead of"):
        reference.check_histogram(data, counts[:-1], bins)


def test_histogram64_keeps_the_top_six_bits():
    data = torch.tensor([0, 3, 4, 255, 252, 251], dtype=torch.uint8)
    assert reference.histogram_counts(data, 64)[[0, 1, 62, 63]].tolist() == [2, 1, 1, 2]
    with pytest.raises(ValueError, match="power of two"):
        reference.histogram_counts(data, 100)


def test_transpose_check_is_exact_on_rows_and_columns():
    source = torch.rand(70, 45)
    reference.check_transpose("transpose naive", source, source.t().contiguous())
    reference.check_transpose("transpose copy", source, source.clone(), transposed=False)
    for row, col in ((0, 0), (44, 69), (22, 35), (3, 5)):
        wrong = source.t().contiguous()
        wrong[row, col] = -1.0
        with pytest.raises(WorkloadFailed, match=rf"^transpose naive: .*result\[{row}, {col}\] is -1.0"):
            reference.check_transpose("transpose naive", source, wrong)
    with pytest.raises(WorkloadFailed, match=r"shape \(70, 45\) instead of \(45, 70\)"):
        reference.check_transpose("transpose naive", source, source.clone())


# -- the benchmarks' own code, on CPU tensors -----------------------------------------------------------------


class CpuTiming(benchmarks.Timing):
    """Timing on the CPU's clock, for running the benchmarks' code here."""

    def milliseconds(self, operation):
        import time

        times = []
        for _ in range(self.warmup + self.repeats):
            started = time.perf_counter()
            operation()
            times.append((time.perf_counter() - started) * 1e3 + 1e-6)
        return times[self.warmup :]


def _cpu_torch(total_memory):
    """torch, with a torch.cuda that reports `total_memory` and pinned allocations that are plain ones."""
    cuda = types.SimpleNamespace(
        mem_get_info=lambda device: (total_memory, total_memory),
        get_device_properties=lambda device: types.SimpleNamespace(total_memory=total_memory),
        synchronize=lambda device=None: None,
        empty_cache=lambda: None,
    )

    def empty(*shape, pin_memory=False, **options):
        return torch.empty(*shape, **options)

    return types.SimpleNamespace(
        **{name: getattr(torch, name) for name in ("uint8", "randint", "randn", "rand", "mm", "Generator", "nn")},
        empty=empty,
        empty_like=torch.empty_like,
        cuda=cuda,
    )


def _units(metrics):
    for entry in metrics:
        assert lookup(entry["metric"]).unit == entry["unit"] and entry["value"] > 0


def test_benchmarks_run_and_check_on_cpu_tensors():
    fake = _cpu_torch(total_memory=3 * 4 * 256**2 * 4)  # SGEMM at fraction 0.25: n = 256
    timing = CpuTiming(fake, torch.device("cpu"), warmup=1, repeats=3, seed=0)
    metrics, metadata = benchmarks.transfers(timing, 1)
    assert [(m["metric"], m.get("labels")) for m in metrics] == [
        ("gpu_h2d_bandwidth", {"transfer": "pinned"}),
        ("gpu_h2d_bandwidth", {"transfer": "pageable"}),
        ("gpu_d2h_bandwidth", {"transfer": "pinned"}),
        ("gpu_d2h_bandwidth", {"transfer": "pageable"}),
        ("gpu_d2d_bandwidth", None),
    ]
    assert metadata["transfer_bytes"] == MIB and len(metadata["timings_ms"]["d2d"]) == 3
    d2d = reference.median(metadata["timings_ms"]["d2d"])
    assert metrics[-1]["value"] == pytest.approx(
        reference.bandwidth_gbs(2 * MIB, d2d), rel=0.02
    )  # timings kept to 0.1 us
    _units(metrics)
    metrics, metadata = benchmarks.sgemm(timing, 0.25)
    assert metadata["sgemm_n"] == 256 and metrics[0]["metric"] == "gpu_sgemm"
    _units(metrics)
    metrics, _ = benchmarks.conv2d(timing, 64, 7)
    assert metrics[0]["metric"] == "gpu_conv2d"
    _units(metrics)
    metrics, metadata = benchmarks.histograms(timing, 1, (64, 256))
    assert [m["labels"] for m in metrics] == [{"bins": 64}, {"bins": 256}] and metadata["histogram_bytes"] == MIB
    _units(metrics)
    kernels = types.SimpleNamespace(
        launch=lambda name, source, destination: destination.copy_(source if name == "copy" else source.t())
    )
    metrics, metadata = benchmarks.transposes(timing, kernels, 96, ["copy", "naive"])
    assert [m["labels"] for m in metrics] == [{"variant": "copy"}, {"variant": "naive"}]
    assert set(metadata["transpose_variants"]) == {"copy", "naive"}
    _units(metrics)


def test_a_wrong_kernel_fails_the_benchmark_by_name():
    timing = CpuTiming(_cpu_torch(2**30), torch.device("cpu"), warmup=1, repeats=1, seed=0)
    kernels = types.SimpleNamespace(launch=lambda name, source, destination: destination.copy_(source))
    with pytest.raises(WorkloadFailed, match=r"^transpose tiled_32x32: the GPU result differs"):
        benchmarks.transposes(timing, kernels, 64, ["tiled_32x32"])


def test_too_little_free_memory_names_the_option():
    timing = CpuTiming(_cpu_torch(MIB), torch.device("cpu"), warmup=1, repeats=1, seed=0)
    with pytest.raises(WorkloadFailed, match="transfers of 1 MiB needs 0.00 GiB.*lower --transfer-mb"):
        benchmarks.transfers(timing, 1)
    with pytest.raises(WorkloadFailed, match="leaves no room .* raise --memory-fraction"):
        benchmarks.sgemm(timing, 0.25)


# -- Triton kernels in the interpreter ------------------------------------------------------------------------


TRANSPOSES_IN_THE_INTERPRETER = """
import sys, torch
from workloads.micro_gpu import reference, transpose
from workloads.micro_gpu.settings import TRANSPOSE_VARIANTS
rows, cols = int(sys.argv[1]), int(sys.argv[2])
source = torch.rand(rows, cols)
for name in TRANSPOSE_VARIANTS:
    destination = torch.zeros(transpose.output_shape(name, rows, cols))
    transpose.launch(name, source, destination)
    reference.check_transpose(f"transpose {name}", source, destination, transposed=name != "copy")
    print("checked", name)
"""


@skips.needs_gpu("Triton comes with the CUDA torch that the lab installs on GPU hosts")
@skips.needs_lab()
@pytest.mark.parametrize("shape", [(70, 45), (64, 64), (33, 130)])
def test_transpose_kernels_in_triton_interpreter(shape):
    """The kernels in Triton's interpreter, on CPU tensors, in the workload venv (TRITON_INTERPRET is read
    when the kernels are decorated, at import)."""
    process = subprocess.run(
        [WORKLOAD_PYTHON, "-c", TRANSPOSES_IN_THE_INTERPRETER, *map(str, shape)],
        cwd=REPO_ROOT,
        env={**ENV, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.split("\n")[:-1] == [f"checked {name}" for name in TRANSPOSE_VARIANTS]
