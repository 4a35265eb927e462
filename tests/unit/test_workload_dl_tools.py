"""workloads.dl_tools, run as the hosts run it: `python -m workloads.dl_tools` in a subprocess, on small
datasets written in the real formats. One TensorFlow process per net (its import alone takes seconds)."""

import math
import shutil

import pytest
from workload_run import FRAMEWORKS, metric_values, only_record, run_module

from workloads.datasets import cifar10, mnist, ptb

MNIST_IMAGES = 768  # 12 batches of 64
PTB_VOCABULARY = 200


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """One folder with all three datasets, as small as the runs below allow."""
    folder = tmp_path_factory.mktemp("dl_tools_data")
    mnist.generate(str(folder), MNIST_IMAGES)
    cifar10.generate(str(folder), 40)
    ptb.generate(str(folder), 4000, PTB_VOCABULARY)
    return folder


def run_workload(*args):
    return run_module("dl_tools", *args)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fcn5_two_epochs_report_first_and_later_epochs_and_learn(data_dir, framework):
    labels = '{"experiment": "unit", "repeat": 0}'
    process, records = run_workload(
        "--net",
        "fcn5",
        "--framework",
        framework,
        "--data-dir",
        data_dir,
        "--batch-size",
        64,
        "--threads",
        1,
        "--labels-json",
        labels,
    )
    record = only_record(process, records)
    assert process.returncode == 0, process.stderr
    assert (record["schema"], record["workload"], record["status"], record["error"]) == (1, "dl_tools", "ok", None)
    assert record["labels"] == {
        "experiment": "unit",
        "repeat": 0,
        "workload": "dl_tools",
        "framework": framework,
        "net": "fcn5",
        "batch_size": 64,
        "data": "mnist",
        "threads": 1,
        "epochs": 2,
        "max_batches_per_epoch": None,
    }
    values = metric_values(record)
    for period in ("epoch1", "later"):
        assert {f"batch_time_{period}_{name}" for name in ("mean", "std", "p50", "p90", "min", "max")} <= set(values)
    metadata = record["metadata"]
    first, later = metadata["batch_times"]
    assert len(first) == len(later) == metadata["batches_per_epoch"] == MNIST_IMAGES // 64
    assert values["batch_time_epoch1_mean"] == pytest.approx(sum(first) / len(first), rel=1e-3)
    assert values["batch_time_later_mean"] == pytest.approx(sum(later) / len(later), rel=1e-3)
    # Throughput counts the later epochs only: the first one carries the warm-up.
    assert values["throughput"] == pytest.approx(64 * len(later) / sum(later), rel=1e-3)
    assert 0 <= values["data_load"] < values["startup"] < values["elapsed"]
    assert metadata["model_params"] == 784 * 2048 + 2048 + 2048 * 4096 + 4096 + 4096 * 1024 + 1024 + 1024 * 10 + 10
    assert metadata["dataset"]["samples"] == MNIST_IMAGES and metadata["study_batch_sizes"] == [512, 1024, 2048]
    if framework == "tensorflow":
        assert metadata["tf_function_traces"] == 1, "the training step must be traced once, not per batch"
    # It trains where the GPUs the plan lets it see are: none here.
    assert metadata["device"] == {"torch": "cpu", "tensorflow": "/CPU:0"}[framework]
    assert metadata["devices"] == []
    # Learnability: the synthetic digits are learned within two short epochs.
    assert all(math.isfinite(values[name]) for name in ("loss_first", "loss_last"))
    epoch1_loss, epoch2_loss = metadata["epoch_loss_mean"]
    assert epoch2_loss < epoch1_loss - 0.1
    assert values["loss_last"] < values["loss_first"]


def _lstm_params(vocabulary, framework):
    recurrent_bias = 2 if framework == "torch" else 1  # PyTorch keeps two bias vectors per LSTM layer
    per_layer = 4 * 256 * (256 + 256 + recurrent_bias)
    return vocabulary * 256 + 2 * per_layer + 256 * vocabulary + vocabulary


