"""Model FLOPs counted from the models themselves, against published figures and against each
other (the Keras and PyTorch versions of every network are the same architecture)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

needs_frameworks = skips.requires(modules=["torch", "tensorflow"])

GMAC = 2e9  # FLOPs in a billion multiply-adds
REPO_ROOT = Path(__file__).resolve().parents[2]


# Counted in a fresh process, as the workloads count them: torch's FLOP counter loads
# torch._dynamo, which cannot import beside the Ansible loaded in the test process.
COUNTS = """
import json, os, torch
os.environ["KERAS_BACKEND"] = "tensorflow"
from workloads.cnn_train import models_tf, models_torch
from workloads.common.flops import keras_forward_flops, torch_forward_flops
from workloads.dl_tools import models_tf as dl_tf, models_torch as dl_torch
counts = {}
for name, size in (("resnet50", 224), ("inception3", 299), ("alexnet", 227)):
    counts[name] = [keras_forward_flops(models_tf.build_model(name, size, 1000)),
                    torch_forward_flops(getattr(models_torch, name)(size, 1000), torch.zeros(1, 3, size, size))]
counts["lstm"] = [keras_forward_flops(dl_tf.build_model("lstm", 1000), sequence_length=32),
                  torch_forward_flops(dl_torch.build_model("lstm", 1000), torch.zeros(1, 32, dtype=torch.long))]
tiny = models_torch.tiny(32, 10).train()
counts["tiny"] = [torch_forward_flops(tiny, torch.zeros(1, 3, 32, 32)),
                  torch_forward_flops(tiny, torch.zeros(4, 3, 32, 32)), tiny.training]
print(json.dumps(counts))
"""


@pytest.fixture(scope="module")
def counts():
    done = subprocess.run(
        [sys.executable, "-c", COUNTS],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def alexnet_macs_by_hand():
    """tf_cnn_benchmarks' AlexNet at 227x227: (output positions, MACs per output) per layer."""
    convs = [
        (55 * 55 * 64, 11 * 11 * 3),
        (27 * 27 * 192, 5 * 5 * 64),
        (13 * 13 * 384, 3 * 3 * 192),
        (13 * 13 * 384, 3 * 3 * 384),
        (13 * 13 * 256, 3 * 3 * 384),
    ]
    dense = [(4096, 6 * 6 * 256), (4096, 4096), (1000, 4096)]
    return sum(outputs * per_output for outputs, per_output in convs + dense)


@needs_frameworks
@pytest.mark.parametrize(
    "model_name, image_size, published_gmac",
    [
        ("resnet50", 224, 4.1),  # ResNet-50 v1.5 (torchvision, MLPerf): 4.09 GMAC
        ("inception3", 299, 5.7),  # InceptionV3 (torchvision, Keras): 5.71 GMAC
        ("alexnet", 227, alexnet_macs_by_hand() / 1e9),
    ],
)
def test_cnn_forward_flops_match_published_figures_in_both_frameworks(counts, model_name, image_size, published_gmac):
    keras_count, torch_count = counts[model_name]
    assert keras_count == torch_count
    assert keras_count / GMAC == pytest.approx(published_gmac, rel=0.05)


@needs_frameworks
def test_recurrent_layers_are_counted_in_torch_as_in_keras(counts):
    vocabulary, steps, units = 1000, 32, 256
    two_lstm_layers = 2 * 2 * steps * (units + units) * 4 * units
    softmax_layer = 2 * steps * units * vocabulary
    assert counts["lstm"] == [two_lstm_layers + softmax_layer] * 2


@needs_frameworks
def test_a_batch_counts_its_samples_and_training_mode_is_restored(counts):
    one, four, still_training = counts["tiny"]
    assert four == 4 * one and still_training


def test_utilisation_metrics():
    from workloads.common.flops import TRAINING_PASSES, utilisation_metrics

    metrics = {
        entry["metric"]: (entry["value"], entry["unit"])
        for entry in utilisation_metrics(10.0, 8e9, TRAINING_PASSES, 400e9)
    }
    assert metrics == {
        "model_flops": (24.0, "GFLOP/sample"),
        "achieved_flops": (240.0, "GFLOP/s"),
        "peak_flops": (400.0, "GFLOP/s"),
        "mfu": (0.6, "ratio"),
    }
    without_peak = [entry["metric"] for entry in utilisation_metrics(10.0, 8e9, 3, None)]
    assert without_peak == ["model_flops", "achieved_flops"]


def test_unknown_sequence_length_is_asked_for():
    from workloads.common.flops import _known

    assert _known((None, 32, 8), None) == [32, 8]
    assert _known((None, None, 8), 16) == [16, 8]
    with pytest.raises(ValueError, match="sequence_length"):
        _known((None, None, 8), None)


@needs_frameworks
def test_keras_functional_and_sequential_models_are_walked_layer_by_layer():
    import keras

    from workloads.common.flops import keras_forward_flops

    inner = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    inputs = keras.Input((6, 6, 2))
    x = keras.layers.Conv2D(3, 3, padding="same")(inputs)  # 36 positions x 3 filters x 18 MACs
    x = keras.layers.DepthwiseConv2D(3, padding="valid")(x)  # 16 positions x 3 channels x 9 MACs
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(8)(x)  # 48 x 8 MACs
    model = keras.Model(inputs, inner(x))  # 8 x 4 MACs
    assert keras_forward_flops(model) == 2 * (36 * 3 * 18 + 16 * 3 * 9 + 48 * 8 + 8 * 4)


def test_a_failing_count_or_peak_keeps_the_run_and_says_why():
    from workloads.common.flops import training_flop_metrics

    def broken():
        raise RuntimeError("no GEMM here")

    metadata = {}
    assert training_flop_metrics(10.0, broken, None, "torch", "float32", 1, metadata) == []
    assert metadata == {"utilisation_error": "RuntimeError: no GEMM here"}
    metadata = {}
    # 10 samples/s of 3 passes (forward and backward) of 8 GFLOP, on a 400 GFLOP/s peak.
    assert [
        (entry["metric"], entry["value"], entry["unit"])
        for entry in training_flop_metrics(10.0, lambda: (8e9, "cpu"), 400.0, "torch", "float32", 1, metadata)
    ] == [
        ("model_flops", pytest.approx(24.0), "GFLOP/sample"),
        ("achieved_flops", pytest.approx(240.0), "GFLOP/s"),
        ("peak_flops", pytest.approx(400.0), "GFLOP/s"),
        ("mfu", pytest.approx(0.6), "ratio"),
    ]
    assert metadata == {"peak_source": "--peak-gflops"}
