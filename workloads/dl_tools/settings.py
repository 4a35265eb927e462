"""The four networks of the study, what the CLI accepts and the defaults it fills in; no framework imports here."""

from typing import NamedTuple


class NetSpec(NamedTuple):
    dataset: str  # module of workloads.datasets that reads its training data
    study_batch_sizes: tuple  # the three sizes Xu et al. measured; the middle one is the default
    sample_unit: str  # what one sample of a batch is
    learning_rate: float
    momentum: float
    clip_norm: float | None  # global gradient-norm clipping, None for none

    @property
    def default_batch_size(self):
        return self.study_batch_sizes[1]


NETS = {
    # 784-2048-4096-1024-10 fully connected, sigmoid, on MNIST.
    "fcn5": NetSpec("mnist", (512, 1024, 2048), "images", 0.01, 0.9, None),
    # The CIFAR-10 AlexNet of cuda-convnet / Caffe's cifar10_full (DLBench's AlexNet-R): 3 conv + 1 FC.
    "alexnet": NetSpec("cifar10", (256, 512, 1024), "images", 0.01, 0.9, None),
    # Bottleneck ResNet-50 with the CIFAR stem (3x3 stride-1 convolution, no max pool): 32x32 input.
    "resnet50": NetSpec("cifar10", (16, 32, 64), "images", 0.01, 0.9, None),
    # 2-layer LSTM language model, 256 units, 32-word windows of PTB (Zaremba et al.'s SGD, clipped).
    "lstm": NetSpec("ptb", (128, 256, 512), "sequences", 1.0, 0.0, 5.0),
}
FRAMEWORK_BACKENDS = {"tensorflow": "tf_backend", "torch": "torch_backend"}
NUM_CLASSES = 10
FCN5_HIDDEN = (2048, 4096, 1024)
SIGMOID_GAIN = 4.0  # Glorot & Bengio (2010): sigmoid units want 4 times the Glorot range
LSTM_UNITS = 256
LSTM_LAYERS = 2
SEQUENCE_LENGTH = 32
