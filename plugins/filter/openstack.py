# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the openstack_instances role: the campaign's plan on the cloud, and what the cloud answered.

Each filter is documented in the YAML file of its own name next to this one; the logic is in
plugin_utils/openstack/openstack_plan.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan as _plan


def openstack_instances_plan(cells, options):
    """What the campaign creates for its ironic, nova and magnum cells."""
    if not isinstance(cells, list):
        raise AnsibleFilterError(f"openstack_instances_plan: expected the list of cells, got {type(cells).__name__}")
    try:
        return _plan.instances_plan(cells, options)
    except _plan.OpenStackPlanError as exc:
        raise AnsibleFilterError(str(exc)) from None


def openstack_instances_describe(plan):
    """The dry run's lines: one resource a line."""
    return _plan.describe(plan)


def openstack_owned(resources, campaign):
    """Of the resources listed per type, those the campaign created."""
    try:
        return _plan.owned(resources, campaign)
    except _plan.OpenStackPlanError as exc:
        raise AnsibleFilterError(f"openstack_owned: {exc}") from None


def openstack_server_outcomes(boot_results, found_results, pci_alias):
    """Per server: active, failed (nova's fault message) or bad_input (what to change)."""
    return _plan.server_outcomes(boot_results, found_results, pci_alias)


def openstack_instances_inventory(plan, server_outcomes, cluster_results, ssh_user):
    """The hosts to add: name, groups, vars."""
    return _plan.inventory(plan, server_outcomes, cluster_results, ssh_user)


def openstack_auth_problem(result, cloud):
    """'' when the cloud answered, else what is wrong with openstack_instances_cloud."""
    return _plan.auth_problem(result, cloud) or ""


def openstack_unsatisfiable(flavors, providers):
    """The flavors no compute host can hold, one problem each."""
    return _plan.unsatisfiable(flavors, providers)


class FilterModule:
    """platbench.lab filters of OpenStack provisioning."""

    def filters(self):
        return {
            "openstack_instances_plan": openstack_instances_plan,
            "openstack_instances_describe": openstack_instances_describe,
            "openstack_owned": openstack_owned,
            "openstack_server_outcomes": openstack_server_outcomes,
            "openstack_instances_inventory": openstack_instances_inventory,
            "openstack_auth_problem": openstack_auth_problem,
            "openstack_unsatisfiable": openstack_unsatisfiable,
        }
