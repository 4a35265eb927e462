"""What the CLI accepts and the defaults it fills in; no framework imports here."""

from typing import NamedTuple


class ModelDefaults(NamedTuple):
    batch_size: int
    image_size: int
    min_image_size: int  # the smallest input the architecture can shrink down to 1x1


MODELS = {
    "tiny": ModelDefaults(batch_size=32, image_size=32, min_image_size=4),
    "alexnet": ModelDefaults(batch_size=512, image_size=227, min_image_size=67),
    "resnet50": ModelDefaults(batch_size=32, image_size=224, min_image_size=32),
    "inception3": ModelDefaults(batch_size=32, image_size=299, min_image_size=75),
}
FRAMEWORK_BACKENDS = {"tensorflow": "tf_backend", "torch": "torch_backend"}
DATA_SOURCES = ("synthetic",)
DTYPES = ("float32",)
OPTIMIZERS = ("sgd",)
SGD_LEARNING_RATE = 0.01
SGD_MOMENTUM = 0.9
