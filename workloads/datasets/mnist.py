"""MNIST in its published idx format: a reader for the real files and a generator of a small stand-in.

The training set is two files, plain or gzip-compressed exactly as published:
``train-images-idx3-ubyte[.gz]`` (magic 0x00000803, dims N x 28 x 28, unsigned bytes) and
``train-labels-idx1-ubyte[.gz]`` (magic 0x00000801, dim N, unsigned bytes 0-9). Every idx
header is big-endian: two zero bytes, a type code, the number of dimensions, then each size.

``python -m workloads.datasets.mnist --out DIR --images N`` writes N synthetic digits (strokes
per class, shifted and noisy, so a network can learn them) in that format.
"""

import gzip
import os
import struct
import sys

import numpy as np

from .base import DatasetError, first_existing, generator_parser, layout_error, run_generator

IMAGES_FILE = "train-images-idx3-ubyte"
LABELS_FILE = "train-labels-idx1-ubyte"
IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801
IMAGE_SIDE = 28
NUM_CLASSES = 10
GENERATOR = "python -m workloads.datasets.mnist"
EXPECTED = f"{IMAGES_FILE}[.gz] and {LABELS_FILE}[.gz] (MNIST idx files)"
# idx type code -> element type, big-endian as the format requires.
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IDX_CODES = {np.dtype(dtype): code for code, dtype in IDX_TYPES.items()}


def _open(path, mode="rb"):
    return gzip.open(path, mode) if path.endswith(".gz") else open(path, mode)


def write_idx(path, array):
    """Writes `array` as an idx file (gzip-compressed when `path` ends in .gz)."""
    array = np.ascontiguousarray(array)
    dtype = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    header = bytes([0, 0, IDX_CODES[np.dtype(dtype)], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with _open(path, "wb") as stream:
        stream.write(header + array.astype(dtype, copy=False).tobytes())


def read_idx(path, expected_magic=None, limit=None):
    """The array stored in an idx file; with `limit`, only its first `limit` entries along dim 0.

    Raises DatasetError when the header, the magic number or the size is not what idx requires.
    """
    with _open(path) as stream:
        try:
            head = stream.read(4)
            if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in IDX_TYPES:
                raise DatasetError(f"{path} is not an idx file (header {head.hex() or 'empty'})")
            magic = struct.unpack(">I", head)[0]
            if expected_magic is not None and magic != expected_magic:
                raise DatasetError(f"{path}: magic number 0x{magic:08x}, expected 0x{expected_magic:08x}")
            ndim = head[3]
            shape = list(struct.unpack(f">{ndim}I", stream.read(4 * ndim)))
            if limit is not None:
                shape[0] = min(shape[0], limit)
            dtype = np.dtype(IDX_TYPES[head[2]])
            wanted = int(np.prod(shape)) * dtype.itemsize
            payload = stream.read(wanted)
            trailing = limit is None and stream.read(1)
        except (OSError, EOFError, struct.error) as error:  # a truncated or corrupt gzip stream
            raise DatasetError(f"{path}: cannot read the idx file ({error})") from None
    if len(payload) != wanted or trailing:
        raise DatasetError(f"{path}: the header promises {wanted} data bytes for shape {shape}, the file differs")
    return np.frombuffer(payload, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _find(data_dir, name):
    return first_existing(os.path.join(data_dir, name), os.path.join(data_dir, name + ".gz"))


def find_files(data_dir):
    """(images path, labels path); DatasetError naming the files and the generator when either is missing."""
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    images, labels = _find(data_dir, IMAGES_FILE), _find(data_dir, LABELS_FILE)
    missing = [name for name, path in ((IMAGES_FILE, images), (LABELS_FILE, labels)) if path is None]
    if missing:
        raise layout_error(f"MNIST file {' and '.join(missing)} not found", data_dir, EXPECTED, GENERATOR)
    return images, labels


def load_train(data_dir, limit=None):
    """(images uint8 N x 28 x 28, labels uint8 N): the first `limit` training examples, or all."""
    images_path, labels_path = find_files(data_dir)
    try:
        images = read_idx(images_path, IMAGES_MAGIC, limit)
        labels = read_idx(labels_path, LABELS_MAGIC, limit)
        if images.shape[1:] != (IMAGE_SIDE, IMAGE_SIDE) or images.dtype != np.uint8:
            raise DatasetError(f"{images_path}: images are {images.dtype} {images.shape[1:]}, not uint8 28 x 28")
        if len(images) != len(labels):
            raise DatasetError(f"{images_path} holds {len(images)} images but {labels_path} {len(labels)} labels")
        if labels.size and labels.max() >= NUM_CLASSES:
            raise DatasetError(f"{labels_path}: label {labels.max()} is not a digit 0-9")
    except DatasetError as error:
        raise layout_error(str(error), data_dir, EXPECTED, GENERATOR) from None
    return images, labels


def _stroke_templates(rng):
    """One 28 x 28 template per class, each a few random thick strokes in the central 20 x 20."""
    rows, cols = np.mgrid[0:IMAGE_SIDE, 0:IMAGE_SIDE].astype(np.float32)
    templates = np.zeros((NUM_CLASSES, IMAGE_SIDE, IMAGE_SIDE), np.float32)
    for template in templates:
        for _ in range(3):
            (r0, c0), (r1, c1) = rng.uniform(4, 24, size=(2, 2))
            length2 = max((r1 - r0) ** 2 + (c1 - c0) ** 2, 1e-6)
            t = np.clip(((rows - r0) * (r1 - r0) + (cols - c0) * (c1 - c0)) / length2, 0, 1)
            distance = np.hypot(rows - (r0 + t * (r1 - r0)), cols - (c0 + t * (c1 - c0)))
            np.maximum(template, np.clip(1.8 - distance, 0, 1), out=template)
    return templates


def synthetic(count, seed=0):
    """(images, labels) in MNIST's types: noisy, shifted strokes, one stroke pattern per class."""
    rng = np.random.default_rng(seed)
    templates = _stroke_templates(rng)
    labels = rng.integers(0, NUM_CLASSES, size=count).astype(np.uint8)
    images = np.empty((count, IMAGE_SIDE, IMAGE_SIDE), np.uint8)
    for index, label in enumerate(labels):
        shifted = np.roll(templates[label], tuple(rng.integers(-2, 3, size=2)), axis=(0, 1))
        pixels = shifted * rng.uniform(180, 255) + rng.normal(0, 12, shifted.shape)
        images[index] = np.clip(pixels, 0, 255)
    return images, labels


def generate(out_dir, count, seed=0, compress=False):
    """Writes the two training files into `out_dir`; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    images, labels = synthetic(count, seed)
    suffix = ".gz" if compress else ""
    paths = [os.path.join(out_dir, IMAGES_FILE + suffix), os.path.join(out_dir, LABELS_FILE + suffix)]
    write_idx(paths[0], images)
    write_idx(paths[1], labels)
    return paths


def main(argv=None):
    parser = generator_parser("mnist", __doc__.split("\n")[0], "--images", 1024, "training images to write")
    parser.add_argument("--gzip", action="store_true", help="write .gz files, as MNIST is published")
    args = parser.parse_args(argv)
    return run_generator(args, lambda: generate(args.out, args.images, args.seed, args.gzip))


if __name__ == "__main__":
    sys.exit(main())
