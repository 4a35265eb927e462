# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the k8s platform: the cluster's configuration and manifests, a Job's outcome.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import mapping as _mapping
from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes import job_spec as _k8s_job
from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes import kubernetes_config as _kubernetes
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_k8s as _instances_k8s


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


class FilterModule:
    """platbench.lab kubernetes filters."""

    def filters(self):
        return {
            "k8s_job_outcome": k8s_job_outcome,
            "k8s_pods_started": k8s_pods_started,
            "kubernetes_problems": kubernetes_problems,
            "kubeadm_init_config": kubeadm_init_config,
            "kubeadm_join_config": kubeadm_join_config,
            "flannel_manifests": flannel_manifests,
            "nvidia_device_plugin_manifests": nvidia_device_plugin_manifests,
        }
