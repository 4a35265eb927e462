# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters for a duet pair (schedule: duet), run by roles/platform_run/tasks/duet.yml.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import duet_pair as _duet_pair


def duet_sides(plans):
    """Each plan of a duet pair as a side of platbench.lab.duet_run (plugin_utils/cells/duet_pair.py)."""
    try:
        return _duet_pair.sides(list(plans))
    except _duet_pair.DuetPlanError as exc:
        raise AnsibleFilterError(str(exc)) from None


def duet_results(sides, run, infos=None):
    """What each side's record reads from the pair's run (plugin_utils/cells/duet_pair.py)."""
    return _duet_pair.results(list(sides), dict(run or {}), list(infos or []))


class FilterModule:
    """platbench.lab duet filters."""

    def filters(self):
        return {"duet_sides": duet_sides, "duet_results": duet_results}
