#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Build or remove the network path between a cell's instances (bridge, VXLAN overlay), with iproute2."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_path
short_description: Build or remove the network path between the instances of a cell
description:
  - The path a cell's instances talk over (plugins/module_utils/network_path.py plans it from the cell's key).
  - C(loopback) builds nothing; every instance's address is 127.0.0.1. Only instances of a process platform
    (bm, sg) share a loopback; several instances of any other platform are refused.
  - C(bridge) makes a Linux bridge holding the /24's first address, and per instance a network namespace (or
    the namespace of the running process O(pids) names, for a container started with C(--network none) or a
    guest's helper) with a veth pair from it to the bridge and an address of the /24.
  - C(overlay) adds, in each instance's namespace, a VXLAN device over its veth as flannel's VXLAN backend
    makes one (VNI 1, UDP port 8472, learning off, static forwarding entries for every peer), with an address
    of a second /24 and the underlay's MTU minus the 50 bytes of VXLAN's encapsulation.
  - For the instances of a guest platform (vm, vmcn) only the bridge is made, holding no address; each guest's
    second NIC is a tap on it that libvirt makes and removes with the domain (C(<target dev>) C(pbXXXXXXXXt<i>)),
    and each guest configures its own end (plugins/module_utils/guest_path.py), which O(instances) describes
    (C(tap), C(nic_mac)).
  - Addresses come from 198.18.0.0/15 only. Every name starts with C(pb) and 8 hex digits of a hash of the
    key, so O(cleanup_all) finds whatever an interrupted cell left.
  - Where the host sends bridged frames through iptables (br_netfilter loaded, as Docker does) a FORWARD rule
    commented with the tag lets the bridge's ports talk to each other.
  - Idempotent; a path built as planned is left alone; one built otherwise, or half-built, is removed and
    built again. A build that fails halfway removes what it made.
version_added: "0.12.0"
author: platbench developers (@platbench)
requirements:
  - iproute2 (ip, bridge); iptables where br_netfilter is loaded
options:
  state:
    description: C(present) builds the path, C(absent) removes the cell's (or, with O(cleanup_all), every cell's).
    type: str
    choices: [present, absent]
    default: present
  key:
    description: The cell's unique key, which names and addresses derive from. Required unless O(cleanup_all).
    type: str
  path:
    description: The network path. Required with O(state=present).
    type: str
    choices: [loopback, bridge, overlay]
  instances:
    description: How many instances the path joins.
    type: int
    default: 2
  platform:
    description:
      - The cell's platform label (the registry's); decides whether C(loopback) can join its instances, and
        whether they are guests (only the bridge is made on the host).
      - Required with O(state=present).
    type: str
  pids:
    description:
      - One running process per instance whose network namespace the instance's end of the path goes into.
      - Without it each instance gets a network namespace of the cell's own, C(pbXXXXXXXX-<index>).
    type: list
    elements: int
  mtu:
    description: The underlay's MTU (the veths'); the overlay's is 50 bytes less.
    type: int
    default: 1500
  subnet:
    description: The underlay's network, instead of the /24 derived from the key; inside 198.18.0.0/15.
    type: str
  overlay_subnet:
    description: The overlay's network, instead of the second /24 derived from the key; inside 198.18.0.0/15.
    type: str
  cleanup_all:
    description: With O(state=absent), remove every cell's path on the host (every name with the prefix).
    type: bool
    default: false
attributes:
  check_mode:
    description: Says whether anything would change, what differs, and the commands it would run.
    support: full
  diff_mode:
    description: The differences are returned as RV(differences).
    support: none
"""

EXAMPLES = r"""
- name: Join two bm instances of the cell by a VXLAN overlay
  platbench.lab.network_path:
    key: "{{ cell_key }}"
    path: overlay
    instances: 2
    platform: bm
  register: cell_path

- name: Join two containers started with --network none
  platbench.lab.network_path:
    key: "{{ cell_key }}"
    path: bridge
    platform: cn
    pids: "{{ cell_containers | map(attribute='State.Pid') | list }}"

- name: Make the bridge the taps of three vm guests join
  platbench.lab.network_path:
    key: "{{ cell_key }}"
    path: overlay
    instances: 3
    platform: vm

- name: Remove the cell's path
  platbench.lab.network_path:
    key: "{{ cell_key }}"
    state: absent

- name: Remove whatever any cell left
  platbench.lab.network_path:
    state: absent
    cleanup_all: true
"""

RETURN = r"""
tag:
  description: The prefix of every name of the cell's path (C(pb) and 8 hex digits); null with O(cleanup_all).
  returned: always
  type: str
  sample: pb3f2a9c01
path:
  description: The network path.
  returned: state is present
  type: str
  sample: overlay
mtu:
  description: The MTU the instances' traffic sees on the path (the overlay's, the veths', or loopback's).
  returned: state is present
  type: int
  sample: 1450
