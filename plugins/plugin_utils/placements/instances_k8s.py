# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The k8s instances placement: a k8s cell of mode distributed or shared as Kubernetes Jobs, run by
``roles/platform_run/tasks/k8s_instances.yml`` (statically verified: no kubelet on the test machine).

The cell's single-instance Job (placements/k8s_job/) is planned first; each instance is that Job's pod again,
with its own resources (requests = limits for pin: Guaranteed, exclusive cores from the static CPU manager), its
labels and, on the runner's cluster, the runner's node (a provisioned cluster's scheduler spreads them):

- ``distributed``: one Indexed Job (``completionMode: Indexed``, completions = parallelism = N, no retry) and a
  headless Service of the same name; the Job's pods take the Service as their ``subdomain``, so that the pod of
  index I answers to ``<job>-I.<service>`` in the cluster's DNS. A pod's rank is its completion index, which the
  Job controller writes into its annotation ``batch.kubernetes.io/job-completion-index``: the Downward API puts it
  in ``PLATBENCH_INSTANCE_INDEX``, the first variable of the container, and Kubernetes expands
  ``$(PLATBENCH_INSTANCE_INDEX)`` in the variables after it: torch's ``RANK``, TF_CONFIG's ``task.index``. The
  workload is unchanged. MASTER_ADDR is the chief's name, ``<job>-0.<service>``; TensorFlow's workers are every
  pod's name, all on ``RENDEZVOUS_PORT`` (each pod has an address of its own). A pod's records get its role and
  index as labels when its log is read (``observed``), since one pod template cannot name them.
- ``shared``: the foreground as a Job alone; then the background as a Job, confirmed running for ``settle``
  seconds, and the foreground's Job again beside it on the same node (the runner's; on a provisioned cluster a
  pod affinity to the background's pod); the background, which must still run then (or the cell fails), is
  deleted once the foreground ended. Each Job's command
  carries its record labels (``several.labels_argv``), as the other kinds' instances do.

The ranks' network path is the cluster's CNI, flannel's VXLAN: ``overlay``. A k8s cell asking for another path is
refused by the prechecks (``network_problems``, called by runplan) before any cell runs, and again here.
Every object carries the cell's labels (``org.platbench.cell``, campaign, host): playbooks/teardown.yml deletes
the Jobs and Services a killed run left by them.
"""

from __future__ import annotations

import copy
import json

from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned
from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes import job_spec as jobs
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import Observed, PlacementError
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import RESULT_PREFIX

RESULT = "k8s_instances"  # the registered result record_cell reads (placements.RESULTS)
RESULTS = {RESULT: "platform_run_k8s_instances"}
PLACEMENT = "k8s_instances"
TASK_FILE = f"{PLACEMENT}.yml"  # roles/platform_run/tasks/k8s_instances.yml
# What the cluster's CNI gives pods to talk over: flannel's VXLAN backend (module_utils/network_path.py builds
# the same path between processes and containers). A cell cannot choose another.
NETWORK_PATHS = ("overlay",)
POD_INTERFACE = "eth0"  # the CNI names a pod's interface so; gloo's and NCCL's sockets go over it
RENDEZVOUS_PORT = 29500  # torch's store on the chief, each TensorFlow worker's gRPC server: every pod its own address
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "PLATBENCH_INSTANCE_INDEX"
ROLE_LABEL = "org.platbench.role"
INSTANCE_LABEL = "org.platbench.instance"
HOSTNAME_TOPOLOGY = jobs.HOSTNAME_LABEL


def network_problems(name, cells, pod_platforms):
    """The prechecks' messages for the cells of Kubernetes platforms (``pod_platforms``: the labels whose kind places
    several instances as pods, placements.instance_platforms) that ask for a network path their pods do not have
    (one per platform and path), so that the experiment is refused before any cell runs."""
    asked = {}
    for cell in cells:
        spec = cell.get("instances") or {}
        label = cell["labels"]["platform"]
        path = spec.get("network")
        if path and path not in NETWORK_PATHS and label in pod_platforms:
            asked.setdefault((label, path), cell["id"])
    return [
        f"Experiment '{name}' asks for network path '{path}' between the pods of {label} (cell {cell_id}), but "
        f"{_network_reason()}: set network: [{', '.join(NETWORK_PATHS)}] in experiments/{name}.yml, or run {label} "
        f"in an experiment of its own with that network."
        for (label, path), cell_id in asked.items()
    ]


def node_problems(name, label, cells, node):
    """The prechecks' messages for ``label``'s cells with several pods on the runner's ``node`` (platform_status's
    summary: allocatable CPUs and GPUs) that it cannot hold at once: pinned pods need their scale-up each (those
    whose scale-up alone is too much are refused by runplan already), and a gpu cell's pods a GPU each at least."""
    problems = []
    cpus, gpus = node.get("allocatable_cpus", 0), node.get("allocatable_gpus", 0)
    placed = [cell for cell in cells if cell.get("instances")]
    pinned = [cell for cell in placed if is_pinned(cell["labels"]) and int(cell["labels"]["scaleup"]) <= cpus]
    widest = max(pinned, key=several.cpus_needed, default=None)
    if widest is not None and several.cpus_needed(widest) > cpus:
        problems.append(
            f"Experiment '{name}' pins {widest['instances']['count']} pods x scale-up {widest['labels']['scaleup']} "
            f"= {several.cpus_needed(widest)} CPUs on {label} (cell {widest['id']}), but node {node['name']} has "
            f"{cpus} allocatable CPUs: lower 'scaleup' or 'instances.count' in experiments/{name}.yml, or let vnl "
            "pods share the node's CPUs."
        )
    with_gpus = [cell for cell in placed if cell["labels"]["processor"] == "gpu"]
    most = max(with_gpus, key=lambda cell: cell["instances"]["count"], default=None)
    if most is not None and 0 < gpus < most["instances"]["count"]:
        problems.append(
            f"Experiment '{name}' runs {most['instances']['count']} pods with a GPU each on {label} "
            f"(cell {most['id']}), but node {node['name']} advertises {gpus} nvidia.com/gpu: lower "
            f"'instances.count' in experiments/{name}.yml, or drop the {label} gpu scenarios."
        )
    return problems


