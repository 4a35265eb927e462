# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The plan of one cell on one runner host: everything its placement task file needs.

What every plan shares is worked out here: cell, scenario, platform, kind, placement, host, campaign,
name, threads, pinned, cpus, cpuset, numa_node, cpu_quota, gpus, argv, env, data_dir, mounts, timeout,
runtime. The platform's kind (the registry's ``kind``, ``plugins/plugin_utils/placements/``) adds its
sections: ``process``, ``container`` (and ``peer`` for micro_net's bridge), ``guest``, ``job`` and
``kubernetes``, ``openstack``. Each kind's entry point in ``roles/platform_run/meta/argument_specs.yml``
declares exactly these.

A placement file (``roles/platform_run/tasks/<kind>.yml``) receives the plan as its one input,
``platform_run_cell_plan``, and only passes its fields to modules; nothing is worked out in Jinja. The
plan is computed from the cell, the host's facts (``ansible_facts.platbench`` from
``platbench.lab.host_facts``) and the run's options.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.platbench.lab.plugins.module_utils import data_disk, platforms
from ansible_collections.platbench.lab.plugins.module_utils import storage as storage_classes
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout, peer, several, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import idle_cores, inject, schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import (
    WorkloadArgsError,
    workload_argv,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools
from ansible_collections.platbench.lab.workloads.common.record import RECORD_FILE_ENV

NAME_PREFIX = "platbench-"
NAME_HASH_CHARS = 12
DATASET_HASH_CHARS = 10
# The options a plan is computed from, each fed by one variable of platbench.lab.platform_run (its
# defaults/main.yml holds the one default; vars/main.yml maps them: a test checks all three agree).
OPTIONS = {
    "host": "inventory_hostname",  # the inventory host the cell runs on
    "campaign": "platform_run_campaign",  # the campaign's name
    "reserved_cpus": "platform_run_reserved_cpus",  # CPUs never given to a pinned cell
    "prefix": "platform_run_prefix",  # where the bare-metal venv lives on the host (and on instances)
    "image": "platform_run_image",  # the workload image
    "engines": "platform_run_engines",  # per container engine: its version and the workload image's id there
    "peak_cache_dir": "platform_run_peak_cache_dir",
    "datasets_dir": "platform_run_datasets_dir",
    "dataset": "platform_run_dataset",  # the experiment's `dataset:` (generated data), or None
    "timeout": "platform_run_cell_timeout",  # seconds before a cell is stopped
    "guest_image": "platform_run_guest",  # the guest image description (guests)
    "vm_memory_mb": "platform_run_vm_memory_mb",
    "vm_hugepages": "platform_run_vm_hugepages",
    "gpus_per_cell": "platform_run_gpus_per_cell",  # GPUs handed to a `gpu` cell
    "gpu_assignment": "platform_run_gpu_assignment",  # platbench_gpu_assignment: PCI address -> host | guests
    "kubeconfig": "platform_run_kubeconfig",  # k8s: the kubeconfig the Job is created with
    "k8s_namespace": "platform_run_k8s_namespace",  # k8s: the namespace of the cells' Jobs
    "k8s_node": "platform_run_k8s_node_name",  # k8s: the runner's node name (platform_status resolves it)
    "k8s_memory": "platform_run_k8s_memory",  # k8s: the pod's memory request and limit
    "k8s_cpu_request": "platform_run_k8s_cpu_request",  # k8s: a vnl pod's CPU request (its limit is the scale-up)
    "k8s_poll_delay": "platform_run_k8s_poll_delay",  # k8s: seconds between two looks at the Job
    "sif": "platform_run_sif",  # the SIF description (Apptainer on the host), platbench.lab.apptainer's current.json
    "apptainer_version": "platform_run_apptainer_version",  # the host's Apptainer
    "openstack_kubeconfig_dir": "platform_run_openstack_kubeconfig_dir",  # magnum: each cluster's kubeconfig
    # The runner hosts (group platbench_runners, in order: name, address, SSH, facts) a cell's ranks spread over
    # (instances.hosts, network host: placements/instances_hosts.py); None: this host alone.
    "runners": "platform_run_runners",
    # The experiment's storage classes as platbench.lab.storage_classes described them on this host (their path,
    # device, rotational flag), by name: a cell's `storage` label puts its data directory there.
    "storage": "platform_run_storage",
}
# Options a plan can do without (None or empty): the others must be given.
OPTIONAL = (
    "dataset",
    "engines",
    "guest_image",
    "sif",
    "apptainer_version",
    "k8s_node",
    "reserved_cpus",
    "runners",
    "storage",
)


class CellPlanError(ValueError):
    """A cell cannot be placed on this host as asked; the message says why and what to change."""


def _digest(text, chars):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:chars]


