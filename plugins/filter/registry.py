# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Filters over the platform registry (plugins/module_utils/platforms.py) that the engine roles read.

Each filter is documented in the YAML file of its own name next to this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.module_utils import platforms as _registry


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
        return {"platform_runtimes": platform_runtimes}
