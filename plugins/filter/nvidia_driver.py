# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""platbench.lab filters of the NVIDIA driver role (the logic lives in plugin_utils/lab/nvidia_driver.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import nvidia_driver as _nvidia


def nvidia_driver_plan(facts, branch, repo="nvidia", open_modules=False, cuda_repo_base_url=""):
    """The driver's packages, repository and pin for a host with these Ansible facts, and the settings' problems."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError(f"nvidia_driver_plan: expected the host's ansible_facts (a dict), got {facts!r}")
    return _nvidia.driver_plan(facts, branch, repo, open_modules, cuda_repo_base_url)


def nvidia_apt_pin(sources, branch):
    """apt preferences keeping the binary packages of the source packages ``sources`` at ``branch``.*."""
    if isinstance(sources, str):
        sources = [sources]
    return _nvidia.apt_branch_pin(sources, branch)


def nvidia_persistence_off(query_csv):
    """Bus ids of the GPUs whose persistence mode is off, from nvidia-smi's CSV query."""
    return _nvidia.persistence_off(query_csv)


class FilterModule:
    """platbench.lab filters for the NVIDIA driver."""

    def filters(self):
        return {
            "nvidia_driver_plan": nvidia_driver_plan,
            "nvidia_apt_pin": nvidia_apt_pin,
            "nvidia_persistence_off": nvidia_persistence_off,
        }
