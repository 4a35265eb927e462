# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters for what the lab builds per CPU architecture (x86_64, aarch64).

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import architectures as _architectures


def debian_arch(architecture):
    """Debian's name of an Ansible architecture fact (x86_64 -> amd64, aarch64 -> arm64)."""
    try:
        return _architectures.debian_arch(architecture)
    except _architectures.ArchitectureError as exc:
        raise AnsibleFilterError(str(exc)) from None


def wheel_platforms(architecture):
    """pip's platform tags for the wheels of an Ansible architecture fact."""
    try:
        return _architectures.wheel_platforms(architecture)
    except _architectures.ArchitectureError as exc:
        raise AnsibleFilterError(str(exc)) from None


def wheelhouse_download_problem(pip_output, architecture, platforms):
    """What a failed wheelhouse download lacked and how to supply it."""
    return _architectures.wheelhouse_download_problem(pip_output, architecture, platforms)


class FilterModule:
    """platbench.lab architecture filters."""

    def filters(self):
        return {
            "debian_arch": debian_arch,
            "wheel_platforms": wheel_platforms,
            "wheelhouse_download_problem": wheelhouse_download_problem,
        }