NETS = [
    ("alexnet", 8, 3 * 25 * 32 + 32 + 32 * 25 * 32 + 32 + 32 * 25 * 64 + 64 + 1024 * 10 + 10),
    ("resnet50", 2, 23_520_842),  # torchvision's resnet50 with the 3x3 CIFAR stem and 10 classes
    ("lstm", 8, None),
]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("net, batch_size, expected_params", NETS, ids=[net for net, _, _ in NETS])
def test_every_net_trains_a_few_batches(data_dir, net, batch_size, expected_params, framework):
    process, records = run_workload(
        "--net",
        net,
        "--framework",
        framework,
        "--data-dir",
        data_dir,
        "--batch-size",
        batch_size,
        "--epochs",
        1,
        "--max-batches-per-epoch",
        2,
        "--threads",
        1,
    )
    record = only_record(process, records)
    assert record["status"] == "ok", record["error"]
    assert process.returncode == 0
    values = metric_values(record)
    assert all(math.isfinite(values[name]) for name in ("loss_first", "loss_last"))
    # One epoch: no later-epoch metrics, throughput over the first epoch.
    assert not any(name.startswith("batch_time_later") for name in values)
    times = record["metadata"]["batch_times"]
    assert len(times) == 1 and len(times[0]) == 2
    assert values["throughput"] == pytest.approx(batch_size * 2 / sum(times[0]), rel=1e-3)
    dataset = record["metadata"]["dataset"]
    if net == "lstm":
        # The vocabulary is built from the file: the words that occur in it, and <eos>.
        assert PTB_VOCABULARY // 2 < dataset["vocabulary_size"] <= PTB_VOCABULARY and dataset["sequence_length"] == 32
        expected_params = _lstm_params(dataset["vocabulary_size"], framework)
        assert [entry["unit"] for entry in record["metrics"] if entry["metric"] == "throughput"] == ["sequences/sec"]
    else:
        assert dataset["input_shape"] == [32, 32, 3] and dataset["samples"] == 40
    assert record["metadata"]["model_params"] == expected_params


def _corrupt_images_magic(folder):
    (folder / "train-images-idx3-ubyte").write_bytes((folder / "train-labels-idx1-ubyte").read_bytes())


def _truncate_cifar_batch(folder):
    batch = folder / "cifar-10-batches-bin" / "data_batch_2.bin"
    batch.write_bytes(batch.read_bytes()[:-5])


GENERATE = "python -m workloads.datasets"
BAD_INPUTS = [
    (["--net", "vgg16"], None, ["fcn5", "alexnet", "resnet50", "lstm"]),
    (["--net", "fcn5", "--framework", "jax"], None, ["tensorflow", "torch"]),
    (["--net", "fcn5", "--batch-size", "0"], None, ["--batch-size", "positive integer"]),
    (["--net", "fcn5", "--epochs", "-1"], None, ["--epochs", "positive integer"]),
    (["--net", "fcn5", "--threads", "1000"], None, ["--threads must be at most"]),
    (["--net", "fcn5", "--labels-json", '{"net": "lstm"}'], None, ["contradict", "net"]),
    (
        ["--net", "fcn5", "--data-dir", "/nonexistent/data"],
        None,
        [
            "/nonexistent/data does not exist",
            "train-images-idx3-ubyte[.gz]",
            f"{GENERATE}.mnist --out /nonexistent/data",
        ],
    ),
    (
        ["--net", "fcn5"],
        "empty",
        ["train-images-idx3-ubyte and train-labels-idx1-ubyte not found", f"{GENERATE}.mnist --out"],
    ),
    (["--net", "alexnet"], "empty", ["data_batch_1.bin", "cifar-10-batches-bin/", f"{GENERATE}.cifar10 --out"]),
    (["--net", "lstm"], "empty", ["ptb.train.txt not found", f"{GENERATE}.ptb --out"]),
    (
        ["--net", "fcn5"],
        _corrupt_images_magic,
        ["magic number 0x00000801, expected 0x00000803", f"{GENERATE}.mnist --out"],
    ),
    (["--net", "resnet50"], _truncate_cifar_batch, ["3073-byte CIFAR-10 records", f"{GENERATE}.cifar10 --out"]),
    (
        ["--net", "fcn5", "--batch-size", "5000"],
        None,
        [f"{MNIST_IMAGES} mnist training samples, fewer than one batch of 5000"],
    ),
]


def _data_folder(data_dir, tmp_path, layout):
    """None: the good data; "empty": an empty folder; a function: a copy of the good data that it breaks."""
    if layout is None:
        return data_dir
    if callable(layout):
        shutil.copytree(data_dir, tmp_path, dirs_exist_ok=True)
        layout(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "args, layout, expected",
    BAD_INPUTS,
    ids=[" ".join(args) + f" {getattr(layout, '__name__', layout)}" for args, layout, _ in BAD_INPUTS],
)
def test_bad_input_exits_2_and_says_what_was_expected(data_dir, tmp_path, args, layout, expected):
    if "--data-dir" not in args:
        args = [*args, "--data-dir", _data_folder(data_dir, tmp_path, layout)]
    process, records = run_workload(*args)
    assert process.returncode == 2, process.stdout + process.stderr
    assert records == []
    for text in expected:
        assert text in process.stderr
