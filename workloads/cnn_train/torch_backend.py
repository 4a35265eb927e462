"""PyTorch training step. Import only after `set_thread_env`."""

import random
import re

import torch

from .data import synthetic_batch
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM
from .models_torch import build_model, parameter_count


def _onednn_info():
    version = re.search(r"MKL-DNN v([\w.]+)", torch.__config__.show())
    return {
        "enabled": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
        "version": version.group(1) if version else None,
    }


def build_trainer(args):
    """Returns (step, metadata): step() trains once and returns the loss; metadata() describes the run."""
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    model = build_model(args.model, args.image_size, args.num_classes)
    model = model.to(memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()
    images_np, labels_np = synthetic_batch(args.batch_size, args.image_size, args.num_classes, args.seed)
    # NHWC memory seen as NCHW: exactly the channels_last layout, no copy.
    images = torch.from_numpy(images_np).permute(0, 3, 1, 2)
    labels = torch.from_numpy(labels_np)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        # .item() returns only once the step is done.
        return loss.item()

    def metadata():
        return {
            "framework_version": torch.__version__,
            "model_params": parameter_count(model),
            "onednn": _onednn_info(),
        }

    return step, metadata
