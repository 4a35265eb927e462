"""PyTorch training step (eager). Import only after `set_thread_env`."""

import random

import torch

from ..common.flops import torch_forward_flops
from ..common.onednn import torch_onednn
from .models_torch import build_model, trainable_parameters


def build_trainer(args, spec, num_outputs):
    """Returns (step, metadata, costs): step(inputs, targets) trains on one batch and returns its
    loss; costs(inputs) gives (forward FLOPs of one sample like ``inputs``, the device it trains on)."""
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    # The plan decides what is visible (CUDA_VISIBLE_DEVICES): a CPU cell sees no CUDA device.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(args.net, num_outputs).to(device).train()
    images = args.net in ("alexnet", "resnet50")
    if images:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate, momentum=spec.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()

    def as_model_input(inputs):
        # On a GPU the batch is copied to it here, inside the timed batch.
        inputs = torch.from_numpy(inputs).to(device)
        # NHWC memory seen as NCHW: exactly the channels_last layout, no copy
        return inputs.permute(0, 3, 1, 2) if images else inputs

    def step(inputs, targets):
        inputs, targets = as_model_input(inputs), torch.from_numpy(targets).to(device)
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        if spec.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip_norm)
        optimizer.step()
        # .item() returns only once the step is done.
        return loss.item()

    def metadata():
        return {
            "framework_version": torch.__version__,
            "model_params": trainable_parameters(model),
            "onednn": torch_onednn(),
            "device": str(device),
        }

    def costs(inputs):
        return torch_forward_flops(model, as_model_input(inputs)), str(device)

    return step, metadata, costs
