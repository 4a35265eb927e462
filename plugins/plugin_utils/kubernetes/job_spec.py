# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A cell as a Kubernetes Job (the ``k8s`` platform), and reading back what Kubernetes did with it.

``job()`` builds the batch/v1 Job of a cell from its plan; ``qos_class()`` classifies a pod spec as
Kubernetes does; ``job_outcome()`` turns what ``kubernetes.core.k8s_info`` returns for the Job and
its pod into finished / succeeded / why. Pure Python: cellplan and the ``platbench.lab.k8s_job_outcome``
filter call it (the runner's Node object is read by ``module_utils/readiness.py``, on the host).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Kubernetes names the container runtime's GPUs so (NVIDIA device plugin) and schedules them as
# an extended resource; its RuntimeClass makes containerd start the container with the NVIDIA runtime.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_RUNTIME_CLASS = "nvidia"
HOSTNAME_LABEL = "kubernetes.io/hostname"
JOB_NAME_LABEL = "job-name"  # the Job controller puts it on every pod of the Job
CONTAINER_NAME = "workload"
# The control plane's taint keeps ordinary pods off it; a cell pinned to a control-plane runner tolerates it.
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
# A Job left behind (the run was killed before its `always:` deleted it) goes this long after it finished.
TTL_AFTER_FINISHED = 600
LABEL_VALUE_MAX = 63
_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIXES = {
    "": 1,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
# Waiting reasons after which the container never starts: the Job would only end at its deadline.
FATAL_WAITING = ("ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError")


class K8sJobError(ValueError):
    """A value the Job cannot be built from; the message names it."""


def label_value(text):
    """``text`` as a Kubernetes label value: at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends."""
    value = _LABEL_VALUE_BAD.sub("_", str(text))[:LABEL_VALUE_MAX]
    return value.strip("_.-")


def quantity(text, what="quantity"):
    """A Kubernetes resource quantity ("500m", "4Gi", "2", 2) as a Decimal."""
    match = _QUANTITY.match(str(text).strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise K8sJobError(f"{what}: {text!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi, 4096Mi)")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        raise K8sJobError(f"{what}: {text!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)") from None


def resources(threads, pinned, memory, cpu_request, gpus):
    """The workload container's resources.

    pin: requests equal to limits for cpu (the integer scale-up) and memory, so the pod is Guaranteed and
    kubelet's static CPU manager gives it exclusive cores. vnl: a CPU limit of the scale-up (a CFS quota)
    and a smaller CPU request, so the pod is Burstable and shares the node's CPUs.
    """
    if quantity(memory, "platform_run_k8s_memory") <= 0:
        raise K8sJobError(f"platform_run_k8s_memory: {memory!r} must be more than 0 (e.g. 4Gi)")
    limits = {"cpu": str(threads), "memory": str(memory)}
    if pinned:
        requests = dict(limits)
    else:
        if not 0 < quantity(cpu_request, "platform_run_k8s_cpu_request") < threads:
            raise K8sJobError(
                f"platform_run_k8s_cpu_request: {cpu_request!r} must be more than 0 and less than the scale-up "
                f"{threads}, so a vnl pod stays Burstable (e.g. 100m)"
            )
        requests = {"cpu": str(cpu_request), "memory": str(memory)}
    if gpus:
        # Extended resources are set in limits; Kubernetes copies them to requests.
        limits[GPU_RESOURCE] = str(gpus)
    return {"requests": requests, "limits": limits}


def job(name, namespace, node, image, command, env, mounts, timeout, labels, annotations, resources_, gpus):
    """The batch/v1 Job running the cell once on ``node``: no retry, stopped at ``timeout`` seconds."""
    volumes, volume_mounts = [], []
    for index, mount in enumerate(mounts):
        volume = f"{'data' if mount['mode'] == 'ro' else 'cache'}-{index}"
        # The data must already be there; the cache directory is created when missing.
        kind = "Directory" if mount["mode"] == "ro" else "DirectoryOrCreate"
        volumes.append({"name": volume, "hostPath": {"path": mount["source"], "type": kind}})
        volume_mounts.append({"name": volume, "mountPath": mount["target"], "readOnly": mount["mode"] == "ro"})
    pod_spec = {
        "restartPolicy": "Never",
        # No node (magnum): the cluster's scheduler chooses.
        "nodeSelector": {HOSTNAME_LABEL: node} if node else {},
        "tolerations": [{"key": CONTROL_PLANE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        # The workload talks to no API server and needs no service environment.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": CONTAINER_NAME,
                "image": image,
                # The image is imported into the node's containerd (platbench.lab.kubernetes), never pulled.
                "imagePullPolicy": "Never",
                "command": list(command),
                "env": [{"name": key, "value": str(value)} for key, value in sorted(env.items())],
                "resources": resources_,
                "volumeMounts": volume_mounts,
                "securityContext": {"allowPrivilegeEscalation": False, "privileged": False},
            }
        ],
        "volumes": volumes,
    }
    if gpus:
        pod_spec["runtimeClassName"] = GPU_RUNTIME_CLASS
    metadata = {"labels": dict(labels), "annotations": dict(annotations)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(timeout),
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "template": {"metadata": metadata, "spec": pod_spec},
        },
    }


def _container_qos_parts(container):
    spec = container.get("resources") or {}
    limits = {key: quantity(value) for key, value in (spec.get("limits") or {}).items() if key in ("cpu", "memory")}
    # The API server defaults a missing request to its limit.
    requests = {**limits}
    requests.update(
        {key: quantity(value) for key, value in (spec.get("requests") or {}).items() if key in ("cpu", "memory")}
    )
    return requests, limits


def qos_class(pod_spec):
    """The QoS class Kubernetes gives a pod of ``pod_spec`` (containers and init containers, cpu and memory):
    Guaranteed when every container has cpu and memory limits and requests equal to them (a missing request
    defaults to its limit); BestEffort when no container requests or limits either; Burstable otherwise."""
    containers = list(pod_spec.get("containers") or []) + list(pod_spec.get("initContainers") or [])
    if not containers:
        raise K8sJobError("a pod spec needs at least one container")
    parts = [_container_qos_parts(container) for container in containers]
    if not any(requests or limits for requests, limits in parts):
        return "BestEffort"
    guaranteed = all(
        set(limits) == {"cpu", "memory"} and all(requests[key] == limits[key] for key in limits)
        for requests, limits in parts
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _conditions(resource):
    conditions = (resource.get("status") or {}).get("conditions") or []
    return {c.get("type"): c for c in conditions if c.get("status") == "True"}


def _terminated(pod):
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER_NAME:
            state = status.get("state") or {}
            return state.get("terminated"), state.get("waiting")
    return None, None


def job_outcome(jobs, pods=None):
    """What became of a cell's Job: ``finished``, ``succeeded``, ``reason`` (why it failed, '' otherwise),
    ``rc`` (the workload's exit code when it ran), ``pod``, ``node``, ``qos_class``.

    ``jobs``: the ``resources`` of ``k8s_info`` for the Job (empty when it is gone); ``pods``: those of its
    pods (label ``job-name``). A pod whose container can never start (``FATAL_WAITING``) ends it too.
    """
    job_resource = (jobs or [{}])[0] or {}
    conditions = _conditions(job_resource)
    pod = next(iter(pods or []), None) or {}
    terminated, waiting = _terminated(pod)
    outcome = {
        "finished": False,
        "succeeded": False,
        "reason": "",
        "rc": terminated.get("exitCode") if terminated else None,
        "pod": (pod.get("metadata") or {}).get("name"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "qos_class": (pod.get("status") or {}).get("qosClass"),
    }
    if not job_resource:
        return {**outcome, "finished": True, "reason": "the Job is gone (deleted before it finished)"}
    if "Complete" in conditions:
        return {**outcome, "finished": True, "succeeded": True}
    if "Failed" in conditions:
        failed = conditions["Failed"]
        reason = f"the Job failed: {failed.get('reason') or 'no reason given'}"
        if failed.get("message"):
            reason += f" ({failed['message']})"
        if terminated:
            reason += f"; the workload exited with {terminated.get('exitCode')} ({terminated.get('reason') or ''})"
        elif waiting:
            reason += f"; its container never started: {waiting.get('reason')} {waiting.get('message') or ''}".rstrip()
        return {**outcome, "finished": True, "reason": reason}
    if waiting and waiting.get("reason") in FATAL_WAITING:
        reason = f"its container cannot start: {waiting['reason']} {waiting.get('message') or ''}".rstrip()
        return {**outcome, "finished": True, "reason": reason}
    return outcome
