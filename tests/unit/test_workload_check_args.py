"""--check-args: every workload checks its parameters with its own parser, as the controller calls it
(`python -m workloads.NAME --check-args ARGS...`), without training and without importing a framework."""

import os
import subprocess
import sys

import pytest
from workload_run import ENV, REPO_ROOT

from workloads.cnn_train.settings import MODELS
from workloads.dl_tools.settings import NETS as DL_TOOLS_NETS
from workloads.inference_e2e.apps.base import APPS as INFERENCE_APPS
from workloads.small_models.settings import NETS as SMALL_MODELS_NETS

FRAMEWORKS = ("torch", "tensorflow", "keras", "jax")
# A valid argv per workload, and the flag that names its model.
VALID = {
    "cnn_train": (["--framework", "torch", "--model", "tiny", "--batch-size", "8"], "--model", MODELS),
    "dl_tools": (["--net", "fcn5", "--data-dir", "/nonexistent/mnist"], "--net", DL_TOOLS_NETS),
    "inference_e2e": (["--app", "ic", "--data-dir", "/nonexistent/imagenet"], "--app", INFERENCE_APPS),
    "small_models": (["--net", "mnist_cnn", "--data-dir", "/nonexistent/mnist"], "--net", SMALL_MODELS_NETS),
}


def check_args(module, *argv):
    """(exit code, stdout, stderr without import lines, top-level modules imported) of one --check-args run."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", f"workloads.{module}", "--check-args", *map(str, argv)],
        cwd=REPO_ROOT,
        env={**ENV, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported, messages = set(), []
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            imported.add(line.rsplit("|", 1)[1].strip().split(".")[0])
        else:
            messages.append(line)
    return done.returncode, done.stdout, "\n".join(messages), imported


@pytest.mark.parametrize("workload", sorted(VALID))
def test_valid_parameters_exit_0_silently_without_a_framework(workload):
    code, stdout, stderr, imported = check_args(workload, *VALID[workload][0])
    assert (code, stdout, stderr) == (0, "", "")
    assert "workloads" in imported  # the import log works: the workload itself shows up in it
    assert not imported & set(FRAMEWORKS)


@pytest.mark.parametrize("workload", sorted(VALID))
def test_an_unknown_model_names_the_flag_and_the_choices(workload):
    argv, flag, choices = VALID[workload]
    argv = list(argv)
    argv[argv.index(flag) + 1] = "resnet9000"
    code, stdout, stderr, imported = check_args(workload, *argv)
    allowed = ", ".join(repr(name) for name in choices)
    assert (code, stdout) == (2, "")
    assert f"error: argument {flag}: invalid choice: 'resnet9000' (choose from {allowed})" in stderr
    assert not imported & set(FRAMEWORKS)


@pytest.mark.parametrize("workload", sorted(VALID))
def test_a_batch_size_of_0_is_refused(workload):
    code, stdout, stderr, _ = check_args(workload, *VALID[workload][0], "--batch-size", 0)
    assert (code, stdout) == (2, "")
    assert "error: argument --batch-size: expected a positive integer, got '0'" in stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "resnet50", "--image-size", "16"], "--image-size for resnet50 must be at least 32, got 16"),
        (["--mode", "distributed", "--launch-local", "1"], "--launch-local 1: a distributed run needs at least 2"),
        (["--mode", "single", "--launch-local", "2"], "--launch-local is for --mode distributed"),
        (["--mode", "ps", "--framework", "torch"], "--mode ps is TensorFlow's CentralStorageStrategy"),
        (["--labels-json", '{"model": "alexnet"}'], "--labels-json must not contradict the run's own labels: model"),
    ],
)
def test_cnn_train_cross_argument_checks_run(argv, message):
    code, _, stderr, imported = check_args("cnn_train", *argv)
    assert code == 2 and message in stderr
    assert not imported & set(FRAMEWORKS)


def test_checks_that_depend_on_the_runner_are_left_to_it(tmp_path):
    more_than_here = len(os.sched_getaffinity(0)) + 1
    many_threads = ["--threads", more_than_here]
    # Without --check-args this host's CPUs bound --threads; the runner's CPUs are not known here.
    refused = subprocess.run(
        [sys.executable, "-m", "workloads.cnn_train", *map(str, many_threads)],
        cwd=REPO_ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "--threads must be at most" in refused.stderr
    assert check_args("cnn_train", *many_threads, "--mode", "ps", "--cpu-workers", more_than_here)[0] == 0
    # A data directory that does not exist here is the runner's; one that does exist is read.
    assert check_args("cnn_train", "--data", "real", "--data-dir", tmp_path / "elsewhere")[0] == 0
    code, _, stderr, _ = check_args("cnn_train", "--data", "real", "--data-dir", tmp_path)
    assert code == 2 and "--data-dir: neither a train/ folder nor TFRecord shards" in stderr


@pytest.mark.parametrize(
    "generator, argv, message",
    [
        ("mnist", ["--images", 0], "argument --images: expected a positive integer"),
        ("ptb", ["--vocab", 2], "--vocab must be at least 4, got 2"),
        ("imagenet", ["--images", 3, "--classes", 4], "--images (3) must be at least --classes (4)"),
        ("criteo", ["--rows", 0], "argument --rows: expected a positive integer"),
    ],
)
def test_dataset_generators_check_without_writing(tmp_path, generator, argv, message):
    out = tmp_path / "out"
    assert check_args(f"datasets.{generator}", "--out", out)[:3] == (0, "", "")
    code, _, stderr, _ = check_args(f"datasets.{generator}", "--out", out, *argv)
    assert code == 2 and message in stderr
    assert not out.exists()
