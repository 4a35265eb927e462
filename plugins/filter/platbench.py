# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters that turn an experiment into cells and a cell into a placed, runnable workload.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.module_utils import platforms as _registry
from ansible_collections.platbench.lab.plugins.plugin_utils import gpus as _gpus
from ansible_collections.platbench.lab.plugins.plugin_utils import identities as _identities
from ansible_collections.platbench.lab.plugins.plugin_utils import k8s_job as _k8s_job
from ansible_collections.platbench.lab.plugins.plugin_utils import kubernetes_config as _kubernetes
from ansible_collections.platbench.lab.plugins.plugin_utils import placements as _placements
from ansible_collections.platbench.lab.plugins.plugin_utils import tool_checks as _tool_checks
from ansible_collections.platbench.lab.plugins.plugin_utils.cellplan import (
    CellPlanError,
    choose_cpus,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cellplan import (
    cell_plan as _cell_plan,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.cellplan import (
    dataset_dir as _dataset_dir,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.leftovers import (
    leftover_problems as _leftover_problems,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.matrix import (
    ExperimentError,
    expand,
    scenario_name,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.matrix import (
    emulated_subset as _emulated_subset,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_hosts as _instances_hosts
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_k8s as _instances_k8s
from ansible_collections.platbench.lab.plugins.plugin_utils.records import done_cells as _done_cells
from ansible_collections.platbench.lab.plugins.plugin_utils.runplan import (
    cells_to_run as _cells_to_run,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.runplan import (
    plan_problems as _plan_problems,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.sizing import SizingError
from ansible_collections.platbench.lab.plugins.plugin_utils.workload_args import (
    WorkloadArgsError,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.workload_args import (
    workload_argv as _workload_argv,
)


def expand_matrix(experiment):
    """The cells of an experiment (a loaded experiment, or the experiment lookup's result)."""
    if not isinstance(experiment, dict):
        raise AnsibleFilterError(f"expand_matrix: expected an experiment mapping, got {type(experiment).__name__}")
    # The experiment lookup adds its own expansion under 'cells'; recompute from the definition.
    definition = {key: value for key, value in experiment.items() if key != "cells"}
    try:
        return expand(validate_experiment(definition, source="expand_matrix input"))
    except ExperimentError as exc:
        raise AnsibleFilterError(str(exc)) from None


def emulated_subset(cells, emulated, platforms=None):
    """The cells to run when ``platforms`` (default: none) have emulated guests."""
    if not isinstance(cells, list):
        raise AnsibleFilterError(f"emulated_subset: expected a list of cells, got {type(cells).__name__}")
    return _emulated_subset(cells, emulated, platforms or ())


def _cpu_number(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"cpuset_for: {what} must list CPU numbers, got {value!r}") from None


def cpuset_for(topology_cpus, count, reserved=None):
    """``count`` CPUs of ``topology_cpus`` not in ``reserved``, highest-numbered first
    (the cell plan's choice, without NUMA nodes).

    CPU 0 takes most interrupts and housekeeping, so it is handed out last.
    Returned in ascending order, ready for ``join(',')``.
    """
    cpus = {_cpu_number(cpu, "topology_cpus") for cpu in topology_cpus}
    excluded = {_cpu_number(cpu, "reserved") for cpu in (reserved or [])}
    allowed = sorted(cpus - excluded, reverse=True)
    if isinstance(count, str) and count.isdigit():  # e.g. from -e on the command line
        count = int(count)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise AnsibleFilterError(f"cpuset_for: count must be a positive integer, got {count!r}")
    if count > len(allowed):
        raise AnsibleFilterError(
            f"cpuset_for: asked for {count} CPUs but only {len(allowed)} are available "
            f"({len(cpus)} on the host, {len(cpus & excluded)} reserved: {sorted(cpus & excluded)})"
        )
    return choose_cpus(allowed, count)[0]


def workload_argv(params, workload):
    """The ``python`` arguments that run ``workloads.<workload>`` with ``params``."""
    if not isinstance(params, dict):
        raise AnsibleFilterError(f"workload_argv: expected a mapping of parameters, got {type(params).__name__}")
    try:
        return _workload_argv(params, workload)
    except WorkloadArgsError as exc:
        raise AnsibleFilterError(str(exc)) from None


def done_cells(campaign_dir, host=None):
    """Ids of the cells that already have samples in ``campaign_dir`` (empty for a new campaign);
    with ``host``, only those that inventory host measured."""
    return sorted(_done_cells(os.path.join(str(campaign_dir), "samples.jsonl"), host))


def platforms(labels=None, source="platforms"):
    """The registry entries of ``labels`` (every platform for None or 'all'), in registry order."""
    if labels is None or labels == "all":
        return [_registry.as_dict(platform) for platform in _registry.PLATFORMS]
    try:
        wanted = _registry.check_labels(labels, source)
    except _registry.UnknownPlatform as exc:
        raise AnsibleFilterError(f"{exc}. Fix the list and run again.") from None
    return [_registry.as_dict(_registry.BY_LABEL[label]) for label in wanted]


def platform_roles(labels, kind=None, applied=(), source="platforms"):
    """The roles that build the platforms ``labels`` (of ``kind`` only, when given), in registry order, each
    once, less those ``applied`` already."""
    try:
        wanted = _registry.check_labels(labels, source)
    except _registry.UnknownPlatform as exc:
        raise AnsibleFilterError(f"{exc}. Fix the list and run again.") from None
    if kind is not None and kind not in _placements.KINDS:
        raise AnsibleFilterError(f"platform_roles: unknown kind {kind!r}; declared: {', '.join(_placements.KINDS)}")
    roles = [
        role
        for entry in _registry.PLATFORMS
        if entry.label in wanted and kind in (None, entry.kind) and entry.placement
        for role in entry.roles
    ]
    return [role for role in dict.fromkeys(roles) if role not in set(applied or ())]


def instance_groups(entries, groups):
    """Per platform of the cloud_instance kind (``entries``: ``platforms`` filter results), the inventory hosts
    of its instances, up (its ``group``) or failed (its ``failed_group``)."""
    groups = groups or {}
    return {
        entry["label"]: list(groups.get(entry["group"]) or []) + list(groups.get(entry["failed_group"]) or [])
        for entry in entries
        if entry.get("group")
    }


def cell_plan(cell, facts, options=None, **more):
    """Everything a placement task file needs to run ``cell`` on this host."""
    try:
        return _cell_plan(cell, facts, {**(options or {}), **more})
    except CellPlanError as exc:
        raise AnsibleFilterError(f"cell_plan: {exc}") from None


def dataset_dir(dataset, datasets_dir):
    """The directory on the host holding an experiment's generated ``dataset``."""
    if not isinstance(dataset, dict) or "generator" not in dataset:
        raise AnsibleFilterError(f"dataset_dir: expected an experiment's dataset with a generator, got {dataset!r}")
    return _dataset_dir(datasets_dir, dataset)


def _mapping(value, what, name):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{name}: {what} must be a mapping, got {type(value).__name__}")
    return value


def plan_problems(
    plan,
    status,
    facts,
    host,
    reserved_cpus=None,
    skip_unavailable=False,
    gpu_assignment=None,
    guest_image=None,
    gpus_per_cell=1,
    runners=None,
    cell_timeout_seconds=3600,
):
    """What stops ``plan`` on ``host`` before any cell runs, the platforms skipped, and which GPUs
    its gpu scenarios use."""
    return _plan_problems(
        _mapping(plan, "the plan", "plan_problems"),
        _mapping(status, "status", "plan_problems"),
        facts,
        host,
        reserved_cpus or (),
        bool(skip_unavailable),
        gpu_assignment,
        guest_image,
        gpus_per_cell,
        _runner_list(runners, "plan_problems"),
        cell_timeout_seconds,
    )


def _runner_list(runners, name):
    if runners is None:
        return None
    if not isinstance(runners, list) or not all(isinstance(entry, dict) and "name" in entry for entry in runners):
        raise AnsibleFilterError(
            f"{name}: runners must be platform_run_runners (a list of dicts with name), got {runners!r}"
        )
    return runners


def runner_hosts(names, hostvars, user=None, key=None):
    """The runner hosts ``names`` (group platbench_runners) as the cell plan takes them: name, address, SSH, facts."""
    if not isinstance(names, list):
        raise AnsibleFilterError(f"runner_hosts: expected the list of the group's hosts, got {names!r}")
    return _instances_hosts.runner_hosts(names, hostvars, user, key)


def runner_ssh_checks(plan, runners, host):
    """The ssh logins ``host`` checks before its first cell whose ranks spread over other runner hosts."""
    return _instances_hosts.ssh_checks(
        _mapping(plan, "the plan", "runner_ssh_checks").get("cells") or [],
        _runner_list(runners, "runner_ssh_checks"),
        host,
    )


def runner_ssh_problems(results, host):
    """A message per runner host the looped ssh check could not log in to."""
    return _instances_hosts.ssh_problems(results, host)


def _gpu_list(gpus, name):
    if not isinstance(gpus, list) or not all(isinstance(gpu, dict) and "pci_address" in gpu for gpu in gpus):
        raise AnsibleFilterError(
            f"{name}: gpus must be ansible_facts.platbench.gpus (a list of dicts with pci_address), got {gpus!r}"
        )
    return gpus


def gpus_assigned_to(assignment, role, gpus, host=None):
    """The sorted PCI addresses of the host's GPUs assigned to ``role`` (``host`` or ``guests``)."""
    try:
        return _gpus.gpus_assigned_to(assignment or {}, role, _gpu_list(gpus, "gpus_assigned_to"), host or "this host")
    except _gpus.GpuAssignmentError as exc:
        raise AnsibleFilterError(f"gpus_assigned_to: {exc}") from None


def gpu_assignment_problems(assignment, gpus, host=None, source=_gpus.SETTING):
    """Every reason a GPU assignment (or a list of addresses for guests) cannot be used on the host."""
    return _gpus.assignment_problems(
        assignment, _gpu_list(gpus, "gpu_assignment_problems"), host or "this host", source
    )


def vfio_functions(addresses, gpus):
    """The PCI functions to bind to vfio-pci to pass ``addresses`` through (each GPU and its slot's other functions)."""
    if not isinstance(addresses, list):
        raise AnsibleFilterError(f"vfio_functions: expected a list of PCI addresses, got {addresses!r}")
    return _gpus.vfio_functions(addresses, _gpu_list(gpus, "vfio_functions"))


def pci_address(address):
    """'0000:3b:00.0' -> {'domain': '0x0000', 'bus': '0x3b', 'slot': '0x00', 'function': '0x0'}."""
    try:
        return _gpus.pci_address_parts(address)
    except _gpus.GpuAssignmentError as exc:
        raise AnsibleFilterError(f"pci_address: {exc}") from None


def leftover_problems(paths, fence, processes, host, fence_state_file=None, cgroups=None):
    """What an earlier run left on ``host`` (network paths, a fence, workload processes, CPU quota cgroups): [] or one
    message."""
    if not isinstance(paths, dict) or not isinstance(fence, dict):
        raise AnsibleFilterError("leftover_problems: expected the results of network_path and cpu_fence (mappings)")
    return _leftover_problems(paths, fence, list(processes or []), str(host), fence_state_file, list(cgroups or []))


def cells_to_run(plan, status, host, results_dir=None, runners=None, facts=None, reserved_cpus=None):
    """The cells ``host`` runs (ready platforms, emulated subset, not yet measured by ``host``, its own when spread
    over several runner hosts), each sized for ``host`` from its ``facts`` (scale-up resolved, chr, numa_nodes)."""
    done = _done_cells(os.path.join(str(results_dir), "samples.jsonl"), host) if results_dir else ()
    try:
        return _cells_to_run(
            _mapping(plan, "the plan", "cells_to_run"),
            _mapping(status, "status", "cells_to_run"),
            host,
            done,
            _runner_list(runners, "cells_to_run"),
            facts or {},
            reserved_cpus or (),
        )
    except SizingError as exc:
        raise AnsibleFilterError(f"cells_to_run: {exc}") from None


def k8s_job_outcome(jobs, pods=None):
    """What became of a k8s cell's Job (finished, succeeded, reason, rc, pod, node, qos_class)."""
    for value, name in ((jobs, "the Job's resources"), (pods, "its pods' resources")):
        if value is not None and not isinstance(value, list):
            raise AnsibleFilterError(f"k8s_job_outcome: {name} must be the list k8s_info returns, got {value!r}")
    try:
        return _k8s_job.job_outcome(jobs, pods)
    except _k8s_job.K8sJobError as exc:
        raise AnsibleFilterError(f"k8s_job_outcome: {exc}") from None


def k8s_pods_started(pods):
    """Whether a k8s shared cell's background pod runs (or ended, so that waiting for it is pointless)."""
    if not isinstance(pods, list):
        raise AnsibleFilterError(f"k8s_pods_started: expected the list of pods k8s_info returns, got {pods!r}")
    return _instances_k8s.background_started(pods)


def _kubernetes_call(name, function, *args):
    try:
        return function(*args)
    except (_kubernetes.KubernetesConfigError, KeyError, TypeError) as exc:
        what = "missing setting %s" % exc if isinstance(exc, KeyError) else str(exc)
        raise AnsibleFilterError("%s: %s" % (name, what)) from None


def kubernetes_problems(settings, facts):
    """Messages for role inputs that would break the cluster on this node (empty when none)."""
    return _kubernetes_call(
        "kubernetes_problems",
        _kubernetes.problems,
        _mapping(settings, "settings", "kubernetes_problems"),
        _mapping(facts, "facts", "kubernetes_problems"),
    )


def kubeadm_init_config(settings):
    """The documents of kubeadm init's --config file."""
    return _kubernetes_call(
        "kubeadm_init_config",
        _kubernetes.kubeadm_init_documents,
        _mapping(settings, "settings", "kubeadm_init_config"),
    )


def kubeadm_join_config(join_command, node_name):
    """A worker's JoinConfiguration from the control plane's join command."""
    return _kubernetes_call("kubeadm_join_config", _kubernetes.kubeadm_join_document, join_command, node_name)


def flannel_manifests(settings):
    """flannel's objects (VXLAN backend)."""
    return _kubernetes_call(
        "flannel_manifests", _kubernetes.flannel_manifests, _mapping(settings, "settings", "flannel_manifests")
    )


def nvidia_device_plugin_manifests(settings):
    """The nvidia RuntimeClass and the NVIDIA device plugin DaemonSet."""
    return _kubernetes_call(
        "nvidia_device_plugin_manifests",
        _kubernetes.nvidia_manifests,
        _mapping(settings, "settings", "nvidia_device_plugin_manifests"),
    )


def tool_checks(plan, status, image):
    """Where this runner looks for the workloads' tools: ``{where, argv, fix}`` per place."""
    return _tool_checks.checks(_mapping(plan, "the plan", "tool_checks"), status or {}, image)


def tool_problems(results, tools, host):
    """A message per place the tool check found a tool missing (the looped command's results)."""
    return _tool_checks.problems(results, tools or [], host)


def base_image_tag(packages, suite):
    """The workload image's base image tag, ``<suite>-<8 hex of the sorted packages>``."""
    return _identities.base_image_tag(suite, packages)


def wheelhouse_name(requirements, python_version, architecture="x86_64"):
    """The wheelhouse directory name of a requirement list, Python version and architecture."""
    return _identities.wheelhouse_name(requirements, python_version, architecture)


def guest_rootfs_id(inputs, nvidia=None, apptainer_deb=None):
    """The guest root file system's id from its inputs (GPU and Apptainer inputs only where they apply)."""
    try:
        return _identities.guest_rootfs_id(_mapping(inputs, "the inputs", "guest_rootfs_id"), nvidia, apptainer_deb)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError(f"guest_rootfs_id: {exc}") from None


class FilterModule:
    """platbench.lab filters."""

    def filters(self):
        return {
            "expand_matrix": expand_matrix,
            "scenario_name": scenario_name,
            "cpuset_for": cpuset_for,
            "workload_argv": workload_argv,
            "done_cells": done_cells,
            "emulated_subset": emulated_subset,
            "platforms": platforms,
            "cell_plan": cell_plan,
            "instance_groups": instance_groups,
            "tool_checks": tool_checks,
            "base_image_tag": base_image_tag,
            "wheelhouse_name": wheelhouse_name,
            "guest_rootfs_id": guest_rootfs_id,
            "tool_problems": tool_problems,
            "platform_roles": platform_roles,
            "dataset_dir": dataset_dir,
            "plan_problems": plan_problems,
            "cells_to_run": cells_to_run,
            "leftover_problems": leftover_problems,
            "runner_hosts": runner_hosts,
            "runner_ssh_checks": runner_ssh_checks,
            "runner_ssh_problems": runner_ssh_problems,
            "gpus_assigned_to": gpus_assigned_to,
            "gpu_assignment_problems": gpu_assignment_problems,
            "vfio_functions": vfio_functions,
            "pci_address": pci_address,
            "k8s_job_outcome": k8s_job_outcome,
            "k8s_pods_started": k8s_pods_started,
            "kubernetes_problems": kubernetes_problems,
            "kubeadm_init_config": kubeadm_init_config,
            "kubeadm_join_config": kubeadm_join_config,
            "flannel_manifests": flannel_manifests,
            "nvidia_device_plugin_manifests": nvidia_device_plugin_manifests,
        }
