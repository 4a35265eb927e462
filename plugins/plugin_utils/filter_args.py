# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the filter plugins check of their arguments before they hand them on, in one place for every filter file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def mapping(value, what, name):
    """``value`` when it is a mapping; else AnsibleFilterError naming the filter ``name`` and ``what`` it is."""
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{name}: {what} must be a mapping, got {type(value).__name__}")
    return value


def runner_list(runners, name):
    """``runners`` (platform_run_runners: a list of dicts with ``name``) or None; else AnsibleFilterError."""
    if runners is None:
        return None
    if not isinstance(runners, list) or not all(isinstance(entry, dict) and "name" in entry for entry in runners):
        raise AnsibleFilterError(
            f"{name}: runners must be platform_run_runners (a list of dicts with name), got {runners!r}"
        )
    return runners
