"""cnn_train --data real: the ImageNet-layout generator and the input pipelines that read its files."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workload_run import metric_values, records_of

from tests import skips
from workloads.common import RESULT_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATOR = "python -m workloads.datasets.imagenet"
needs_tf = skips.requires(modules=["tensorflow"])
needs_torch = skips.requires(modules=["torch", "PIL"])
needs_jpeg_encoder = skips.requires(modules=["PIL"])
CLASSES, IMAGES = 4, 64


def run_module(module, *args, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def generate(out, *args):
    process = run_module("workloads.datasets.imagenet", "--out", out, *args)
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout)


def train(*args):
    """(process, the one record) of a tiny cnn_train run on one thread."""
    process = run_module("workloads.cnn_train", "--model", "tiny", "--image-size", 32, "--threads", 1, *args)
    records = records_of(process.stdout)
    assert len(records) == 1, process.stdout + process.stderr
    assert records[0]["status"] == "ok", records[0]["error"] + process.stderr[-3000:]
    return process, records[0]


@pytest.fixture(scope="module")
def jpeg_dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("imagenet") / "jpeg"
    summary = generate(out, "--images", IMAGES, "--classes", CLASSES, "--image-size", 32, "--val-images", 8)
    return out, summary


@needs_jpeg_encoder
def test_generator_writes_the_imagenet_folder_layout(jpeg_dataset):
    out, summary = jpeg_dataset
    classes = sorted(path.name for path in (out / "train").iterdir())
    assert classes == [f"n{label:08d}" for label in range(CLASSES)]
    files = sorted((out / "train").glob("*/*"))
    assert len(files) == IMAGES == summary["train_images"]
    for path in files:
        assert path.suffix == ".JPEG" and path.name.startswith(path.parent.name + "_")
        assert path.read_bytes()[:3] == b"\xff\xd8\xff", f"{path} is not a JPEG"
    assert [len(list((out / "train" / name).iterdir())) for name in classes] == [IMAGES // CLASSES] * CLASSES
    assert summary["train_jpeg_bytes"] == sum(path.stat().st_size for path in files)
    assert len(list((out / "val").glob("n*/*.JPEG"))) == 8
    if importlib.util.find_spec("PIL"):
        from PIL import Image

        sizes = [Image.open(path).size for path in files]
        assert all(32 <= side <= 40 for size in sizes for side in size)
        assert len(set(sizes)) > 1, "image sizes vary, so that the pipeline's resize and crop do real work"


@needs_jpeg_encoder
@pytest.mark.parametrize(
    "args, expected",
    [(["--images", "3", "--classes", "4"], "at least --classes"), (["--images", "0"], "positive integer")],
)
def test_generator_rejects_bad_input(tmp_path, args, expected):
    process = run_module("workloads.datasets.imagenet", "--out", tmp_path / "out", *args)
    assert process.returncode == 2 and expected in process.stderr


@needs_jpeg_encoder
def test_generator_refuses_a_non_empty_directory(jpeg_dataset):
    out, _ = jpeg_dataset
    process = run_module("workloads.datasets.imagenet", "--out", out, "--images", 4, "--classes", 2)
    assert process.returncode == 2 and "not empty" in process.stderr


def check_reads(record, data_dir, batches, batch_size):
    """The run consumed batches x batch_size images, read from these very files, each epoch in full."""
    files = sorted(Path(data_dir, "train").glob("*/*.JPEG"))
    info = record["metadata"]["input"]
    images = batches * batch_size
    assert images % len(files) == 0, "the test sizes are chosen to consume whole epochs"
    epochs = images // len(files)
    assert (info["batches"], info["files_read"], info["dataset_files"]) == (batches, images, len(files))
    assert info["distinct_files_read"] == len(files)
    assert info["bytes_read"] == epochs * sum(path.stat().st_size for path in files)
    assert info["epochs"] == epochs


def check_learns(record):
    losses = record["metadata"]["losses"]
    assert all(math.isfinite(loss) for loss in losses)
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.7 * first, f"loss did not decrease enough: {first:.3f} -> {last:.3f}"


def check_timing(record, steps):
    values = metric_values(record)
    step_times = record["metadata"]["step_times"]
    data_waits = record["metadata"]["data_waits"]
    assert len(step_times) == len(data_waits) == steps
    assert 0 <= values["data_load"] <= sum(step_times)
    assert values["data_load"] == pytest.approx(sum(data_waits), abs=1e-4)
    assert 0 < values["data_first_batch"] < values["elapsed"]
    assert values["throughput"] == pytest.approx(16 * steps / sum(step_times), rel=1e-3)


@needs_tf
def test_tensorflow_reads_the_jpeg_files_every_epoch_and_learns(jpeg_dataset):
    out, _ = jpeg_dataset
    # 2 + 30 batches of 16 = 8 epochs of the 64 images.
    _, record = train("--data", "real", "--data-dir", out, "--batch-size", 16, "--warmup-steps", 2, "--steps", 30)
    assert record["labels"]["data"] == "real"
    assert (record["metadata"]["data_format"], record["metadata"]["num_classes"]) == ("jpeg", CLASSES)
    assert record["metadata"]["data_dir"] == str(out)
    assert record["metadata"]["tf_function_traces"] == 1
    check_reads(record, out, 32, 16)
    check_learns(record)
    check_timing(record, 30)


@needs_torch
def test_torch_dataloader_reads_the_jpeg_files_every_epoch_and_learns(jpeg_dataset):
    out, _ = jpeg_dataset
    real_data = ["--framework", "torch", "--data", "real", "--data-dir", out, "--data-workers", 2]
    _, record = train(*real_data, *"--batch-size 16 --warmup-steps 4 --steps 28".split())
    assert record["metadata"]["input"]["data_workers"] == 2
    check_reads(record, out, 32, 16)
    check_learns(record)
    check_timing(record, 28)


@needs_tf
def test_tensorflow_reads_tfrecord_shards(tmp_path):
    summary = generate(
        tmp_path, "--images", 48, "--classes", CLASSES, "--image-size", 32, "--format", "tfrecord", "--shards", 3
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"train-0000{i}-of-00003" for i in range(3)]
    # 1 + 11 batches of 8 = 2 epochs of the 48 records. The labels in the shards are 1..4: a
    # reader that forgot the offset would hand the loss an out-of-range class and fail.
    real_data = ["--data", "real", "--data-dir", tmp_path, "--num-classes", CLASSES]
    _, record = train(*real_data, *"--batch-size 8 --warmup-steps 1 --steps 11".split())
    info = record["metadata"]["input"]
    assert record["metadata"]["data_format"] == "tfrecord"
    assert (info["files_read"], info["shards"]) == (96, 3)
    assert info["bytes_read"] == 2 * summary["train_jpeg_bytes"]
    assert all(math.isfinite(loss) for loss in record["metadata"]["losses"])


def _loose_jpegs(root):
    (root / "train").mkdir(parents=True)
    (root / "train" / "a.JPEG").write_bytes(b"\xff\xd8\xff")


def _train_folder_itself(root):
    (root / "n00000000").mkdir(parents=True)
    (root / "n00000000" / "x.JPEG").write_bytes(b"\xff\xd8\xff")


def _incomplete_shards(root):
    root.mkdir()
    (root / "train-00000-of-00002").write_bytes(b"")


BAD_LAYOUTS = {
    "missing": (lambda root: None, [], ["does not exist", "train/<class_name>/*.JPEG", GENERATOR]),
    "empty": (lambda root: root.mkdir(), [], ["neither a train/ folder nor TFRecord shards", GENERATOR]),
    "loose-jpegs": (_loose_jpegs, [], ["not in class folders", "train/<class_name>/*.JPEG", GENERATOR]),
    "train-folder-itself": (_train_folder_itself, [], ["pass its parent", GENERATOR]),
    "incomplete-shards": (_incomplete_shards, [], ["incomplete", "train-NNNNN-of-NNNNN", GENERATOR]),
    "torch-tfrecord": (_incomplete_shards, ["--data-format", "tfrecord"], None),
}


@pytest.mark.parametrize("name", BAD_LAYOUTS)
def test_a_wrong_data_dir_exits_2_and_says_what_was_expected(tmp_path, name):
    make, extra, expected = BAD_LAYOUTS[name]
    root = tmp_path / "data"
    make(root)
    framework = "torch" if name == "torch-tfrecord" else "tensorflow"
    if name == "torch-tfrecord":
        (root / "train-00001-of-00002").write_bytes(b"")
        expected = ["only --framework tensorflow reads", "DIR/train/<class_name>/*.JPEG"]
    process = run_module(
        "workloads.cnn_train", "--framework", framework, "--model", "tiny", "--data", "real", "--data-dir", root, *extra
    )
    assert process.returncode == 2, process.stderr
    assert RESULT_PREFIX not in process.stdout
    for text in expected:
        assert text in process.stderr


def test_real_data_needs_a_directory_and_synthetic_takes_none(tmp_path):
    missing = run_module("workloads.cnn_train", "--model", "tiny", "--data", "real")
    assert missing.returncode == 2 and "--data-dir DIR" in missing.stderr and GENERATOR in missing.stderr
    stray = run_module("workloads.cnn_train", "--model", "tiny", "--data-dir", tmp_path)
    assert stray.returncode == 2 and "--data-dir is read only with --data real" in stray.stderr


@needs_jpeg_encoder
def test_more_classes_on_disk_than_the_model_has_is_rejected(jpeg_dataset):
    out, _ = jpeg_dataset
    process = run_module(
        "workloads.cnn_train", "--model", "tiny", "--data", "real", "--data-dir", out, "--num-classes", 2
    )
    assert process.returncode == 2 and "fewer than the 4 class folders" in process.stderr


@needs_torch
def test_the_torch_path_never_imports_tensorflow(jpeg_dataset):
    out, _ = jpeg_dataset
    code = (
        "import sys; from workloads.cnn_train import cli, torch_backend; "
        f"args = cli.parse_args(['--framework', 'torch', '--model', 'tiny', '--image-size', '32', '--data', 'real', "
        f"'--data-dir', {str(out)!r}, '--data-workers', '0', '--batch-size', '4', '--threads', '1']); "
        "t = torch_backend.build_trainer(args); t.step(t.next_batch()); print('tensorflow' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.strip() == "False", result.stderr


@needs_jpeg_encoder
def test_scan_needs_only_the_standard_library(jpeg_dataset):
    out, _ = jpeg_dataset
    code = (
        "import sys; from workloads.datasets.imagenet import scan; layout = scan(sys.argv[1]); "
        "print(layout.format, len(layout.class_names), layout.size, "
        "[m for m in ('numpy', 'tensorflow', 'torch', 'PIL') if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["jpeg", str(CLASSES), str(IMAGES), "[]"]
