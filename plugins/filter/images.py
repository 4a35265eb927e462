# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters naming what the lab builds: the base image, the wheelhouse, the guest root.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import mapping as _mapping
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import identities as _identities


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
    """platbench.lab images filters."""

    def filters(self):
        return {
            "base_image_tag": base_image_tag,
            "wheelhouse_name": wheelhouse_name,
            "guest_rootfs_id": guest_rootfs_id,
        }