def _network_reason():
    return (
        "a Kubernetes pod reaches another only over the cluster's CNI, flannel's VXLAN "
        f"({', '.join(NETWORK_PATHS)}); each pod has a loopback and a bridge of its own"
    )


def plan(ctx, plan, spec):
    """Turn ``plan`` (the cell's single Job planned by placements/k8s_job/) into Jobs of ``spec``'s instances:
    plan["k8s_instances"], run by k8s_instances.yml."""
    count, sharing = spec["count"], spec["cpus"]
    if spec.get("network") and spec["network"] not in NETWORK_PATHS:
        raise PlacementError(
            f"{ctx.where}: network path '{spec['network']}' cannot join pods: {_network_reason()}; "
            f"use network: [{', '.join(NETWORK_PATHS)}]"
        )
    if sharing == "shared" and ctx.pinned:
        raise PlacementError(
            f"{ctx.where}: pinned pods cannot share their CPUs (kubelet's static CPU manager gives each Guaranteed "
            "pod cores of its own): use instances: {cpus: disjoint}, or cpu_config vnl"
        )
    single = plan.pop("job")
    cluster = plan["kubernetes"]
    members = [
        {"name": f"{ctx.name}-{index}", "role": role, "index": index} for index, role in enumerate(spec["roles"])
    ]
    service = None
    if ctx.cell["labels"].get("mode") == "shared":
        rounds = _shared_rounds(ctx, single, members, spec["background"], cluster["node"])
    else:
        service = _service(ctx.name, single)
        rounds = [{"background": None, "settle": 0.0, "foreground": _indexed_job(ctx, single, members, service)}]
    objects = [
        {"api_version": "batch/v1", "kind": "Job", "name": job["metadata"]["name"]}
        for entry in rounds
        for job in (entry["background"], entry["foreground"])
        if job
    ]
    if service:
        objects.append({"api_version": "v1", "kind": "Service", "name": service["metadata"]["name"]})
    plan["k8s_instances"] = {
        "count": count,
        "cpus": sharing,
        "members": members,
        "service": service,
        "rounds": rounds,
        "objects": objects,
    }
    plan["placement"] = PLACEMENT
    described = [
        ([members[1]] if entry["background"] else []) + ([members[0]] if service is None else members)
        for entry in rounds
    ]
    plan["runtime"].update(
        instances=count,
        instance_cpus=sharing,
        instance_rounds=several.describe_rounds(described),
        k8s_jobs=[item["name"] for item in objects if item["kind"] == "Job"],
    )
    if service:
        plan["runtime"].update(network_path=spec["network"], k8s_service=service["metadata"]["name"])
    else:
        plan["runtime"].pop("job_name", None)  # a shared cell's Jobs are its k8s_jobs
    if "background" in spec:
        plan["runtime"]["background"] = {"workload": spec["background"]["workload"], **spec["background"]["params"]}


