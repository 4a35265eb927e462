# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The instances placement: a cell with several instances of its platform's kind, run side by side by
``platbench.lab.run_instances`` (``roles/platform_run/tasks/instances.yml``).

The cell's kind plans its one instance first (``process`` or ``container``); each instance is that
command again with its own CPUs, GPUs, name and record labels:

- process (bm): ``taskset`` over the instance's CPUs in front of the venv's python, on the runner host, and
  ``CUDA_VISIBLE_DEVICES`` naming the instance's own GPUs in a gpu cell;
- container (cn, pd): the engine's own ``run --rm`` command line with the instance's name, CPUs, labels and
  GPUs (Docker: ``--gpus "device=..."``; Podman: ``--device nvidia.com/gpu=...``, CDI), each seen from 0
  inside (the supervisor runs the client in the foreground; ``rm -f NAME`` is its stop command, since killing
  the client leaves the container running).

A gpu cell's GPUs are split among its instances by ``instances.gpus`` (``several.split_gpus``); the record's
runtime lists each instance's (``instance_gpus``). Distributed torch ranks on GPUs train with NCCL, which runs
one rank per GPU: ranks sharing one are refused.

A shared cell runs two rounds: the foreground alone, then a background job (confirmed running for
``settle`` seconds first) and the foreground again. Its two foreground records carry ``share: alone`` and
``share: shared``, and record_cell adds their degradation (outcome.py).

A k8s cell's instances are pods, placed by placements/instances_k8s.py (k8s_instances.yml; statically verified).
"""

from __future__ import annotations

import hashlib
import json
import time

from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota, duet, network_path
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import peer, several
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process as process_kind
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import Observed, PlacementError, gpu_env
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.container import CDI_GPU
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import RESULT_PREFIX, SCHEMA_VERSION

RESULT = "instances"  # the registered result record_cell reads (placements.RESULTS)
PATH_RESULT = "path"  # network_path_measure's result: the path's throughput, RTT and MTU
# The registered results tasks/instances.yml leaves for record_cell (result name -> variable).
RESULTS = {RESULT: "platform_run_instances", PATH_RESULT: "platform_run_path"}
TASK_FILE = "instances.yml"  # roles/platform_run/tasks/instances.yml
STOP_GRACE_SECONDS = 5
# The ranks' rendezvous: the chief's TCP store (torch) or each worker's gRPC server (TensorFlow) listens on a port
# of this range, derived from the cell's key (each worker its own on a shared loopback).
RENDEZVOUS_PORTS = (29500, 30500)
# What a container's network namespace is held by while the path is built into it and measured, before the
# workload's containers join it (--network container:HOLDER), as a Kubernetes pod's pause container holds its.
HOLDER_SUFFIX = "-net"
# micro_net's peer is listening within this; the workload then waits for it a while more itself (--peer-wait).
PEER_SETTLE_SECONDS = 1.0


def plan(ctx, plan, spec):
    """Turn ``plan`` (its kind's single instance planned) into the instances placement of ``spec``
    (``cell["instances"]``): plan["instances"] with the rounds run_instances runs."""
    check_kind(ctx)
    count, sharing = spec["count"], spec["cpus"]
    cpus = several.split_cpus(ctx.cpus, count, ctx.threads, sharing) if ctx.pinned else [[]] * count
    names = [f"{ctx.name}-{index}" for index in range(count)]
    build = _process_instance if ctx.declaration.launched else _container_instance
    roles = spec["roles"]
    gpu_sharing = spec.get("gpus", "disjoint")
    gpus = several.split_gpus(ctx.gpus, count, gpu_sharing)
    members = [
        {
            "name": names[index],
            "role": roles[index],
            "index": index,
            "cpus": cpus[index],
            "cpuset": ",".join(str(cpu) for cpu in cpus[index]),
            "gpus": gpus[index],
            "gpu_env": _gpu_env(ctx, gpus[index], gpu_sharing),
        }
        for index in range(count)
    ]
    _check_gpu_ranks(ctx, gpus, gpu_sharing)
    network = _network(ctx, plan, spec) if "network" in spec else None
    if "peer" in spec:
        rounds, settle = _peer_rounds(ctx, plan, build, members, network, spec), PEER_SETTLE_SECONDS
    elif ctx.cell["labels"].get("mode") == "shared":
        rounds, settle = several.shared_rounds(ctx, plan, build, members, spec["background"])
    else:
        rounds = [[_rank(ctx, plan, build, member, network) for member in members]]
        settle = 0.0
    none = {"path": None, "built": False, "key": ctx.key, "holders": [], "engine": None, "measure": None}
    plan["instances"] = several.plan_section(spec, members, rounds, settle, STOP_GRACE_SECONDS, network or none)
    record_placement(plan, ctx.declaration, spec, members, rounds, network)
    if "peer" in spec:
        plan["runtime"]["peer_address"] = network["members"][1]["address"]


def _network(ctx, plan, spec):
    """The cell's network path (module_utils/network_path.py plans it from the cell's key): each instance's
    address, namespace and device, the holders of the containers' namespaces, and what is measured."""
    count, path = spec["count"], spec["network"]
    try:
        planned = network_path.plan(ctx.key, path, count, ctx.platform.label)
    except network_path.NetworkPathError as exc:
        raise PlacementError(f"{ctx.where}: {exc}") from None
    device = {"loopback": lambda entry: "lo", "bridge": lambda entry: entry["veth"], "overlay": lambda e: e["vxlan"]}
    members = [
        {"address": entry["address"], "netns": entry["netns"], "device": device[path](entry)}
        for entry in planned["instances"]
    ]
    holders = []
    if path != "loopback" and ctx.declaration.engine_run:
        container = plan["container"]
        holders = [
            {
                "name": f"{ctx.name}-{index}{HOLDER_SUFFIX}",
                "image": container["image"],
                # Holds the namespace for the cell's whole length; removed with the cell.
                "command": ["python", "-c", f"import time; time.sleep({int(plan['timeout']) + 60})"],
                "labels": {**container["labels"], "org.platbench.role": "network-holder"},
            }
            for index in range(count)
        ]
    first, second = members[0], members[1]
    measure = {
        "address": second["address"],
        "client_netns": first["netns"],
        "server_netns": second["netns"],
        "port": _port(ctx.key) + count,  # beside the ranks' ports, never one of them
    }
    if "peer" in spec:
        measure = None  # micro_net measures the path itself, against its peer
    return {
        "path": path,
        "built": True,  # by platbench.lab.network_path (the host path is the hosts' own: nothing to build)
        "key": ctx.key,
        "mtu": planned.get("mtu"),
        "members": members,
        "holders": holders,
        "engine": plan["container"]["engine"] if holders else None,
        "measure": measure,
        "port": _port(ctx.key),
    }


