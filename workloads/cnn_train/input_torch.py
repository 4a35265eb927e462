"""PyTorch input pipeline over the JPEG-folder layout: Dataset + DataLoader with worker processes.

read file -> decode (Pillow) -> resize the shorter side to --image-size -> central crop ->
batch (DataLoader, --data-workers processes, prefetching) -> uint8 NHWC host tensors; the
training step converts them. TensorFlow is never imported here. Nothing is cached: every
epoch reads the files again.
"""

import io
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .data import InputStats, resized_size, shard_of, shuffled_files

PREFETCH_BATCHES_PER_WORKER = 2


def decode_and_crop(contents, image_size):
    """JPEG bytes (or any format Pillow reads: a few ImageNet "JPEG"s are PNG or CMYK) -> uint8 SxSx3."""
    from PIL import Image

    with Image.open(io.BytesIO(contents)) as opened:
        # JPEG only: decode at the smallest DCT scale that still covers image_size on both sides.
        opened.draft("RGB", (image_size, image_size))
        image = opened.convert("RGB")
    height, width = resized_size(image.height, image.width, image_size)
    image = image.resize((width, height), Image.BILINEAR)
    top, left = (height - image_size) // 2, (width - image_size) // 2
    return np.array(image.crop((left, top, left + image_size, top + image_size)), dtype=np.uint8)


class JpegFiles(Dataset):
    """Item i: (image uint8 HWC, label, bytes read, file index) of the i-th file of this shard."""

    def __init__(self, root, files, labels, indices, image_size):
        self.root, self.files, self.labels, self.indices = root, files, labels, indices
        self.image_size = image_size

    def __len__(self):
        return len(self.files)

    def __getitem__(self, position):
        with open(os.path.join(self.root, self.files[position].decode()), "rb") as handle:
            contents = handle.read()
        image = decode_and_crop(contents, self.image_size)
        return torch.from_numpy(image), int(self.labels[position]), len(contents), int(self.indices[position])


class EpochCycler(Sampler):
    """A fresh permutation per epoch, epochs concatenated until exactly `total` indices were given.

    Batches run across epoch boundaries (as tf.data's repeat-then-batch does), and the loader
    ends by itself once the steps have their data.
    """

    def __init__(self, size, total, seed):
        self.size, self.total, self.seed = size, total, seed

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed)
        remaining = self.total
        while remaining > 0:
            epoch = torch.randperm(self.size, generator=generator)[:remaining].tolist()
            yield from epoch
            remaining -= len(epoch)

    def __len__(self):
        return self.total


def build_input(layout, args, total_batches, shard_index=0, shard_count=1, pin_memory=False, timeout=0):
    """(next_batch, stats, loader_info): next_batch() -> (images uint8 NHWC, labels int64) on the host."""
    if layout.format != "jpeg":
        raise ValueError("the PyTorch input pipeline reads the JPEG folder layout only")
    files, labels, indices = (
        shard_of(column, shard_index, shard_count) for column in shuffled_files(layout, args.seed)
    )
    if len(files) == 0:
        raise ValueError(
            f"worker {shard_index} of {shard_count} has no file to read: {layout.size} files in {layout.root}"
        )
    dataset = JpegFiles(layout.root, files, labels, indices, args.image_size)
    workers = args.data_workers if args.data_workers is not None else min(4, len(os.sched_getaffinity(0)))
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=EpochCycler(len(dataset), total_batches * args.batch_size, args.seed + shard_index),
        num_workers=workers,
        drop_last=True,
        pin_memory=pin_memory,
        prefetch_factor=PREFETCH_BATCHES_PER_WORKER if workers else None,
        timeout=timeout if workers else 0,
    )
    iterator = iter(loader)
    stats = InputStats(len(dataset))

    def next_batch():
        images, labels, file_bytes, file_indices = next(iterator)
        stats.add_batch(file_bytes.numpy(), file_indices.numpy())
        return images, labels

    return next_batch, stats, {"data_workers": workers, "prefetch_factor": PREFETCH_BATCHES_PER_WORKER}