instances:
  description: Per instance its index, namespace, address on the path, and for the other paths the veth, host
    veth, underlay address, and for the overlay the VXLAN device and its MAC; for guests no namespace or host veth,
    but the tap's name and the guest NIC's MAC, the veth being the NIC's name in the guest.
  returned: state is present
  type: list
  elements: dict
  sample: [{"index": 0, "netns": "pb3f2a9c01-0", "address": "198.18.77.2", "underlay_address": "198.18.41.2"}]
bridge:
  description: The bridge's name.
  returned: state is present and path is not loopback
  type: str
  sample: pb3f2a9c01br
subnet:
  description: The underlay's network.
  returned: state is present and path is not loopback
  type: str
  sample: 198.18.41.0/24
overlay_subnet:
  description: The overlay's network.
  returned: state is present and path is overlay
  type: str
  sample: 198.18.77.0/24
differences:
  description: What kept the host from holding the planned path (empty when it did).
  returned: state is present
  type: list
  elements: str
commands:
  description: The commands run (in check mode, those that would run).
  returned: always
  type: list
  elements: list
removed_tags:
  description: The tags of the cells whose leftovers were removed.
  returned: state is absent
  type: list
  elements: str
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import network_path, network_state

BRIDGE_NETFILTER = "/proc/sys/net/bridge/bridge-nf-call-iptables"


def _remove(tools, state, tags):
    commands = network_state.removal_commands(state, tags)
    for argv in commands:
        error = tools.run(argv, removing=True)
        if error:
            tools.module.fail_json(msg=f"could not remove the network path of {', '.join(sorted(tags))}: {error}")
    return commands


def _absent(module, tools):
    state = tools.state()
    tags = network_state.tags_in(state) if module.params["cleanup_all"] else [network_path.tag_of(module.params["key"])]
    tags = [tag for tag in tags if tag in network_state.tags_in(state)]
    tag = None if module.params["cleanup_all"] else network_path.tag_of(module.params["key"])
    commands = network_state.removal_commands(state, tags)
    if commands and not module.check_mode:
        _remove(tools, state, tags)
        left = [t for t in network_state.tags_in(tools.state()) if t in tags]
        if left:
            module.fail_json(msg=f"the network paths of {', '.join(left)} are still there after removing them")
    module.exit_json(changed=bool(commands), tag=tag, commands=commands, removed_tags=tags)


def _bridge_filtered():
    try:
        with open(BRIDGE_NETFILTER) as setting:
            return setting.read().strip() == "1"
    except OSError:
        return False  # br_netfilter is not loaded: bridged frames never see iptables


def _present(module, tools):
    params = module.params
    try:
        planned = network_path.plan(
            params["key"],
            params["path"],
            params["instances"],
            params["platform"],
            pids=params["pids"],
            mtu=params["mtu"],
            subnet=params["subnet"],
            overlay=params["overlay_subnet"],
            bridge_filtered=_bridge_filtered(),
        )
    except (network_path.NetworkPathError, ValueError) as error:
        module.fail_json(msg=str(error))
    described = {key: value for key, value in planned.items() if key not in ("commands", "forward_rule")}
    if planned["path"] == "loopback":
        module.exit_json(changed=False, differences=[], commands=[], **described)
    pids_by_netns = {instance["netns"]: instance["pid"] for instance in planned["instances"] if instance["pid"]}
    state = tools.state(pids_by_netns)
    differences = network_state.differences(planned, state)
    if not differences:
        module.exit_json(changed=False, differences=[], commands=[], **described)
    stale = network_state.removal_commands(state, [planned["tag"]])
    commands = stale + planned["commands"]
    if module.check_mode:
        module.exit_json(changed=True, differences=differences, commands=commands, **described)
    if stale:
        _remove(tools, state, [planned["tag"]])
    for argv in planned["commands"]:
        error = tools.run(argv)
        if error:
            # nothing half-built stays behind: what this run made goes, then the module fails
            _remove(tools, tools.state(), [planned["tag"]])
            module.fail_json(msg=f"could not build the {planned['path']} path {planned['tag']}: {error}", cmd=argv)
    left = network_state.differences(planned, tools.state(pids_by_netns))
    if left:
        module.fail_json(msg=f"the {planned['path']} path {planned['tag']} differs once built: {'; '.join(left)}")
    module.exit_json(changed=True, differences=differences, commands=commands, **described)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "key": {"type": "str", "no_log": False},
            "path": {"type": "str", "choices": list(network_path.PATHS)},
            "instances": {"type": "int", "default": 2},
            "platform": {"type": "str"},
            "pids": {"type": "list", "elements": "int"},
            "mtu": {"type": "int", "default": network_path.DEFAULT_MTU},
            "subnet": {"type": "str"},
            "overlay_subnet": {"type": "str"},
            "cleanup_all": {"type": "bool", "default": False},
        },
        required_if=[("state", "present", ("key", "path", "platform")), ("cleanup_all", False, ("key",))],
        supports_check_mode=True,
    )
    if module.params["cleanup_all"] and module.params["state"] == "present":
        module.fail_json(msg="cleanup_all removes every cell's path: it goes with state=absent only")
    tools = network_state.PathCommands(module)
    if module.params["state"] == "absent":
        _absent(module, tools)
    _present(module, tools)


if __name__ == "__main__":
    main()
