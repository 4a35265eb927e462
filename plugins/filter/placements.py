# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over the declared placement kinds (plugins/plugin_utils/placements/), read by roles/platform_run.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.module_utils import platforms as _platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements as _placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import teardown as _teardown


def placement_results(kinds="all", holding=None):
    """The variables the task files of ``kinds`` (every declared kind for 'all') and of the instance placements
    register for record_cell, each once, in the table's order. With ``holding`` (a host's variables,
    ``hostvars[inventory_hostname]``), only those that hold a result there: what a cell has to forget before the
    next, often one variable of fourteen (each forgotten one costs a loop item, some 20 ms a cell)."""
    if kinds == "all":
        variables = _placements.RESULTS.values()
    else:
        if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)):
            raise AnsibleFilterError(f"placement_results: expected 'all' or a list of kinds, got {kinds!r}")
        unknown = [kind for kind in kinds if kind not in _placements.KINDS]
        if unknown:
            raise AnsibleFilterError(
                f"placement_results: unknown kind(s) {', '.join(unknown)}; declared: {', '.join(_placements.KINDS)}"
            )
        variables = (variable for kind in kinds for variable in _placements.KINDS[kind].results.values())
    found = list(dict.fromkeys(variables))
    return found if holding is None else [variable for variable in found if variable in holding and holding[variable]]


def kind_teardown(groups, playbook):
    """The kinds' own teardown files for a host of the inventory ``groups`` (its group_names) that the teardown
    ``playbook`` imports in no play of its own (plugin_utils/cells/teardown.py, own_files)."""
    if isinstance(groups, str) or not isinstance(groups, (list, tuple)):
        raise AnsibleFilterError(f"kind_teardown: expected a list of inventory groups (group_names), got {groups!r}")
    return _teardown.own_files(groups, playbook)


def workload_process_pattern(prefix):
    """The ``pgrep``/``pkill --full`` pattern of a workload run by the environment under ``prefix``: the one the
    precheck's leftovers module and a guest's stop use (module_utils/platforms.py), for teardown's variables."""
    if not isinstance(prefix, str) or not prefix.startswith("/"):
        raise AnsibleFilterError(f"workload_process_pattern: expected the environment's absolute path, got {prefix!r}")
    return _platforms.workload_process_pattern(prefix)


class FilterModule:
    """platbench.lab placement filters."""

    def filters(self):
        return {
            "placement_results": placement_results,
            "kind_teardown": kind_teardown,
            "workload_process_pattern": workload_process_pattern,
        }