def _service(name, single):
    """The headless Service whose name the ranks' pods take as their subdomain: ``<job>-<index>.<name>``."""
    labels = single["metadata"]["labels"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": single["metadata"]["namespace"],
            "labels": dict(labels),
            "annotations": dict(single["metadata"]["annotations"]),
        },
        "spec": {
            "clusterIP": "None",
            # A rank resolves the others as soon as they have an address, not once they are Ready.
            "publishNotReadyAddresses": True,
            "selector": {jobs.JOB_NAME_LABEL: name},
            "ports": [
                {"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT, "protocol": "TCP"}
            ],
        },
    }


def _job_of(single, name, extra_labels):
    """The single Job again under ``name``, with ``extra_labels`` on it and its pods."""
    job = copy.deepcopy(single)
    job["metadata"]["name"] = name
    for metadata in (job["metadata"], job["spec"]["template"]["metadata"]):
        metadata["labels"] = {**metadata["labels"], **extra_labels}
    return job


def _container(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def _indexed_job(ctx, single, members, service):
    """The ranks as one Indexed Job: each pod's rank is its completion index (see the module's docstring)."""
    count = len(members)
    name, service_name = single["metadata"]["name"], service["metadata"]["name"]
    job = _job_of(single, name, {ROLE_LABEL: "rank"})
    job["spec"].update(completionMode="Indexed", completions=count, parallelism=count)
    job["spec"]["template"]["spec"]["subdomain"] = service_name
    hosts = [f"{name}-{index}.{service_name}" for index in range(count)]
    index = f"$({INDEX_ENV})"
    if ctx.params.get("framework", "tensorflow") == "torch":
        rank_env = {
            "RANK": index,
            "WORLD_SIZE": str(count),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": hosts[0],
            "MASTER_PORT": str(RENDEZVOUS_PORT),
            "GLOO_SOCKET_IFNAME": POD_INTERFACE,
            "NCCL_SOCKET_IFNAME": POD_INTERFACE,
        }
    else:
        workers = json.dumps([f"{host}:{RENDEZVOUS_PORT}" for host in hosts], separators=(",", ":"))
        rank_env = {"TF_CONFIG": f'{{"cluster":{{"worker":{workers}}},"task":{{"type":"worker","index":{index}}}}}'}
    container = _container(job)
    planned = {entry["name"]: entry["value"] for entry in container["env"]}
    # The index first: Kubernetes expands $(NAME) only from the variables defined before it.
    container["env"] = [
        {"name": INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}
    ] + [{"name": key, "value": str(value)} for key, value in sorted({**planned, **rank_env}.items())]
    container["ports"] = [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT, "protocol": "TCP"}]
    return job


