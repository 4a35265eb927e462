"""The GPUs and CPUs this process may hand to training processes; no framework imported."""

import os
import re

from ..common.gpus import visible_entries


def visible_gpus():
    """CUDA device ids this process may use, as CUDA_VISIBLE_DEVICES entries; no framework imported.

    Counts the NVIDIA device nodes (/dev/nvidiaN: inside a container only the GPUs given to it),
    narrowed by CUDA_VISIBLE_DEVICES when set. Best effort: [] when the driver exposes none.
    """
    try:
        nodes = [name for name in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", name)]
    except OSError:
        nodes = []
    ids = visible_entries(os.environ)
    if ids is None:
        return [str(index) for index in range(len(nodes))]
    return ids[: len(nodes)]


def partition(cpus, groups):
    """Splits sorted cpus into `groups` contiguous groups whose sizes differ by at most one."""
    size, extra = divmod(len(cpus), groups)
    parts, start = [], 0
    for index in range(groups):
        end = start + size + (1 if index < extra else 0)
        parts.append(cpus[start:end])
        start = end
    return parts
