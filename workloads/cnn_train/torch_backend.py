"""PyTorch training step. Import only after `set_thread_env`."""

import random
import time

import torch

from ..common.flops import torch_forward_flops
from ..common.onednn import torch_onednn
from .data import synthetic_batch
from .h2d import CopyLog, event_seconds, no_copy
from .models_torch import build_model, parameter_count
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM


class Trainer:
    """One model replica: next_batch() and step(batch) for the timed loop.

    shard_index/shard_count: which part of the dataset this replica reads.
    """

    def __init__(self, args, shard_index=0, shard_count=1, distributed=False):
        """distributed: the process group is initialised; the model becomes a DistributedDataParallel
        replica whose gradients are averaged over the ranks inside backward()."""
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        self.args = args
        # The plan decides what is visible (CUDA_VISIBLE_DEVICES): a CPU cell sees no CUDA device.
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.copies = CopyLog("CUDA events around the input copies") if self.device.type == "cuda" else None

        model = build_model(args.model, args.image_size, args.num_classes)
        self.model = model.to(self.device, memory_format=torch.channels_last).train()
        self.module = self.model  # the model itself, also when DDP wraps it
        if distributed:
            device_ids = [self.device.index or 0] if self.device.type == "cuda" else None
            self.model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.params = list(self.model.parameters())
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

    def _to_device(self, images, labels):
        """On a GPU the host-to-device copy happens here, inside the timed step, between two CUDA
        events on the copy's stream (read at the end of the run: no synchronization added)."""
        if self.copies is None:
            return images, labels
        if images.device.type != "cpu":
            self.copies.add(no_copy, 0)
            return images, labels
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        on_device = images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        end.record()
        nbytes = sum(tensor.numel() * tensor.element_size() for tensor in (images, labels))
        self.copies.add(lambda: event_seconds(start, end), nbytes)
        return on_device

    def _inputs(self, batch):
        """Batch on the model's device as (NCHW channels_last float images, labels)."""
        images, labels = self._to_device(*batch)
        images = images.permute(0, 3, 1, 2)
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

    def h2d_metrics(self, timed_steps):
        """h2d_time and h2d_bytes of the timed steps on a GPU; nothing on a CPU."""
        return [] if self.copies is None else self.copies.metrics(timed_steps)

    def forward_flops(self):
        """Matrix FLOPs of one image's forward pass, counted by PyTorch on the model itself."""
        args = self.args
        example = torch.zeros(1, 3, args.image_size, args.image_size, device=self.device)
        return torch_forward_flops(self.module, example.contiguous(memory_format=torch.channels_last))

    def metadata(self):
        info = {
            "framework_version": torch.__version__,
            "model_params": parameter_count(self.module),
            "onednn": torch_onednn(),
            "device": str(self.device),
        }
        if self.copies is not None:
            info["h2d_method"] = self.copies.method
        if self.stats is not None:
            info["input"] = {**self.stats.metadata(), **self.loader_info}
        return info


def build_trainer(args, shard_index=0, shard_count=1, distributed=False):
    return Trainer(args, shard_index, shard_count, distributed)