def _port(key):
    low, high = RENDEZVOUS_PORTS
    return low + int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % (high - low - 64)


def _rank(ctx, plan, build, member, network):
    """One rank of a distributed cell: its instance, with where it meets the others (torch: the chief's TCP store,
    MASTER_ADDR; TensorFlow: TF_CONFIG's workers) on the cell's path, in its namespace or its holder's."""
    return _on_path(ctx, build(ctx, plan, member, ctx.argv, {}, env=rank_env(ctx, member["index"], network)), network)


def rank_env(ctx, index, network):
    """Where rank ``index`` meets the others on ``network`` (its members' ``address`` and ``device``, its ``port``):
    torch's variables (MASTER_ADDR, gloo's and NCCL's device) or TensorFlow's TF_CONFIG."""
    count = len(network["members"])
    framework = ctx.params.get("framework", "tensorflow")
    addresses = [entry["address"] for entry in network["members"]]
    own = network["members"][index]
    if framework == "torch":
        env = {
            "RANK": str(index),
            "WORLD_SIZE": str(count),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": addresses[0],
            "MASTER_PORT": str(network["port"]),
        }
        if own["device"]:  # gloo's (and NCCL's) own sockets on the path's device, not the host name's address
            env.update(GLOO_SOCKET_IFNAME=own["device"], NCCL_SOCKET_IFNAME=own["device"])
    else:
        workers = [f"{address}:{network['port'] + rank}" for rank, address in enumerate(addresses)]
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {"TF_CONFIG": json.dumps(config, separators=(",", ":"))}
    return env


def _on_path(ctx, instance, network):
    """The instance in its place on the cell's path: a bm process in its namespace, a container in its holder's."""
    if network["path"] != "loopback" and network["built"]:
        own = network["members"][instance["index"]]
        if ctx.declaration.launched:
            instance["argv"] = ["ip", "netns", "exec", own["netns"], *instance["argv"]]
        else:
            at = instance["argv"].index("--network") + 1
            instance["argv"][at] = f"container:{network['holders'][instance['index']]['name']}"
    return instance


def _peer_rounds(ctx, plan, build, members, network, spec):
    """micro_net's one round: its peer serving on the path (started first, confirmed running), then the workload
    measuring against the peer's address."""
    workload, server = members
    address = network["members"][server["index"]]["address"]
    serve = build(ctx, plan, server, peer.serve_argv(spec, address, plan["timeout"]), None, background=True)
    measure = build(ctx, plan, workload, [*ctx.argv, "--peer", address], {})
    return [[_on_path(ctx, serve, network), _on_path(ctx, measure, network)]]


