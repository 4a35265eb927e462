# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the openstack_deploy role writes for kolla-ansible, computed as data.

The role only writes what these functions return: ``globals.yml`` (our settings, then the
inventory's ``openstack_deploy_globals`` on top), the INI overrides kolla-ansible merges into the
services' own files (``<config_dir>/config/...``), and the multinode inventory (the pinned release's
own service groups, with our hosts in its top-level groups). ``problems`` lists every input that
would give a broken cloud, each naming the setting and the fix.
"""

from __future__ import annotations

import ipaddress
import json
import re

# The scheduler filters nova enables when [filter_scheduler] enabled_filters is not set; an
# override replaces the whole list, so ours starts from these.
NOVA_DEFAULT_FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
)
PCI_FILTER = "PciPassthroughFilter"
NUMA_FILTER = "NUMATopologyFilter"
MAGNUM_NETWORK_DRIVERS = ("flannel", "calico")
PCI_DEVICE_TYPES = ("type-PCI", "type-PF", "type-VF")
PCI_NUMA_POLICIES = ("legacy", "preferred", "required", "socket")
# kolla-ansible's host groups that name hosts; every other group of its inventory is made of these.
KOLLA_HOST_GROUPS = ("control", "network", "compute", "monitoring", "storage", "deployment")
# The host variables a generated inventory line may carry (how kolla-ansible reaches the host).
CONNECTION_VARS = ("ansible_host", "ansible_port", "ansible_user", "ansible_become")
HEADER = "# Written by platbench.lab.openstack_deploy from the inventory; edits here are overwritten.\n"
_HEX_ID = re.compile(r"[0-9a-f]{4}")
# kolla-ansible renders override files as Jinja templates before merging them.
_JINJA_MARKS = ("{{", "{%", "{#")


def openstack_series(kolla_version):
    """The OpenStack release series a kolla-ansible version deploys: 22.x -> '2026.1', 23.x -> '2026.2'.

    kolla-ansible's major version advances by one per six-monthly series, 16 being 2023.1.
    """
    match = re.fullmatch(r"(\d+)\.\d+\.\d+", str(kolla_version))
    if not match or int(match.group(1)) < 16:
        raise ValueError(
            f"openstack_deploy_kolla_version: {kolla_version!r} is not a kolla-ansible release this role knows; "
            "pin an exact version from 16.0.0 (OpenStack 2023.1) on, such as '22.2.0'"
        )
    index = int(match.group(1)) - 16
    return f"{2023 + index // 2}.{1 + index % 2}"


def parse_cpu_spec(text, variable):
    """CPU numbers of a nova CPU spec such as ``4-31,^8``; ValueError naming ``variable``."""
    include, exclude = set(), set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        match = re.fullmatch(r"(\^?)(\d+)(?:-(\d+))?", part)
        if not match or (match.group(3) and int(match.group(3)) < int(match.group(2))):
            raise ValueError(
                f"{variable}: {text!r} is not a CPU list; write CPU numbers, ranges and exclusions such as '4-31,^8'"
            )
        first = int(match.group(2))
        (exclude if match.group(1) else include).update(range(first, int(match.group(3) or first) + 1))
    return sorted(include - exclude)


def _dig(mapping, key, default=None):
    value = mapping.get(key, default) if isinstance(mapping, dict) else default
    return default if value is None else value


def _truthy(value):
    """A kolla-ansible boolean as its ``| bool`` reads it."""
    return str(value).strip().lower() in ("true", "yes", "on", "1")


def _pci_id(value):
    """A PCI vendor or product id as nova matches it: four lower-case hex digits, no 0x."""
    text = str(value or "").strip().lower()
    text = text[2:] if text.startswith("0x") else text
    return text if _HEX_ID.fullmatch(text) else None


def merged(base, overrides):
    """``overrides`` on top of ``base``, mapping by mapping; lists and scalars replace."""
    result = dict(base)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def globals_yml(settings):
    """globals.yml: our settings as kolla-ansible variables, then ``settings['globals']`` on top."""
    base = {
        "openstack_release": openstack_series(settings["kolla_version"]),
        "kolla_base_distro": settings["base_distro"],
        "kolla_internal_vip_address": settings["internal_vip"],
        "network_interface": settings["network_interface"],
        "neutron_external_interface": settings["neutron_external_interface"],
        "enable_haproxy": bool(settings["enable_haproxy"]),
        "nova_compute_virt_type": settings["virt_type"],
        "node_custom_config": settings["config_dir"].rstrip("/") + "/config",
        "enable_ironic": bool(settings["enable_ironic"]),
        "enable_magnum": bool(settings["enable_magnum"]),
    }
    if settings.get("external_vip"):
        base["kolla_external_vip_address"] = settings["external_vip"]
    if settings["enable_magnum"]:
        # Magnum builds its clusters as Heat stacks.
        base["enable_heat"] = True
    if settings["enable_ironic"]:
        ironic = settings["ironic"]
        base["ironic_dnsmasq_interface"] = ironic["dnsmasq_interface"] or settings["network_interface"]
        base["ironic_dnsmasq_dhcp_ranges"] = [dict(item) for item in ironic["dhcp_ranges"]]
        base["ironic_cleaning_network"] = ironic["cleaning_network"] or ironic["provisioning_network"]
    return merged(base, settings.get("globals") or {})


def host_settings(hostvars, hosts):
    """What the role reads of each host: its GPUs, CPU sets, connection and extra kolla inventory variables."""
    found = {}
    for host in hosts:
        if host not in hostvars:
            raise ValueError(
                f"{host} is in a kolla-ansible host group (openstack_deploy_kolla_groups) but not in the inventory; "
                "add it to the inventory or correct openstack_deploy_kolla_groups"
            )
        facts = hostvars[host]
        found[host] = {
            "gpus": list(facts.get("openstack_deploy_gpus") or []),
            "cpu_dedicated_set": str(facts.get("openstack_deploy_cpu_dedicated_set") or ""),
            "cpu_shared_set": str(facts.get("openstack_deploy_cpu_shared_set") or ""),
            "connection": {name: facts[name] for name in CONNECTION_VARS if name in facts},
            "kolla_vars": dict(facts.get("openstack_deploy_kolla_host_vars") or {}),
        }
    return found


def _gpu_problems(host, gpus):
    problems = []
    if not isinstance(gpus, list):
        return [f"openstack_deploy_gpus of {host} must be a list of {{vendor_id, product_id}} mappings, got {gpus!r}"]
    for index, gpu in enumerate(gpus):
        missing = [key for key in ("vendor_id", "product_id") if not _pci_id(_dig(gpu, key))]
        if missing:
            problems.append(
                f"openstack_deploy_gpus[{index}] of {host} ({gpu!r}) has no valid {' or '.join(missing)}: give the "
                "GPU's PCI ids as four hex digits (lspci -nn shows them as [vendor:product], e.g. 10de:2330)"
            )
    return problems


def _cpu_problems(host, data):
    problems, sets = [], {}
    for name in ("cpu_dedicated_set", "cpu_shared_set"):
        try:
            sets[name] = set(parse_cpu_spec(data[name], f"openstack_deploy_{name} of {host}"))
        except ValueError as exc:
            problems.append(str(exc))
    common = sets.get("cpu_dedicated_set", set()) & sets.get("cpu_shared_set", set())
    if common:
        problems.append(
            f"openstack_deploy_cpu_dedicated_set and openstack_deploy_cpu_shared_set of {host} overlap on CPUs "
            f"{','.join(map(str, sorted(common)))}: nova refuses to start; give each CPU to one set only"
        )
    return problems


def _device_ids(hosts_data):
    """(vendor, product) -> the compute hosts that have such a GPU."""
    ids = {}
    for host, data in hosts_data.items():
        for gpu in data["gpus"] if isinstance(data["gpus"], list) else []:
            key = (_pci_id(_dig(gpu, "vendor_id")), _pci_id(_dig(gpu, "product_id")))
            if all(key):
                ids.setdefault(key, []).append(host)
    return ids


def _alias_problems(aliases, computes):
    problems, names = [], set()
    ids = _device_ids(computes)
    for index, alias in enumerate(aliases):
        name = _dig(alias, "name")
        where = f"openstack_deploy_pci_aliases[{index}]" + (f" ({name})" if name else "")
        if not name:
            problems.append(f"{where} has no name: give each alias the name flavors request it by")
        elif name in names:
            problems.append(f"{where}: the alias name {name!r} is given twice; nova needs one definition per name")
        names.add(name)
        key = (_pci_id(_dig(alias, "vendor_id")), _pci_id(_dig(alias, "product_id")))
        if not all(key):
            problems.append(f"{where} needs vendor_id and product_id as four hex digits, e.g. 10de and 2330")
        elif key not in ids:
            have = ", ".join(f"{v}:{p}" for v, p in sorted(ids)) or "none"
            problems.append(
                f"{where} asks for {key[0]}:{key[1]}, which no compute host has in openstack_deploy_gpus "
                f"(the compute hosts have: {have}); correct the ids or the hosts' openstack_deploy_gpus"
            )
        if _dig(alias, "device_type", "type-PCI") not in PCI_DEVICE_TYPES:
            problems.append(f"{where}: device_type must be one of {', '.join(PCI_DEVICE_TYPES)}")
        if _dig(alias, "numa_policy", "legacy") not in PCI_NUMA_POLICIES:
            problems.append(f"{where}: numa_policy must be one of {', '.join(PCI_NUMA_POLICIES)}")
    return problems


def _dhcp_range_problems(ranges):
    problems = []
    if not ranges:
        return [
            "openstack_deploy_ironic_dhcp_ranges is empty but Ironic is enabled: give at least one range of the "
            "provisioning network, e.g. [{range: '198.18.8.100,198.18.8.200'}], or set openstack_deploy_enable_ironic "
            "to false"
        ]
    for index, item in enumerate(ranges):
        parts = str(_dig(item, "range", "")).split(",")
        try:
            first, last = (ipaddress.ip_address(part.strip()) for part in parts[:2])
            ok = len(parts) in (2, 3) and first <= last
        except ValueError:
            ok = False
        if not ok:
            problems.append(
                f"openstack_deploy_ironic_dhcp_ranges[{index}]: range {_dig(item, 'range')!r} must be "
                "'FIRST,LAST' (or 'FIRST,LAST,NETMASK' for a relay) with FIRST <= LAST"
            )
    return problems


def problems(settings, hosts_data):
    """Every setting that would give a broken cloud, each naming the setting and what to do."""
    found = []
    computes = {host: hosts_data[host] for host in settings["compute_hosts"] if host in hosts_data}
    try:
        openstack_series(settings["kolla_version"])
    except ValueError as exc:
        found.append(str(exc))
    if not settings["control_hosts"]:
        found.append(f"the inventory group {settings['control_group']} (openstack_deploy_control_group) has no host")
    if not settings["compute_hosts"]:
        found.append(f"the inventory group {settings['compute_group']} (openstack_deploy_compute_group) has no host")
    try:
        vip = ipaddress.ip_address(str(settings["internal_vip"]))
    except ValueError:
        found.append(
            f"openstack_deploy_internal_vip is {settings['internal_vip']!r}: give the address the APIs are reached "
            "at (an unused address of the controllers' network when enable_haproxy is on)"
        )
    else:
        owners = [host for host, data in hosts_data.items() if str(data["connection"].get("ansible_host")) == str(vip)]
        if owners and settings["enable_haproxy"]:
            found.append(
                f"openstack_deploy_internal_vip {vip} is the address of {', '.join(owners)}; with "
                "openstack_deploy_enable_haproxy keepalived moves it between controllers, so give an unused address, "
                "or set openstack_deploy_enable_haproxy to false on a single controller"
            )
    for host, data in computes.items():
        found += _gpu_problems(host, data["gpus"])
        found += _cpu_problems(host, data)
    found += _alias_problems(settings["pci_aliases"], computes)
    if settings["enable_magnum"] and settings["magnum_network_driver"] not in MAGNUM_NETWORK_DRIVERS:
        found.append(
            f"openstack_deploy_magnum_network_driver is {settings['magnum_network_driver']!r}: Magnum's Kubernetes "
            f"clusters take {' or '.join(MAGNUM_NETWORK_DRIVERS)}"
        )
    magnum = bool(settings["enable_magnum"])
    final = merged({"enable_magnum": magnum, "enable_heat": magnum}, settings.get("globals") or {})
    if _truthy(final["enable_magnum"]) and not _truthy(final["enable_heat"]):
        found.append(
            "openstack_deploy_globals sets enable_heat to false while Magnum is enabled: Magnum builds clusters as "
            "Heat stacks; remove that override or set openstack_deploy_enable_magnum to false"
        )
    if settings["enable_ironic"]:
        found += _dhcp_range_problems(settings["ironic"]["dhcp_ranges"])
    return found


def _json(entry):
    return json.dumps(entry, sort_keys=True, separators=(", ", ": "))


def device_specs(gpus):
    """[pci] device_spec values for a host's GPUs: one per GPU address, or one per model without addresses."""
    specs = []
    for gpu in gpus:
        spec = {"vendor_id": _pci_id(gpu["vendor_id"]), "product_id": _pci_id(gpu["product_id"])}
        if _dig(gpu, "address"):
            spec["address"] = str(gpu["address"])
        if _json(spec) not in specs:
            specs.append(_json(spec))
    return specs


