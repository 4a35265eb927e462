"""ImageNet as it is published for training: class folders of JPEG files, or TFRecord shards.

Two on-disk layouts are read unchanged (a real ImageNet directory works as it is):

- JPEG folders (the ILSVRC2012 train tarball unpacked): ``DIR/train/<class_name>/*.JPEG``.
  Class labels are the class folders' indices in sorted order, 0 .. C-1.
- TFRecord shards (``build_imagenet_data.py`` of tensorflow/models, as tf_cnn_benchmarks reads
  them): ``DIR/train-NNNNN-of-NNNNN``, each record a ``tf.train.Example`` with the features
  ``image/encoded`` (JPEG bytes) and ``image/class/label`` (int64, 1-based: 0 is the
  "background" class of that script, so readers subtract 1).

Scanning a directory (:func:`scan`) needs the standard library only, so that a workload can
reject a bad ``--data-dir`` before it imports numpy or a framework.

Run as a program, this module writes a small learnable stand-in in exactly that layout::

    python -m workloads.datasets.imagenet --out DIR --images 256 --classes 4 --image-size 32 \
        [--format jpeg|tfrecord] [--val-images 64]

Images are random but class-dependent (each class has its own colour and stripe pattern, each
image its own noise, size and aspect ratio), so that even a tiny model learns them. Nothing is
ever downloaded. JPEG encoding uses Pillow when it is installed, TensorFlow otherwise; the
TFRecord format needs TensorFlow.
"""

import colorsys
import math
import os
import re
import sys
from typing import NamedTuple

from .base import DatasetError, generator_parser, layout_error, run_generator

GENERATOR = "python -m workloads.datasets.imagenet --images 1000 --classes 10 --image-size 64"
JPEG_SUFFIXES = (".jpeg", ".jpg")
SHARD_NAME = re.compile(r"^train-(\d{5})-of-(\d{5})$")
EXPECTED = {
    "jpeg": "train/<class_name>/*.JPEG (one folder of JPEG files per class)",
    "tfrecord": "TFRecord shards train-NNNNN-of-NNNNN (features image/encoded, image/class/label)",
}
EXPECTED["auto"] = f"{EXPECTED['jpeg']} or {EXPECTED['tfrecord']}"
FORMATS = ("jpeg", "tfrecord")
# The feature keys of build_imagenet_data.py (tensorflow/models), which tf_cnn_benchmarks reads.
ENCODED_KEY = "image/encoded"
LABEL_KEY = "image/class/label"
TFRECORD_LABEL_OFFSET = 1  # labels in the shards are 1..1000; 0 is that script's background class


class JpegFolders(NamedTuple):
    """``root``/<class>/<file>: files are relative to root, labels index class_names."""

    root: str
    class_names: tuple
    files: list
    labels: list

    format = "jpeg"

    @property
    def size(self):
        return len(self.files)


class TfrecordShards(NamedTuple):
    """The shard files (absolute paths, sorted) of one split."""

    root: str
    shards: tuple

    format = "tfrecord"

    @property
    def size(self):
        return None  # unknown without reading every shard


def _is_jpeg_name(name):
    return name.lower().endswith(JPEG_SUFFIXES)


def _jpeg_files(directory):
    with os.scandir(directory) as entries:
        return sorted(entry.name for entry in entries if _is_jpeg_name(entry.name) and entry.is_file())


def _subdirectories(directory):
    with os.scandir(directory) as entries:
        return sorted(entry.name for entry in entries if entry.is_dir())


def _looks_like_a_train_folder(directory, probe=3):
    """True when `directory` itself holds class folders of JPEGs (the user named train/, not its parent)."""
    try:
        return any(_jpeg_files(os.path.join(directory, name)) for name in _subdirectories(directory)[:probe])
    except OSError:
        return False


def _scan_jpeg(data_dir):
    train = os.path.join(data_dir, "train")
    if not os.path.isdir(train):
        hint = (
            " (it looks like a train/ folder itself: pass its parent)" if _looks_like_a_train_folder(data_dir) else ""
        )
        raise layout_error(f"no train/ folder{hint}", data_dir, EXPECTED["jpeg"], GENERATOR)
    class_names, files, labels = [], [], []
    for name in _subdirectories(train):
        images = _jpeg_files(os.path.join(train, name))
        if not images:
            continue
        label = len(class_names)
        class_names.append(name)
        files.extend(f"{name}/{image}" for image in images)
        labels.extend([label] * len(images))
    if not files:
        loose = " (JPEG files lie directly in train/, not in class folders)" if _jpeg_files(train) else ""
        raise layout_error(f"no class folder of JPEG files in {train}{loose}", data_dir, EXPECTED["jpeg"], GENERATOR)
    return JpegFolders(train, tuple(class_names), files, labels)