def _labels_argv(member, extra):
    """The record labels an instance's workload is given; none for a program that writes no record (extra None)."""
    if extra is None:
        return []
    labels = {several.ROLE_LABEL: member["role"], several.INDEX_LABEL: member["index"], **extra}
    return several.labels_argv(labels)


def _process_instance(ctx, plan, member, argv, extra, background=False, env=None):
    process = plan["process"]
    taskset = ["taskset", "--cpu-list", member["cpuset"]] if member["cpuset"] else []
    python = f"{ctx.opts['prefix']}/venv/bin/python"
    place, scope = _process_place(process, member)
    return {
        "name": member["name"],
        "role": member["role"],
        "index": member["index"],
        "argv": scope + taskset + [python] + argv + _labels_argv(member, extra),
        "env": {**process["env"], **member["gpu_env"], **(env or {})},
        "chdir": process["chdir"],
        "background": background,
        "stop": None,
        "place": place,
    }


def _process_place(process, member):
    """Where a process instance on the runner host runs, as the process kind places its cell (``process``, that
    kind's plan; placements/process/): a cgroup of the instance's own (each container instance has its engine's;
    named as a cell's, so that teardown and the prechecks find one left behind), or where systemd is PID 1 a scope
    of its own (``systemd-run`` in front of its argv); at the normal policy, on the fixed base environment. The
    supervisor, which runs at the harness's SCHED_IDLE in its cgroup, puts it there (module_utils/supervisor.py).
    ``(place, argv prefix)``; ``(None, [])`` for a process the plan does not place (in a guest, over SSH)."""
    if not process.get("normal_policy"):
        return None, []
    place = {"normal_policy": True}
    if process.get("clean_env"):
        place["base_env"] = dict(pair.split("=", 1) for pair in process_kind.BASE_ENV)
    digits = hashlib.sha1(member["name"].encode("utf-8")).hexdigest()[: len("0123456789ab")]
    cgroup, scope = process.get("cgroup"), process.get("scope")
    if cgroup:
        hierarchy = cgroup["path"].rsplit("/", 1)[0]
        path = f"{hierarchy}/{cpu_quota.PREFIX}{digits}"
        place["cgroup"] = {"path": path, "version": cgroup["version"], "leave": list(cgroup.get("leave", []))}
    if scope:
        place["scope"] = f"{process_kind.SCOPE_PREFIX}{digits}.scope"  # for the record: systemd-run makes it
        return place, process_kind.scope_argv({**scope, "unit": place["scope"]})
    return place, []


def _container_instance(ctx, plan, member, argv, extra, background=False, env=None):
    container = plan["container"]
    engine = container["engine"]
    run = [engine, "run", "--rm", "--name", member["name"], "--network", container["network_mode"]]
    if container.get("runtime"):
        run += ["--runtime", container["runtime"]]
    if member["cpuset"]:
        run += ["--cpuset-cpus", member["cpuset"]]
    elif container.get("cpus"):
        run += ["--cpus", str(container["cpus"])]
    for name, value in sorted({**container["env"], **member["gpu_env"], **(env or {})}.items()):
        run += ["--env", f"{name}={value}"]
    for volume in container["volumes"]:
        run += ["--volume", volume]
    labels = {**container["labels"], "org.platbench.instance": member["name"], "org.platbench.role": member["role"]}
    for name, value in sorted(labels.items()):
        run += ["--label", f"{name}={value}"]
    run += _gpu_options(engine, gpu_pools.cuda_indexes(member["gpus"], ctx.facts.get("gpus")))
    command = ["python"] + argv + _labels_argv(member, extra)
    # Podman's CLI forks conmon, which starts the container: each would inherit the supervisor's SCHED_IDLE.
    policy = duet.NORMAL_POLICY_ARGV if engine in duet.INHERITS_POLICY else []
    return {
        "name": member["name"],
        "role": member["role"],
        "index": member["index"],
        "argv": policy + run + [container["image"]] + command,
        "env": {},
        "chdir": None,
        "background": background,
        "stop": [engine, "rm", "--force", member["name"]],
    }


def _gpu_env(ctx, gpus, sharing):
    """What an instance of a gpu cell sees of its own GPUs (common.gpu_env for its list), and TensorFlow's
    allocator growing as needed where instances share a GPU (its default takes nearly all of the GPU's memory)."""
    if not ctx.gpu_count:
        return {}
    env = gpu_env(ctx.platform.gpu_view, gpus, len(gpus), ctx.facts)
    if sharing == "shared" and len(gpus):
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    return env


