# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over the runner hosts of a campaign: which hosts run cells, and how they reach each other.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import mapping as _mapping
from ansible_collections.platbench.lab.plugins.plugin_utils.filter_args import runner_list as _runner_list
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_hosts as _instances_hosts


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


class FilterModule:
    """platbench.lab runners filters."""

    def filters(self):
        return {
            "runner_hosts": runner_hosts,
            "runner_ssh_checks": runner_ssh_checks,
            "runner_ssh_problems": runner_ssh_problems,
        }