def instance_key(campaign, host, cell_id):
    """What tells a cell's instances apart: its campaign, runner host and cell id."""
    return f"{campaign}|{host}|{cell_id}"


def instance_name(campaign, host, cell_id):
    """The container's and the guest's name: unique per campaign, runner host and cell, and
    short enough for libvirt and Docker (``platbench-`` and 12 hex digits)."""
    return NAME_PREFIX + _digest(instance_key(campaign, host, cell_id), NAME_HASH_CHARS)


def dataset_dir(datasets_dir, dataset):
    """Where a generated dataset lives on the host: one directory per generator and arguments."""
    args = json.dumps(dataset.get("args") or {}, sort_keys=True)
    return f"{str(datasets_dir).rstrip('/')}/{dataset['generator']}-{_digest(args, DATASET_HASH_CHARS)}"


def choose_cpus(allowed, count, reserved=(), numa_nodes=None):
    """sizing.choose_cpus, a CellPlanError where the CPUs cannot be chosen."""
    try:
        return sizing.choose_cpus(allowed, count, reserved, numa_nodes)
    except sizing.SizingError as exc:
        raise CellPlanError(str(exc)) from None


DATA_PATH = "data_path"  # the cell label of the experiment's data_path (matrix.DATA_PATH)
# The empty second lower layer of a read-only overlayfs (one lower layer alone is refused), in the GEMM peak cache:
# platbench.lab.platform_run makes both before the cells.
OVERLAY_LOWER = "overlay-lower"


def overlay_lower_dir(cache):
    """The empty lower layer under the cache directory ``cache``."""
    return f"{str(cache).rstrip('/')}/{OVERLAY_LOWER}"


def _overlay_lower(platform, data_dir, cache, where):
    """The empty lower layer of a cell's data read through overlayfs; CellPlanError where the cell has no data or its
    kind cannot read it so."""
    if not data_dir:
        raise CellPlanError(
            f"{where}: data_path: overlay reads the data directory through overlayfs, and this cell has none"
        )
    if not placements.declaration(platform).data_overlay:
        able = [
            entry.label
            for entry in platforms.PLATFORMS
            if entry.placement and placements.declaration(entry).data_overlay
        ]
        raise CellPlanError(
            f"{where}: data_path: overlay: {platform.label} reads its data through a bind mount only; the platforms "
            f"that can read it through overlayfs: {', '.join(able)} (only_on: {{data_path: [...]}} limits the "
            "dimension to them)"
        )
    return overlay_lower_dir(cache)


def duet_cpus(allowed, count, reserved=(), numa_nodes=None):
    """The two CPU sets of a duet pair (schedule.duet) of scale-up ``count``: ``([side 0], [side 1])``, disjoint,
    ``count`` CPUs each, in one NUMA node where the host has several (choose_cpus' 2 x ``count``, side 0 the higher
    half). Raises CellPlanError, saying what the host has, where they do not fit."""
    try:
        chosen, node = choose_cpus(allowed, 2 * count, reserved, numa_nodes)
    except CellPlanError as exc:
        raise CellPlanError(f"a duet pair of scale-up {count} runs twice, side by side: {exc}") from None
    if len(numa_nodes or {}) > 1 and node is None:
        raise CellPlanError(
            f"a duet pair of scale-up {count} needs 2 x {count} free CPUs in one NUMA node, and no node of this host "
            "has them"
        )
    return chosen[count:], chosen[:count]