def _check_gpu_ranks(ctx, gpus, sharing):
    """NCCL builds one communicator over distinct GPUs: two torch ranks on one GPU fail at its first collective."""
    torch = ctx.params.get("framework", "tensorflow") == "torch"
    if ctx.cell["labels"].get("mode") == "distributed" and torch and sharing == "shared" and any(gpus):
        raise PlacementError(
            f"{ctx.where}: torch ranks on GPUs train with NCCL, which runs one rank per GPU, and instances.gpus is "
            "shared: give each rank GPUs of its own (instances: {gpus: disjoint}, the default), or run the ranks on "
            "CPU (processor cpu: gloo)"
        )


def _gpu_options(engine, indexes):
    """The engine's request for an instance's GPUs, by nvidia-smi index: Podman's CDI devices, Docker's --gpus
    (quoted, so that its CSV parser keeps a list of devices as one field)."""
    if not indexes:
        return []
    if engine == "podman":
        return [option for index in indexes for option in ("--device", f"{CDI_GPU}={index}")]
    return ["--gpus", '"device=' + ",".join(str(index) for index in indexes) + '"']


def observed(plan, results):
    """The records of the instances that report (not a background, which is stopped mid-run), and each instance's
    end: its role, index, round, exit status and seconds."""
    result = results.get(RESULT) or {}
    ran = result.get("instances") or []
    output = "\n".join(
        f"{entry.get('stdout', '')}\n{entry.get('stderr', '')}" for entry in ran if not entry.get("background")
    )
    runtime = {
        "instances_ran": [
            {key: entry.get(key) for key in ("name", "role", "index", "round", "rc", "stopped", "seconds")}
            for entry in ran
        ]
    }
    measured = results.get(PATH_RESULT) or {}
    if measured.get("samples"):
        # The path's figures, measured before the ranks trained, as a record of the cell's own.
        record = {
            "schema": SCHEMA_VERSION,
            "workload": "network_path",
            "status": "ok",
            "error": None,
            "timestamp": time.time(),
            "labels": {},
            "metrics": measured["samples"],
            "metadata": {"path_measure": {key: measured.get(key) for key in ("throughput", "rtt", "mtu", "device")}},
        }
        output += f"\n{RESULT_PREFIX}{json.dumps(record)}\n"
    # A guest per instance (instances_guest.py): how each ran, as the guest kind records its one guest's.
    guests, vcpus = results.get("guests") or {}, (results.get("vcpus") or {}).get("results") or []
    if guests:
        affinity = {entry.get("item"): entry.get("vcpu_affinity") for entry in vcpus if isinstance(entry, dict)}
        runtime["guests"] = [
            {
                "name": name,
                "accelerator": guest.get("accelerator"),
                "boot_to_ready_s": float(guest["boot_to_ready_s"]) if guest.get("boot_to_ready_s") else None,
                "ssh_port": guest.get("ssh_port"),
                "vcpu_affinity": affinity.get(name),
            }
            for name, guest in sorted(guests.items())
        ]
    # The supervisor's verdict names the first instance to fail; its peers' failed records only say they lost it.
    error = result.get("msg") if result.get("failed") else None
    return Observed(output=output, runtime=runtime if result else {}, error=error)


def record_placement(plan, declaration, spec, members, rounds, network=None):
    """``plan`` becomes the instances placement (its kind's section gone), with what each instance was asked."""
    plan["placement"] = "instances"
    process = plan.pop(declaration.name, None) or {}
    several.record_runtime(plan, spec, members, rounds, network)
    uncapped = plan["runtime"].get("uncapped_cgroup")
    if declaration.launched and uncapped:
        # Each instance has a cgroup of its own (_process_place), not the one the single process would have had.
        places = [instance.get("place") or {} for instances_of_round in rounds for instance in instances_of_round]
        slice_ = (process.get("scope") or {}).get("slice")
        uncapped.pop("cgroup", None)
        shown = [
            place["cgroup"]["path"] if place.get("cgroup") else f"{slice_}/{place['scope']}"
            for place in places
            if place.get("cgroup") or place.get("scope")
        ]
        uncapped["cgroups"] = sorted(set(shown))


def check_kind(ctx):
    """Several instances of a platform are the runner host's processes and containers (the supervised kinds: their
    declaration's ``instances``)."""
    if ctx.declaration is None or not ctx.declaration.supervised or ctx.platform.remote:
        raise PlacementError(
            f"{ctx.where}: a cell with several instances (mode {ctx.cell['labels'].get('mode')}) runs in this release "
            f"on the runner host's processes and containers (bm, cn, pd), a guest each (vm, vmcn) and pods (k8s), not "
            f"on {ctx.platform.label}: leave {ctx.platform.label} out of this experiment"
        )
    if ctx.declaration.launched and ctx.platform.launcher != "venv":
        raise PlacementError(f"{ctx.where}: several instances of {ctx.platform.label} are not placed in this release")