def _scan_tfrecord(data_dir):
    with os.scandir(data_dir) as entries:
        matches = sorted((entry.name, SHARD_NAME.match(entry.name)) for entry in entries if entry.is_file())
    shards = [(name, int(match.group(1)), int(match.group(2))) for name, match in matches if match]
    if not shards:
        raise layout_error("no TFRecord shard train-*-of-*", data_dir, EXPECTED["tfrecord"], GENERATOR)
    totals = {total for _, _, total in shards}
    indices = {index for _, index, _ in shards}
    if len(totals) != 1 or indices != set(range(next(iter(totals)))):
        names = ", ".join(name for name, _, _ in shards[:4]) + (", ..." if len(shards) > 4 else "")
        raise layout_error(
            f"incomplete or mixed TFRecord shards ({len(shards)} files: {names})",
            data_dir,
            EXPECTED["tfrecord"],
            GENERATOR,
        )
    return TfrecordShards(data_dir, tuple(os.path.join(data_dir, name) for name, _, _ in shards))


def scan(data_dir, data_format="auto"):
    """The training split found in `data_dir`: JpegFolders or TfrecordShards; DatasetError if neither.

    `data_format` "auto" prefers the JPEG folders when both layouts are present.
    """
    if data_format not in ("auto", *FORMATS):
        raise ValueError(f"data_format must be auto, jpeg or tfrecord, got {data_format!r}")
    if not data_dir:
        raise DatasetError(
            f"--data real needs --data-dir DIR holding {EXPECTED[data_format]}; to write one: {GENERATOR} --out DIR"
        )
    data_dir = os.path.abspath(data_dir)
    if not os.path.isdir(data_dir):
        what = "is not a directory" if os.path.exists(data_dir) else "does not exist"
        raise layout_error(f"data directory {what}", data_dir, EXPECTED[data_format], GENERATOR)
    if data_format == "jpeg":
        return _scan_jpeg(data_dir)
    if data_format == "tfrecord":
        return _scan_tfrecord(data_dir)
    if os.path.isdir(os.path.join(data_dir, "train")):
        return _scan_jpeg(data_dir)
    with os.scandir(data_dir) as entries:
        has_shards = any(SHARD_NAME.match(entry.name) for entry in entries)
    if has_shards:
        return _scan_tfrecord(data_dir)  # says what is wrong with them, if anything
    hint = " (it looks like a train/ folder itself: pass its parent)" if _looks_like_a_train_folder(data_dir) else ""
    raise layout_error(f"neither a train/ folder nor TFRecord shards{hint}", data_dir, EXPECTED["auto"], GENERATOR)


# ---------------------------------------------------------------------------------------------
# The generator: numpy, and Pillow or TensorFlow, imported only when it runs.


def class_name(label):
    """WordNet-id-like folder names, as ImageNet's: n00000000, n00000001, ..."""
    return f"n{label:08d}"


def _class_style(label, classes):
    """A colour (RGB 0..255) and a stripe pattern (angle, cycles per image) of one class."""
    hue = label / classes
    value = 0.9 if label % 2 == 0 else 0.6
    color = [255 * channel for channel in colorsys.hsv_to_rgb(hue, 0.8, value)]
    angle = (label * 2.399963) % math.pi  # the golden angle spreads orientations evenly
    cycles = 1 + label % 4
    return color, angle, cycles


