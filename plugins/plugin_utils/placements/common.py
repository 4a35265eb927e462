# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What every placement kind shares: the placing context, the observed outcome, the environment."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools

# Every thread pool the frameworks start gets the scenario's core count.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
FIXED_ENV = {"TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
# Where the guest image installs the workload environment (platbench.lab.guest_image).
GUEST_PREFIX = "/opt/platbench"


def kind_file(module_file, name):
    """The task file ``name`` of a kind's own folder (``placements/<kind>/tasks/``), from its ``__init__``'s
    ``__file__``: what its declaration names as its ``task_file`` and ``teardown``."""
    return os.path.join(os.path.dirname(os.path.abspath(module_file)), "tasks", name)


class PlacementError(ValueError):
    """A cell cannot be placed as asked; the message says why and what to change."""


class KindError(ValueError):
    """A kind's declaration, or a platform's use of a kind, is wrong; the message names the kind and the part."""


# How a kind's cells of several instances are placed (placements/registry.py picks the placement):
#   supervised  processes and containers of the runner host, run by platbench.lab.run_instances
#   guests      a guest each, on a bridge of the runner host (placements/instances_guest.py)
#   pods        pods of the runner's cluster (placements/instances_k8s.py)
#   None        not placed: a cell of several instances of the kind is refused
INSTANCE_PLACEMENTS = ("supervised", "guests", "pods", None)
# What starts a kind's workload, which its platforms then name (the registry's field of that name):
#   launcher  a process of the machine's own OS, started by the platform's `launcher` (the venv's python, apptainer
#             exec): its instances share that OS's loopback, enter a network namespace with `ip netns exec`, and need
#             the machine's workload environment
#   engine    a container of the workload image, run by the platform's `engine`: the image holds its tools, and its
#             instances join a network through a holder container
#   None      neither: the kind holds another (a guest, an instance), or starts the workload its own way (LXC, a Job)
STARTERS = ("launcher", "engine", None)


@dataclass(frozen=True)
class Kind:
    """One kind of placement, declared once in its module (``KIND = Kind(...)`` in placements/<kind>/): every table
    of the kinds (placements/registry.py) is built from these declarations, and nothing else names a kind's facts.

    Required: ``name``, ``summary``, ``plan``, ``observed``, ``task_file``, ``results`` and ``teardown``. The rest are
    capabilities, off unless declared."""

    name: str
    summary: str  # what a cell of the kind is, one line (the docs, `platbench.lab.platforms`)
    plan: Callable  # plan(ctx, plan): adds the kind's sections to a cell plan
    observed: Callable  # observed(plan, results): what its engine reported, as an Observed
    task_file: str  # its placement: the path of tasks/place.yml in its folder (kind_file(__file__, "place.yml"))
    results: Mapping  # the registered results its task files leave for record_cell: result name -> variable name
    # What removes what a stopped cell of it leaves: the path of tasks/teardown.yml in its folder (or another kind's),
    # and names of playbooks/tasks/teardown/ that several kinds share (fence, data_disks).
    teardown: tuple
    inner: tuple = ()  # the kinds it may hold (a guest's, an instance's workload): their plan runs inside it
    fenced: bool = False  # runs on the runner's own cores: idle_cores none fences the host's other work onto them
    emulator: bool = False  # a guest of the runner, whose emulator threads share its cores (idle_cores none)
    takes_quota: bool = False  # an injected CPU quota (inject: cpu_quota) is applied to its cells
    duet: bool = False  # its cells run as a side of a duet pair (schedule: duet; platbench.lab.duet_run)
    instances: str | None = None  # INSTANCE_PLACEMENTS: how a cell of several instances of it is placed
    started_by: str | None = None  # STARTERS: what starts its workload (its platforms name their launcher or engine)
    # Its cells are submitted from the runner through the platform's API (a kubeconfig), not run on the machine that
    # holds it: an instance holding it is reached with a local connection.
    through_api: bool = False
    # Its platforms say what confines the workload besides its namespaces (the registry's `confinement`: an OCI bundle
    # run with or without the engine's seccomp profile and capabilities).
    confined: bool = False
    # Its cells can read their data directory through a read-only overlayfs (the experiment's data_path: overlay), as
    # from an image layer, in place of a bind mount.
    data_overlay: bool = False
    # Roles its task files apply to each cell (a guest's boot): its platforms' registry entries may list them, but no
    # lab build applies them (platform_roles leaves them out).
    cell_roles: tuple = ()
    # Whose kernel and network namespace its workload is in (module_utils/platforms.py MACHINES, NETWORKS). Its
    # platforms' registry entries say the same, for the code shipped to the hosts, which cannot read this
    # declaration; the registry is refused where they differ (registry.registry_problems).
    machine: str = "host"
    network: str = "own"

    REQUIRED = ("name", "summary", "plan", "observed", "task_file", "results", "teardown")

    def __post_init__(self):
        name = self.name if isinstance(self.name, str) and self.name else "(unnamed)"
        for part in self.REQUIRED:
            value = getattr(self, part)
            if value is None or value == "" or (part in ("results", "teardown") and not value):
                raise KindError(f"kind {name}: its declaration lacks {part!r}: {_PART_HELP[part]}")
        for part in ("plan", "observed"):
            if not callable(getattr(self, part)):
                raise KindError(f"kind {name}: {part!r} must be a function, got {getattr(self, part)!r}")
        if not isinstance(self.results, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.results.items()
        ):
            raise KindError(f"kind {name}: 'results' must map result names to registered variable names")
        if not os.path.isabs(self.task_file):
            raise KindError(
                f"kind {name}: 'task_file' is the path of tasks/place.yml in the kind's folder "
                f"(kind_file(__file__, 'place.yml') in placements/{name}/__init__.py), not {self.task_file!r}"
            )
        if isinstance(self.teardown, str) or isinstance(self.inner, str):
            raise KindError(f"kind {name}: 'teardown' and 'inner' are tuples of names, not a string")
        if self.instances not in INSTANCE_PLACEMENTS:
            raise KindError(f"kind {name}: 'instances' {self.instances!r} is not one of {INSTANCE_PLACEMENTS}")
        if self.started_by not in STARTERS:
            raise KindError(f"kind {name}: 'started_by' {self.started_by!r} is not one of {STARTERS}")
        if self.machine not in platforms.MACHINES or self.network not in platforms.NETWORKS:
            raise KindError(
                f"kind {name}: 'machine' {self.machine!r} is not one of {platforms.MACHINES}, or 'network' "
                f"{self.network!r} is not one of {platforms.NETWORKS}"
            )

    @property
    def folder(self):
        """The kind's own folder (``placements/<kind>/``, its task files in ``tasks/``)."""
        return os.path.dirname(os.path.dirname(self.task_file))

    @property
    def supervised(self):
        """Several instances of it are run side by side by the runner's supervisor (platbench.lab.run_instances)."""
        return self.instances == "supervised"

    @property
    def launched(self):
        """Its workload is a process of the machine's own OS, started by its platform's launcher."""
        return self.started_by == "launcher"

    @property
    def engine_run(self):
        """Its workload is a container of the workload image, run by its platform's engine."""
        return self.started_by == "engine"


_PART_HELP = {
    "name": "the kind's name, as the registry's platforms name it (kind=...)",
    "summary": "one line saying what a cell of the kind is",
    "plan": "the function that adds the kind's sections to a cell plan",
    "observed": "the function that maps what its engine reported into the cell's output and runtime",
    "task_file": "the path of the task file of its folder that executes its plan (tasks/place.yml)",
    "results": "the registered results its task files leave for record_cell, by result name",
    "teardown": "the task files of playbooks/tasks/teardown/ that remove what a stopped cell of it leaves",
}


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
    declaration: Kind | None = None  # the platform's kind, as declared (placements.plan_sections sets it)

    @property
    def injected_quota(self):
        """The fraction of its CPUs' time an injected overhead leaves the cell (its ``inject`` label, ``cpu_quota``:
        plugins/plugin_utils/experiment/inject.py), or None for a cell without one."""
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


def command_observed(result):
    """What a command's registered result says (the process and lxc kinds'): its output and exit code."""
    result = result or {}
    return Observed(output=process_output(result), runtime={"rc": result["rc"]} if "rc" in result else {})


def process_output(result):
    """A command's stdout and stderr, as the record parser reads them."""
    result = result or {}
    if "stdout" not in result and "stderr" not in result:
        return ""
    return f"{result.get('stdout', '')}\n{result.get('stderr', '')}"
