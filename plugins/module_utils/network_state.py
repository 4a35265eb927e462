# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What of the cells' network paths a host holds, read from ``ip -j``, ``bridge -j`` and ``iptables -S``;
how it differs from a plan (plugins/module_utils/network_path.py); and the commands that remove it. ``PathCommands``
reads it and runs those commands for a module (platbench.lab.network_path, platbench.lab.leftovers).

Only names of a cell's path (network_path.LINK_NAME, NETNS_NAME, a FORWARD rule commented with a tag) are
kept when reading, so nothing else of the host is ever compared or removed. A guest's tap on a cell's bridge is
libvirt's: it is made and removed with its domain (playbooks/teardown.yml removes leftover guests before leftover
paths), so it is not read either.
"""

from __future__ import annotations

import json
import os

from ansible_collections.platbench.lab.plugins.module_utils import network_path


class StateReadError(ValueError):
    """A tool printed something that is not what it prints; the message quotes it."""


def _json(text, what):
    if not (text or "").strip():
        return []  # ip prints nothing at all for an empty list on some versions
    try:
        return json.loads(text)
    except ValueError:
        raise StateReadError(f"{what} printed no JSON: {text.strip()[:200]}") from None


def parse_links(text):
    """``ip -j -d addr show``: the cells' links by name, each with what a plan sets on it."""
    links = {}
    for link in _json(text, "ip -j -d addr show"):
        name = link.get("ifname", "")
        if not network_path.tag_of_name(name):
            continue
        info = link.get("linkinfo") or {}
        if info.get("info_kind") == "tun":
            continue  # a guest's tap: libvirt's, gone with its domain
        data = info.get("info_data") or {}
        links[name] = {
            "kind": info.get("info_kind"),
            "mtu": link.get("mtu"),
            "master": link.get("master"),
            "up": "UP" in (link.get("flags") or []),
            "mac": link.get("address"),
            "addresses": sorted(
                f"{address['local']}/{address['prefixlen']}"
                for address in link.get("addr_info") or []
                if address.get("family") == "inet"
            ),
            "vxlan": {key: data.get(key) for key in ("id", "port", "local", "learning")} if data else None,
        }
    return links


def parse_netns(text):
    """``ip -j netns list``: the names of the cells' namespaces."""
    return sorted(
        entry["name"] for entry in _json(text, "ip -j netns list") if network_path.NETNS_NAME.match(entry["name"])
    )


def parse_fdb(text):
    """``bridge -j fdb show dev VXLAN``: its (MAC, destination) entries."""
    return sorted({(entry["mac"], entry["dst"]) for entry in _json(text, "bridge -j fdb show") if entry.get("dst")})


def parse_forward_rules(text):
    """``iptables -S FORWARD``: the cells' rules, each as its argv after ``-A FORWARD``."""
    rules = []
    for line in (text or "").splitlines():
        words = line.split()
        if words[:2] != ["-A", "FORWARD"] or "--comment" not in words:
            continue
        comment = words[words.index("--comment") + 1].strip('"')
        if network_path.TAG.fullmatch(comment):
            rules.append(words[2:])
    return rules


def tags_in(state):
    """Every cell tag the state holds something of."""
    names = list(state["links"]) + list(state["netns"])
    tags = {network_path.tag_of_name(name) for name in names}
    tags |= {rule[rule.index("--comment") + 1] for rule in state["forward_rules"]}
    return sorted(tag for tag in tags if tag)


def _link_differences(name, link, want, where):
    if link is None:
        return [f"{name} is missing{where}"]
    found = []
    for field, value in want.items():
        if link.get(field) != value:
            found.append(f"{name}{where}: {field} is {link.get(field)!r}, not {value!r}")
    return found


def _wanted_links(path_plan):
    """What the plan sets on each link: those of the host's namespace, and those inside each namespace."""
    bridge, prefixlen = path_plan["bridge"], path_plan["subnet"].split("/")[1]
    underlay_mtu = path_plan["underlay_mtu"]
    gateway = [f"{path_plan['gateway']}/{prefixlen}"] if path_plan["gateway"] else []
    host = {bridge: {"kind": "bridge", "up": True, "addresses": gateway}}
    inside = {}
    if path_plan.get("guests"):
        return host, inside  # the guests hold their ends (module_utils/guest_path.py)
    for instance in path_plan["instances"]:
        host[instance["host_veth"]] = {"kind": "veth", "up": True, "master": bridge, "mtu": underlay_mtu}
        address = f"{instance['underlay_address']}/{prefixlen}"
        links = {instance["veth"]: {"kind": "veth", "up": True, "mtu": underlay_mtu, "addresses": [address]}}
        if path_plan["path"] == "overlay":
            links[instance["vxlan"]] = {
                "kind": "vxlan",
                "up": True,
                "mtu": path_plan["mtu"],
                "mac": instance["mac"],
                "addresses": [f"{instance['address']}/{path_plan['overlay_subnet'].split('/')[1]}"],
                "vxlan": {
                    "id": path_plan["vni"],
                    "port": path_plan["vxlan_port"],
                    "local": instance["underlay_address"],
                    "learning": False,
                },
            }
        inside[instance["netns"]] = links
    return host, inside


def _missing_fdb(path_plan, instance, held):
    entries = set(map(tuple, held["fdb"].get(instance["vxlan"], [])))
    missing = []
    for peer in path_plan["instances"]:
        wanted = [(mac, peer["underlay_address"]) for mac in (network_path.FLOOD_MAC, peer["mac"])]
        if peer is not instance:
            missing += [entry for entry in wanted if entry not in entries]
    return [f"{instance['vxlan']} in {instance['netns']} has no entry {mac} dst {dst}" for mac, dst in missing]


