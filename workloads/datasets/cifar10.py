"""CIFAR-10 in its published binary version: a reader for the real files and a generator of a small stand-in.

``cifar-10-batches-bin/data_batch_{1..5}.bin`` hold the training set as fixed-size records:
1 label byte (0-9), then 3072 pixel bytes, the 1024 red values first, then green, then blue,
each plane row-major 32 x 32. ``test_batch.bin`` has the same records, ``batches.meta.txt``
the class names, one per line.

``python -m workloads.datasets.cifar10 --out DIR --images N`` writes N synthetic training images
(a colour pattern per class, shifted, flipped and noisy, so a network can learn them) spread
over the five batch files, in that layout under DIR/cifar-10-batches-bin.
"""

import os
import sys

import numpy as np

from .base import DatasetError, first_existing, generator_parser, layout_error, run_generator

FOLDER = "cifar-10-batches-bin"
TRAIN_FILES = tuple(f"data_batch_{index}.bin" for index in range(1, 6))
TEST_FILE = "test_batch.bin"
META_FILE = "batches.meta.txt"
IMAGE_SIDE = 32
CHANNELS = 3
RECORD_BYTES = 1 + CHANNELS * IMAGE_SIDE * IMAGE_SIDE  # 3073
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GENERATOR = "python -m workloads.datasets.cifar10"
EXPECTED = f"{FOLDER}/data_batch_1.bin ... data_batch_5.bin (CIFAR-10 binary version, {RECORD_BYTES}-byte records)"


def batches_dir(data_dir):
    """The folder holding the batch files: DIR/cifar-10-batches-bin, or DIR itself when it is that folder."""
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    folder = first_existing(os.path.join(data_dir, FOLDER, TRAIN_FILES[0]), os.path.join(data_dir, TRAIN_FILES[0]))
    folder = os.path.dirname(folder) if folder else os.path.join(data_dir, FOLDER)
    missing = [name for name in TRAIN_FILES if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        raise layout_error(f"CIFAR-10 file(s) {', '.join(missing)} not found", data_dir, EXPECTED, GENERATOR)
    return folder


def read_batch(path):
    """(images uint8 N x 32 x 32 x 3, i.e. NHWC, labels uint8 N) of one batch file."""
    size = os.path.getsize(path)
    if size == 0 or size % RECORD_BYTES:
        raise DatasetError(f"{path}: {size} bytes is not a whole number of {RECORD_BYTES}-byte CIFAR-10 records")
    records = np.fromfile(path, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    labels = records[:, 0].copy()
    if labels.max() >= len(CLASS_NAMES):
        raise DatasetError(f"{path}: label byte {labels.max()} is not a class 0-9; is this the CIFAR-100 layout?")
    images = records[:, 1:].reshape(-1, CHANNELS, IMAGE_SIDE, IMAGE_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def load_train(data_dir):
    """(images uint8 N x 32 x 32 x 3, labels uint8 N) of the five training batches, in file order."""
    folder = batches_dir(data_dir)
    try:
        batches = [read_batch(os.path.join(folder, name)) for name in TRAIN_FILES]
    except DatasetError as error:
        raise layout_error(str(error), data_dir, EXPECTED, GENERATOR) from None
    return np.concatenate([images for images, _ in batches]), np.concatenate([labels for _, labels in batches])


def write_batch(path, images, labels):
    """Writes NHWC uint8 images and their labels as CIFAR-10 binary records."""
    planes = np.asarray(images, np.uint8).transpose(0, 3, 1, 2).reshape(len(images), -1)
    records = np.concatenate([np.asarray(labels, np.uint8)[:, None], planes], axis=1)
    records.tofile(path)


def synthetic(count, seed=0):
    """(images NHWC uint8, labels uint8): a smooth colour pattern per class, shifted, flipped and noisy."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, size=(len(CLASS_NAMES), 4, 4, CHANNELS))
    templates = coarse.repeat(IMAGE_SIDE // 4, axis=1).repeat(IMAGE_SIDE // 4, axis=2)
    labels = rng.integers(0, len(CLASS_NAMES), size=count).astype(np.uint8)
    images = np.empty((count, IMAGE_SIDE, IMAGE_SIDE, CHANNELS), np.uint8)
    for index, label in enumerate(labels):
        image = np.roll(templates[label], tuple(rng.integers(-3, 4, size=2)), axis=(0, 1))
        if rng.random() < 0.5:
            image = image[:, ::-1]
        images[index] = np.clip(image + rng.normal(0, 25, image.shape), 0, 255)
    return images, labels


def generate(out_dir, count, seed=0):
    """Writes data_batch_1..5.bin (count images split over them, at least one each), test_batch.bin and
    batches.meta.txt under out_dir/cifar-10-batches-bin; returns their paths."""
    folder = os.path.join(out_dir, FOLDER)
    os.makedirs(folder, exist_ok=True)
    count = max(count, len(TRAIN_FILES))
    test_count = -(-count // len(TRAIN_FILES))
    images, labels = synthetic(count + test_count, seed)
    bounds = np.linspace(0, count, len(TRAIN_FILES) + 1).astype(int).tolist() + [count + test_count]
    paths = [os.path.join(folder, name) for name in TRAIN_FILES + (TEST_FILE, META_FILE)]
    for path, start, stop in zip(paths, bounds, bounds[1:], strict=False):
        write_batch(path, images[start:stop], labels[start:stop])
    with open(paths[-1], "w") as meta:
        meta.write("\n".join(CLASS_NAMES) + "\n\n")
    return paths


def main(argv=None):
    parser = generator_parser("cifar10", __doc__.split("\n")[0], "--images", 1000, "training images to write")
    args = parser.parse_args(argv)
    return run_generator(args, lambda: generate(args.out, args.images, args.seed))


if __name__ == "__main__":
    sys.exit(main())
