"""Keras 3 versions of the four networks, the same layers as models_torch; every model returns logits."""

import math

import keras
from keras import layers

from ..cnn_train.models_tf import conv_bn, resnet50_on_stem
from .settings import FCN5_HIDDEN, LSTM_LAYERS, LSTM_UNITS, SIGMOID_GAIN


def fcn5(num_outputs, input_size=784):
    """784-2048-4096-1024-10, sigmoid; sigmoid layers start at 4 times the Glorot range, as in models_torch."""
    sigmoid_init = keras.initializers.VarianceScaling(SIGMOID_GAIN**2, mode="fan_avg", distribution="uniform")
    hidden = [layers.Dense(width, activation="sigmoid", kernel_initializer=sigmoid_init) for width in FCN5_HIDDEN]
    return keras.Sequential([keras.Input((input_size,)), *hidden, layers.Dense(num_outputs)], name="fcn5")


def alexnet(num_outputs):
    """cuda-convnet's CIFAR-10 net (Caffe cifar10_full) without its local response normalization."""
    return keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            layers.Conv2D(32, 5, padding="same"),
            layers.MaxPooling2D(3, 2, padding="same"),  # 32 -> 16
            layers.ReLU(),
            layers.Conv2D(32, 5, padding="same", activation="relu"),
            layers.AveragePooling2D(3, 2, padding="same"),  # 16 -> 8
            layers.Conv2D(64, 5, padding="same", activation="relu"),
            layers.AveragePooling2D(3, 2, padding="same"),  # 8 -> 4
            layers.Flatten(),
            layers.Dense(num_outputs),
        ],
        name="alexnet",
    )


def resnet50(num_outputs):
    """ResNet-50 (v1.5 bottlenecks, 3-4-6-3) with the CIFAR stem: 3x3 stride-1 convolution, no max pool."""
    inputs = keras.Input((32, 32, 3))
    x = layers.ReLU()(conv_bn(inputs, 64, 3))
    return resnet50_on_stem(inputs, x, num_outputs)


def lstm(vocabulary_size):
    """Word embedding, 2 stacked LSTM layers of 256 units, a softmax layer over the vocabulary."""
    recurrent = [layers.LSTM(LSTM_UNITS, return_sequences=True) for _ in range(LSTM_LAYERS)]
    return keras.Sequential(
        [
            keras.Input((None,), dtype="int64"),
            layers.Embedding(vocabulary_size, LSTM_UNITS),
            *recurrent,
            layers.Dense(vocabulary_size),
        ],
        name="lstm",
    )


BUILDERS = {"fcn5": fcn5, "alexnet": alexnet, "resnet50": resnet50, "lstm": lstm}


def build_model(net, num_outputs):
    return BUILDERS[net](num_outputs)


def trainable_parameters(model):
    return sum(math.prod(weight.shape) for weight in model.trainable_weights)