def choose_gpus(platform, facts, assignment, wanted, host):
    """The PCI addresses of the GPUs a `gpu` cell on ``platform`` gets: the first ``wanted`` of
    its pool (the registry's ``gpu_pool``: ``host``, the GPUs assigned to the host and not bound to
    vfio-pci; ``guests``, those assigned to guests), in PCI order."""
    gpus = facts.get("gpus") or []
    if not gpus:
        raise CellPlanError("a 'gpu' cell needs a GPU, and this host has none: use processor [cpu] here")
    try:
        to_guests = platform.gpu_pool == "guests"
        pool = (gpu_pools.guest_pool if to_guests else gpu_pools.host_pool)(assignment, gpus, host)
    except gpu_pools.GpuAssignmentError as exc:
        raise CellPlanError(str(exc)) from None
    if not pool:
        uses = (
            "the GPUs it assigns to guests"
            if to_guests
            else "the GPUs it leaves with the host that are not bound to vfio-pci"
        )
        raise CellPlanError(
            f"no GPU is left for a {platform.label} cell: it takes {uses} ({gpu_pools.SETTING}), and this host's "
            f"GPUs (assignment, driver) are {gpu_pools.describe_all(assignment, gpus, host)}"
        )
    return pool[: max(int(wanted), 1)]


def _options(options):
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise CellPlanError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    missing = [name for name in OPTIONS if name not in OPTIONAL and options.get(name) in (None, "")]
    if missing:
        raise CellPlanError(
            "option(s) " + ", ".join(f"{name} (from {OPTIONS[name]})" for name in missing) + " must be given"
        )
    return {**dict.fromkeys(OPTIONAL), **options}


def _platform(cell):
    try:
        platform = platforms.get(cell["labels"].get("platform"), f"cell {cell['id']}")
    except platforms.UnknownPlatform as exc:
        raise CellPlanError(str(exc)) from None
    if not platform.placement:
        raise CellPlanError(
            f"cell {cell['id']}: platform {platform.label} is {platforms.not_built_reason(platform.label)}"
        )
    return platform


def _resources(platform, cell, facts, opts, where):
    """The runner's CPUs (and their NUMA node) and GPUs the cell gets, and how many GPUs it gets."""
    labels = cell["labels"]
    threads, pinned = labels["scaleup"], is_pinned(labels)
    wants_gpu = labels["processor"] == "gpu"
    needed = several.cpus_needed(cell)  # the scale-up, times the instances that each get their own cores
    if pinned and needed != threads and not platform.remote:
        try:
            free = sizing.cpu_numbers(facts.get("cpus_allowed", []), "the host's allowed CPUs") - sizing.cpu_numbers(
                opts["reserved_cpus"] or [], "reserved CPUs"
            )
        except sizing.SizingError as exc:
            raise CellPlanError(str(exc)) from None
        if needed > len(free):
            raise CellPlanError(
                f"{where}: {cell['instances']['count']} pinned instances x scale-up {threads} need {needed} CPUs, "
                f"but only {len(free)} are free ({sorted(free)}): lower the scale-up, or let the instances share "
                "their CPUs (instances: {cpus: shared})"
            )
    try:
        # An instance's CPUs and GPUs are its flavor's, not the runner's.
        cpus, node = (
            choose_cpus(facts.get("cpus_allowed", []), needed, opts["reserved_cpus"] or [], facts.get("numa_nodes"))
            if pinned and not platform.remote
            else ([], None)
        )
        side = labels.get(schedule.DUET_SIDE)
        if side is not None and pinned and not platform.remote:
            # A duet pair's side: its half of the pair's CPUs (schedule.duet swaps the sides every round).
            allowed, reserved = facts.get("cpus_allowed", []), opts["reserved_cpus"] or []
            sides = duet_cpus(allowed, needed, reserved, facts.get("numa_nodes"))
            cpus = sides[int(side)]
        # The assignment is checked for every cell, so a bad one never passes unnoticed.
        gpu_pools.checked_assignment(opts["gpu_assignment"], facts.get("gpus"), opts["host"])
        # GPUs of its own for each instance of a cell with several (instances.gpus: disjoint), or one set for all.
        # k8s: each pod asks the device plugin for its own; the host pool only names the node's GPUs.
        scheduled = platform.gpu_view == "scheduled"
        wanted = int(opts["gpus_per_cell"]) if scheduled else several.gpus_needed(cell, opts["gpus_per_cell"])
        gpus = (
            choose_gpus(platform, facts, opts["gpu_assignment"], wanted, opts["host"])
            if wants_gpu and platform.gpu_pool
            else []
        )
    except (CellPlanError, gpu_pools.GpuAssignmentError) as exc:
        raise CellPlanError(f"{where}: {exc}") from None
    if cell.get("instances") and gpus and len(gpus) < wanted:
        count = cell["instances"]["count"]
        raise CellPlanError(
            f"{where}: {count} instances x {wanted // count} GPU(s) each (platform_run_gpus_per_cell) need {wanted} "
            f"GPUs of their own, but {platform.label} cells get {len(gpus)} here "
            f"({gpu_pools.describe(gpus, facts.get('gpus'))}, their pool under {gpu_pools.SETTING}): "
            "lower platform_run_gpus_per_cell, assign more GPUs to the host, or let the instances share their GPUs "
            "(instances: {gpus: shared})"
        )
    count = len(gpus) if platform.gpu_pool else int(opts["gpus_per_cell"]) if wants_gpu else 0
    # kubelet's CPU manager picks the cores, a scheduler (device plugin) the GPUs: only how many is planned.
    if platform.pinning == "cpu_manager":
        cpus, node = [], None
    if platform.gpu_view == "scheduled":
        gpus = []
    return cpus, node, gpus, count


