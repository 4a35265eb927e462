"""Keras 3 models; every model returns logits (no softmax).

ResNet-50 is written out (v1.5, as models_torch) and every batch normalization runs as
TensorFlow's fused kernel: see FusedBatchNormalization for why.
"""

import keras
import tensorflow as tf
from keras import layers


class FusedBatchNormalization(layers.BatchNormalization):
    """Keras' BatchNormalization computed by TensorFlow's fused kernels (FusedBatchNormV3 and its
    gradient) on 4-D channels-last inputs; the same maths, variables and config otherwise.

    Keras 3 normalizes with a chain of generic ops (mean, squared difference, rsqrt, multiply,
    add, each with its own gradient): about ten passes over every activation, forward and
    backward, where the fused kernels make two. On a CPU that chain cost ResNet-50 training
    about a third of its speed. The fused kernels also let oneDNN's graph rewrites see the
    convolution + batch norm + ReLU pattern.
    """

    def add_weight(self, *args, **kwargs):
        # The moving statistics are assigned while training, inside each replica's step: under a
        # tf.distribute strategy that is allowed only for a variable that says how replicas' values
        # combine (Keras 3 creates them with aggregation "none"). Their mean, as one replica would see.
        if not kwargs.get("trainable", True):
            kwargs.setdefault("aggregation", "mean")
        return super().add_weight(*args, **kwargs)

    def call(self, inputs, training=None, mask=None):
        if (
            mask is not None
            or self.renorm
            or len(inputs.shape) != 4
            or self.axis not in (-1, 3)
            or inputs.dtype not in (tf.float32, tf.bfloat16)
        ):
            return super().call(inputs, training=training, mask=mask)
        channels = inputs.shape[-1]
        # Statistics, scale and offset stay float32 under mixed precision, as the kernels want.
        scale = tf.convert_to_tensor(self.gamma) if self.scale else tf.ones([channels], tf.float32)
        offset = tf.convert_to_tensor(self.beta) if self.center else tf.zeros([channels], tf.float32)
        training = bool(training and self.trainable)
        # In training, exponential_avg_factor makes the kernel return the updated moving statistics.
        moving_average = {"exponential_avg_factor": 1.0 - self.momentum} if training else {}
        outputs, moving_mean, moving_variance = tf.compat.v1.nn.fused_batch_norm(
            inputs,
            scale,
            offset,
            mean=self.moving_mean,
            variance=self.moving_variance,
            epsilon=self.epsilon,
            is_training=training,
            **moving_average,
        )
        if training:
            self.moving_mean.assign(moving_mean)
            self.moving_variance.assign(moving_variance)
        return outputs


def with_fused_batch_norm(model):
    """A copy of a functional or Sequential model whose BatchNormalization layers are fused."""

    def clone(layer):
        if type(layer) is layers.BatchNormalization:
            return FusedBatchNormalization.from_config(layer.get_config())
        return layer.__class__.from_config(layer.get_config())

    return keras.models.clone_model(model, clone_function=clone)


def conv_bn(x, filters, kernel, stride=1):
    # Batch norm's offset makes a convolution bias redundant.
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
    return FusedBatchNormalization(epsilon=1e-5, momentum=0.9)(x)


def _bottleneck(x, width, stride):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""
    out_channels = width * 4
    shortcut = x
    if stride != 1 or x.shape[-1] != out_channels:
        shortcut = conv_bn(x, out_channels, 1, stride)
    y = layers.ReLU()(conv_bn(x, width, 1))
    y = layers.ReLU()(conv_bn(y, width, 3, stride))
    y = conv_bn(y, out_channels, 1)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50_on_stem(inputs, stem_output, num_outputs, name="resnet50"):
    """ResNet-50's bottleneck stages (3-4-6-3) and classifier after a stem with 64 channels."""
    x = stem_output
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            x = _bottleneck(x, width, 2 if stage > 0 and block == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_outputs)(x), name=name)


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
    # The single-tower AlexNet of tf_cnn_benchmarks (no LRN).
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
    """ImageNet ResNet-50 v1.5 (the stride on the 3x3 convolutions, as tf_cnn_benchmarks'
    resnet50_v1.5, MLPerf and models_torch): 7x7 stride-2 stem and max pool."""
    inputs = keras.Input(input_shape)
    x = layers.ReLU()(conv_bn(inputs, 64, 7, 2))
    x = layers.MaxPooling2D(3, 2, padding="same")(x)
    return resnet50_on_stem(inputs, x, num_classes)


def _inception3(input_shape, num_classes):
    return with_fused_batch_norm(
        keras.applications.InceptionV3(
            weights=None, input_shape=input_shape, classes=num_classes, classifier_activation=None
        )
    )


BUILDERS = {"tiny": _tiny, "alexnet": _alexnet, "resnet50": _resnet50, "inception3": _inception3}


def build_model(name, image_size, num_classes):
    return BUILDERS[name]((image_size, image_size, 3), num_classes)