def synthetic_image(rng, label, classes, image_size):
    """One uint8 HxWx3 image of class `label`: class colour and stripes, per-image size, shift and noise."""
    import numpy as np

    height, width = (int(rng.integers(image_size, image_size * 5 // 4 + 1)) for _ in range(2))
    color, angle, cycles = _class_style(label, classes)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 2 * math.pi)
    along = (x * math.cos(angle) + y * math.sin(angle)) / max(height, width)
    stripes = 40.0 * np.sin(2 * math.pi * cycles * along + phase)
    brightness = rng.uniform(0.85, 1.15)
    image = np.asarray(color, np.float32) * brightness + stripes[..., None]
    image += rng.normal(0.0, 20.0, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _jpeg_encoder():
    """A function uint8 HxWx3 -> JPEG bytes: Pillow when installed, TensorFlow otherwise."""
    try:
        import io

        from PIL import Image

        def encode(image):
            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, format="JPEG", quality=90)
            return buffer.getvalue()

        return encode
    except ImportError:
        pass
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
    except ImportError:
        raise DatasetError("writing JPEG files needs Pillow or TensorFlow; neither is installed") from None
    return lambda image: tf.io.encode_jpeg(image, quality=90).numpy()


def _examples(count, classes, image_size, rng, encode, first_index):
    """(class index, file name, JPEG bytes, height, width) of `count` images, classes round-robin."""
    for offset in range(count):
        index = first_index + offset
        label = index % classes
        image = synthetic_image(rng, label, classes, image_size)
        name = f"{class_name(label)}_{index}.JPEG"
        yield label, name, encode(image), image.shape[0], image.shape[1]


def _write_jpeg_split(directory, examples):
    total_bytes = 0
    for label, name, data, _, _ in examples:
        folder = os.path.join(directory, class_name(label))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(data)
        total_bytes += len(data)
    return total_bytes


def _tf_example(tf, label, name, data, height, width):
    """The record build_imagenet_data.py writes (no bounding boxes: they are empty lists there too)."""

    def int64(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def text(value):
        return tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[value.encode() if isinstance(value, str) else value])
        )

    def floats():
        return tf.train.Feature(float_list=tf.train.FloatList(value=[]))

    synset = class_name(label)
    feature = {
        "image/height": int64(height),
        "image/width": int64(width),
        "image/colorspace": text("RGB"),
        "image/channels": int64(3),
        LABEL_KEY: int64(label + TFRECORD_LABEL_OFFSET),
        "image/class/synset": text(synset),
        "image/class/text": text(f"synthetic class {label}"),
        "image/object/bbox/xmin": floats(),
        "image/object/bbox/xmax": floats(),
        "image/object/bbox/ymin": floats(),
        "image/object/bbox/ymax": floats(),
        "image/object/bbox/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[])),
        "image/format": text("JPEG"),
        "image/filename": text(f"{synset}/{name}"),
        ENCODED_KEY: text(data),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write_tfrecord_split(directory, prefix, examples, count, shards):
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
    except ImportError:
        raise DatasetError("--format tfrecord needs TensorFlow, which is not installed") from None
    shards = max(1, min(shards, count))
    per_shard = math.ceil(count / shards)
    total_bytes, writer, shard = 0, None, -1
    for position, example in enumerate(examples):
        if position // per_shard != shard:
            if writer:
                writer.close()
            shard = position // per_shard
            writer = tf.io.TFRecordWriter(os.path.join(directory, f"{prefix}-{shard:05d}-of-{shards:05d}"))
        writer.write(_tf_example(tf, *example))
        total_bytes += len(example[2])
    writer.close()
    # Every announced shard exists, even when rounding left the last ones empty.
    for empty in range(shard + 1, shards):
        tf.io.TFRecordWriter(os.path.join(directory, f"{prefix}-{empty:05d}-of-{shards:05d}")).close()
    return total_bytes


def check_sizes(images, classes):
    if images < classes:
        raise DatasetError(f"--images ({images}) must be at least --classes ({classes}): every class needs an image")


def generate(out, images, classes, image_size, data_format="jpeg", val_images=0, shards=2, seed=0):
    """Writes the stand-in dataset; returns a summary dict."""
    import numpy as np

    if data_format not in FORMATS:
        raise ValueError(f"data_format must be jpeg or tfrecord, got {data_format!r}")
    check_sizes(images, classes)
    if os.path.isdir(out) and os.listdir(out):
        raise DatasetError(f"{out} is not empty; write the dataset into a new or empty directory")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    encode = _jpeg_encoder()
    splits = {"train": images, "val": val_images}
    summary = {"out": os.path.abspath(out), "format": data_format, "classes": classes, "image_size": image_size}
    first_index = 0
    for split, count in splits.items():
        if count == 0:
            continue
        examples = _examples(count, classes, image_size, rng, encode, first_index)
        if data_format == "jpeg":
            written = _write_jpeg_split(os.path.join(out, split), examples)
        else:
            prefix = "train" if split == "train" else "validation"
            written = _write_tfrecord_split(out, prefix, examples, count, shards)
        summary[f"{split}_images"] = count
        summary[f"{split}_jpeg_bytes"] = written
        first_index += count
    return summary


def build_parser():
    parser = generator_parser(
        "imagenet",
        "Write a small learnable ImageNet-layout dataset (class folders of JPEGs, or TFRecord shards).",
        "--images",
        1000,
        "training images, spread evenly over the classes",
    )
    from ..common.args import non_negative_int, positive_int

    add = parser.add_argument
    add("--classes", type=positive_int, default=10, help="number of classes (class folders)")
    add(
        "--image-size",
        type=positive_int,
        default=64,
        help="shorter side of the images, about (sizes vary up to +25%%)",
    )
    add("--format", choices=FORMATS, default="jpeg", help="jpeg: DIR/train/<class>/*.JPEG; tfrecord: DIR/train-*-of-*")
    add("--val-images", type=non_negative_int, default=0, help="also write a validation split (val/ or validation-*)")
    add("--shards", type=positive_int, default=2, help="TFRecord shards per split (--format tfrecord)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return run_generator(
        args,
        lambda: generate(
            args.out, args.images, args.classes, args.image_size, args.format, args.val_images, args.shards, args.seed
        ),
        check=lambda: check_sizes(args.images, args.classes),
    )


if __name__ == "__main__":
    sys.exit(main())
