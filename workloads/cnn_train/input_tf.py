"""tf.data input pipeline over an ImageNet-layout directory. Import only after `set_thread_env`.

read file (or TFRecord) -> decode -> resize the shorter side to --image-size -> central crop
-> batch -> prefetch; decoding runs as a parallel map. Nothing is cached: every epoch reads
the files again. Batches are uint8 NHWC on the host; the training step converts them.
"""

import tensorflow as tf

from ..datasets.imagenet import ENCODED_KEY, LABEL_KEY, TFRECORD_LABEL_OFFSET
from .data import InputStats, shard_of, shuffled_files

FILE_SHUFFLE_BUFFER = 10_000  # file names (the list is also shuffled once, in full, up front)
RECORD_SHUFFLE_BUFFER = 1_024  # encoded images (about 110 kB each on ImageNet)
SHARDS_READ_AT_ONCE = 8
TFRECORD_READ_BUFFER = 8 << 20


def decode_and_crop(contents, image_size):
    """JPEG (or PNG/GIF/BMP, as a few ImageNet "JPEG"s are) -> uint8 image_size x image_size x 3."""
    image = tf.io.decode_image(contents, channels=3, expand_animations=False)
    shape = tf.shape(image)
    height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    scale = image_size / tf.minimum(height, width)
    new_height = tf.maximum(image_size, tf.cast(tf.round(height * scale), tf.int32))
    new_width = tf.maximum(image_size, tf.cast(tf.round(width * scale), tf.int32))
    image = tf.image.resize(image, [new_height, new_width], method="bilinear")
    image = tf.image.resize_with_crop_or_pad(image, image_size, image_size)  # central crop
    image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)
    image.set_shape([image_size, image_size, 3])
    return image


def _jpeg_dataset(layout, args, shard_index, shard_count):
    files, labels, indices = (
        shard_of(column, shard_index, shard_count) for column in shuffled_files(layout, args.seed)
    )
    if len(files) == 0:
        raise ValueError(
            f"worker {shard_index} of {shard_count} has no file to read: {layout.size} files in {layout.root}"
        )
    root = layout.root.rstrip("/") + "/"
    dataset = tf.data.Dataset.from_tensor_slices((files, labels, indices))
    # Shuffling before repeat keeps epochs whole: each file is read exactly once per epoch.
    dataset = dataset.shuffle(min(len(files), FILE_SHUFFLE_BUFFER), seed=args.seed, reshuffle_each_iteration=True)

    def load(name, label, index):
        contents = tf.io.read_file(tf.strings.join([root, name]))
        return decode_and_crop(contents, args.image_size), label, tf.strings.length(contents), index

    return dataset.repeat(), load, InputStats(len(files))


def _tfrecord_dataset(layout, args, shard_index, shard_count):
    shards = list(layout.shards)
    whole_files = len(shards) >= shard_count
    if whole_files:
        shards = shard_of(shards, shard_index, shard_count)
    files = tf.data.Dataset.from_tensor_slices(shards)
    files = files.shuffle(len(shards), seed=args.seed, reshuffle_each_iteration=True)
    records = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, buffer_size=TFRECORD_READ_BUFFER),
        cycle_length=min(len(shards), SHARDS_READ_AT_ONCE),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    if not whole_files:
        records = records.shard(shard_count, shard_index)
    # Shuffling before repeat keeps epochs whole: each record is read exactly once per epoch.
    records = records.shuffle(RECORD_SHUFFLE_BUFFER, seed=args.seed, reshuffle_each_iteration=True).repeat()
    schema = {
        ENCODED_KEY: tf.io.FixedLenFeature([], tf.string),
        LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
    }

    def load(record):
        features = tf.io.parse_single_example(record, schema)
        contents = features[ENCODED_KEY]
        label = features[LABEL_KEY] - TFRECORD_LABEL_OFFSET
        return decode_and_crop(contents, args.image_size), label, tf.strings.length(contents), tf.constant(-1, tf.int64)

    return records, load, InputStats(shards=len(shards))


def build_input(layout, args, total_batches, shard_index=0, shard_count=1):
    """(next_batch, stats): next_batch() -> (images uint8 NHWC, labels int64), both host tensors."""
    build = _jpeg_dataset if layout.format == "jpeg" else _tfrecord_dataset
    dataset, load, stats = build(layout, args, shard_index, shard_count)
    parallel = args.data_workers or tf.data.AUTOTUNE
    dataset = (
        dataset.map(load, num_parallel_calls=parallel)
        .batch(args.batch_size, drop_remainder=True)
        .take(total_batches)
        .prefetch(tf.data.AUTOTUNE)
    )
    if args.data_workers:
        options = tf.data.Options()
        options.threading.private_threadpool_size = args.data_workers
        dataset = dataset.with_options(options)
    iterator = iter(dataset)
    keeps_indices = layout.format == "jpeg"

    def next_batch():
        images, labels, file_bytes, indices = next(iterator)
        stats.add_batch(file_bytes.numpy(), indices.numpy() if keeps_indices else None)
        return images, labels

    return next_batch, stats
