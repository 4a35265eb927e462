# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Placement kinds: the code each kind of platform runs with, written once per kind.

Every platform of the registry (``plugins/module_utils/platforms.py``) names its kind; a kind's module
here does two things, and ``roles/platform_run/tasks/<kind>.yml`` executes what it planned:

- ``plan(ctx, plan)`` adds the kind's sections to a cell plan (``process``, ``container``, ``guest``,
  ``job``/``kubernetes``, ``openstack``) and what was asked of the platform to ``plan["runtime"]``;
- ``observed(plan, results)`` maps what the engine reported after the run (the registered results of the
  kind's task file) into the cell's output, its runtime metadata and, where the engine says the workload
  failed without the task failing, an error.

Kinds that hold another (a guest, a cloud instance) plan and map their inner kind through ``inner``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import inject
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import (
    cloud_instance,
    container,
    guest,
    instances,
    instances_guest,
    instances_hosts,
    instances_k8s,
    k8s_job,
    micro_vm,
    process,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Observed,
    PlacementError,
    Placing,
)

KINDS = {
    "process": process,
    "container": container,
    "guest": guest,
    "k8s_job": k8s_job,
    "cloud_instance": cloud_instance,
    "micro_vm": micro_vm,
}
# The registered results each kind's task file leaves for record_cell (roles/platform_run/tasks/cell.yml
# forgets them before every cell, so a cell never reads the one before's).
RESULTS = (
    "process",
    "container",
    "guest",
    "vcpus",
    "micro_vm",
    "k8s_job",
    "k8s_pods",
    "k8s_log",
    "instance",
    instances.RESULT,
    instances.PATH_RESULT,
    instances_k8s.RESULT,
    instances_guest.RESULT,
)

__all__ = ["KINDS", "RESULTS", "Observed", "PlacementError", "Placing", "plan_sections", "observed"]


def plan_sections(ctx, plan):
    """Add the sections of ``ctx.platform``'s kind to ``plan``; a cell with several instances then becomes the
    instances placement of that kind's instance (placements/instances.py; pods: placements/instances_k8s.py; a guest
    each: placements/instances_guest.py; ranks over the runner hosts' own network: placements/instances_hosts.py).
    An injected overhead is applied by the process and container kinds, to cells of one instance: the others are
    refused here too (the experiment's plan refuses their platforms already, inject.platform_problems)."""
    spec = ctx.cell.get("instances")
    if ctx.injected_quota is not None:
        if ctx.platform.kind not in inject.KINDS:
            raise PlacementError(
                f"{ctx.where}: inject: {ctx.platform.label} ({ctx.platform.kind}) cannot take an injected overhead; "
                f"only the cells of {' and '.join(inject.KINDS)} platforms do"
            )
        if spec:
            raise PlacementError(
                f"{ctx.where}: inject: an overhead is injected into cells of one instance only, and this one has "
                f"{spec.get('count', 'several')}: inject into a single-instance experiment"
            )
    KINDS[ctx.platform.kind].plan(ctx, plan)
    if spec:
        if instances_k8s.places(ctx.platform):
            placing = instances_k8s
        elif ctx.platform.guest:
            placing = instances_guest
        else:
            placing = instances_hosts if instances_hosts.places(spec) else instances
        placing.plan(ctx, plan, spec)


def observed(plan, results):
    """What ``plan``'s engine reported (``results``: registered results by RESULTS name), as an Observed."""
    platform = platforms.get(plan.get("platform"), "the cell plan's platform")
    unknown = sorted(set(results or {}) - set(RESULTS))
    if unknown:
        raise PlacementError(f"unknown result(s) {', '.join(unknown)}; known: {', '.join(RESULTS)}")
    results = {name: (results or {}).get(name) or {} for name in RESULTS}
    if plan.get("placement") in ("instances", instances_guest.PLACEMENT):
        return instances.observed(plan, results)
    if plan.get("placement") == instances_k8s.PLACEMENT:
        return instances_k8s.observed(plan, results)
    return KINDS[platform.kind].observed(plan, results)