def alias_values(aliases):
    """[pci] alias values: name, ids, device type and, when given, the NUMA policy."""
    values = []
    for alias in aliases:
        entry = {
            "name": alias["name"],
            "vendor_id": _pci_id(alias["vendor_id"]),
            "product_id": _pci_id(alias["product_id"]),
            "device_type": _dig(alias, "device_type", "type-PCI"),
        }
        if _dig(alias, "numa_policy"):
            entry["numa_policy"] = alias["numa_policy"]
        values.append(_json(entry))
    return values


def scheduler_filters(base, pci, pinning):
    """``base`` plus PciPassthroughFilter for GPU aliases and NUMATopologyFilter for pinned CPUs."""
    filters = list(base)
    for needed, name in ((pci, PCI_FILTER), (pinning, NUMA_FILTER)):
        if needed and name not in filters:
            filters.append(name)
    return filters


def ini_text(sections):
    """An override file from ``[(section, [(key, value), ...]), ...]``; a key given twice is a multi-valued option.

    kolla-ansible renders override files as Jinja before merging: a value that would read as a
    Jinja tag is refused rather than silently rewritten.
    """
    lines = [HEADER.rstrip("\n")]
    for section, options in sections:
        if not options:
            continue
        lines += ["", f"[{section}]"]
        for key, value in options:
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if any(mark in text for mark in _JINJA_MARKS) or "\n" in text:
                raise ValueError(f"[{section}] {key}: {text!r} would be changed by kolla-ansible's templating")
            lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def _nova_host_file(data):
    compute = [(name, data[name]) for name in ("cpu_dedicated_set", "cpu_shared_set") if data[name]]
    pci = [("device_spec", spec) for spec in device_specs(data["gpus"])]
    return [("compute", compute), ("pci", pci)] if compute or pci else None


