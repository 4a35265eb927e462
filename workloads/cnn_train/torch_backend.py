"""PyTorch training step. Import only after `set_thread_env`."""

import random
import time

import torch

from ..common.flops import torch_forward_flops
from ..common.onednn import torch_onednn
from .data import synthetic_batch
from .models_torch import build_model, parameter_count
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM


class Trainer:
    """One model replica: next_batch() and step(batch) for the timed loop, gradients/params for a PS.

    shard_index/shard_count: which part of the dataset this replica reads.
    """

    def __init__(self, args, shard_index=0, shard_count=1):
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        self.args = args
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        model = build_model(args.model, args.image_size, args.num_classes)
        self.model = model.to(self.device, memory_format=torch.channels_last).train()
        self.params = list(self.model.parameters())
        self.sizes = [parameter.numel() for parameter in self.params]
        self.optimizer = torch.optim.SGD(self.params, lr=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
        self.loss_fn = torch.nn.CrossEntropyLoss()

        setup_started = time.perf_counter()
        self.stats, self.loader_info = None, None
        if args.data == "real":
            from .input_torch import build_input

            total_batches = args.warmup_steps + args.steps
            self.next_batch, self.stats, self.loader_info = build_input(
                args.dataset,
                args,
                total_batches,
                shard_index,
                shard_count,
                pin_memory=self.device.type == "cuda",
                timeout=args.net_timeout,
            )
        else:
            images_np, labels_np = synthetic_batch(
                args.batch_size, args.image_size, args.num_classes, args.seed + shard_index
            )
            # NHWC memory seen as NCHW: exactly the channels_last layout, no copy. Synthetic data
            # lives where the model runs: no copy is ever timed.
            batch = (torch.from_numpy(images_np).to(self.device), torch.from_numpy(labels_np).to(self.device))
            self.next_batch = lambda: batch
        self.data_setup = time.perf_counter() - setup_started

    def _inputs(self, batch):
        """Batch on the model's device as (NCHW channels_last float images, labels).

        On a GPU the host-to-device copy happens here, inside the timed step.
        """
        images, labels = batch
        images = images.to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        labels = labels.to(self.device, non_blocking=True)
        if images.dtype == torch.uint8:
            images = images.float().div_(127.5).sub_(1.0)
        return images, labels

    def _loss(self, batch):
        images, labels = self._inputs(batch)
        self.optimizer.zero_grad(set_to_none=True)
        # bfloat16: autocast runs matrix work in bf16; weights, gradients and the loss stay float32.
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.args.dtype == "bfloat16"):
            logits = self.model(images)
        loss = self.loss_fn(logits.float(), labels)
        loss.backward()
        return loss

    def step(self, batch):
        loss = self._loss(batch)
        self.optimizer.step()
        # .item() returns only once the step is done.
        return loss.item()

    def gradients(self, batch):
        """(loss, every parameter's gradient as one flat float32 numpy vector)."""
        loss = self._loss(batch)
        flat = torch.cat([parameter.grad.reshape(-1) for parameter in self.params])
        return loss.item(), flat.cpu().numpy()

    def get_params(self):
        # reshape, not view: channels_last weights are not contiguous; the order is the logical one.
        with torch.no_grad():
            return torch.cat([parameter.reshape(-1) for parameter in self.params]).cpu().numpy()

    def set_params(self, flat):
        # copy_ into the existing tensors keeps their memory format (channels_last).
        flat = torch.from_numpy(flat).to(self.device, non_blocking=True)
        with torch.no_grad():
            for parameter, part in zip(self.params, torch.split(flat, self.sizes), strict=False):
                parameter.copy_(part.view(parameter.shape))

    def forward_flops(self):
        """Matrix FLOPs of one image's forward pass, counted by PyTorch on the model itself."""
        args = self.args
        example = torch.zeros(1, 3, args.image_size, args.image_size, device=self.device)
        return torch_forward_flops(self.model, example.contiguous(memory_format=torch.channels_last))

    def metadata(self):
        info = {
            "framework_version": torch.__version__,
            "model_params": parameter_count(self.model),
            "onednn": torch_onednn(),
            "device": str(self.device),
        }
        if self.stats is not None:
            info["input"] = {**self.stats.metadata(), **self.loader_info}
        return info


def build_trainer(args, shard_index=0, shard_count=1):
    return Trainer(args, shard_index, shard_count)
