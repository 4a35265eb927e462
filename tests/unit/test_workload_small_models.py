"""workloads.small_models, run as the hosts run it: `python -m workloads.small_models` in a subprocess,
on MNIST idx files and an aclImdb folder written by the generators."""

import json
import math
import os
import subprocess
import sys

import pytest
from workload_run import REPO_ROOT, metric_values, only_record, run_module

from tests import skips
from workloads.datasets import imdb, mnist

needs_torch = skips.requires(modules=["torch"])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("small_models_data")
    mnist.generate(str(folder), 512)
    imdb.generate(str(folder), 200)
    return folder


def run_workload(*args):
    return run_module("small_models", *args)


@needs_torch
def test_mnist_cnn_epoch_reports_real_user_system_time_and_learns(data_dir):
    labels = '{"experiment": "unit", "repeat": 1}'
    process, records = run_workload(
        "--net", "mnist_cnn", "--data-dir", data_dir, "--batch-size", 16, "--threads", 1, "--labels-json", labels
    )
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    assert (record["workload"], record["status"], record["error"]) == ("small_models", "ok", None)
    assert record["labels"] == {
        "experiment": "unit",
        "repeat": 1,
        "workload": "small_models",
        "framework": "torch",
        "net": "mnist_cnn",
        "batch_size": 16,
        "batch_size_search": None,
        "data": "mnist",
        "samples": 512,
        "epochs": 1,
        "threads": 1,
        "device": "cpu",
    }
    values = metric_values(record)
    assert values["throughput"] == pytest.approx(512 / values["epoch_time"], rel=1e-6)
    assert 0 < values["epoch_time"] < values["elapsed"]
    assert values["user_time"] > values["epoch_user_time"] > 0 and values["system_time"] >= 0
    assert values["step_time_min"] <= values["step_time_p50"] <= values["step_time_max"]
    metadata = record["metadata"]
    assert metadata["batches_per_epoch"] == 32 and len(metadata["batch_times"]) == 32
    # PyTorch's MNIST example network: 320 + 18,496 + 1,179,776 + 1,290 parameters.
    assert (metadata["model_params"], metadata["optimizer"]) == (1_199_882, "Adadelta")
    assert metadata["profile"] is None and "CUDA is not available" in metadata["profile_reason"]
    # A CPU cell: no GPU profile metrics at all, the reason above instead.
    assert not [name for name in values if name.startswith(("gpu_", "roofline_"))]
    assert all(math.isfinite(values[name]) for name in ("loss_first", "loss_last"))
    assert values["loss_last"] < values["loss_first"] - 0.5, "32 batches of synthetic digits must be learned"


@needs_torch
def test_imdb_rnn_trains_on_aclimdb_reviews(data_dir):
    process, records = run_workload(
        "--net",
        "imdb_rnn",
        "--data-dir",
        data_dir / "aclImdb",
        "--samples",
        100,
        "--batch-size",
        32,
        "--epochs",
        2,
        "--threads",
        1,
    )
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    values = metric_values(record)
    assert all(math.isfinite(values[name]) for name in ("loss_first", "loss_last"))
    assert values["throughput"] == pytest.approx(2 * 100 / (2 * values["epoch_time"]), rel=1e-6)
    metadata = record["metadata"]
    assert len(metadata["epoch_times"]) == 2 and metadata["batches_per_epoch"] == 4  # 32+32+32+4: the last one short
    dataset = metadata["dataset"]
    assert (dataset["samples"], dataset["positive"], dataset["max_length"]) == (100, 50, 200)
    vocabulary = dataset["vocabulary_size"]
    assert metadata["model_params"] == vocabulary * 100 + (100 * 256 + 256 * 256 + 2 * 256) + 256 + 1
    assert [entry["unit"] for entry in record["metrics"] if entry["metric"] == "throughput"] == ["reviews/sec"]


@needs_torch
def test_batch_size_search_picks_the_fastest_candidate(data_dir):
    process, records = run_workload(
        "--net",
        "mnist_cnn",
        "--data-dir",
        data_dir,
        "--samples",
        128,
        "--batch-size-search",
        "16,32",
        "--search-batches",
        2,
        "--threads",
        1,
    )
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    search = record["metadata"]["batch_size_search"]
    assert search["candidates"] == [16, 32]
    assert [trial["batch_size"] for trial in search["trials"]] == [16, 32]
    assert all(trial["timed_batches"] == 2 and trial["seconds"] > 0 for trial in search["trials"])
    fastest = max(search["trials"], key=lambda trial: trial["samples_per_sec"])
    assert search["chosen"] == fastest["batch_size"] == record["labels"]["batch_size"]
    assert record["labels"]["batch_size_search"] == "16,32"
    assert record["metadata"]["batches_per_epoch"] == 128 // search["chosen"]
    assert metric_values(record)["search_time"] >= sum(trial["seconds"] for trial in search["trials"])


