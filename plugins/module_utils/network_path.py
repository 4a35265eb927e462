# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The network path between a cell's instances, planned: names, addresses, MTU and the commands that build it.

A cell's instances talk over one of three paths built on the runner host (``PATHS``), or over the hosts' own
network (``host``):

- ``loopback``: 127.0.0.1, nothing to build; only workloads in the host's network namespace share it (platforms
  whose registry entry says ``network="host"``), so it is refused for several instances of any other.
- ``bridge``: a Linux bridge in the host's namespace, and per instance a veth pair whose inner end sits in
  the instance's network namespace (one of the cell's own, or a running process's: a container started with
  ``--network none``, a guest's helper), with an address of the cell's underlay /24.
- ``overlay``: the bridge, and in each instance's namespace a VXLAN device over its veth, as flannel's VXLAN
  backend builds one (VNI 1, UDP port 8472, learning off, static forwarding entries to every peer), with an
  address of a second /24 and the MTU lowered by VXLAN's 50 bytes of encapsulation.
- ``host`` (``HOST_PATH``): nothing is built and nothing is planned here. Each instance uses the address of the
  runner host it runs on: the inventory's ``platbench_underlay_address`` of that host, else its ``ansible_host``,
  else the default IPv4 address of its facts (plugins/plugin_utils/placements/instances_hosts.py). It is the one
  path that crosses hosts (``instances.hosts`` above 1: a bridge or an overlay built here never leaves this host);
  with one host its ranks meet on that host's address. A bm rank is a process in the host's namespace, a cn or pd
  rank a container with ``--network host``.