def config_overrides(settings, hosts_data):
    """The override files, as ``{path under <config_dir>/config: INI text}``.

    Per-service files (``nova/nova-api.conf``) reach that service on every host, per-host ones
    (``nova/<host>/nova.conf``) every nova service of that host: kolla-ansible's own layering.
    """
    files = {}
    aliases = alias_values(settings["pci_aliases"])
    pinning = False
    for host in settings["compute_hosts"]:
        sections = _nova_host_file(hosts_data[host])
        if sections:
            files[f"nova/{host}/nova.conf"] = ini_text(sections)
            pinning = pinning or bool(hosts_data[host]["cpu_dedicated_set"])
    if aliases:
        # The API checks a flavor's alias, the compute host claims devices by it.
        for service in ("nova-api", "nova-compute"):
            files[f"nova/{service}.conf"] = ini_text([("pci", [("alias", value) for value in aliases])])
    filters = scheduler_filters(settings["scheduler_filters"], bool(aliases), pinning)
    files["nova/nova-scheduler.conf"] = ini_text([("filter_scheduler", [("enabled_filters", ",".join(filters))])])
    if settings["enable_ironic"]:
        ironic = settings["ironic"]
        files["ironic.conf"] = ini_text(
            [
                (
                    "DEFAULT",
                    [
                        ("enabled_network_interfaces", ",".join(ironic["network_interfaces"])),
                        ("default_network_interface", ironic["default_network_interface"]),
                        ("default_boot_interface", ironic["boot_interface"]),
                    ],
                ),
                ("conductor", [("automated_clean", bool(ironic["automated_clean"]))]),
                ("dhcp", [("dhcp_provider", "neutron")]),
                (
                    "neutron",
                    [
                        ("provisioning_network", ironic["provisioning_network"]),
                        ("cleaning_network", ironic["cleaning_network"] or ironic["provisioning_network"]),
                    ],
                ),
            ]
        )
    if settings["enable_magnum"]:
        files["magnum.conf"] = ini_text(
            [
                (
                    "cluster_template",
                    [
                        ("kubernetes_allowed_network_drivers", ",".join(MAGNUM_NETWORK_DRIVERS)),
                        ("kubernetes_default_network_driver", settings["magnum_network_driver"]),
                    ],
                )
            ]
        )
    return files


