# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over a host's GPUs: which stay with the host, which go to guests through vfio-pci.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as _gpus


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


class FilterModule:
    """platbench.lab gpus filters."""

    def filters(self):
        return {
            "gpus_assigned_to": gpus_assigned_to,
            "gpu_assignment_problems": gpu_assignment_problems,
            "vfio_functions": vfio_functions,
            "pci_address": pci_address,
        }
