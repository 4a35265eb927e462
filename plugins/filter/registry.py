# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over the platform registry (plugins/module_utils/platforms.py) that the engine roles read.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.module_utils import platforms as _registry
from ansible_collections.platbench.lab.plugins.plugin_utils import placements as _placements


def platforms(labels=None, source="platforms"):
    """The registry entries of ``labels`` (every platform for None or 'all'), in registry order."""
    if labels is None or labels == "all":
        return [_registry.as_dict(platform) for platform in _registry.PLATFORMS]
    try:
        wanted = _registry.check_labels(labels, source)
    except _registry.UnknownPlatform as exc:
        raise AnsibleFilterError(f"{exc}. Fix the list and run again.") from None
    return [_registry.as_dict(_registry.BY_LABEL[label]) for label in wanted]


def platform_roles(labels, kind=None, applied=(), source="platforms", host_group=None):
    """The roles that build the platforms ``labels`` (of ``kind`` only, and built on ``host_group`` only, when
    given), in registry order, each once, less those ``applied`` already and those a kind applies to each cell
    (its declaration's ``cell_roles``: platbench.lab.vm boots a cell's guest, it builds nothing)."""
    try:
        wanted = _registry.check_labels(labels, source)
    except _registry.UnknownPlatform as exc:
        raise AnsibleFilterError(f"{exc}. Fix the list and run again.") from None
    if kind is not None and kind not in _placements.KINDS:
        raise AnsibleFilterError(f"platform_roles: unknown kind {kind!r}; declared: {', '.join(_placements.KINDS)}")
    known_groups = {entry.host_group for entry in _registry.PLATFORMS} - {None}
    if host_group is not None and host_group not in known_groups:
        raise AnsibleFilterError(
            f"platform_roles: no platform is built on host group {host_group!r}; the registry's: "
            + ", ".join(sorted(known_groups))
        )
    roles = [
        role
        for entry in _registry.PLATFORMS
        if entry.label in wanted
        and kind in (None, entry.kind)
        and host_group in (None, entry.host_group)
        and entry.placement
        for role in entry.roles
    ]
    left_out = set(applied or ()) | set(_placements.CELL_ROLES)
    return [role for role in dict.fromkeys(roles) if role not in left_out]


def instance_groups(entries, groups):
    """Per platform of the cloud_instance kind (``entries``: ``platforms`` filter results), the inventory hosts
    of its instances, up (its ``group``) or failed (its ``failed_group``)."""
    groups = groups or {}
    return {
        entry["label"]: list(groups.get(entry["group"]) or []) + list(groups.get(entry["failed_group"]) or [])
        for entry in entries
        if entry.get("group")
    }


def platform_runtimes(labels, engine="docker", source="platforms"):
    """The OCI runtimes the platforms ``labels`` of ``engine`` ask for (the registry's ``runtime``), each once."""
    try:
        wanted = _registry.check_labels(labels, source)
    except _registry.UnknownPlatform as exc:
        raise AnsibleFilterError(f"{exc}. Fix the list and run again.") from None
    found = [_registry.BY_LABEL[label] for label in wanted]
    return list(dict.fromkeys(p.runtime for p in found if p.engine == engine and p.runtime and p.placement))


class FilterModule:
    """platbench.lab registry filters."""

    def filters(self):
        return {
            "platforms": platforms,
            "platform_roles": platform_roles,
            "instance_groups": instance_groups,
            "platform_runtimes": platform_runtimes,
        }
