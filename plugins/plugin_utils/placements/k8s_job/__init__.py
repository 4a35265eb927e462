# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The k8s_job kind: the workload image as a Kubernetes Job, always deleted with its pod.

``pin`` = Guaranteed QoS (requests equal limits), so kubelet's static CPU manager gives the pod exclusive
cores; ``vnl`` = Burstable with a CPU limit. The device plugin chooses the pod's GPUs: only their count is
planned. On the runner's own cluster the Job is pinned to the runner's node; on a provisioned cluster
(a cloud instance holding it) its scheduler chooses the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes import job_spec as jobs
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    Observed,
    PlacementError,
    kind_file,
)


@dataclass
class Cluster:
    """Which cluster runs the Job, as the kind holding it describes it."""

    kubeconfig: str
    node: str | None  # the node the Job is pinned to, or None (the scheduler chooses)
    pull: bool = False  # the nodes pull the image (no role imported it there)


def runner_cluster(ctx):
    """The runner's own cluster (k8s): its node, found by platform_status."""
    if not ctx.opts["k8s_node"]:
        raise PlacementError(
            f"cell {ctx.cell['id']}: no Kubernetes node for {ctx.opts['host']}: set platform_run_k8s_node, or let "
            "platbench.lab.platform_status find it (platform_run's capabilities)"
        )
    return Cluster(kubeconfig=ctx.opts["kubeconfig"], node=ctx.opts["k8s_node"])


def plan(ctx, plan, cluster=None):
    """plan["job"] (the batch/v1 Job) and plan["kubernetes"] (where and how to run it)."""
    cluster = cluster or runner_cluster(ctx)
    opts = ctx.opts
    plan["env"] = ctx.env()
    labels = {
        "org.platbench.cell": jobs.label_value(ctx.cell["id"]),
        "org.platbench.campaign": jobs.label_value(opts["campaign"]),
        "org.platbench.host": jobs.label_value(opts["host"]),
    }
    # Label values cannot hold the cell id as it is (`/`, `|`); annotations keep it whole.
    annotations = {"org.platbench.cell": ctx.cell["id"], "org.platbench.campaign": str(opts["campaign"])}
    try:
        resources = jobs.resources(ctx.threads, ctx.pinned, opts["k8s_memory"], opts["k8s_cpu_request"], ctx.gpu_count)
    except jobs.K8sJobError as exc:
        raise PlacementError(f"cell {ctx.cell['id']}: {exc}") from None
    delay = max(int(opts["k8s_poll_delay"]), 1)
    plan["job"] = jobs.job(
        ctx.name,
        opts["k8s_namespace"],
        cluster.node,
        opts["image"],
        ["python"] + ctx.argv,
        plan["env"],
        ctx.mounts,
        plan["timeout"],
        labels,
        annotations,
        resources,
        ctx.gpu_count,
    )
    if cluster.pull:
        plan["job"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    plan["kubernetes"] = {
        "kubeconfig": cluster.kubeconfig,
        "namespace": opts["k8s_namespace"],
        "node": cluster.node,
        "poll_delay": delay,
        # The Job's own deadline ends it at `timeout`; one more minute lets Kubernetes say so.
        "poll_retries": -(-(plan["timeout"] + 60) // delay),
    }
    plan["runtime"].update(
        launcher="kubernetes",
        job_name=ctx.name,
        k8s_namespace=opts["k8s_namespace"],
        image=opts["image"],
        k8s_cpu_request=resources["requests"]["cpu"],
        k8s_cpu_limit=resources["limits"]["cpu"],
        k8s_memory=resources["limits"]["memory"],
        k8s_gpus_requested=ctx.gpu_count,
    )


def observed(plan, results):
    """The pod's log, what Kubernetes did (node, QoS class, pod, exit code), and the Job's failure."""
    job, pods, log = results.get("k8s_job") or {}, results.get("k8s_pods") or {}, results.get("k8s_log") or {}
    if not job:
        return Observed()
    cluster = plan["kubernetes"]
    name = plan["job"]["metadata"]["name"]
    outcome = jobs.job_outcome(job.get("resources") or [], pods.get("resources") or [])
    output = log.get("log") if "log" in log else log.get("msg", "")
    runtime = {
        "k8s_node": outcome["node"],
        "k8s_qos_class": outcome["qos_class"],
        "k8s_pod": outcome["pod"],
        "k8s_namespace": cluster["namespace"],
        "job_name": name,
        "rc": outcome["rc"],
    }
    error = None
    if not outcome["succeeded"]:
        error = (
            f"Job {name} in namespace {cluster['namespace']} on node {cluster['node']}: {outcome['reason']}. "
            f"Its log: {output}"
        )
    return Observed(output=output or "", runtime=runtime, error=error)


KIND = Kind(
    name="k8s_job",
    summary="a Kubernetes Job of the workload image, deleted with its pod",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"k8s_job": "platform_run_k8s_job", "k8s_pods": "platform_run_k8s_pods", "k8s_log": "platform_run_k8s_log"},
    teardown=(kind_file(__file__, "teardown.yml"),),
    instances="pods",
    through_api=True,
)
