"""Input data of cnn_train, framework-free parts.

- synthetic: one fixed random batch kept in memory, so no I/O is ever timed;
- real: an ImageNet-layout directory (see workloads.datasets.imagenet), read by the
  framework's own input pipeline (input_tf.py: tf.data; input_torch.py: DataLoader),
  every file read again in every epoch (nothing is cached), cycling through the dataset
  as often as warm-up + timed steps need.

Both pipelines hand the training step uint8 NHWC batches; the step converts them to float
(x / 127.5 - 1), on the device, inside the timed step.
"""

import numpy as np


def synthetic_batch(batch_size, image_size, num_classes, seed):
    """(images NHWC float32, labels int64), identical for both frameworks at a given seed."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch_size, image_size, image_size, 3), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=batch_size, dtype=np.int64)
    return images, labels


def shard_of(items, index, count):
    """Worker `index` of `count` reads every count-th item, starting at its own index."""
    return items[index::count]


def shuffled_files(layout, seed):
    """(relative paths as a numpy bytes array, labels int64, file indices int64), in one seeded order.

    A numpy array rather than a list of str: DataLoader workers fork, and touching Python
    objects in a forked worker copies their pages (a 1.28M-file list would be copied per worker).
    """
    files = np.array([name.encode() for name in layout.files], dtype=np.bytes_)
    labels = np.asarray(layout.labels, dtype=np.int64)
    indices = np.arange(len(files), dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(files))
    return files[order], labels[order], indices[order]


def resized_size(height, width, image_size):
    """(height, width) scaled so that the shorter side is image_size (aspect ratio kept)."""
    scale = image_size / min(height, width)
    return max(image_size, round(height * scale)), max(image_size, round(width * scale))


class InputStats:
    """What the training loop really consumed from disk: counted per batch as it is handed over."""

    def __init__(self, dataset_size=None, shards=None):
        self.dataset_size = dataset_size  # files in this reader's shard; None when unknown (TFRecord)
        self.shards = shards  # TFRecord shard files this reader reads from
        self.files_read = 0
        self.bytes_read = 0
        self.batches = 0
        self._distinct = set()

    def add_batch(self, file_bytes, file_indices=None):
        self.batches += 1
        self.files_read += len(file_bytes)
        self.bytes_read += int(np.sum(file_bytes))
        if file_indices is not None:
            self._distinct.update(np.asarray(file_indices).tolist())

    def metadata(self):
        # files_read counts images handed to training: JPEG files, or records of TFRecord shards.
        info = {"batches": self.batches, "files_read": self.files_read, "bytes_read": self.bytes_read}
        if self.shards is not None:
            info["shards"] = self.shards
        if self.dataset_size:
            info["dataset_files"] = self.dataset_size
            info["distinct_files_read"] = len(self._distinct)
            info["epochs"] = round(self.files_read / self.dataset_size, 4)
        return info