def _shared_rounds(ctx, single, members, background, node):
    """The foreground's Job alone; then the background's Job and the foreground's again, on one node."""
    foreground, noise = members
    command = ["python", *ctx.argv]

    def labelled(member, share=None):
        extra = {several.SHARE_LABEL: share} if share else {}
        return several.labels_argv({several.ROLE_LABEL: member["role"], several.INDEX_LABEL: member["index"], **extra})

    def job_for(member, name, argv):
        job = _job_of(single, name, {ROLE_LABEL: member["role"], INSTANCE_LABEL: member["name"]})
        _container(job)["command"] = argv
        return job

    alone = job_for(foreground, f"{foreground['name']}-{several.ALONE}", command + labelled(foreground, several.ALONE))
    beside = job_for(
        foreground, f"{foreground['name']}-{several.SHARED}", command + labelled(foreground, several.SHARED)
    )
    noise_job = job_for(
        noise, noise["name"], ["python", *several.background_argv(background, ctx.threads)] + labelled(noise)
    )
    if not node:
        # No node to pin both to: the scheduler puts the foreground beside the background's pod.
        beside["spec"]["template"]["spec"]["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {jobs.JOB_NAME_LABEL: noise["name"]}},
                        "topologyKey": HOSTNAME_TOPOLOGY,
                    }
                ]
            }
        }
    return [
        {"background": None, "settle": 0.0, "foreground": alone},
        {"background": noise_job, "settle": float(background["settle"]), "foreground": beside},
    ]


def background_started(pods):
    """Whether the background's pod (``k8s_info`` resources) runs, or has ended so that waiting is pointless."""
    return any(((pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")) for pod in pods or [])


def _pod_index(pod):
    metadata = pod.get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(text) if text is not None and str(text).isdigit() else None


def _exit_code(pod):
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status.get("name") == jobs.CONTAINER_NAME and terminated:
            return terminated.get("exitCode")
    return None


def _labelled_records(log, labels):
    """``log`` with ``labels`` added to each result record it holds (one pod template cannot name its rank)."""
    lines = []
    for line in log.splitlines():
        if line.startswith(RESULT_PREFIX):
            try:
                record = json.loads(line[len(RESULT_PREFIX) :])
            except ValueError:
                record = None
            if isinstance(record, dict):
                record["labels"] = {**(record.get("labels") or {}), **labels}
                line = RESULT_PREFIX + json.dumps(record)
        lines.append(line)
    return "\n".join(lines)


def observed(plan, results):
    """Every foreground pod's log (a background is deleted mid-run), what Kubernetes did with each pod, and the
    first Job that failed."""
    reported = (results.get(RESULT) or {}).get("rounds") or []
    if not reported:
        return Observed()
    planned = plan[RESULT]
    namespace = plan["kubernetes"]["namespace"]
    roles = [member["role"] for member in planned["members"]]
    distributed = planned["service"] is not None
    outputs, ran, errors = [], [], []
    for entry in reported:
        number = int(entry.get("round", 0))
        name = planned["rounds"][number]["foreground"]["metadata"]["name"]
        pods = entry.get("pods") or []
        logs = {}
        for read in entry.get("logs") or []:
            logs[str(read.get("item"))] = read.get("log") if "log" in read else read.get("msg", "")
        for pod in sorted(pods, key=lambda pod: _pod_index(pod) or 0):
            pod_name = (pod.get("metadata") or {}).get("name")
            index = _pod_index(pod) if distributed else 0
            log = logs.get(pod_name) or ""
            if distributed and index is not None:
                log = _labelled_records(log, {several.ROLE_LABEL: roles[index], several.INDEX_LABEL: index})
            outputs.append(log)
            ran.append(
                {
                    "name": pod_name,
                    "role": roles[index] if index is not None else None,
                    "index": index,
                    "round": number,
                    "rc": _exit_code(pod),
                    "node": (pod.get("spec") or {}).get("nodeName"),
                    "qos_class": (pod.get("status") or {}).get("qosClass"),
                }
            )
        outcome = jobs.job_outcome(entry.get("job") or [], pods)
        if not outcome["succeeded"]:
            errors.append(f"Job {name} in namespace {namespace}: {outcome['reason'] or 'it did not finish'}")
        background = planned["rounds"][number]["background"]
        if background and entry.get("background"):
            ended = jobs.job_outcome(entry["background"])
            if ended["finished"]:
                errors.append(
                    f"the background Job {background['metadata']['name']} ended before the foreground did "
                    f"({ended['reason'] or 'it completed'}): the foreground did not run beside it to the end"
                )
    output = "\n".join(outputs)
    error = None
    if errors:
        error = "; ".join(errors) + f". The pods' logs: {output}"
    runtime = {"instances_ran": ran, "k8s_namespace": namespace}
    return Observed(output=output, runtime=runtime, error=error)
