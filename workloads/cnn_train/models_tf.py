"""Keras 3 models; every model returns logits (no softmax)."""

import keras
from keras import layers


def _tiny(input_shape, num_classes):
    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.GlobalAveragePooling2D(),
            layers.Dense(num_classes),
        ],
        name="tiny",
    )


def _alexnet(input_shape, num_classes):
    # The single-tower AlexNet of tf_cnn_benchmarks and torchvision (no LRN).
    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Conv2D(64, 11, strides=4, activation="relu"),
            layers.MaxPooling2D(3, 2),
            layers.Conv2D(192, 5, padding="same", activation="relu"),
            layers.MaxPooling2D(3, 2),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(3, 2),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dense(num_classes),
        ],
        name="alexnet",
    )


def _resnet50(input_shape, num_classes):
    return keras.applications.ResNet50(
        weights=None, input_shape=input_shape, classes=num_classes, classifier_activation=None
    )


def _inception3(input_shape, num_classes):
    return keras.applications.InceptionV3(
        weights=None, input_shape=input_shape, classes=num_classes, classifier_activation=None
    )


BUILDERS = {"tiny": _tiny, "alexnet": _alexnet, "resnet50": _resnet50, "inception3": _inception3}


def build_model(name, image_size, num_classes):
    return BUILDERS[name]((image_size, image_size, 3), num_classes)
