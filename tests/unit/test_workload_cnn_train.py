"""workloads.cnn_train, run as the hosts run it: `python -m workloads.cnn_train` in a subprocess."""

import math
import subprocess
import sys

import pytest
from workload_run import ENV, FIRST_CPU, FRAMEWORKS, REPO_ROOT, metric_values, only_record, run_module

from tests import skips

needs_taskset = skips.requires(commands=["taskset"], by="util-linux (in every Debian system)")
TINY_ARGS = "--model tiny --image-size 32 --batch-size 8 --warmup-steps 1 --threads 1".split()


def run_workload(*args, one_cpu=False):
    return run_module("cnn_train", *args, one_cpu=one_cpu)


@needs_taskset
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_run_reports_a_complete_record(framework):
    labels = '{"experiment": "unit", "repeat": 0}'
    process, records = run_workload(
        "--framework", framework, *TINY_ARGS, "--steps", "3", "--labels-json", labels, one_cpu=True
    )
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    assert (record["schema"], record["workload"], record["status"], record["error"]) == (1, "cnn_train", "ok", None)
    assert record["labels"] == {
        "experiment": "unit",
        "repeat": 0,
        "workload": "cnn_train",
        "framework": framework,
        "model": "tiny",
        "batch_size": 8,
        "image_size": 32,
        "data": "synthetic",
        "dtype": "float32",
        "threads": 1,
        "warmup_steps": 1,
        "steps": 3,
    }
    values = metric_values(record)
    assert values["throughput"] > 0
    assert all(math.isfinite(values[name]) for name in ("loss_first", "loss_last"))
    assert 0 < values["startup"] < values["elapsed"]
    assert values["step_time_min"] <= values["step_time_p50"] <= values["step_time_p90"] <= values["step_time_max"]
    step_times = record["metadata"]["step_times"]
    assert len(step_times) == 3
    assert values["throughput"] == pytest.approx(8 * 3 / sum(step_times), rel=1e-3)
    metadata = record["metadata"]
    assert (metadata["cpuset"], metadata["cpus_allowed_count"]) == (str(FIRST_CPU), 1)
    assert metadata["model_params"] == 16 * 27 + 16 + 32 * 144 + 32 + 33 * 1000
    assert metadata["framework_version"]
    if framework == "tensorflow":
        assert metadata["tf_function_traces"] == 1, "the training step must be traced once, not per call"
    # Model FLOPs: 3 passes x 2 FLOPs x the multiply-adds of conv1, conv2 and the classifier.
    forward_macs = 32 * 32 * 16 * 27 + 16 * 16 * 32 * 144 + 32 * 1000
    assert values["model_flops"] == pytest.approx(3 * 2 * forward_macs / 1e9)
    assert values["achieved_flops"] == pytest.approx(values["throughput"] * values["model_flops"])
    assert values["peak_flops"] > 0 and metadata["peak_source"] in ("measured", "cache")
    assert 0 < values["mfu"] <= 1
    assert values["mfu"] == pytest.approx(values["achieved_flops"] / values["peak_flops"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_model_learns(framework):
    process, records = run_workload("--framework", framework, *TINY_ARGS, "--steps", "30", "--peak-gflops", "0")
    values = metric_values(only_record(process, records))
    assert "mfu" not in values and "peak_flops" not in values and values["achieved_flops"] > 0  # --peak-gflops 0
    # Random labels on one fixed batch: at least the label frequencies must be learned.
    assert values["loss_last"] < values["loss_first"] - 1.0


BAD_INPUTS = [
    (["--model", "vgg16"], ["tiny", "alexnet", "resnet50", "inception3"]),
    (["--framework", "jax"], ["tensorflow", "torch"]),
    (["--batch-size", "0"], ["--batch-size", "positive integer"]),
    (["--steps", "-5"], ["--steps", "positive integer"]),
    (["--warmup-steps", "many"], ["--warmup-steps", "non-negative integer"]),
    (["--threads", "0"], ["--threads", "positive integer"]),
    (["--threads", "2"], ["--threads must be at most 1", f"({FIRST_CPU})"]),
    (["--data", "imagenet"], ["synthetic"]),
    (["--dtype", "float16"], ["float32", "bfloat16"]),
    (["--model", "inception3", "--image-size", "64"], ["inception3", "at least 75"]),
    (["--labels-json", "[1]"], ["JSON object"]),
    (["--peak-gflops", "-1"], ["--peak-gflops", "number >= 0"]),
    (["--labels-json", '{"model": "alexnet"}'], ["contradict", "model"]),
]


@needs_taskset
@pytest.mark.parametrize("args, expected", BAD_INPUTS, ids=[" ".join(args) for args, _ in BAD_INPUTS])
def test_bad_input_exits_2_and_says_what_was_expected(args, expected):
    process, records = run_workload("--model", "tiny", *args, one_cpu=True)
    assert process.returncode == 2
    assert records == []
    for text in expected:
        assert text in process.stderr


needs_torch = skips.requires(modules=["torch"])


@needs_torch
def test_failure_during_the_run_still_leaves_a_record():
    # A batch far beyond any address space: the synthetic data cannot be allocated.
    process, records = run_workload("--framework", "torch", "--model", "tiny", "--batch-size", str(10**12))
    record = only_record(process, records)
    assert process.returncode == 1
    assert (record["status"], record["metrics"]) == ("failed", [])
    assert record["error"].startswith("MemoryError: ")
    assert record["labels"]["batch_size"] == 10**12
    assert record["metadata"]["cpuset"]


@needs_torch
def test_torch_resnet50_trains_one_step():
    process, records = run_workload(
        *"--framework torch --model resnet50 --image-size 64 --batch-size 2 --warmup-steps 0 --steps 1".split()
    )
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    assert math.isfinite(metric_values(record)["loss_last"])


@needs_torch
@pytest.mark.parametrize(
    "model, image_size, expected_params, tolerance",
    [
        ("resnet50", 224, 25_557_032, 0),  # torchvision's resnet50
        ("inception3", 299, 23_834_568, 0),  # torchvision's inception_v3 less its auxiliary head
        ("alexnet", 227, 61_000_000, 0.05),  # tf_cnn_benchmarks' variant: 384 channels in conv4
    ],
)
def test_torch_models_have_the_standard_shapes(model, image_size, expected_params, tolerance):
    import torch

    from workloads.cnn_train.models_torch import build_model, parameter_count

    network = build_model(model, image_size, 1000).eval()
    assert parameter_count(network) == pytest.approx(expected_params, rel=tolerance)
    with torch.no_grad():
        assert network(torch.zeros(1, 3, image_size, image_size)).shape == (1, 1000)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bfloat16_is_an_explicit_mixed_precision_option(framework):
    process, records = run_workload(
        "--framework", framework, *TINY_ARGS, "--steps", "20", "--dtype", "bfloat16", "--peak-gflops", "100"
    )
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    values = metric_values(record)
    assert record["labels"]["dtype"] == "bfloat16"
    # The same model, the same FLOPs; the peak given on the command line.
    assert values["peak_flops"] == 100.0 and record["metadata"]["peak_source"] == "--peak-gflops"
    assert values["mfu"] == pytest.approx(values["achieved_flops"] / 100.0)
    assert values["loss_last"] < values["loss_first"]


def test_fused_momentum_updates_equal_keras_sgd():
    code = """
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np, tensorflow as tf, keras
from workloads.cnn_train.tf_backend import MomentumSGD
shapes = [(3, 2), (4,)]
keras_vars = [keras.Variable(np.full(shape, 1.5, np.float32)) for shape in shapes]
fused_vars = [keras.Variable(np.full(shape, 1.5, np.float32)) for shape in shapes]
reference = keras.optimizers.SGD(0.01, momentum=0.9)
reference.build(keras_vars)
fused = MomentumSGD(fused_vars, 0.01, 0.9)
rng = np.random.default_rng(0)
for _ in range(5):
    gradients = [tf.constant(rng.normal(size=shape).astype(np.float32)) for shape in shapes]
    reference.apply_gradients(zip(gradients, keras_vars))
    fused.apply(gradients)
print(max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(keras_vars, fused_vars)),
      float(np.abs(keras_vars[0].numpy() - 1.5).max()))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    difference, moved = map(float, done.stdout.split())
    assert difference == 0.0 and moved > 0.0