def _host_line(host, data):
    variables = dict(data["connection"], **data["kolla_vars"])
    words = [host] + [
        f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in variables.items()
    ]
    for word in words:
        if any(char.isspace() for char in word):
            raise ValueError(f"inventory variable of {host} {word!r} has a blank; kolla's INI inventory cannot hold it")
    return " ".join(words)


def multinode_inventory(release_inventory, groups, hosts_data):
    """The pinned release's multinode inventory with our hosts in its host groups.

    ``groups`` maps kolla's host groups (control, network, compute, monitoring, storage) to
    inventory hosts; ``deployment`` is the host running kolla-ansible (local connection). Every
    ``[...:children]`` section of the release is kept as it is: which service runs in which group
    is the release's business.
    """
    lines, section = [HEADER.rstrip("\n")], None
    seen = set()
    for raw in release_inventory.splitlines():
        line = raw.strip()
        header = re.fullmatch(r"\[([^\]]+)\]", line)
        if header:
            section = header.group(1)
            lines += ["", line]
            if section in KOLLA_HOST_GROUPS:
                seen.add(section)
                if section == "deployment":
                    lines.append("localhost ansible_connection=local")
                else:
                    lines += [_host_line(host, hosts_data[host]) for host in groups.get(section, [])]
            continue
        if section is None or section in KOLLA_HOST_GROUPS or not line or line.startswith("#"):
            continue
        lines.append(line)
    missing = [group for group in KOLLA_HOST_GROUPS if group not in seen]
    if missing:
        raise ValueError(
            f"the release's multinode inventory has no [{'], ['.join(missing)}] group: it is not a kolla-ansible "
            "inventory this role knows; check openstack_deploy_kolla_share_dir"
        )
    return "\n".join(lines) + "\n"
