# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The plan of one cell on one runner host: everything its placement task file needs.

Common keys: cell, scenario, platform, placement, host, campaign, name, threads, pinned, cpus,
cpuset, numa_node, cpu_quota, gpus, argv, env, data_dir, mounts, timeout, runtime; then per
platform ``process`` (bm, vm, sg, vmsg), ``container`` (cn, vmcn) and ``guest`` (vm, vmcn, vmsg), and ``peer``
for micro_net's cn cells (its network and peer container: plugin_utils/peer.py). The placement
entry points declare exactly these in ``roles/platform_run/meta/argument_specs.yml``.

A placement file (``roles/platform_run/tasks/run_<platform>.yml``) receives the plan as its
one input, ``platform_run_cell_plan``, and only passes its fields to modules; nothing is
worked out in Jinja. The plan is computed from the cell, the host's facts
(``ansible_facts.platbench`` from ``platbench.lab.host_facts``) and the run's options.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.platbench.lab.plugins.module_utils import apptainer, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import apptainer_plan, k8s_job, openstack_plan, peer
from ansible_collections.platbench.lab.plugins.plugin_utils import gpus as gpu_pools
from ansible_collections.platbench.lab.plugins.plugin_utils.workload_args import WorkloadArgsError, workload_argv

# Every thread pool the frameworks start gets the scenario's core count.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
FIXED_ENV = {"TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
# Where the guest image installs the workload environment (platbench.lab.guest_image).
GUEST_PREFIX = "/opt/platbench"
NAME_PREFIX = "platbench-"
NAME_HASH_CHARS = 12
DATASET_HASH_CHARS = 10
OPTIONS = {
    "host": None,  # the inventory host the cell runs on (required)
    "campaign": None,  # the campaign's name (required)
    "reserved_cpus": [],  # CPUs never given to a pinned cell
    "prefix": "/opt/platbench",  # where the bare-metal venv lives on the host
    "image": "platbench/workload:latest",  # the workload image (cn)
    "image_id": None,  # its id, as the engine reported it
    "docker_version": None,  # the host engine's version
    "peak_cache_dir": "/var/cache/platbench",
    "datasets_dir": "/var/lib/platbench/datasets",
    "dataset": None,  # the experiment's `dataset:` (generated data), or None
    "timeout": 3600,  # seconds before a cell is stopped
    "guest_image": {},  # the guest image description (vm, vmcn)
    "vm_memory_mb": 3072,
    "vm_hugepages": False,
    "gpus_per_cell": 1,  # GPUs handed to a `gpu` cell
    "gpu_assignment": {},  # platbench_gpu_assignment: PCI address -> host | guests
    "kubeconfig": "/etc/kubernetes/admin.conf",  # k8s: the kubeconfig the Job is created with
    "k8s_namespace": "platbench",  # k8s: the namespace of the cells' Jobs
    "k8s_node": None,  # k8s: the runner's Kubernetes node name (platform_status resolves it)
    "k8s_memory": "4Gi",  # k8s: the pod's memory request and limit
    "k8s_cpu_request": "100m",  # k8s: a vnl pod's CPU request (its limit is the scale-up)
    "k8s_poll_delay": 5,  # k8s: seconds between two looks at the Job
    "sif": {},  # the SIF description (sg), platbench.lab.apptainer's current.json
    "apptainer_version": None,  # the host's Apptainer (sg)
    "openstack_kubeconfig_dir": "/var/lib/platbench/openstack",  # magnum: where each cluster's kubeconfig is
}


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


def _cpu_numbers(values, what):
    try:
        return {int(value) for value in values}
    except (TypeError, ValueError):
        raise CellPlanError(f"{what} must list CPU numbers, got {values!r}") from None


def choose_cpus(allowed, count, reserved=(), numa_nodes=None):
    """``count`` CPUs of ``allowed`` minus ``reserved``, and the NUMA node they lie in (or None).

    Where the host has several NUMA nodes and the count fits in one, the CPUs come from one
    node: the one holding the highest-numbered free CPU. Within the node (or across the host,
    when no node is big enough) the highest-numbered CPUs go first, so CPU 0, which takes most
    interrupts and housekeeping, goes last. Returned in ascending order.
    """
    reserved = _cpu_numbers(reserved, "reserved CPUs")
    available = _cpu_numbers(allowed, "the host's allowed CPUs") - reserved
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise CellPlanError(f"the scale-up must be a positive integer, got {count!r}")
    if count > len(available):
        raise CellPlanError(
            f"scale-up {count} needs {count} CPUs but only {len(available)} are free "
            f"({sorted(available)}; {len(reserved)} reserved by platbench_reserved_cpus)"
        )
    nodes = {
        str(name): _cpu_numbers(cpus, f"NUMA node {name}") & available for name, cpus in (numa_nodes or {}).items()
    }
    fitting = [(max(cpus), name) for name, cpus in nodes.items() if len(cpus) >= count]
    pool = nodes[max(fitting)[1]] if len(nodes) > 1 and fitting else available
    chosen = sorted(sorted(pool, reverse=True)[:count])
    node = next((name for name, cpus in sorted(nodes.items()) if set(chosen) <= cpus), None)
    return chosen, node


def choose_gpus(platform, facts, assignment, wanted, host):
    """The PCI addresses of the GPUs a `gpu` cell on ``platform`` gets: the first ``wanted`` of
    its pool (bm, cn: the GPUs assigned to the host and not bound to vfio-pci; guests: those
    assigned to guests), in PCI order."""
    gpus = facts.get("gpus") or []
    if not gpus:
        raise CellPlanError("a 'gpu' cell needs a GPU, and this host has none: use processor [cpu] here")
    try:
        pool = (gpu_pools.guest_pool if platform.guest else gpu_pools.host_pool)(assignment, gpus, host)
    except gpu_pools.GpuAssignmentError as exc:
        raise CellPlanError(str(exc)) from None
    if not pool:
        uses = (
            "the GPUs it assigns to guests"
            if platform.guest
            else "the GPUs it leaves with the host that are not bound to vfio-pci"
        )
        raise CellPlanError(
            f"no GPU is left for a {platform.label} cell: it takes {uses} ({gpu_pools.SETTING}), and this host's "
            f"GPUs (assignment, driver) are {gpu_pools.describe_all(assignment, gpus, host)}"
        )
    return pool[: max(int(wanted), 1)]


def gpu_env(platform, gpus, facts):
    """The variables that decide which GPUs the workload sees, and which it must find.

    CUDA_VISIBLE_DEVICES="" hides every GPU from a cpu cell, so a framework never picks one up
    behind its back; NVIDIA_VISIBLE_DEVICES=void keeps the NVIDIA container runtime from
    mounting any. On bm the GPUs are numbered among those the NVIDIA driver sees, in PCI order;
    so is Apptainer's --nv on the host (sg), which shows the container the host's GPUs. A Docker
    container or a guest sees only its own, numbered from 0. PLATBENCH_EXPECTED_GPUS is what
    the workload checks the devices it used against: the host's bus ids where the workload sees
    them (bm, cn, sg), none in a guest, whose bus ids are its own.
    """
    on_host = not platform.guest and platform.gpu_handover in platforms.HOST_GPU_VIEW
    visible = gpu_pools.cuda_indexes(gpus, facts.get("gpus")) if on_host else range(len(gpus))
    expected = {"count": len(gpus), "pci_bus_ids": None if platform.guest else list(gpus)}
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in visible),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PLATBENCH_EXPECTED_GPUS": json.dumps(expected, separators=(",", ":")),
    }
    if not gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