def differences(path_plan, state):
    """What keeps ``state`` from being ``path_plan`` built, in words; empty when it is built."""
    if path_plan["path"] == "loopback":
        return []
    tag = path_plan["tag"]
    host, inside = _wanted_links(path_plan)
    found = []
    for name, want in host.items():
        found += _link_differences(name, state["links"].get(name), want, "")
    found += [f"{name} is not of this plan" for name in state["links"] if name.startswith(tag) and name not in host]
    found += [
        f"namespace {name} is not of this plan"
        for name in state["netns"]
        if name.startswith(tag) and name not in inside
    ]
    for instance in [] if path_plan.get("guests") else path_plan["instances"]:
        netns = instance["netns"]
        held = state["netns"].get(netns)
        if held is None:
            found.append(f"namespace {netns} is missing")
            continue
        if instance["pid"] and not held.get("attached_to_pid"):
            found.append(f"namespace {netns} is not the network namespace of process {instance['pid']}")
        for name, want in inside[netns].items():
            found += _link_differences(name, held["links"].get(name), want, f" in {netns}")
        found += [f"{name} in {netns} is not of this plan" for name in held["links"] if name not in inside[netns]]
        if path_plan["path"] == "overlay":
            found += _missing_fdb(path_plan, instance, held)
    found += _rule_differences(path_plan, state)
    return found


def _rule_differences(path_plan, state):
    rules = [rule for rule in state["forward_rules"] if path_plan["tag"] in rule]
    wanted = path_plan["forward_rule"]
    found = (
        [f"the FORWARD rule that lets {path_plan['bridge']}'s ports talk is missing"]
        if wanted and wanted not in rules
        else []
    )
    return found + [f"FORWARD rule {' '.join(rule)} is not of this plan" for rule in rules if rule != wanted]


def removal_commands(state, tags):
    """The argvs that remove what ``state`` holds of the cells tagged ``tags``: inside each namespace its VXLAN
    devices, then its veths (whose host ends go with them), then the namespace (a process's, a container's,
    keeps its other links and only loses its name); then what is left in the host's namespace, the bridge
    last; then the FORWARD rules. A link may be gone by the time its command runs (a veth takes its peer
    along, a VXLAN device goes with its lower device): the caller takes "Cannot find device" as done."""
    tags = set(tags)
    commands = []
    for netns, held in sorted(state["netns"].items()):
        if network_path.tag_of_name(netns) not in tags:
            continue
        inside = [name for name in held["links"] if network_path.tag_of_name(name) in tags]
        for name in sorted(inside, key=lambda name: (held["links"][name]["kind"] != "vxlan", name)):
            commands.append(["ip", "-n", netns, "link", "del", name])
        commands.append(["ip", "netns", "del", netns])
    host_links = [name for name in state["links"] if network_path.tag_of_name(name) in tags]
    for name in sorted(host_links, key=lambda name: (state["links"][name]["kind"] == "bridge", name)):
        commands.append(["ip", "link", "del", name])
    for rule in state["forward_rules"]:
        if rule[rule.index("--comment") + 1] in tags:
            commands.append(["iptables", "-D", "FORWARD", *rule])
    return commands


# What ip prints when what it was asked to remove is already gone (taken along by its peer or lower device)
ALREADY_GONE = ("Cannot find device", "No such file or directory")


class PathCommands:
    """Reads the host's network state and runs the commands that change it, for an Ansible module; a read that
    fails fails the module with the command and what it printed."""

    def __init__(self, module):
        self.module = module
        self.iptables = module.get_bin_path("iptables", opt_dirs=["/usr/sbin", "/sbin"])

    def read(self, argv):
        rc, stdout, stderr = self.module.run_command(argv)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(argv)} failed: {(stderr or stdout).strip()}", cmd=argv, rc=rc)
        return stdout

    def state(self, pids_by_netns=None):
        """The cells' links, namespaces (their links, VXLAN forwarding entries, whether a process's namespace
        is the one named) and FORWARD rules."""
        netns = {}
        for name in parse_netns(self.read(["ip", "-j", "netns", "list"])):
            links = parse_links(self.read(["ip", "-n", name, "-j", "-d", "addr", "show"]))
            fdb = {
                link: parse_fdb(self.read(["bridge", "-n", name, "-j", "fdb", "show", "dev", link]))
                for link, found in links.items()
                if found["kind"] == "vxlan"
            }
            pid = (pids_by_netns or {}).get(name)
            netns[name] = {"links": links, "fdb": fdb, "attached_to_pid": pid is not None and _same_netns(name, pid)}
        rules = self.read([self.iptables, "-S", "FORWARD"]) if self.iptables else ""
        return {
            "links": parse_links(self.read(["ip", "-j", "-d", "addr", "show"])),
            "netns": netns,
            "forward_rules": parse_forward_rules(rules),
        }

    def run(self, argv, removing=False):
        if argv[0] == "iptables":
            if not self.iptables:
                self.module.fail_json(msg="iptables is not installed, yet br_netfilter sends bridged frames through it")
            argv = [self.iptables, *argv[1:]]
        rc, stdout, stderr = self.module.run_command(argv)
        if rc != 0 and not (removing and any(gone in stderr for gone in ALREADY_GONE)):
            return f"{' '.join(argv)} failed: {(stderr or stdout).strip()}"
        return None


def _same_netns(netns, pid):
    try:
        named, process = os.stat(f"/run/netns/{netns}"), os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (process.st_dev, process.st_ino)
