"""Training data of each network, read from the published file formats and kept in memory as stored (bytes or
word ids); every batch is gathered and converted on the host inside the timed step, as an input pipeline does."""

import os

import numpy as np

from ..datasets import cifar10, mnist, ptb
from ..datasets.base import DatasetError
from .settings import NETS, SEQUENCE_LENGTH

# The usual per-channel statistics of the CIFAR-10 training set.
CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
CIFAR_STD = np.array([0.2470, 0.2435, 0.2616], np.float32)


class MnistVectors:
    """MNIST images as 784-vectors in [0, 1]."""

    def __init__(self, data_dir):
        self.images, self.labels = mnist.load_train(data_dir)
        self.samples, self.num_outputs = len(self.labels), mnist.NUM_CLASSES
        self.info = {"files": list(mnist.find_files(data_dir)), "input_shape": [mnist.IMAGE_SIDE**2]}

    def batch(self, indices):
        images = self.images[indices].reshape(len(indices), -1).astype(np.float32) * (1 / 255)
        return images, self.labels[indices].astype(np.int64)


class CifarImages:
    """CIFAR-10 images NHWC, scaled to [0, 1] and standardized per channel."""

    def __init__(self, data_dir):
        self.images, self.labels = cifar10.load_train(data_dir)
        self.samples, self.num_outputs = len(self.labels), len(cifar10.CLASS_NAMES)
        folder = cifar10.batches_dir(data_dir)
        self.info = {
            "files": [os.path.join(folder, name) for name in cifar10.TRAIN_FILES],
            "input_shape": list(self.images.shape[1:]),
        }

    def batch(self, indices):
        images = (self.images[indices].astype(np.float32) * (1 / 255) - CIFAR_MEAN) / CIFAR_STD
        return images, self.labels[indices].astype(np.int64)


class PtbWindows:
    """The PTB word stream cut into consecutive 32-word windows; each target is the next word.

    Windows are independent samples (shuffled, state reset per batch); the work per batch is that of
    truncated backpropagation through 32 steps.
    """

    def __init__(self, data_dir):
        ids, vocabulary = ptb.load_train(data_dir)
        windows = (len(ids) - 1) // SEQUENCE_LENGTH
        self.inputs = ids[: windows * SEQUENCE_LENGTH].reshape(windows, SEQUENCE_LENGTH)
        self.targets = ids[1 : windows * SEQUENCE_LENGTH + 1].reshape(windows, SEQUENCE_LENGTH)
        self.samples, self.num_outputs = windows, len(vocabulary)
        self.info = {
            "files": [ptb.find_train_file(data_dir)],
            "words": len(ids),
            "vocabulary_size": len(vocabulary),
            "sequence_length": SEQUENCE_LENGTH,
        }

    def batch(self, indices):
        return self.inputs[indices].astype(np.int64), self.targets[indices].astype(np.int64)


def epoch_orders(samples, seed):
    """A new random order of the samples for every epoch, the same sequence for a given seed."""
    rng = np.random.default_rng(seed)
    while True:
        yield rng.permutation(samples)


READERS = {"mnist": MnistVectors, "cifar10": CifarImages, "ptb": PtbWindows}
GENERATORS = {"mnist": mnist.GENERATOR, "cifar10": cifar10.GENERATOR, "ptb": ptb.GENERATOR}


def load(net, data_dir, batch_size):
    """The net's training data; DatasetError when the files are missing, malformed or hold less than one batch."""
    dataset = NETS[net].dataset
    data = READERS[dataset](data_dir)
    if data.samples < batch_size:
        raise DatasetError(
            f"{data_dir} holds {data.samples} {dataset} training samples, fewer than one batch of {batch_size}; "
            f"lower --batch-size or write a larger set: {GENERATORS[dataset]} --out {data_dir} (see its --help)"
        )
    data.info.update(dataset=dataset, samples=data.samples)
    return data
