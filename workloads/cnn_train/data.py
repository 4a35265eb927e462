"""Synthetic data: one fixed random batch kept in memory, so no I/O is ever timed."""

import numpy as np


def synthetic_batch(batch_size, image_size, num_classes, seed):
    """(images NHWC float32, labels int64), identical for both frameworks at a given seed."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch_size, image_size, image_size, 3), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=batch_size, dtype=np.int64)
    return images, labels
