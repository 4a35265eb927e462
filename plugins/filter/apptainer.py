# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the apptainer role: the SIF's name and build command line, and the version check.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.module_utils import apptainer as _apptainer
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import apptainer_plan as _plan


def apptainer_sif_path(image_id, sif_dir=_apptainer.SIF_DIR):
    """'sha256:0123456789ab...' -> '/var/lib/platbench/sif/workload-0123456789ab.sif'."""
    try:
        return _apptainer.sif_path(image_id, sif_dir)
    except ValueError as exc:
        raise AnsibleFilterError(f"apptainer_sif_path: {exc}") from None


def apptainer_sif_build_argv(image_ref, sif_path):
    """The `apptainer build` argv writing ``<sif_path>.part`` from the host Docker engine's ``image_ref``."""
    try:
        return _plan.build_argv(image_ref, sif_path)
    except ValueError as exc:
        raise AnsibleFilterError(f"apptainer_sif_build_argv: {exc}") from None


def apptainer_version(text):
    """The version in `apptainer --version`'s output ('apptainer version 1.4.5' -> '1.4.5'), or None."""
    return _apptainer.parse_version(text)


def apptainer_version_problem(installed, minimum=_apptainer.MINIMUM_VERSION, setting="apptainer_minimum_version"):
    """'' when ``installed`` is at least ``minimum``, else what is wrong and what to do."""
    if _apptainer.parse_version(minimum) is None:
        raise AnsibleFilterError(f"apptainer_version_problem: {setting} must be a version like 1.1.0, got {minimum!r}")
    version = _apptainer.parse_version(installed)
    if version is None:
        return (
            f"no Apptainer version could be read (got {installed!r}): install it with platbench.lab.apptainer, "
            "or check that `apptainer --version` answers"
        )
    if _apptainer.too_old(version, minimum):
        return (
            f"Apptainer {version} is installed, older than {minimum} ({setting}), the first with the --cpus resource "
            "limit the sg and vmsg platforms use: remove it (apt remove apptainer / dnf remove apptainer) or set "
            "apptainer_version to a newer release, and run the role again"
        )
    return ""


class FilterModule:
    """platbench.lab Apptainer filters."""

    def filters(self):
        return {
            "apptainer_sif_path": apptainer_sif_path,
            "apptainer_sif_build_argv": apptainer_sif_build_argv,
            "apptainer_version": apptainer_version,
            "apptainer_version_problem": apptainer_version_problem,
        }
