"""IC: image classification, as MLPerf's ResNet-50 Offline benchmark serves it (Samani 2022's first app).

- requests: JPEG files in ImageNet's published layout, ``DIR/train/<class>/*.JPEG`` (a real ImageNet
  directory works as it is; workloads/datasets/imagenet.py writes a stand-in), the first ones in
  sorted order;
- pre: decode (Pillow), RGB, shorter side resized to 256 and the centre 224 x 224 cropped, as MLPerf's
  reference pre-processing does, channel means subtracted, float32 HWC;
- inference: cnn_train's ResNet-50 v1.5 (TensorFlow/Keras, random weights, 1,000 classes), the batch
  through a traced ``model(x, training=False)``;
- post: softmax over the logits, the top-5 classes with their probabilities.

``--framework torch`` serves the same requests with cnn_train's ResNet-50 v1.5 written in PyTorch (NCHW,
the batch moved to the device and transposed there): the pre- and post-processing are the same code, so
the two frameworks' inference phases compare directly, and a host whose TensorFlow sees no GPU can still
serve IC on its GPU.
"""

import os

from ...datasets import imagenet
from ...datasets.base import DatasetError, layout_error
from ..settings import OFFLINE, offline_minimums
from .base import App, RawRequest

IMAGE_SIZE = 224
RESIZE_TO = 256  # shorter side before the centre crop (MLPerf's reference pre-processing)
CHANNEL_MEANS = (123.68, 116.78, 103.94)  # RGB, subtracted after the crop
NUM_CLASSES = 1000
TOP_K = 5
JPEG_MAGIC = b"\xff\xd8\xff"


class ImageClassification(App):
    name = "ic"
    description = "JPEG images, ResNet-50 v1.5 (TensorFlow/Keras), top-5 classes"
    framework = "tensorflow"
    # resnet50: the study's; tiny: cnn_train's tiny CNN on the same 224 x 224 inputs, for tests.
    sizes = ("resnet50", "tiny")
    default_requests = 1000  # the study's 1,000 images
    default_batch_size = 32
    request_unit = "images"
    mlperf = {OFFLINE: offline_minimums("resnet50")}  # MLPerf's ResNet-50
    dataset = "imagenet-jpeg"
    data_format = imagenet.EXPECTED["jpeg"]
    generator = imagenet.GENERATOR

    def _files(self, data_dir, count):
        """(train folder, the first ``count`` image paths relative to it); DatasetError when fewer."""
        found = imagenet.scan(data_dir, "jpeg")
        if found.size < count:
            raise layout_error(
                f"{found.size} JPEG files in {found.root}, {count} requests asked for (--requests)",
                data_dir,
                self.data_format,
                f"{self.generator} --images {count}",
            )
        return found.root, found.files[:count]

    def validate(self, data_dir, count):
        root, files = self._files(data_dir, count)
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as stream:
                head = stream.read(len(JPEG_MAGIC))
            if head != JPEG_MAGIC:
                why = "an empty file" if not head else f"starts with {head!r}, a JPEG starts with {JPEG_MAGIC!r}"
                raise DatasetError(f"{path}: not a JPEG file ({why})")

    def load(self, data_dir, count):
        self.validate(data_dir, count)
        root, files = self._files(data_dir, count)
        requests = []
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as stream:
                requests.append(RawRequest(path, stream.read()))
        return requests

    def preprocess(self, data):
        import io

        import numpy as np
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            image = image.convert("RGB")
        width, height = image.size
        scale = RESIZE_TO / min(width, height)
        resized = image.resize((max(round(width * scale), IMAGE_SIZE), max(round(height * scale), IMAGE_SIZE)))
        left = (resized.width - IMAGE_SIZE) // 2
        top = (resized.height - IMAGE_SIZE) // 2
        cropped = resized.crop((left, top, left + IMAGE_SIZE, top + IMAGE_SIZE))
        return np.asarray(cropped, dtype=np.float32) - np.asarray(CHANNEL_MEANS, dtype=np.float32)

    def build_model(self, size, seed, device):
        import tensorflow as tf

        from ...cnn_train.models_tf import build_model

        placement = "/GPU:0" if device == "cuda" else "/CPU:0"
        with tf.device(placement):
            model = build_model(size, IMAGE_SIZE, NUM_CLASSES)
        signature = [tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32)]
        # One trace serves every batch size (the last batch may be smaller).
        forward = tf.function(lambda images: model(images, training=False), input_signature=signature)
        return ClassifierModel(model, forward, placement)

    def infer(self, model, features):
        import numpy as np
        import tensorflow as tf

        # The batch is stacked into a buffer kept between batches: a fresh 19 MB array a batch of 32 costs its
        # page faults again each time, about 1% of ResNet-50's inference on one core.
        if model.buffer is None or len(model.buffer) < len(features):
            model.buffer = np.empty((len(features), IMAGE_SIZE, IMAGE_SIZE, 3), np.float32)
        batch = np.stack(features, out=model.buffer[: len(features)])
        with tf.device(model.placement):
            logits = model.forward(tf.constant(batch))
        return list(logits.numpy())

    def postprocess(self, output):
        import numpy as np

        shifted = np.exp(output - output.max())
        probabilities = shifted / shifted.sum()
        top = np.argpartition(probabilities, -TOP_K)[-TOP_K:]
        top = top[np.argsort(-probabilities[top])]
        return [[int(label), round(float(probabilities[label]), 6)] for label in top]

    def forward_flops(self, model, features):
        from ...common.flops import keras_forward_flops

        return keras_forward_flops(model.keras)

    def describe(self, model):
        return {
            "name": model.keras.name,
            "parameters": int(model.keras.count_params()),
            "input": [IMAGE_SIZE, IMAGE_SIZE, 3],
            "classes": NUM_CLASSES,
            "placement": model.placement,
        }