@needs_torch
def test_profiled_operator_costs_come_from_shapes_and_dtypes():
    # In a fresh interpreter: torch.profiler cannot load beside Ansible's patches of this test process.
    code = """
import json, torch
from torch.profiler import ProfilerActivity, profile
from workloads.small_models.profiling import operator_costs
layer = torch.nn.Linear(64, 32)
with profile(activities=[ProfilerActivity.CPU], with_flops=True, record_shapes=True) as profiler:
    layer(torch.zeros(8, 64))
print(json.dumps(operator_costs(profiler.events())))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    costs = json.loads(process.stdout.splitlines()[-1])
    assert costs == [["aten::addmm", 2 * 8 * 64 * 32, 4 * (32 + 8 * 64 + 64 * 32)]]


BAD_INPUTS = [
    (["--net", "resnet18"], ["mnist_cnn", "imdb_rnn"]),
    (["--net", "mnist_cnn", "--batch-size", "0"], ["--batch-size", "positive integer"]),
    (["--net", "mnist_cnn", "--batch-size", "1024"], ["batch size 1024 is larger than the 512 training samples"]),
    (["--net", "mnist_cnn", "--batch-size-search", "64,-1"], ["--batch-size-search", "positive integers"]),
    (["--net", "mnist_cnn", "--batch-size", "64", "--batch-size-search", "64,128"], ["exclude each other"]),
    (["--net", "mnist_cnn", "--device", "tpu"], ["auto", "cpu", "cuda"]),
    (["--net", "mnist_cnn", "--samples", "600"], ["512 mnist training samples, 600 are needed", "--images 600"]),
    (["--net", "imdb_rnn", "--samples", "400"], ["holds 100 review files", "200 are needed", "--reviews 400"]),
]
MISSING_DATA = [
    ("mnist_cnn", ["train-images-idx3-ubyte[.gz]", "python -m workloads.datasets.mnist --out"]),
    ("imdb_rnn", ["aclImdb/train/pos/<id>_<rating>.txt", "python -m workloads.datasets.imdb --out"]),
]


def _assert_exit_2(process, records, expected):
    assert process.returncode == 2, process.stdout + process.stderr
    assert records == []
    for text in expected:
        assert text in process.stderr


@pytest.mark.parametrize("args, expected", BAD_INPUTS, ids=[" ".join(args) for args, _ in BAD_INPUTS])
def test_bad_input_exits_2_and_says_what_was_expected(data_dir, args, expected):
    _assert_exit_2(*run_workload(*args, "--data-dir", data_dir), expected)


@pytest.mark.parametrize("net, expected", MISSING_DATA)
def test_missing_dataset_exits_2_naming_files_and_generator(tmp_path, net, expected):
    _assert_exit_2(*run_workload("--net", net, "--data-dir", tmp_path), expected)


@needs_torch
def test_device_cuda_profiles_the_gpu_or_exits_2_without_one(data_dir):
    process, records = run_workload(
        "--net", "mnist_cnn", "--device", "cuda", "--samples", 64, "--profile-batches", 2, "--data-dir", data_dir
    )
    if process.returncode == 2:
        _assert_exit_2(process, records, ["--device cuda", "CUDA is not available"])
        return
    # A machine with CUDA: the GPU path and its profile.
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    metadata = record["metadata"]
    profile, values = metadata["profile"], metric_values(record)
    assert record["labels"]["device"] == "cuda" and profile["batches"] == 2 and profile["samples"] == 64
    assert profile["kernel_launches"] == values["gpu_kernel_count"] > 0 and profile["top_kernels"]
    assert profile["h2d_copy_count"] > 0 and values["gpu_h2d_copy_time"] > 0 and values["gpu_kernel_time"] > 0
    assert values["gpu_achieved_flops"] > 0 and metadata["profile_sources"]["achieved_flops"]
    # DRAM throughput with ncu's counters, else the reason they are missing.
    assert ("gpu_dram_read_throughput" in values) != ("dram_counters_reason" in metadata)
    assert values["roofline_peak_flops"] > 0 and values["roofline_peak_bandwidth"] > 0
    assert values["roofline_attainable_flops"] <= values["roofline_peak_flops"]
    assert metadata["roofline"]["bound"] in ("memory", "compute") and metadata["roofline_device"]


@needs_torch
def test_the_ncu_section_trains_the_runs_job_and_says_what_it_profiled(data_dir):
    from workloads.small_models.cli import parse_args
    from workloads.small_models.section import section_argv

    args = parse_args(["--net", "mnist_cnn", "--data-dir", str(data_dir), "--samples", "64", "--threads", "1"])
    argv = section_argv(args, 3, python=sys.executable)
    assert argv[:3] == [sys.executable, "-m", "workloads.small_models.section"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options == {
        "--net": "mnist_cnn",
        "--data-dir": str(data_dir),
        "--samples": "64",
        "--batch-size": "64",
        "--batches": "3",
        "--threads": "1",
        "--seed": "0",
        "--device": "cuda",
    }
    # On this CPU-only machine: the same job and batches on the CPU, no profiled range.
    argv[-1] = "cpu"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "profiled section: 3 batches, 192 samples of mnist_cnn on cpu"
    assert "PLATBENCH_RESULT" not in process.stdout
