"""Training of one job on CPU or CUDA: epochs, the batch-size search trials. Import only after `set_thread_env`."""

import itertools
import math
import random
import resource
import time
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader, TensorDataset

from .models import build, parameter_count


class DeviceUnavailable(Exception):
    pass


def setup(threads, seed):
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    random.seed(seed)


def resolve_device(requested):
    """auto: cuda when available, else cpu; DeviceUnavailable when cuda is asked for and absent."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("CUDA is not available on this machine (torch.cuda.is_available() is False)")
    return torch.device(requested)


def cpu_times():
    """(user, system) CPU seconds of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + children.ru_utime, own.ru_stime + children.ru_stime


class Job:
    """A freshly initialized model (same weights for a given seed), its optimizer and data loader."""

    def __init__(self, net, data, device, batch_size, seed):
        torch.manual_seed(seed)
        model, self.loss_fn, make_optimizer = build(net, data.vocabulary_size)
        self.model = model.to(device).train()
        self.optimizer = make_optimizer(self.model.parameters())
        self.device = device
        shuffle = torch.Generator().manual_seed(seed)
        dataset = TensorDataset(data.inputs, data.targets)
        self.loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=shuffle)

    def train_batch(self, inputs, targets):
        """Trains on one host batch; returns (loss, bytes copied to the device)."""
        copied = 0
        if self.device.type != "cpu":
            copied = inputs.nbytes + targets.nbytes
            inputs, targets = inputs.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        # .item() returns only once the step is done (on CUDA too: it synchronizes).
        return loss.item(), copied

    def endless_batches(self):
        return itertools.chain.from_iterable(itertools.repeat(self.loader))

    def parameters(self):
        return parameter_count(self.model)


class EpochRun(NamedTuple):
    losses: list  # every batch's loss
    batch_times: list  # seconds per batch, data loader included
    epoch_times: list  # seconds per epoch
    epoch_cpu: list  # (user, system) CPU seconds per epoch


def run_epochs(job, epochs):
    losses, batch_times, epoch_times, epoch_cpu = [], [], [], []
    for epoch in range(epochs):
        user, system = cpu_times()
        epoch_started = started = time.perf_counter()
        for inputs, targets in job.loader:
            loss, _ = job.train_batch(inputs, targets)
            now = time.perf_counter()
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at batch {len(batch_times)} (epoch {epoch + 1})")
            losses.append(loss)
            batch_times.append(now - started)
            started = now
        epoch_times.append(time.perf_counter() - epoch_started)
        epoch_cpu.append(tuple(after - before for after, before in zip(cpu_times(), (user, system), strict=False)))
    return EpochRun(losses, batch_times, epoch_times, epoch_cpu)


def search_batch_size(make_job, candidates, timed_batches):
    """Times `timed_batches` full batches (after one untimed) of a fresh job per candidate.

    Returns (fastest batch size by samples/sec, trials).
    """
    trials = []
    for batch_size in candidates:
        job = make_job(batch_size)
        batches = (batch for batch in job.endless_batches() if len(batch[1]) == batch_size)
        job.train_batch(*next(batches))
        started = time.perf_counter()
        for _ in range(timed_batches):
            job.train_batch(*next(batches))
        seconds = time.perf_counter() - started
        trials.append(
            {
                "batch_size": batch_size,
                "timed_batches": timed_batches,
                "seconds": seconds,
                "samples_per_sec": batch_size * timed_batches / seconds,
            }
        )
    fastest = max(trials, key=lambda trial: trial["samples_per_sec"])
    return fastest["batch_size"], trials