def k8s_gpu_env(count):
    """GPU variables in a k8s pod: the device plugin chooses the GPUs, so the pod sees its own, numbered
    from 0, and the workload checks their count only (the host's bus ids are not known in advance)."""
    expected = {"count": count, "pci_bus_ids": None}
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in range(count)),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PLATBENCH_EXPECTED_GPUS": json.dumps(expected, separators=(",", ":")),
    }
    if not count:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


def _k8s(plan, cell, threads, pinned, gpu_count, argv, mounts, opts):
    """The k8s sections of the plan: ``job`` (the batch/v1 Job) and ``kubernetes`` (where and how to run it)."""
    if not opts["k8s_node"] and plan["platform"] == "k8s":
        raise CellPlanError(
            f"cell {cell['id']}: no Kubernetes node for {opts['host']}: set platform_run_k8s_node, or let "
            "platbench.lab.platform_status find it (platform_run's capabilities)"
        )
    labels = {
        "org.platbench.cell": k8s_job.label_value(cell["id"]),
        "org.platbench.campaign": k8s_job.label_value(opts["campaign"]),
        "org.platbench.host": k8s_job.label_value(opts["host"]),
    }
    # Label values cannot hold the cell id as it is (`/`, `|`); annotations keep it whole.
    annotations = {"org.platbench.cell": cell["id"], "org.platbench.campaign": str(opts["campaign"])}
    try:
        resources = k8s_job.resources(threads, pinned, opts["k8s_memory"], opts["k8s_cpu_request"], gpu_count)
    except k8s_job.K8sJobError as exc:
        raise CellPlanError(f"cell {cell['id']}: {exc}") from None
    delay = max(int(opts["k8s_poll_delay"]), 1)
    plan["job"] = k8s_job.job(
        plan["name"],
        opts["k8s_namespace"],
        opts["k8s_node"],
        opts["image"],
        ["python"] + argv,
        plan["env"],
        mounts,
        plan["timeout"],
        labels,
        annotations,
        resources,
        gpu_count,
    )
    plan["kubernetes"] = {
        "kubeconfig": opts["kubeconfig"],
        "namespace": opts["k8s_namespace"],
        "node": opts["k8s_node"],
        "poll_delay": delay,
        # The Job's own deadline ends it at `timeout`; one more minute lets Kubernetes say so.
        "poll_retries": -(-(plan["timeout"] + 60) // delay),
    }
    plan["runtime"].update(
        launcher="kubernetes",
        job_name=plan["name"],
        k8s_namespace=opts["k8s_namespace"],
        image=opts["image"],
        k8s_cpu_request=resources["requests"]["cpu"],
        k8s_cpu_limit=resources["limits"]["cpu"],
        k8s_memory=resources["limits"]["memory"],
        k8s_gpus_requested=gpu_count,
    )


def _openstack(plan, cell, platform, threads, pinned, gpu_count, argv, mounts, opts):
    """ironic and nova: the workload as a process on the campaign's instance of the scenario, over SSH (the
    instance's workload environment at ``prefix``, as on bm); magnum: a Job on the scenario's cluster, with its
    kubeconfig and no node of its own (the cluster's scheduler chooses)."""
    labels = cell["labels"]
    instance = openstack_plan.instance_name(opts["campaign"], labels)
    plan["openstack"] = {"instance": instance, "group": openstack_plan.group_name(platform.label)}
    plan["runtime"].update(openstack_instance=instance, gpus_requested=gpu_count or None)
    if platform.label == "magnum":
        cluster_opts = {
            **opts,
            "kubeconfig": f"{str(opts['openstack_kubeconfig_dir']).rstrip('/')}/{instance}.kubeconfig",
            "k8s_node": None,
        }
        _k8s(plan, cell, threads, pinned, gpu_count, argv, mounts, cluster_opts)
        # The cluster's nodes pull the workload image; no role imports it there as on k8s.
        plan["job"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        return
    # Nova pins through the flavor (hw:cpu_policy=dedicated): inside the server every vCPU is the scenario's.
    # A bare-metal node is the whole machine: taskset gives the scenario its first CPUs.
    taskset = ["taskset", "--cpu-list", f"0-{threads - 1}"] if pinned and platform.label == "ironic" else []
    plan["process"] = {
        "argv": taskset + [f"{opts['prefix']}/venv/bin/python"] + argv,
        "chdir": opts["prefix"],
        "env": plan["env"],
    }
    plan["runtime"]["launcher"] = "taskset over ssh" if taskset else "ssh"


def _options(options):
    merged = {**OPTIONS, **{key: value for key, value in (options or {}).items() if value is not None}}
    unknown = sorted(set(options or {}) - set(OPTIONS))
    if unknown:
        raise CellPlanError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    for required in ("host", "campaign"):
        if not merged[required]:
            raise CellPlanError(f"option {required!r} is required")
    return merged


def _env(threads, cache_dir, gpus_env, extra=None):
    env = {name: str(threads) for name in THREAD_ENV}
    env.update(FIXED_ENV)
    env["PLATBENCH_CACHE_DIR"] = str(cache_dir)
    env.update(gpus_env)
    env.update(extra or {})
    return env


def _container(name, engine_host, image, image_id, argv, env, cpuset, quota, mounts, device_ids, cell_id, opts):
    return {
        "engine_host": engine_host,
        "name": name,
        "image": image,
        "image_id": image_id,
        "command": ["python"] + argv,
        "env": env,
        "cpuset_cpus": cpuset or None,
        "cpus": quota,
        "volumes": [f"{m['source']}:{m['target']}:{m['mode']}" for m in mounts],
        "network_mode": "none",
        "device_requests": (
            [{"driver": "nvidia", "device_ids": [str(index) for index in device_ids], "capabilities": [["gpu"]]}]
            if device_ids
            else []
        ),
        "labels": {
            "org.platbench.cell": cell_id,
            "org.platbench.campaign": str(opts["campaign"]),
            "org.platbench.host": str(opts["host"]),
        },
    }


def _peer_args(platform, params, key, where):
    """What micro_net's command line gets on ``platform``: where its peer is (see plugin_utils/peer.py)."""
    try:
        peer.check_params(params, where)
    except peer.PeerPlanError as exc:
        raise CellPlanError(str(exc)) from None
    if platform == "bm":
        return peer.bm_args()
    if platform == "cn":
        return ["--peer", peer.peer_address(key)]
    raise CellPlanError(
        f"{where}: micro_net needs a peer, which the lab provides on bm (a second process) and cn (a second "
        f"container) only, not on {platform}: leave {platform} out of this experiment's micro_net cells"
    )


def cell_plan(cell, facts, options=None):
    """Everything placing ``cell`` on its platform on this host needs (see the role's README)."""
    if not isinstance(cell, dict) or not {"id", "labels", "params"} <= set(cell):
        raise CellPlanError(f"expected a cell of the expanded experiment (id, labels, params), got {cell!r}")
    opts = _options(options)
    facts = facts or {}
    labels = cell["labels"]
    try:
        platform = platforms.get(labels.get("platform"), f"cell {cell['id']}")
    except platforms.UnknownPlatform as exc:
        raise CellPlanError(str(exc)) from None
    if not platform.placement:
        raise CellPlanError(
            f"cell {cell['id']}: platform {platform.label} is {platforms.not_built_reason(platform.label)}"
        )
    threads = labels["scaleup"]
    pinned = labels["cpu_config"] == "pin"
    wants_gpu = labels["processor"] == "gpu"
    where = f"cell {cell['id']} on {opts['host']}"
    try:
        # An OpenStack instance's CPUs and GPUs are its flavor's, not the runner's.
        cpus, node = (
            choose_cpus(facts.get("cpus_allowed", []), threads, opts["reserved_cpus"], facts.get("numa_nodes"))
            if pinned and not platform.remote
            else ([], None)
        )
        # The assignment is checked for every cell, so a bad one never passes unnoticed.
        gpu_pools.checked_assignment(opts["gpu_assignment"], facts.get("gpus"), opts["host"])
        gpus = (
            choose_gpus(platform, facts, opts["gpu_assignment"], opts["gpus_per_cell"], opts["host"])
            if wants_gpu and not platform.remote
            else []
        )
    except (CellPlanError, gpu_pools.GpuAssignmentError) as exc:
        raise CellPlanError(f"{where}: {exc}") from None
    gpu_count = int(opts["gpus_per_cell"]) if wants_gpu and platform.remote else len(gpus)
    if platform.label == "k8s":
        # The device plugin chooses the pod's GPUs among the node's: the host's PCI addresses are not known
        # here, only how many it gets (as many as a cn cell); kubelet's CPU manager likewise picks the cores.
        cpus, node, gpus = [], None, []
    cpuset = ",".join(str(cpu) for cpu in cpus)
    quota = None if pinned else float(threads)

    params = {"threads": threads, **cell["params"]}
    data_dir = params.get("data_dir")
    if opts["dataset"]:
        data_dir = params["data_dir"] = dataset_dir(opts["datasets_dir"], opts["dataset"])
    try:
        argv = workload_argv(params, labels["workload"])
    except WorkloadArgsError as exc:
        raise CellPlanError(str(exc)) from None
    key = instance_key(opts["campaign"], opts["host"], cell["id"])
    with_peer = peer.needs_peer(labels["workload"])
    if with_peer:
        argv += _peer_args(platform.label, params, key, where)
    cache = opts["peak_cache_dir"]
    # Data on the host (a generated dataset or the user's own) read-only, the GEMM peak cache read-write.
    mounts = ([{"source": str(data_dir), "target": str(data_dir), "mode": "ro"}] if data_dir else []) + [
        {"source": str(cache), "target": str(cache), "mode": "rw"}
    ]
    name = instance_name(opts["campaign"], opts["host"], cell["id"])
    # The device plugin (k8s, magnum) or the flavor (nova, ironic) chooses the GPUs: only their count is known.
    counted = platform.label == "k8s" or platform.remote
    gpus_env = k8s_gpu_env(gpu_count) if counted else gpu_env(platform, gpus, facts)
    # Inside a guest the GPUs passed through are numbered from 0.
    renumbered = list(range(len(gpus)))

    plan = {
        "cell": cell["id"],
        "scenario": cell.get("scenario"),
        "platform": platform.label,
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
        "timeout": int(opts["timeout"]),
        # What the platform was asked to do, recorded with the cell; placement adds what it saw.
        "runtime": {
            "cpuset_requested": cpuset or None,
            "numa_node": node,
            "gpus_requested": ",".join(gpus) or None,
        },
    }
    if platform.label == "bm":
        plan["env"] = _env(threads, cache, gpus_env, {"PYTHONPATH": opts["prefix"]})
        plan["process"] = {
            "argv": (["taskset", "--cpu-list", cpuset] if pinned else [])
            + [f"{opts['prefix']}/venv/bin/python"]
            + argv,
            "chdir": opts["prefix"],
            "env": plan["env"],
        }
        plan["runtime"]["launcher"] = "taskset" if pinned else "process"
        if with_peer:
            plan["runtime"]["peer_address"] = peer.LOOPBACK_PEER
    elif platform.label == "cn":
        plan["env"] = _env(threads, cache, gpus_env)
        plan["container"] = _container(
            name,
            opts["host"],
            opts["image"],
            opts["image_id"],
            argv,
            plan["env"],
            cpuset,
            quota,
            mounts,
            # nvidia-smi's index on the host: PCI order among the GPUs the driver sees.
            gpu_pools.cuda_indexes(gpus, facts.get("gpus")),
            cell["id"],
            opts,
        )
        plan["container"]["docker_version"] = opts["docker_version"]
        plan["runtime"].update(launcher="docker", cpu_quota_requested=quota, container_name=name, image=opts["image"])
        if with_peer:
            plan["peer"] = peer.container_peer(key, name, cell["params"], plan["container"], plan["timeout"])
            peer.attach_cell(plan["container"], plan["peer"])
            plan["runtime"].update(
                peer_container=plan["peer"]["container"]["name"],
                peer_address=plan["peer"]["address"],
                peer_network=plan["peer"]["network"]["name"],
                peer_subnet=plan["peer"]["network"]["subnet"],
            )
    elif platform.label == "sg":
        sif = opts["sif"] or {}
        if not sif.get("sif"):
            raise CellPlanError(f"{where}: no SIF of the workload image: {apptainer.INSTALL_FIX}")
        plan["env"] = _env(threads, cache, gpus_env)
        plan["process"] = {
            "argv": apptainer_plan.exec_argv(
                sif["sif"], argv, binds=mounts, gpu=bool(gpus), cpu_quota=quota, cpuset=cpuset
            ),
            "chdir": "/",
            "env": apptainer_plan.process_env(plan["env"]),
        }
        plan["runtime"].update(
            launcher="apptainer",
            cpu_quota_requested=quota,
            sif=sif["sif"],
            sif_image_id=sif.get("image_id"),
            image=sif.get("image"),
            apptainer_version=opts["apptainer_version"] or sif.get("apptainer_version"),
        )
    elif platform.label in ("vm", "vmcn", "vmsg"):
        guest_image = opts["guest_image"] or {}
        plan["guest"] = {
            "name": name,
            "vcpus": threads,
            "cpu_pins": cpus,
            "emulator_cpus": cpus,
            "memory_mb": int(opts["vm_memory_mb"]),
            "hugepages": bool(opts["vm_hugepages"]),
            "with_container_disk": platform.label == "vmcn",
            "hostdevs": list(gpus),
            # vmsg: the SIF's read-only disk, mounted at apptainer.GUEST_SIF_DIR in the guest.
            "extra_disks": (
                [{"path": guest_image.get("sif_disk"), "format": "raw", "readonly": True}]
                if platform.label == "vmsg"
                else []
            ),
        }
        plan["runtime"].update(
            guest_domain=name,
            guest_vcpus=threads,
            vcpu_pins_requested=cpuset or None,
            emulator_pins_requested=cpuset or None,
            guest_memory_mb=int(opts["vm_memory_mb"]),
        )
        # The guest's vCPUs are pinned on the host; in the guest the container takes them all.
        in_guest = ",".join(str(vcpu) for vcpu in range(threads)) if pinned else ""
        if platform.label == "vmsg":
            if not guest_image.get("sif_disk"):
                raise CellPlanError(f"{where}: the guest image has no SIF disk: {apptainer.GUEST_FIX}")
            plan["env"] = _env(threads, cache, gpus_env)
            plan["process"] = {
                # The cache lives and dies with the throwaway guest: a scratch directory, not a bind.
                "argv": apptainer_plan.exec_argv(
                    apptainer.GUEST_SIF_PATH,
                    argv,
                    scratch=[cache],
                    gpu=bool(gpus),
                    cpu_quota=quota,
                    cpuset=in_guest,
                ),
                "chdir": "/",
                "env": apptainer_plan.process_env(plan["env"]),
            }
            plan["runtime"].update(
                launcher="apptainer",
                cpu_quota_requested=quota,
                in_guest_cpuset=in_guest or None,
                sif=apptainer.GUEST_SIF_PATH,
                sif_image_id=guest_image.get("sif_image_id"),
                apptainer_version=guest_image.get("apptainer_version"),
            )
        elif platform.container:
            plan["env"] = _env(threads, cache, gpus_env)
            image = guest_image.get("container_image_id")
            plan["container"] = _container(
                name, name, image, image, argv, plan["env"], in_guest, quota, mounts[-1:], renumbered, cell["id"], opts
            )
            plan["container"]["docker_version"] = None
            plan["runtime"].update(
                launcher="docker",
                cpu_quota_requested=quota,
                container_name=name,
                image=image,
                in_guest_cpuset=in_guest or None,
            )
        else:
            plan["env"] = _env(threads, cache, gpus_env, {"PYTHONPATH": GUEST_PREFIX})
            plan["process"] = {
                "argv": [f"{GUEST_PREFIX}/venv/bin/python"] + argv,
                "chdir": GUEST_PREFIX,
                "env": plan["env"],
            }
            plan["runtime"]["launcher"] = "ssh"
    elif platform.label == "k8s":
        plan["env"] = _env(threads, cache, gpus_env)
        _k8s(plan, cell, threads, pinned, gpu_count, argv, mounts, opts)
    elif platform.remote:
        plan["env"] = _env(threads, cache, gpus_env, None if platform.container else {"PYTHONPATH": opts["prefix"]})
        _openstack(plan, cell, platform, threads, pinned, gpu_count, argv, mounts, opts)
    else:  # a new platform with a placement file needs its branch here (README, "Adding a platform")
        raise CellPlanError(f"{where}: platform {platform.label} has a placement file but no cell plan")
    return plan
