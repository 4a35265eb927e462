"""Training sets of the two jobs, read from the published formats into host tensors before any timing."""

import numpy as np
import torch

from ..datasets import imdb, mnist
from ..datasets.base import DatasetError
from .settings import IMDB_MAX_LENGTH, IMDB_VOCABULARY, MNIST_MEAN, MNIST_STD


class TrainingSet:
    def __init__(self, inputs, targets, info, vocabulary_size=None):
        self.inputs, self.targets, self.info = inputs, targets, info
        self.vocabulary_size = vocabulary_size
        self.samples = len(targets)


def _mnist(data_dir, samples):
    images, labels = mnist.load_train(data_dir, limit=samples)
    inputs = (torch.from_numpy(images.astype(np.float32)).unsqueeze(1) / 255 - MNIST_MEAN) / MNIST_STD
    info = {"files": list(mnist.find_files(data_dir)), "input_shape": [1, mnist.IMAGE_SIDE, mnist.IMAGE_SIDE]}
    return TrainingSet(inputs, torch.from_numpy(labels.astype(np.int64)), info)


def _imdb(data_dir, samples):
    texts, labels = imdb.load_train(data_dir, limit=samples)
    tokens = [imdb.tokenize(text) for text in texts]
    vocabulary = imdb.build_vocabulary(tokens, IMDB_VOCABULARY)
    inputs = torch.from_numpy(imdb.encode(tokens, vocabulary, IMDB_MAX_LENGTH))
    info = {
        "folder": imdb.reviews_dir(data_dir),
        "vocabulary_size": len(vocabulary),
        "max_length": IMDB_MAX_LENGTH,
        "mean_review_words": float(np.mean([len(words) for words in tokens])),
        "positive": int(labels.sum()),
    }
    return TrainingSet(inputs, torch.from_numpy(labels.astype(np.float32)), info, len(vocabulary))


READERS = {"mnist": _mnist, "imdb": _imdb}
GENERATORS = {"mnist": (mnist.GENERATOR, "--images"), "imdb": (imdb.GENERATOR, "--reviews")}


def load(dataset, data_dir, samples):
    """The first `samples` training examples; DatasetError when missing, malformed or fewer."""
    data = READERS[dataset](data_dir, samples)
    if data.samples < samples:
        generator, flag = GENERATORS[dataset]
        raise DatasetError(
            f"{data_dir} holds {data.samples} {dataset} training samples, {samples} are needed; lower --samples "
            f"or write a larger set: {generator} --out {data_dir} {flag} {samples}"
        )
    data.info.update(dataset=dataset, samples=data.samples)
    return data
