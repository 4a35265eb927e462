# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A guest's end of its cell's network path, configured inside the guest before the ranks start.

The host holds only the cell's bridge (module_utils/network_path.py plans it for guests); each guest's second NIC
is a tap on it, with a MAC derived from the cell's key and the instance's index. Inside the guest:

- the NIC is found by that MAC (the guest's own name for it, ``enp...``, depends on where the PCI bus put it),
  brought down and renamed to the instance's ``veth`` name of the plan, so that the ranks can name it
  (``GLOO_SOCKET_IFNAME``) before the guest exists; a NIC of a name that no ``.network`` file of the guest image
  matches is left alone by systemd-networkd;
- no IPv6 link-local address (``addrgenmode none``), the instance's address of the cell's /24, up;
- for ``overlay``, a VXLAN device over the NIC's address as flannel's VXLAN backend makes one on each node
  (VNI 1, UDP port 8472, learning off, a static forwarding entry per peer guest, the MTU 50 bytes lower), with the
  instance's overlay address.

No route is added beyond the /24s' own: the guests reach each other on the path and nothing else through it.
Pure functions: ``guest_commands`` (argvs, for the tests to read), ``guest_script`` (the POSIX shell script the
guest runs, through ansible.builtin.raw, which needs no Python module there).
"""

from __future__ import annotations

import shlex

from ansible_collections.platbench.lab.plugins.module_utils import network_path

CONFIGURED, UNCHANGED = "configured", "unchanged"  # what the script prints last, for changed_when


class GuestPathError(ValueError):
    """The plan is no guests' path."""


def _instance(path_plan, index):
    if not path_plan.get("guests") or path_plan["path"] == "loopback":
        raise GuestPathError(f"the {path_plan['path']} path {path_plan['tag']} is not one of guests on a bridge")
    try:
        return path_plan["instances"][index]
    except (IndexError, TypeError):
        raise GuestPathError(f"the path {path_plan['tag']} has no instance {index!r}") from None


def guest_commands(path_plan, index):
    """The argvs that give guest ``index`` its end of ``path_plan`` once its NIC carries the planned name."""
    instance = _instance(path_plan, index)
    nic, prefixlen = instance["veth"], path_plan["subnet"].split("/")[1]
    commands = [
        ["ip", "link", "set", "dev", nic, "mtu", str(path_plan["underlay_mtu"])],
        ["ip", "addr", "add", f"{instance['underlay_address']}/{prefixlen}", "dev", nic],
        *network_path.link_up(nic),
    ]
    if path_plan["path"] == "overlay":
        commands += network_path.vxlan_commands(path_plan, instance)
    return commands


def guest_script(path_plan, index):
    """The shell script guest ``index`` runs: find the NIC by its MAC, name it, then ``guest_commands``. A guest
    already configured (the NIC named and addressed, the VXLAN device there) prints UNCHANGED and changes nothing;
    a half-configured one is cleared and configured again."""
    instance = _instance(path_plan, index)
    nic, mac = instance["veth"], instance["nic_mac"]
    prefixlen = path_plan["subnet"].split("/")[1]
    address = f"{instance['underlay_address']}/{prefixlen}"
    vxlan = instance.get("vxlan")
    done = f"ip -o addr show dev {nic} | grep -qF ' {address} '"
    if vxlan:
        overlay = f"{instance['address']}/{path_plan['overlay_subnet'].split('/')[1]}"
        done += f" && ip -o addr show dev {vxlan} | grep -qF ' {overlay} '"
    lines = [
        "set -eu",
        f"if {done} 2>/dev/null; then echo {UNCHANGED}; exit 0; fi",
        "found=",
        "for link in /sys/class/net/*; do",
        f'  [ "$(cat "$link/address")" = {shlex.quote(mac)} ] && found="${{link##*/}}"',
        "done",
        'if [ -z "$found" ]; then',
        f"  echo 'no NIC with MAC {mac} in this guest: is its domain on the bridge {path_plan['bridge']}?' >&2",
        "  ip -br link >&2",
        "  exit 1",
        "fi",
        # what a run before left half-made goes, so that the commands start from nothing
        *([f"ip link del {vxlan} 2>/dev/null || true"] if vxlan else []),
        'ip link set dev "$found" down',
        f'[ "$found" = {nic} ] || ip link set dev "$found" name {nic}',
        f"ip addr flush dev {nic}",
        *(shlex.join(argv) for argv in guest_commands(path_plan, index)),
        f"echo {CONFIGURED}",
    ]
    return "\n".join(lines) + "\n"


def device(path_plan, index):
    """The device the ranks' sockets go over in guest ``index``: its NIC, or for ``overlay`` its VXLAN device."""
    instance = _instance(path_plan, index)
    return instance["vxlan"] if path_plan["path"] == "overlay" else instance["veth"]
