# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""platbench.lab filters of the openstack_deploy role (the logic lives in plugin_utils/openstack/kolla.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import kolla as _kolla


def _settings(settings, name):
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"{name}: expected the role's settings (a dict), got {type(settings).__name__}")
    return settings


def _call(name, function, *args):
    try:
        return function(*args)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError(f"{name}: {exc}") from None
    except KeyError as exc:
        raise AnsibleFilterError(f"{name}: missing setting {exc}") from None


def kolla_host_settings(hostvars, hosts):
    """Each host's GPUs, CPU sets, connection variables and extra kolla inventory variables."""
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError(f"kolla_host_settings: hosts must be a list of inventory hosts, got {hosts!r}")
    return _call("kolla_host_settings", _kolla.host_settings, hostvars, list(hosts))


def kolla_problems(settings, hosts_data):
    """Messages for settings that would give a broken cloud (empty when none)."""
    return _call("kolla_problems", _kolla.problems, _settings(settings, "kolla_problems"), hosts_data)


def kolla_globals(settings):
    """globals.yml as a dict: the role's settings, then openstack_deploy_globals on top."""
    return _call("kolla_globals", _kolla.globals_yml, _settings(settings, "kolla_globals"))


def kolla_config_overrides(settings, hosts_data):
    """The INI override files, as {path under <config_dir>/config: text}."""
    return _call(
        "kolla_config_overrides", _kolla.config_overrides, _settings(settings, "kolla_config_overrides"), hosts_data
    )


def kolla_multinode_inventory(release_inventory, groups, hosts_data):
    """The pinned release's multinode inventory with the inventory's hosts in kolla's host groups."""
    if not isinstance(release_inventory, str):
        raise AnsibleFilterError("kolla_multinode_inventory: expected the text of the release's multinode inventory")
    return _call("kolla_multinode_inventory", _kolla.multinode_inventory, release_inventory, groups, hosts_data)


class FilterModule:
    """platbench.lab filters for kolla-ansible."""

    def filters(self):
        return {
            "kolla_host_settings": kolla_host_settings,
            "kolla_problems": kolla_problems,
            "kolla_globals": kolla_globals,
            "kolla_config_overrides": kolla_config_overrides,
            "kolla_multinode_inventory": kolla_multinode_inventory,
        }
