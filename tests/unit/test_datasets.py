"""workloads.datasets: the generators write the published formats byte for byte, the loaders read them back."""

import gzip
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workloads.datasets import cifar10, imdb, mnist, ptb
from workloads.datasets.base import DatasetError

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_generator(module, *args):
    """Runs a generator as users do, `python -m workloads.datasets.<module>`; returns the paths it printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.run(
        [sys.executable, "-m", f"workloads.datasets.{module}", *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr
    return process.stdout.split()


# --- MNIST idx ---------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_mnist_generator_writes_idx_files(tmp_path, compress):
    paths = run_generator("mnist", "--out", tmp_path, "--images", 30, *(["--gzip"] if compress else []))
    suffix = ".gz" if compress else ""
    assert paths == [
        str(tmp_path / f"train-images-idx3-ubyte{suffix}"),
        str(tmp_path / f"train-labels-idx1-ubyte{suffix}"),
    ]
    opener = gzip.open if compress else open
    with opener(paths[0], "rb") as images_file, opener(paths[1], "rb") as labels_file:
        images_bytes, labels_bytes = images_file.read(), labels_file.read()
    # Parsed by hand, independently of the module's reader.
    assert struct.unpack(">IIII", images_bytes[:16]) == (0x00000803, 30, 28, 28)
    assert struct.unpack(">II", labels_bytes[:8]) == (0x00000801, 30)
    assert (len(images_bytes), len(labels_bytes)) == (16 + 30 * 784, 8 + 30)
    labels = np.frombuffer(labels_bytes[8:], np.uint8)
    assert labels.max() <= 9

    images, read_labels = mnist.load_train(str(tmp_path))
    assert (images.shape, images.dtype, read_labels.dtype) == ((30, 28, 28), np.uint8, np.uint8)
    assert np.array_equal(images.reshape(30, -1), np.frombuffer(images_bytes[16:], np.uint8).reshape(30, -1))
    assert np.array_equal(read_labels, labels)
    first, first_labels = mnist.load_train(str(tmp_path), limit=7)
    assert np.array_equal(first, images[:7]) and np.array_equal(first_labels, labels[:7])


def test_mnist_synthetic_digits_differ_by_class():
    images, labels = mnist.synthetic(400, seed=3)
    means = np.stack([images[labels == digit].mean(axis=0) for digit in range(10)])
    # Pixels of one class's images agree with their own class mean better than with any other's.
    own = [np.abs(images[labels == d] - means[d]).mean() for d in range(10)]
    other = [np.abs(images[labels == d] - means[(d + 1) % 10]).mean() for d in range(10)]
    assert all(a < b for a, b in zip(own, other, strict=False))


def test_idx_round_trip_of_other_element_types(tmp_path):
    path = str(tmp_path / "values-idx2-int")
    values = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    mnist.write_idx(path, values)
    assert Path(path).read_bytes()[:4] == b"\x00\x00\x0c\x02"
    assert np.array_equal(mnist.read_idx(path), values)


def test_mnist_reader_rejects_wrong_files(tmp_path):
    mnist.generate(str(tmp_path), 5)
    images = tmp_path / "train-images-idx3-ubyte"
    labels = tmp_path / "train-labels-idx1-ubyte"
    with pytest.raises(DatasetError, match="magic number 0x00000801, expected 0x00000803"):
        mnist.read_idx(str(labels), mnist.IMAGES_MAGIC)
    images.write_bytes(images.read_bytes()[:-1])
    with pytest.raises(DatasetError) as truncated:
        mnist.load_train(str(tmp_path))
    message = str(truncated.value)
    assert "promises 3920 data bytes" in message
    assert (
        "train-images-idx3-ubyte[.gz]" in message and f"python -m workloads.datasets.mnist --out {tmp_path}" in message
    )
    labels.unlink()
    with pytest.raises(DatasetError, match="train-labels-idx1-ubyte not found"):
        mnist.load_train(str(tmp_path))


# --- CIFAR-10 binary -----------------------------------------------------------------------------


def test_cifar10_generator_writes_binary_batches(tmp_path):
    paths = run_generator("cifar10", "--out", tmp_path, "--images", 23)
    folder = tmp_path / "cifar-10-batches-bin"
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin", "batches.meta.txt"]
    assert paths == [str(folder / name) for name in names]
    sizes = [(folder / name).stat().st_size for name in names[:6]]
    assert all(size % 3073 == 0 and size > 0 for size in sizes)
    assert sum(sizes[:5]) == 23 * 3073
    assert (folder / "batches.meta.txt").read_text().split() == list(cifar10.CLASS_NAMES)

    raw = np.fromfile(folder / "data_batch_1.bin", np.uint8).reshape(-1, 3073)
    images, labels = cifar10.load_train(str(tmp_path))
    assert (images.shape, labels.shape) == ((23, 32, 32, 3), (23,))
    assert labels.max() <= 9 and np.array_equal(labels[: len(raw)], raw[:, 0])
    # Record layout: label byte, then the red plane, the green plane, the blue plane, each row-major.
    first = raw[0, 1:].reshape(3, 32, 32)
    assert np.array_equal(images[0], first.transpose(1, 2, 0))
    # DIR may also be the batches folder itself.
    assert np.array_equal(cifar10.load_train(str(folder))[0], images)


def test_cifar10_planes_are_red_green_blue(tmp_path):
    image = np.zeros((1, 32, 32, 3), np.uint8)
    image[..., 0], image[..., 1], image[..., 2] = 10, 20, 30
    image[0, 0, 1, 0] = 99  # red, row 0, column 1
    path = tmp_path / "batch.bin"
    cifar10.write_batch(path, image, [7])
    data = path.read_bytes()
    assert len(data) == 3073 and data[0] == 7
    assert data[1:3] == bytes([10, 99]) and set(data[3:1025]) == {10}
    assert set(data[1025:2049]) == {20} and set(data[2049:]) == {30}


def test_cifar10_reader_rejects_wrong_layouts(tmp_path):
    cifar10.generate(str(tmp_path), 10)
    folder = tmp_path / "cifar-10-batches-bin"
    with open(folder / "data_batch_3.bin", "ab") as batch:
        batch.write(b"\0" * 100)
    with pytest.raises(DatasetError, match="not a whole number of 3073-byte CIFAR-10 records") as odd:
        cifar10.load_train(str(tmp_path))
    assert "python -m workloads.datasets.cifar10 --out" in str(odd.value)
    (folder / "data_batch_5.bin").unlink()
    with pytest.raises(DatasetError, match=r"data_batch_5\.bin not found; expected cifar-10-batches-bin/"):
        cifar10.load_train(str(tmp_path))


# --- PTB text ------------------------------------------------------------------------------------


def test_ptb_generator_writes_ptb_text(tmp_path):
    paths = run_generator("ptb", "--out", tmp_path, "--words", 2000, "--vocab", 60)
    assert paths == [str(tmp_path / name) for name in ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")]
    lines = Path(paths[0]).read_text().splitlines(keepends=True)
    assert all(line.startswith(" ") and line.endswith(" \n") and "  " not in line for line in lines)
    words = [word for line in lines for word in line.split()]
    assert 2000 <= len(words) + len(lines) < 2100
    assert len(set(words)) <= 59 and "<unk>" in set(words)

    ids, vocabulary = ptb.load_train(str(tmp_path))
    assert ids.dtype == np.int32 and len(ids) == len(words) + len(lines)
    assert len(vocabulary) == len(set(words)) + 1 and vocabulary[ids[len(lines[0].split())]] == "<eos>"
    counts = np.bincount(ids)
    assert list(counts) == sorted(counts, reverse=True)  # most frequent word first


def test_ptb_reader_takes_the_simple_examples_layout_and_rejects_others(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ptb.train.txt").write_text(" the cat sat \n the dog \n")
    ids, vocabulary = ptb.load_train(str(tmp_path))
    assert vocabulary == ["<eos>", "the", "cat", "dog", "sat"]
    assert ids.tolist() == [1, 2, 4, 0, 1, 3, 0]
    (tmp_path / "data" / "ptb.train.txt").write_bytes(b"\xff\xfe binary")
    with pytest.raises(DatasetError, match="not UTF-8"):
        ptb.load_train(str(tmp_path))
    shutil.rmtree(tmp_path / "data")
    with pytest.raises(
        DatasetError, match=f"ptb.train.txt not found.*python -m workloads.datasets.ptb --out {tmp_path}"
    ):
        ptb.load_train(str(tmp_path))


# --- IMDB aclImdb --------------------------------------------------------------------------------


def test_imdb_generator_writes_the_aclimdb_layout(tmp_path):
    assert run_generator("imdb", "--out", tmp_path, "--reviews", 9) == [str(tmp_path / "aclImdb" / "train")]
    for name, ratings, count in (("neg", range(1, 5), 4), ("pos", range(7, 11), 5)):
        files = sorted((tmp_path / "aclImdb" / "train" / name).iterdir())
        assert len(files) == count
        for path in files:
            review_id, rating = path.stem.split("_")
            assert int(rating) in ratings and review_id.isdigit()
            text = path.read_text(encoding="utf-8")
            assert "\n" not in text and "<br /><br />" in text
    texts, labels = imdb.load_train(str(tmp_path), limit=6)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert texts[0] == (tmp_path / "aclImdb/train/neg/0_1.txt").read_text()
    # DIR may also be aclImdb itself.
    assert imdb.load_train(str(tmp_path / "aclImdb"))[1].tolist() == [0] * 4 + [1] * 5


def test_imdb_reviews_are_learnable_from_their_words():
    rng = np.random.default_rng(0)
    rare = [f"rare{i}" for i in range(100)]
    positive_words = set(imdb._SENTIMENT[1])
    shares = {label: [] for label in (0, 1)}
    for label in (0, 1):
        for _ in range(20):
            tokens = imdb.tokenize(imdb.synthetic_review(label, rng, rare))
            shares[label].append(sum(token in positive_words for token in tokens) / len(tokens))
    assert min(shares[1]) > max(shares[0])


def test_imdb_tokens_vocabulary_and_fixed_length_ids():
    assert imdb.tokenize("I didn't LIKE it.<br /><br />Great film, 10/10!") == [
        "i",
        "didn't",
        "like",
        "it",
        "great",
        "film",
        "10",
        "10",
    ]
    vocabulary = imdb.build_vocabulary([["b", "a", "b"], ["c"]], max_size=4)
    assert vocabulary == ["<pad>", "<unk>", "b", "a"]
    ids = imdb.encode([["a", "b", "c"], ["b"] * 6], vocabulary, 4)
    assert ids.tolist() == [[0, 3, 2, 1], [2, 2, 2, 2]]


def test_imdb_reader_names_the_layout_and_the_generator(tmp_path):
    with pytest.raises(DatasetError) as missing:
        imdb.load_train(str(tmp_path))
    assert "aclImdb/train/pos/<id>_<rating>.txt" in str(missing.value)
    assert f"python -m workloads.datasets.imdb --out {tmp_path}" in str(missing.value)
    imdb.generate(str(tmp_path), 4)
    with pytest.raises(DatasetError, match="holds 2 review files.*3 are needed"):
        imdb.load_train(str(tmp_path), limit=6)
