# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Cells with several instances: the experiment fields that ask for them, and each instance's part of a plan.

A cell of ``mode: single`` is one instance: one process, container, guest or Job (the kinds in
``placements/``). The other modes place several instances of the cell's platform, each with a role:

- ``shared`` (Lin 2018's noisy neighbour): a ``foreground`` job measured alone, then again beside a
  ``background`` job on the same host. The experiment's ``background: {workload, params, settle}`` says
  what runs beside it (Lin: AlexNet at batch 512, and again at 32; a list in its params is a dimension).
  On bm both run in the same OS as processes; on a container platform each is a container; on a guest platform
  each is a guest (vm: its process; vmcn: a container in it).
- ``distributed``: ``instances: {count: N}`` ranks, a ``chief`` and ``worker``s, across the network path of
  the cell's ``network`` (``loopback``, ``bridge``, ``overlay`` on the runner host; ``host``: the runner hosts'
  own addresses). ``instances.hosts: H`` (default 1) spreads the ranks over the first H hosts of group
  ``platbench_runners``, rank i on runner i % H (placements/instances_hosts.py); only the ``host`` path crosses hosts.
  Guests (vm, vmcn: a guest per rank, vmcn's container in it) meet on ``bridge`` or ``overlay``, each guest with a
  NIC on the cell's bridge; ``loopback``, which each guest has of its own, is refused for them when the experiment
  is loaded.

``instances.cpus`` says whether the instances share the cell's CPUs (``shared``) or each gets its own
scale-up's worth (``disjoint``, the default: Lin's instances each had their own GPU and cores).
``instances.gpus`` says the same of a ``gpu`` cell's GPUs: ``disjoint`` (the default, Lin's one GPU each) gives
every instance ``platform_run_gpus_per_cell`` GPUs of its own, so the cell takes count x that many from the
host's pool (``platbench_gpu_assignment``); ``shared`` hands the same GPUs to every instance. Each instance sees
only its own GPUs (bm: ``CUDA_VISIBLE_DEVICES``; cn, pd: the engine's GPU request), as CUDA device 0 onwards in
a container; a torch rank on a GPU trains with NCCL, on CPU with gloo.

The instances of a cell run in rounds under ``platbench.lab.run_instances`` (a background first,
confirmed running, then the foreground); every instance's record carries its role and index as labels
(``instance_role``, ``instance_index``; a shared cell's foreground also ``share``: ``alone`` or
``shared``), so that the report never mixes them.
"""

from __future__ import annotations

import json
import shlex

from ansible_collections.platbench.lab.plugins.module_utils import network_path, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import cell_labels

MODES_WITH_INSTANCES = ("distributed", "shared")
NETWORK_PATHS = (*network_path.PATHS, network_path.HOST_PATH)
CPU_SHARING = ("disjoint", "shared")
GPU_SHARING = ("disjoint", "shared")
ROLES = ("chief", "worker", "ps", "foreground", "background", "peer")
INSTANCE_FIELDS = ("count", "cpus", "gpus", "hosts")
BACKGROUND_FIELDS = ("workload", "params", "settle")
# Lin 2018's background job; its steps outlast any foreground (the supervisor stops it).
DEFAULT_BACKGROUND = {"workload": "cnn_train", "params": {"model": "alexnet", "batch_size": [512, 32]}}
DEFAULT_SETTLE_SECONDS = 10  # the background's model is built and training before the foreground starts
BACKGROUND_STEPS = 1_000_000
# The labels a record of an instance carries (workloads take them through --labels-json).
ROLE_LABEL, INDEX_LABEL, SHARE_LABEL = cell_labels.INSTANCE_ROLE, cell_labels.INSTANCE_INDEX, cell_labels.SHARE
ALONE, SHARED = "alone", "shared"


class InstancesError(ValueError):
    """The instances asked for cannot be placed; the message says why and what to change."""


def _as_list(value):
    return value if isinstance(value, list) else [value]


def check_experiment(experiment, problems):
    """Validate and normalise ``instances``, ``network`` and ``background`` against ``mode`` (in place)."""
    mode = experiment.get("mode")
    instances, network, background = (experiment.get(field) for field in ("instances", "network", "background"))
    if mode not in MODES_WITH_INSTANCES:
        for field, value in (("instances", instances), ("network", network), ("background", background)):
            if value is not None:
                problems.append(f"{field}: applies to cells with several instances (mode distributed or shared)")
        return
    instances = dict(instances or {})
    if not isinstance(experiment.get("instances") or {}, dict) or set(instances) - set(INSTANCE_FIELDS):
        problems.append(f"instances: must be a mapping with any of {', '.join(INSTANCE_FIELDS)}, got {instances!r}")
        return
    instances.setdefault("cpus", "disjoint")
    if instances["cpus"] not in CPU_SHARING:
        problems.append(f"instances.cpus: unknown value {instances['cpus']!r}; allowed: {', '.join(CPU_SHARING)}")
    instances.setdefault("gpus", "disjoint")
    if instances["gpus"] not in GPU_SHARING:
        problems.append(
            f"instances.gpus: unknown value {instances['gpus']!r}; allowed: {', '.join(GPU_SHARING)} (disjoint: "
            "platform_run_gpus_per_cell GPUs of its own for each instance of a gpu cell; shared: the same for all)"
        )
    if mode == "distributed":
        count = instances.get("count")
        if not (isinstance(count, int) and not isinstance(count, bool)):
            problems.append(
                f"instances.count: a distributed cell needs the number of its ranks (2 or more), got {count!r}"
            )
        elif count < 2:
            problems.append(
                f"instances.count: {count}: a distributed cell needs at least 2 instances; one instance training "
                "on several processes is mode single (cnn_train --launch-local)"
            )
        network = _as_list(network if network is not None else "loopback")
        if not network:
            problems.append(f"network: must name at least one of {', '.join(NETWORK_PATHS)}")
        for path in network:
            if path not in NETWORK_PATHS:
                problems.append(f"network: unknown path {path!r}; allowed: {', '.join(NETWORK_PATHS)}")
        experiment["network"] = network
        _check_hosts(instances, network, problems)
        _check_guests_loopback(experiment, network, problems)
        if background is not None:
            problems.append("background: applies to mode shared")
    else:
        if instances.get("hosts", 1) != 1:
            problems.append(
                f"instances.hosts: {instances['hosts']!r}: a shared cell's two jobs share one host; "
                "hosts applies to mode distributed"
            )
        instances["hosts"] = 1
        if "count" in instances and instances["count"] != 2:
            problems.append("instances.count: a shared cell has 2 instances, its foreground and its background")
        instances["count"] = 2
        if network is not None:
            problems.append("network: a shared cell's two jobs do not talk to each other; leave network out")
        experiment["background"] = _checked_background(background, problems)
    experiment["instances"] = instances


def _check_hosts(instances, network, problems):
    """``instances.hosts``: how many runner hosts a distributed cell's ranks spread over (1 to count), and only
    over the ``host`` path: the paths built on one host (loopback, bridge, overlay) do not leave it."""
    hosts = instances.setdefault("hosts", 1)
    if isinstance(hosts, bool) or not isinstance(hosts, int) or hosts < 1:
        problems.append(
            f"instances.hosts: {hosts!r}: the number of runner hosts the ranks spread over, a whole number from 1 "
            "(the default: every rank on one host) to instances.count"
        )
        return
    count = instances.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and hosts > count:
        problems.append(
            f"instances.hosts: {hosts} hosts for {count} ranks would leave a host without one: "
            f"set hosts to {count} at most, or raise instances.count"
        )
    local = [path for path in network if path in network_path.PATHS]
    if hosts > 1 and local:
        problems.append(
            f"network: {', '.join(local)} cannot join ranks on {hosts} hosts (instances.hosts): "
            f"{'each is' if len(local) > 1 else 'it is'} built on one host and does not leave it; "
            f"use network: [{network_path.HOST_PATH}] (the runner hosts' own addresses), or k8s pods over the "
            "cluster's overlay"
        )


def home_share(count, hosts):
    """How many of ``count`` instances spread over ``hosts`` hosts (instance i on host i % hosts) the first
    host, the cell's home, holds: the most any host holds."""
    return -(-count // max(int(hosts or 1), 1))


def _check_guests_loopback(experiment, network, problems):
    """A guest has a loopback of its own: the guests of a distributed cell cannot meet on one."""
    guests = [
        label
        for label in _as_list(experiment.get("platforms") or [])
        if label in platforms.BY_LABEL and platforms.get(label).guest
    ]
    if "loopback" in network and guests:
        listed = platforms.in_words(guests)
        problems.append(
            f"network: 'loopback' cannot join the instances of {listed}, each a guest with a loopback of its own; "
            f"give network: [bridge] or [overlay] (the guests' NICs on the cell's bridge), or leave {listed} out of "
            "platforms"
        )


def _checked_background(background, problems):
    if background is None:
        problems.append(
            "background: a shared cell needs the job that runs beside it, e.g. "
            "{workload: cnn_train, params: {model: alexnet, batch_size: [512, 32]}} (Lin 2018's)"
        )
        return None
    if not isinstance(background, dict) or set(background) - set(BACKGROUND_FIELDS) or "workload" not in background:
        problems.append(f"background: must be a mapping with workload and any of params, settle; got {background!r}")
        return background
    params = background.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(key, str) for key in params):
        problems.append(f"background.params: must be a mapping of workload parameters, got {params!r}")
    settle = background.get("settle", DEFAULT_SETTLE_SECONDS)
    if isinstance(settle, bool) or not isinstance(settle, (int, float)) or settle < 0:
        problems.append(f"background.settle: {settle!r} must be seconds, 0 or more")
    return {"workload": background["workload"], "params": dict(params), "settle": settle}


def background_variants(background):
    """Each background job of the experiment's ``background`` (a list in its params is a dimension), as
    (label, {workload, params, settle}); the label names the job and what sets it apart."""
    params = background["params"]
    varying = [key for key, value in params.items() if isinstance(value, list)]
    combinations = [[]]
    for key in varying:
        combinations = [done + [(key, value)] for done in combinations for value in params[key]]
    variants = []
    # The label names the model and what varies; the rest is in the record's runtime.background.
    named = ["model"] if "model" in params else []
    for combination in combinations:
        chosen = {**params, **dict(combination)}
        shown = ",".join(f"{key}={chosen[key]}" for key in dict.fromkeys(named + varying))
        variants.append(
            (f"{background['workload']}:{shown}", {**background, "params": chosen}),
        )
    return variants


def cell_dimensions(experiment):
    """The values one cell of the experiment takes beyond the scenario and the params: [(labels, spec)], where
    labels go into the cell's labels and id, and spec into the cell (``cell["instances"]``); [({}, None)] for
    a mode with one instance."""
    mode = experiment.get("mode")
    if mode == "distributed":
        count, cpus = experiment["instances"]["count"], experiment["instances"]["cpus"]
        gpus = experiment["instances"].get("gpus", "disjoint")
        hosts = experiment["instances"].get("hosts", 1)
        return [
            (
                {"network": path},
                {
                    "count": count,
                    "cpus": cpus,
                    "gpus": gpus,
                    "network": path,
                    "roles": distributed_roles(count),
                    **({"hosts": hosts} if hosts > 1 else {}),
                },
            )
            for path in experiment["network"]
        ]
    if mode == "shared":
        cpus, gpus = experiment["instances"]["cpus"], experiment["instances"].get("gpus", "disjoint")
        return [
            (
                {"background": label},
                {"count": 2, "cpus": cpus, "gpus": gpus, "roles": ["foreground", "background"], "background": job},
            )
            for label, job in background_variants(experiment["background"])
        ]
    return [({}, None)]


def distributed_roles(count):
    return ["chief"] + ["worker"] * (count - 1)


def cpus_needed(cell):
    """CPUs a cell pins on its runner: the scale-up for each instance that has cores of its own (of a cell spread
    over several hosts, each of the instances on its home host, which holds the most)."""
    spec = cell.get("instances")
    scaleup = int(cell["labels"]["scaleup"])
    if not spec or spec["cpus"] == "shared":
        return scaleup
    return scaleup * home_share(spec["count"], spec.get("hosts", 1))


def gpus_needed(cell, per_instance):
    """GPUs a ``gpu`` cell takes from its host's pool: ``per_instance`` (platform_run_gpus_per_cell) for each
    instance that has GPUs of its own (``instances.gpus: disjoint``), once for a cell whose instances share them."""
    spec = cell.get("instances")
    per_instance = max(int(per_instance), 1)
    if not spec or spec.get("gpus", "disjoint") == "shared":
        return per_instance
    return per_instance * home_share(spec["count"], spec.get("hosts", 1))


def split_gpus(gpus, count, sharing):
    """Each instance's GPUs (PCI addresses): the cell's list for ``shared``; an equal run of ``gpus`` apiece in
    PCI order for ``disjoint`` (instance 0, the chief or the foreground, first)."""
    if sharing == "shared" or not gpus:
        return [list(gpus)] * count
    each = len(gpus) // count
    return [list(gpus[index * each : (index + 1) * each]) for index in range(count)]


def split_cpus(cpus, count, threads, sharing):
    """Each instance's CPUs: the cell's own list for ``shared``; ``threads`` apiece of ``cpus`` for ``disjoint``,
    the highest to instance 0 (the chief, the foreground), as choose_cpus leaves CPU 0 for last."""
    if sharing == "shared":
        return [list(cpus)] * count
    top = len(cpus)
    return [sorted(cpus[top - (index + 1) * threads : top - index * threads]) for index in range(count)]


def labels_argv(labels):
    """``--labels-json`` of an instance's record: its role and index (and share), never mixed in a report."""
    return ["--labels-json", json.dumps(labels, sort_keys=True, separators=(",", ":"))]


def background_argv(job, threads):
    """The background job's python arguments: its workload and params, training until it is stopped."""
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import workload_argv

    params = {"threads": threads, **job["params"]}
    if job["workload"] == "cnn_train":
        params.setdefault("steps", BACKGROUND_STEPS)
    return workload_argv(params, job["workload"])


def shared_rounds(ctx, plan, build, members, job):
    """A shared cell's rounds and settle time: its foreground alone, then its background job (``job``) and the
    foreground again; ``build(ctx, plan, member, argv, extra_labels, background=False)`` makes an instance."""
    foreground, background = members
    alone = build(ctx, plan, foreground, ctx.argv, {SHARE_LABEL: ALONE})
    beside = build(ctx, plan, foreground, ctx.argv, {SHARE_LABEL: SHARED})
    noise = build(ctx, plan, background, background_argv(job, ctx.threads), {}, background=True)
    return [[alone], [noise, beside]], float(job["settle"])


def plan_section(spec, members, rounds, settle, grace, network):
    """plan["instances"]: how many, their CPUs and GPUs, each member's name, role, index, CPU set and GPUs, the rounds
    run_instances runs, and the cell's network path (as the placement planned it)."""
    return {
        "count": spec["count"],
        "cpus": spec["cpus"],
        "gpus": spec.get("gpus", "disjoint"),
        "members": [
            {**{key: member[key] for key in ("name", "role", "index", "cpuset")}, "gpus": member.get("gpus", [])}
            for member in members
        ],
        "rounds": rounds,
        "settle": settle,
        "grace": grace,
        "network": network,
    }


def record_runtime(plan, spec, members, rounds, network):
    """What a cell with several instances was asked to run, into its plan's runtime record."""
    plan["runtime"].update(
        instances=spec["count"],
        instance_cpus=spec["cpus"],
        instance_cpusets=[member["cpuset"] or None for member in members],
        instance_gpus=[",".join(member.get("gpus") or []) or None for member in members],
        instance_rounds=describe_rounds(rounds),
    )
    if network:
        plan["runtime"].update(network_path=network["path"], path_addresses=[m["address"] for m in network["members"]])
    if "background" in spec:
        plan["runtime"]["background"] = {"workload": spec["background"]["workload"], **spec["background"]["params"]}


def describe_rounds(rounds):
    """One line per round, for the plan's runtime record: who ran beside whom."""
    return [" + ".join(f"{spec['role']} {spec['index']}" for spec in specs) for specs in rounds]


def shell_line(argv):
    return shlex.join(str(arg) for arg in argv)
