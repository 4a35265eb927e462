"""The two jobs of the study, what the CLI accepts and the defaults it fills in; no framework imports here."""

from typing import NamedTuple


class NetSpec(NamedTuple):
    dataset: str  # module of workloads.datasets that reads its training data
    samples: int  # training samples the study uses
    sample_unit: str


NETS = {
    # PyTorch's examples/mnist network on the first 512 MNIST training images.
    "mnist_cnn": NetSpec("mnist", 512, "images"),
    # Embedding, one RNN layer, one fully-connected output, on 1,000 IMDB reviews (500 negative, 500 positive).
    "imdb_rnn": NetSpec("imdb", 1000, "reviews"),
}
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_BATCH_SIZE = 64
SEARCH_BATCHES = 3  # timed batches per candidate of --batch-size-search, after one untimed batch
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # as in PyTorch's MNIST example
ADADELTA_LEARNING_RATE = 1.0  # PyTorch's MNIST example
ADAM_LEARNING_RATE = 1e-3
IMDB_MAX_LENGTH = 200  # words kept per review (its first ones), padded in front
IMDB_VOCABULARY = 25000  # <pad>, <unk> and the most frequent training words
IMDB_EMBEDDING = 100
IMDB_HIDDEN = 256
PROFILE_BATCHES = 5
PROFILE_TOP_KERNELS = 10
NCU_LAUNCH_COUNT = 1000  # kernels ncu collects at most: the profiled batches of both nets stay below it
