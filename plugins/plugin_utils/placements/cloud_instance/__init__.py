# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The cloud_instance kind: the campaign's instance of the scenario, provisioned from a cloud by
platbench.lab.openstack_instances (a bare-metal node, a server, a container cluster: the registry's
``instance``), the workload on it as the registry's ``inner`` kind.

The instance's CPUs and GPUs are its flavor's, not the runner's: ``pin`` is the flavor's dedicated CPUs
(``hw:cpu_policy=dedicated``), or ``taskset`` over its first CPUs on a bare-metal node, which is the
whole machine; GPUs are counted, the flavor's PCI alias chooses them.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import k8s_job, process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    kind_file,
)

# The kinds an instance holds, by their declared names.
INNER = {module.KIND.name: module for module in (process, k8s_job)}


def plan(ctx, plan):
    """plan["openstack"] (the instance and its inventory group) and the inner kind's section."""
    instance = openstack_plan.instance_name(ctx.opts["campaign"], ctx.cell["labels"])
    plan["openstack"] = {
        "instance": instance,
        "group": ctx.platform.group,
        "failed_group": ctx.platform.failed_group,
        "inner": ctx.platform.inner,
        "inner_task_file": INNER[ctx.platform.inner].KIND.task_file,
        # What the messages call it.
        "noun": "cluster" if ctx.platform.instance == "coe_cluster" else "instance",
    }
    plan["runtime"].update(openstack_instance=instance, gpus_requested=ctx.gpu_count or None)
    if INNER[ctx.platform.inner].KIND.through_api:
        kubeconfig = f"{str(ctx.opts['openstack_kubeconfig_dir']).rstrip('/')}/{instance}.kubeconfig"
        k8s_job.plan(ctx, plan, k8s_job.Cluster(kubeconfig=kubeconfig, node=None, pull=True))
        return
    pins = ctx.pinned and ctx.platform.pinning == "taskset"
    machine = process.Machine(
        host=instance,
        prefix=ctx.opts["prefix"],
        taskset=f"0-{ctx.threads - 1}" if pins else "",
        over_ssh=True,
        become=False,
    )
    process.plan(ctx, plan, machine)


def observed(plan, results):
    """The inner kind's outcome, and the instance's flavor and address."""
    section = plan.get("openstack") or {}
    held = INNER[section.get("inner", process.KIND.name)]
    inner = held.observed(plan, results)
    instance = results.get("instance") or {}
    if instance and held.KIND.launched:
        inner.runtime.update(
            openstack_flavor=instance.get("platbench_openstack_flavor"), openstack_address=instance.get("ansible_host")
        )
    return inner


KIND = Kind(
    name="cloud_instance",
    machine="cloud",
    summary="an instance the campaign provisioned from a cloud, the workload on it as its inner kind",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"instance": "platform_run_instance"},
    teardown=(kind_file(__file__, "teardown.yml"),),
    inner=tuple(INNER),
)