class ClassifierModel:
    """The Keras model, its traced inference call, where it runs and its batch buffer."""

    def __init__(self, keras_model, forward, placement):
        self.keras, self.forward, self.placement = keras_model, forward, placement
        self.buffer = None  # the host array batches are stacked into (infer)


class ImageClassificationTorch(ImageClassification):
    """IC with cnn_train's PyTorch ResNet-50 v1.5 (models_torch); requests, pre and post unchanged."""

    description = "JPEG images, ResNet-50 v1.5 (PyTorch), top-5 classes"
    framework = "torch"
    alternatives = {}

    def build_model(self, size, seed, device):
        import torch

        from ...cnn_train.models_torch import build_model

        torch.manual_seed(seed)
        model = build_model(size, IMAGE_SIZE, NUM_CLASSES).to(device).eval()
        return TorchClassifier(model, torch.device(device), size)

    def infer(self, model, features):
        import numpy as np
        import torch

        if model.buffer is None or len(model.buffer) < len(features):
            # Page-locked on a GPU, so that the copy to the device is one DMA transfer.
            model.buffer = torch.empty(
                (len(features), IMAGE_SIZE, IMAGE_SIZE, 3), pin_memory=model.device.type == "cuda"
            )
        batch = model.buffer[: len(features)]
        np.stack(features, out=batch.numpy())
        with torch.inference_mode():
            # NHWC to NCHW on the device: the transpose is the device's work, as TensorFlow's own layout is.
            images = batch.to(model.device, non_blocking=True).permute(0, 3, 1, 2).contiguous()
            logits = model.module(images).cpu().numpy()
        return list(logits)

    def forward_flops(self, model, features):
        import torch

        from ...common.flops import torch_forward_flops

        image = torch.from_numpy(features).to(model.device).permute(2, 0, 1).unsqueeze(0)
        return torch_forward_flops(model.module, image)

    def describe(self, model):
        from ...cnn_train.models_torch import parameter_count

        return {
            "name": model.name,
            "parameters": int(parameter_count(model.module)),
            "input": [IMAGE_SIZE, IMAGE_SIZE, 3],
            "classes": NUM_CLASSES,
            "placement": str(model.device),
        }


class TorchClassifier:
    """The PyTorch model, its device and the batch buffer in host memory."""

    def __init__(self, module, device, name):
        self.module, self.device, self.name = module, device, name
        self.buffer = None


APP = ImageClassification()
APP.alternatives = {"torch": ImageClassificationTorch()}