def _with_storage_class(cell, opts, where):
    """``opts`` with the datasets directory of the cell's storage class (its ``storage`` label), and what the record
    says of that class; unchanged, and nothing to say, for a cell without one."""
    name = cell["labels"].get("storage")
    if name is None:
        return opts, {}
    info = (opts["storage"] or {}).get(name)
    if not info or not info.get("exists"):
        raise CellPlanError(
            f"{where}: storage class {name!r} is not described on this host (platbench_storage_classes names no "
            "existing directory for it; the prechecks say which)"
        )
    # The dataset, and a guest's data disk made of it, both live on the class's device.
    return {**opts, "datasets_dir": info["path"]}, storage_classes.runtime(info)


def cell_plan(cell, facts, options=None):
    """Everything placing ``cell`` on its platform on this host needs (see the role's README)."""
    if not isinstance(cell, dict) or not {"id", "labels", "params"} <= set(cell):
        raise CellPlanError(f"expected a cell of the expanded experiment (id, labels, params), got {cell!r}")
    opts = _options(options)
    facts = facts or {}
    platform = _platform(cell)
    where = f"cell {cell['id']} on {opts['host']}"
    # Each cell is sized once, by cells_to_run on the host that runs it (a relative scale-up resolved, chr,
    # numa_nodes): the plan takes that sizing and never works it out again.
    if not sizing.is_sized(cell):
        raise CellPlanError(
            f"{where}: the cell is not sized for this host (its labels lack {sizing.CHR_LABEL}): plan the cells "
            "cells_to_run returns, which sizes each for the host that runs it (plugins/plugin_utils/cells/sizing.py)"
        )
    labels = cell["labels"]
    opts, storage_runtime = _with_storage_class(cell, opts, where)
    try:
        fence, emulator_cpus, idle_runtime = idle_cores.plan(platform, cell, facts, opts["reserved_cpus"], where)
    except idle_cores.IdleCoresError as exc:
        raise CellPlanError(str(exc)) from None
    cpus, node, gpus, gpu_count = _resources(platform, cell, facts, opts, where)
    threads, pinned = labels["scaleup"], is_pinned(labels)
    cpuset = ",".join(str(cpu) for cpu in cpus)
    quota = None if pinned else float(threads)

    params = {"threads": threads, **cell["params"]}
    host_data_dir = params.get("data_dir")
    if opts["dataset"]:
        host_data_dir = dataset_dir(opts["datasets_dir"], opts["dataset"])
    # Where the workload reads the data: the host's directory itself, or in a guest the disk made of it.
    data_dir = host_data_dir
    if host_data_dir:
        if platform.data_view is None:
            raise CellPlanError(
                f"{where}: {platform.label} runs on an instance that has no copy of the runner's data files "
                f"({host_data_dir}): drop {platform.label} from the experiment's platforms or use data: synthetic"
            )
        if platform.data_view == "disk":
            data_dir = data_disk.GUEST_DATA_DIR
        params["data_dir"] = data_dir
    try:
        argv = workload_argv(params, labels["workload"])
    except WorkloadArgsError as exc:
        raise CellPlanError(str(exc)) from None
    key = instance_key(opts["campaign"], opts["host"], cell["id"])
    with_peer = peer.needs_peer(labels["workload"])
    if with_peer:
        # micro_net's peer is the cell's second instance (plugins/plugin_utils/cells/peer.py).
        try:
            cell = {**cell, "instances": peer.instances_spec(platform, params, where)}
        except peer.PeerPlanError as exc:
            raise CellPlanError(str(exc)) from None
    cache = opts["peak_cache_dir"]
    # The data (a generated dataset or the user's own) read-only, the GEMM peak cache read-write; both as the machine
    # the workload runs on sees them (a guest: the data disk's mount point).
    mounts = ([{"source": str(data_dir), "target": str(data_dir), "mode": "ro"}] if data_dir else []) + [
        {"source": str(cache), "target": str(cache), "mode": "rw"}
    ]
    if labels.get(DATA_PATH) == "overlay":
        mounts[0]["overlay"] = _overlay_lower(platform, data_dir, cache, where)
    name = instance_name(opts["campaign"], opts["host"], cell["id"])
    try:
        timeout = cell_timeout.seconds(opts["timeout"])
    except cell_timeout.CellTimeoutError as exc:
        raise CellPlanError(f"{where}: {exc}") from None
    plan = {
        "cell": cell["id"],
        "scenario": cell.get("scenario"),
        "platform": platform.label,
        "kind": platform.kind,
        "placement": platform.placement,
        "host": opts["host"],
        "campaign": opts["campaign"],
        "name": name,
        "threads": threads,
        "pinned": pinned,
        "cpus": cpus,
        "cpuset": cpuset,
        "numa_node": node,
        "cpu_quota": quota,
        "gpus": gpus,
        "argv": argv,
        "data_dir": data_dir,
        "mounts": mounts,
        "timeout": timeout,
        # idle_cores: none on the runner host: the host's other work kept on these CPUs while the cell runs.
        "fence": fence,
        # What the platform was asked to do, recorded with the cell; the kind adds what its engine saw.
        "runtime": {
            "cpuset_requested": cpuset or None,
            "numa_node": node,
            "gpus_requested": ",".join(gpus) or None,
            **storage_runtime,
            **idle_runtime,
        },
    }
    ctx = placements.Placing(
        platform=platform,
        cell=cell,
        opts=opts,
        facts=facts,
        where=where,
        name=name,
        key=key,
        threads=threads,
        pinned=pinned,
        cpus=cpus,
        cpuset=cpuset,
        quota=quota,
        gpus=gpus,
        gpu_count=gpu_count,
        argv=argv,
        mounts=mounts,
        host_data_dir=host_data_dir,
        cache=cache,
        peer=with_peer,
        params=cell["params"],
    )
    # An injected discard or spin (inject.py) is the workload's own doing: it reads the fraction from its environment.
    try:
        workload_env = inject.workload_env(labels.get(inject.LABEL))
    except ValueError as exc:
        raise CellPlanError(f"{ctx.where}: {exc}") from None
    ctx.extra_env.update(workload_env)
    for knob, variable in inject.WORKLOAD_ENV.items():
        if variable in workload_env:
            plan["runtime"][f"inject_{knob}_requested"] = {
                "fraction": float(workload_env[variable]),
                "applied_by": f"the workload, {inject.APPLIED_BY[knob]} ({variable}={workload_env[variable]})",
            }
    if labels.get(schedule.DUET_PAIR) is not None:
        # A duet pair's start line (workloads/common/duet.py): a directory of the pair's own in the cache, which
        # both sides see at the same path; tasks/duet.yml clears it before and after the pair.
        plan["duet_dir"] = f"{cache}/duet/{instance_name(opts['campaign'], opts['host'], labels[schedule.DUET_PAIR])}"
        # Each side's record line also goes to a file of its own there (workloads/common/record.py), which duet_run
        # reads back: `start --attach` once lost a container side's line. Cleared with the start line.
        plan["record_file"] = f"{plan['duet_dir']}/{name}.record"
        ctx.extra_env.update(
            {
                "PLATBENCH_DUET_DIR": plan["duet_dir"],
                "PLATBENCH_DUET_SIDE": str(labels[schedule.DUET_SIDE]),
                RECORD_FILE_ENV: plan["record_file"],
            }
        )
    try:
        placements.plan_sections(ctx, plan)
    except placements.PlacementError as exc:
        raise CellPlanError(str(exc)) from None
    if emulator_cpus is not None:
        plan["guest"]["emulator_cpus"] = emulator_cpus
        plan["runtime"]["emulator_pins_requested"] = ",".join(map(str, emulator_cpus))
    return plan
