# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What every placement kind shares: the placing context, the observed outcome, the environment."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ansible_collections.platbench.lab.plugins.plugin_utils import gpus as gpu_pools
from ansible_collections.platbench.lab.plugins.plugin_utils import inject

# Every thread pool the frameworks start gets the scenario's core count.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
FIXED_ENV = {"TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
# Where the guest image installs the workload environment (platbench.lab.guest_image).
GUEST_PREFIX = "/opt/platbench"


class PlacementError(ValueError):
    """A cell cannot be placed as asked; the message says why and what to change."""


@dataclass
class Placing:
    """One cell being planned: what cell_plan worked out for every kind, read by the kind modules."""

    platform: object  # the registry entry
    cell: dict
    opts: dict  # cellplan.OPTIONS merged with the caller's
    facts: dict  # ansible_facts.platbench of the runner host
    where: str  # "cell ID on HOST", for messages
    name: str  # the container's, guest's or Job's name
    key: str  # what tells the cell's instances apart (peer networks hash it)
    threads: int
    pinned: bool
    cpus: list  # the runner's CPUs chosen for `pin` (empty otherwise)
    cpuset: str
    quota: float | None  # CPUs of quota for `vnl`, None for `pin`
    gpus: list  # the runner's GPUs (PCI addresses) handed over
    gpu_count: int  # how many GPUs the cell gets (where a scheduler chooses them, only this is known)
    argv: list  # python's arguments
    mounts: list  # data (read-only) and GEMM peak cache directories, as source/target/mode where the workload runs
    host_data_dir: str | None  # the runner host's data directory (a generated dataset, params.data_dir), or None
    cache: str  # the GEMM peak cache directory
    peer: bool = False  # micro_net: the workload measures the network against a peer
    params: dict = field(default_factory=dict)
    extra_env: dict = field(default_factory=dict)  # what the kind adds to every environment (an emulated guest's)

    @property
    def injected_quota(self):
        """The fraction of its CPUs' time an injected overhead leaves the cell (its ``inject`` label, ``cpu_quota``:
        plugins/plugin_utils/inject.py), or None for a cell without one."""
        try:
            return inject.parse(self.cell["labels"].get(inject.LABEL)).get("cpu_quota")
        except ValueError as exc:
            raise PlacementError(f"{self.where}: {exc}") from None

    def injected_cpus(self, fraction):
        """The CPUs of quota an injected ``fraction`` leaves the cell: Q x its CPUs (the scale-up)."""
        return round(float(fraction) * self.threads, 6)

    @property
    def data_mounts(self):
        """The read-only mounts of ``mounts``: the data's (the GEMM peak cache is read-write)."""
        return [mount for mount in self.mounts if mount["mode"] == "ro"]

    def env(self, extra=None):
        """The workload's environment: thread pools, GPU visibility, the peak cache, ``extra``."""
        env = {name: str(self.threads) for name in THREAD_ENV}
        env.update(FIXED_ENV)
        env["PLATBENCH_CACHE_DIR"] = str(self.cache)
        env.update(gpu_env(self.platform.gpu_view, self.gpus, self.gpu_count, self.facts))
        env.update(self.extra_env)
        env.update(extra or {})
        return env


def gpu_env(view, gpus, count, facts):
    """The variables that decide which GPUs the workload sees, and which it must find.

    CUDA_VISIBLE_DEVICES="" hides every GPU from a cpu cell, so a framework never picks one up behind
    its back; NVIDIA_VISIBLE_DEVICES=void keeps the NVIDIA container runtime from mounting any. With the
    ``host`` view (bm, Apptainer's --nv on the host) the GPUs are numbered among those the host's driver
    sees, in PCI order; every other view shows the workload its own GPUs, numbered from 0.
    PLATBENCH_EXPECTED_GPUS is what the workload checks the devices it used against: the host's bus ids
    where it sees them (``host``, ``own``), only their count where a guest renumbers them (``passthrough``)
    or a scheduler chooses them (``scheduled``).
    """
    count = len(gpus) if gpus else count
    visible = gpu_pools.cuda_indexes(gpus, facts.get("gpus")) if view == "host" else range(count)
    expected = {"count": count, "pci_bus_ids": list(gpus) if view in ("host", "own") else None}
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in visible),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PLATBENCH_EXPECTED_GPUS": json.dumps(expected, separators=(",", ":")),
    }
    if not count:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


@dataclass
class Observed:
    """What a cell's engine reported: the workload's output, runtime metadata, and an error where the
    engine says the workload failed although no task did (a Kubernetes Job that ended Failed)."""

    output: str = ""
    runtime: dict = field(default_factory=dict)
    error: str | None = None


def process_output(result):
    """A command's stdout and stderr, as the record parser reads them."""
    result = result or {}
    if "stdout" not in result and "stderr" not in result:
        return ""
    return f"{result.get('stdout', '')}\n{result.get('stderr', '')}"
