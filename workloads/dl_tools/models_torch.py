"""PyTorch versions of the four networks; every model returns logits."""

from torch import nn

from ..cnn_train.models_torch import resnet50_on_stem
from .settings import FCN5_HIDDEN, LSTM_LAYERS, LSTM_UNITS, SIGMOID_GAIN


def fcn5(num_outputs, input_size=784):
    """784-2048-4096-1024-10, sigmoid. Sigmoid layers start as Glorot & Bengio (2010) advise for sigmoid units,
    4 times the Glorot range, zero biases: with PyTorch's default start, SGD stays on the 2.3 loss plateau."""
    layers, width = [], input_size
    for hidden in FCN5_HIDDEN:
        layers += [nn.Linear(width, hidden), nn.Sigmoid()]
        width = hidden
    layers.append(nn.Linear(width, num_outputs))
    for layer in layers[::2]:
        nn.init.xavier_uniform_(layer.weight, gain=1.0 if layer is layers[-1] else SIGMOID_GAIN)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def alexnet(num_outputs):
    """cuda-convnet's CIFAR-10 net (Caffe cifar10_full) without its local response normalization."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, padding=2),
        nn.MaxPool2d(3, 2, ceil_mode=True),  # 32 -> 16, like Caffe's pooling
        nn.ReLU(inplace=True),
        nn.Conv2d(32, 32, 5, padding=2),
        nn.ReLU(inplace=True),
        nn.AvgPool2d(3, 2, ceil_mode=True),  # 16 -> 8
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(inplace=True),
        nn.AvgPool2d(3, 2, ceil_mode=True),  # 8 -> 4
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, num_outputs),
    )


def resnet50(num_outputs):
    """ResNet-50 (v1.5 bottlenecks, 3-4-6-3) with the CIFAR stem: 3x3 stride-1 convolution, no max pool."""
    stem = [nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)]
    return resnet50_on_stem(stem, num_outputs)


class LstmLanguageModel(nn.Module):
    """Word embedding, 2 stacked LSTM layers of 256 units, a softmax layer over the vocabulary."""

    def __init__(self, vocabulary_size):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, LSTM_UNITS)
        self.lstm = nn.LSTM(LSTM_UNITS, LSTM_UNITS, num_layers=LSTM_LAYERS, batch_first=True)
        self.decoder = nn.Linear(LSTM_UNITS, vocabulary_size)

    def forward(self, words):
        hidden, _ = self.lstm(self.embedding(words))
        return self.decoder(hidden)


BUILDERS = {"fcn5": fcn5, "alexnet": alexnet, "resnet50": resnet50, "lstm": LstmLanguageModel}


def build_model(net, num_outputs):
    return BUILDERS[net](num_outputs)


def trainable_parameters(model):
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