Guests (platforms of the ``guest`` kind) are machines of their own: the host holds only the bridge, with no address
(the guests reach nothing of the host through it), and each guest's second NIC is a tap on it that libvirt makes
and removes with the domain (``t<i>``, the NIC's MAC derived from the key). Inside each guest the NIC, found by that
MAC, takes the instance's name and address, and for ``overlay`` carries the VXLAN device: what a namespace's veth
and VXLAN device are for the other kinds (module_utils/guest_path.py renders those commands).

Every name starts with the cell's tag, ``pb`` and 8 hex digits of a hash of the cell's key, and ends with what
it is (``br``, ``h<i>``, ``v<i>``, ``x<i>``, a guest's tap ``t<i>``, namespaces ``-<i>``), so that ``LINK_NAME``
and ``NETNS_NAME`` match exactly what some cell left, and nothing else. Interface names stay within IFNAMSIZ
(15 characters).

Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range), a /24 per cell derived from its key, as
plugins/plugin_utils/cells/peer.py gives micro_net's Docker networks. 198.18.0.0/24 is never allocated: it is left
to tests and hand-made set-ups, which may name it as an explicit ``subnet``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from ansible_collections.platbench.lab.plugins.module_utils import platforms

PATHS = ("loopback", "bridge", "overlay")  # built (or, loopback, found) on the runner host by plan()
HOST_PATH = "host"  # the runner hosts' own network: nothing to build, so never a path of plan()
SUPERNET = ipaddress.ip_network("198.18.0.0/15")
RESERVED_SUBNETS = (ipaddress.ip_network("198.18.0.0/24"),)
SUBNETS = tuple(subnet for subnet in SUPERNET.subnets(new_prefix=24) if subnet not in RESERVED_SUBNETS)
LOOPBACK_ADDRESS = "127.0.0.1"
LOOPBACK_MTU = 65536

PREFIX = "pb"
TAG_HEX = 8
IFNAMSIZ = 15  # the kernel's limit on an interface name, its terminating NUL excluded
TAG = re.compile(rf"^{PREFIX}[0-9a-f]{{{TAG_HEX}}}")
LINK_NAME = re.compile(rf"^({PREFIX}[0-9a-f]{{{TAG_HEX}}})(br|[hvxt][0-9]{{1,2}})$")
NETNS_NAME = re.compile(rf"^({PREFIX}[0-9a-f]{{{TAG_HEX}}})-[0-9]{{1,2}}$")
MAX_INSTANCES = 64  # two digits in a name; far more than a distributed cell on one host places

# flannel's VXLAN backend: VNI 1, the Linux kernel's historical port 8472, and an outer IPv4 + UDP + VXLAN
# + inner Ethernet header of 20 + 8 + 8 + 14 = 50 bytes taken from the underlay's MTU.
VXLAN_VNI = 1
VXLAN_PORT = 8472
VXLAN_OVERHEAD = 50
DEFAULT_MTU = 1500
FLOOD_MAC = "00:00:00:00:00:00"
FIRST_HOST = 2  # .1 is the bridge's (the host's) address on the underlay


class NetworkPathError(ValueError):
    """The path cannot be planned as asked; the message says which input and why."""


def digest(key):
    return hashlib.sha1(str(key).encode("utf-8")).hexdigest()


def cell_subnet(key):
    """The /24 of 198.18.0.0/15 (198.18.0.0/24 excepted) of the cell with this key."""
    return SUBNETS[int(digest(key), 16) % len(SUBNETS)]


def overlay_subnet(key):
    """A second /24 for the overlay, derived from the key as well and never the underlay's."""
    underlay = SUBNETS.index(cell_subnet(key))
    step = 1 + int(digest(f"{key}/overlay"), 16) % (len(SUBNETS) - 1)
    return SUBNETS[(underlay + step) % len(SUBNETS)]


def tag_of(key):
    return PREFIX + digest(key)[:TAG_HEX]


def tag_of_name(name):
    """The cell tag a link or namespace name carries, or None when it is no name of a cell's path."""
    found = LINK_NAME.match(name) or NETNS_NAME.match(name)
    return found.group(1) if found else None


def _subnet(text, what, instances):
    try:
        subnet = ipaddress.ip_network(str(text), strict=True)
    except ValueError as error:
        raise NetworkPathError(f"{what} {text!r} is not an IPv4 network: {error}") from None
    if subnet.version != 4 or not subnet.subnet_of(SUPERNET):
        raise NetworkPathError(
            f"{what} {text} is outside 198.18.0.0/15: a cell's network path only uses the benchmarking range"
        )
    # .0, the bridge's .1 and the broadcast address are not an instance's
    if subnet.num_addresses - FIRST_HOST - 1 < instances:
        raise NetworkPathError(f"{what} {text} has no room for {instances} instances: give a larger one")
    return subnet


# Locally administered unicast MACs (the first octet's second-lowest bit set, its lowest clear): 02 for a VXLAN
# device, 06 for a guest's NIC on the bridge; then the tag's 4 bytes and the instance's index.
VXLAN_MAC_OCTET, GUEST_NIC_MAC_OCTET = "02", "06"


def _mac(tag, index, first=VXLAN_MAC_OCTET):
    """A fixed MAC for instance ``index``'s VXLAN device (static FDB entries name it) or, with ``first`` 06, its
    guest's NIC on the bridge (the guest finds the NIC by it)."""
    octets = [first, tag[2:4], tag[4:6], tag[6:8], tag[8:10], f"{index:02x}"]
    return ":".join(octets)


def _check_request(path, instances, platform, pids):
    if path not in PATHS:
        raise NetworkPathError(f"unknown network path {path!r}; known: {', '.join(PATHS)}")
    if isinstance(instances, bool) or not isinstance(instances, int) or not 1 <= instances <= MAX_INSTANCES:
        raise NetworkPathError(f"instances must be a whole number from 1 to {MAX_INSTANCES}, got {instances!r}")
    entry = platforms.get(platform)
    if path == "loopback" and instances > 1 and entry.network != "host":
        sharing = platforms.in_words(platforms.labels_where(network="host"), " or ")
        raise NetworkPathError(
            f"network path 'loopback' cannot join {instances} instances of {platform}: each {entry.kind} has a "
            f"loopback of its own, which only workloads in the host's network namespace share ({sharing}); use "
            f"'bridge' or 'overlay'"
        )
    if pids and entry.guest:
        raise NetworkPathError(f"pids: the instances of {platform} are guests, whose NICs are taps on the bridge")
    if pids and len(pids) != instances:
        raise NetworkPathError(f"pids names {len(pids)} processes for {instances} instances: give one per instance")


def plan(key, path, instances, platform, pids=None, mtu=DEFAULT_MTU, subnet=None, overlay=None, bridge_filtered=False):
    """The path of the cell with ``key`` between ``instances`` instances of ``platform`` (a registry label).

    ``pids``: one running process per instance whose network namespace the instance joins (else the cell
    makes a namespace per instance; a guest platform's instances are guests, which get only the bridge on the
    host and configure their own ends, module_utils/guest_path.py); ``mtu``: the underlay's; ``subnet``,
    ``overlay``: explicit /N of 198.18.0.0/15 instead of the key's; ``bridge_filtered``: the host passes bridged
    frames through iptables (br_netfilter), so the bridge needs a FORWARD rule of its own to let its ports talk.
    """
    _check_request(path, instances, platform, pids)
    guests = platforms.get(platform).guest
    tag = tag_of(key)
    result = {"tag": tag, "path": path, "guests": guests, "instances": [], "commands": [], "forward_rule": None}
    if path == "loopback":
        result["mtu"] = LOOPBACK_MTU
        result["instances"] = [{"index": i, "address": LOOPBACK_ADDRESS, "netns": None} for i in range(instances)]
        return result
    if not isinstance(mtu, int) or mtu < 1280 or mtu > 65535:
        raise NetworkPathError(f"mtu must be from 1280 to 65535, got {mtu!r}")
    underlay = _subnet(subnet or cell_subnet(key), "subnet", instances)
    result.update(
        bridge=f"{tag}br",
        subnet=str(underlay),
        # a guests' bridge holds no address: the guests reach nothing of the host through it
        gateway=None if guests else str(underlay.network_address + 1),
        underlay_mtu=mtu,
        mtu=mtu,
    )
    if path == "overlay":
        inner = _subnet(overlay or overlay_subnet(key), "overlay subnet", instances)
        if inner.overlaps(underlay):
            raise NetworkPathError(f"overlay subnet {inner} overlaps the underlay's {underlay}: give two apart")
        result.update(overlay_subnet=str(inner), mtu=mtu - VXLAN_OVERHEAD, vni=VXLAN_VNI, vxlan_port=VXLAN_PORT)
    for index in range(instances):
        underlay_address = str(underlay.network_address + FIRST_HOST + index)
        instance = {
            "index": index,
            "netns": None if guests else f"{tag}-{index}",
            "pid": pids[index] if pids else None,
            "veth": f"{tag}v{index}",  # a guest's NIC takes this name in the guest
            "underlay_address": underlay_address,
            "address": underlay_address,
        }
        if guests:
            instance.update(tap=f"{tag}t{index}", nic_mac=_mac(tag, index, GUEST_NIC_MAC_OCTET))
        else:
            instance["host_veth"] = f"{tag}h{index}"
        if path == "overlay":
            instance.update(
                vxlan=f"{tag}x{index}", mac=_mac(tag, index), address=str(inner.network_address + FIRST_HOST + index)
            )
        result["instances"].append(instance)
    if bridge_filtered:
        result["forward_rule"] = forward_rule(result["bridge"], tag)
    result["commands"] = build_commands(result)
    return result


def forward_rule(bridge, tag):
    """The iptables FORWARD rule (after ``-A``/``-C``/``-D FORWARD``) that lets the bridge's ports talk,
    commented with the tag so that a leftover is found by it."""
    return ["-i", bridge, "-o", bridge, "-m", "comment", "--comment", tag, "-j", "ACCEPT"]


def link_up(name, netns=None):
    # addrgenmode none: no IPv6 link-local address, so nothing is sent outside the cell's IPv4 addresses
    inside = _in(netns)
    return [
        ["ip", *inside, "link", "set", "dev", name, "addrgenmode", "none"],
        ["ip", *inside, "link", "set", name, "up"],
    ]


def _in(netns):
    return ["-n", netns] if netns else []


def build_commands(path_plan):
    """The ``ip``/``bridge``/``iptables`` argvs that build ``path_plan`` from nothing, in order (for guests, the
    bridge alone: the taps are libvirt's, the rest the guests')."""
    bridge, prefixlen = path_plan["bridge"], path_plan["subnet"].split("/")[1]
    commands = [["ip", "link", "add", bridge, "type", "bridge"]]
    if path_plan["gateway"]:
        commands.append(["ip", "addr", "add", f"{path_plan['gateway']}/{prefixlen}", "dev", bridge])
    commands += link_up(bridge)
    if path_plan["forward_rule"]:
        commands.append(["iptables", "-I", "FORWARD", "1", *path_plan["forward_rule"]])
    if path_plan["guests"]:
        return commands
    mtu = str(path_plan["underlay_mtu"])
    for instance in path_plan["instances"]:
        netns, veth, host_veth = instance["netns"], instance["veth"], instance["host_veth"]
        if instance["pid"]:
            commands.append(["ip", "netns", "attach", netns, str(instance["pid"])])
        else:
            commands.append(["ip", "netns", "add", netns])
            commands.append(["ip", "-n", netns, "link", "set", "lo", "up"])
        commands.append(["ip", "link", "add", host_veth, "mtu", mtu, "type", "veth", "peer", "name", veth, "mtu", mtu])
        commands.append(["ip", "link", "set", veth, "netns", netns])
        commands.append(["ip", "link", "set", host_veth, "master", bridge])
        commands += link_up(host_veth)
        commands.append(["ip", "-n", netns, "addr", "add", f"{instance['underlay_address']}/{prefixlen}", "dev", veth])
        commands += link_up(veth, netns)
    if path_plan["path"] == "overlay":
        for instance in path_plan["instances"]:
            commands += vxlan_commands(path_plan, instance)
    return commands


def vxlan_commands(path_plan, instance):
    """The instance's VXLAN device over its veth (a guest's NIC), in its namespace (or, for a guest, in the guest)."""
    netns, vxlan = instance["netns"], instance["vxlan"]
    overlay_prefixlen = path_plan["overlay_subnet"].split("/")[1]
    add = ["ip", *_in(netns), "link", "add", vxlan, "address", instance["mac"], "mtu", str(path_plan["mtu"])]
    add += ["type", "vxlan", "id", str(path_plan["vni"]), "dstport", str(path_plan["vxlan_port"])]
    add += ["local", instance["underlay_address"], "dev", instance["veth"], "nolearning"]
    commands = [add, ["ip", *_in(netns), "addr", "add", f"{instance['address']}/{overlay_prefixlen}", "dev", vxlan]]
    # flannel-style: learning off, so every peer is written down: its MAC where to send unicast frames, and
    # the all-zero MAC once per peer so that broadcasts (ARP) reach each of them
    for peer in path_plan["instances"]:
        if peer["index"] == instance["index"]:
            continue
        fdb = ["bridge", *_in(netns), "fdb", "append"]
        commands.append([*fdb, FLOOD_MAC, "dst", peer["underlay_address"], "dev", vxlan])
        commands.append([*fdb, peer["mac"], "dst", peer["underlay_address"], "dev", vxlan])
    return commands + link_up(vxlan, netns)
