# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""micro_net's peer in a cell plan: the other instance of the platform the network is measured against.

- bm: the workload starts the peer itself, a second process on loopback: ``--peer 127.0.0.1
  --serve-peer`` (under the same ``taskset`` as the cell, since the child inherits its CPUs).
- cn: a second container of the same image on a user-defined bridge network made for the cell
  (never ``host``), with a /24 of the benchmarking range 198.18.0.0/15; the peer at ``.2``, the
  cell's container at ``.3`` with ``--peer <.2>``. The network is ``internal`` (no route out of it),
  publishes no port, and is removed with the peer after the cell (roles/platform_run/tasks/run_cn.yml).
  The peer gets the cell's CPUs (cpuset or quota), as the bm peer shares the cell's CPUs too, so
  both platforms measure two instances on the same cores.

The network's name and subnet are derived from the cell's key (campaign, host, cell id, as the
container's name is): the same cell always gets the same ones, two cells almost always different
ones (511 subnets; cells of one host run one at a time, so a clash needs a leftover network).
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms

# The cells' share of the benchmarking range, one /24 per cell: one allocation for every network path
# (plugins/module_utils/network_path.py, where the modules can import it).
from ansible_collections.platbench.lab.plugins.module_utils.network_path import (  # noqa: F401
    RESERVED_SUBNETS,
    SUBNETS,
    SUPERNET,
    cell_subnet,
    digest,
)

WORKLOAD = "micro_net"
NETWORK_PREFIX = "platbench-net-"
HASH_CHARS = 12
LOOPBACK_PEER = "127.0.0.1"
# The workload's defaults (workloads/micro_net/peer.py); a cell's params `port`, `pingpong_port` override them.
DEFAULT_PORT = 5201
DEFAULT_PINGPONG_PORT = 5202
PEER_MODULE = "workloads.micro_net.peer"
# The options the platform sets; a cell must not set them in its params.
PLATFORM_PARAMS = ("peer", "serve_peer")


class PeerPlanError(ValueError):
    """micro_net's peer cannot be planned for this cell; the message says why."""


def needs_peer(workload):
    return workload == WORKLOAD


# How each of the registry's peer kinds (its ``peer`` field) gives a cell its peer, in words.
PEER_WORDS = {"loopback": "a second process", "bridge": "a second container"}
PEER_CHOSEN = {
    "loopback": f"a child process on {LOOPBACK_PEER}",
    "bridge": "a peer container on a network of the cell's own",
}


def _peer_platforms():
    return [platform for platform in platforms.PLATFORMS if platform.peer and platform.placement]


def check_params(params, where):
    """The platform chooses the peer: params that name one are refused, rather than silently overridden."""
    given = [key for key in PLATFORM_PARAMS if key in params]
    if given:
        chosen = "; ".join(f"{platform.label}: {PEER_CHOSEN[platform.peer]}" for platform in _peer_platforms())
        raise PeerPlanError(
            f"{where}: micro_net's {', '.join(given)} is chosen by the platform ({chosen}): remove it from the params"
        )


def peer_args(platform, params, key, where):
    """What micro_net's command line gets on ``platform`` (a registry entry): where its peer is."""
    check_params(params, where)
    if platform.peer == "loopback":
        return bm_args()
    if platform.peer == "bridge":
        return ["--peer", peer_address(key)]
    offered = platforms.in_words([f"{p.label} ({PEER_WORDS[p.peer]})" for p in _peer_platforms()])
    raise PeerPlanError(
        f"{where}: micro_net needs a peer, which the lab provides on {offered} only, not on {platform.label}: "
        f"leave {platform.label} out of this experiment's micro_net cells"
    )


def bm_args():
    """What a loopback-peer cell (bm) adds to micro_net's command line: the peer as its own child on loopback."""
    return ["--peer", LOOPBACK_PEER, "--serve-peer"]


def peer_address(key):
    """The peer container's address on the cell's network: ``.2`` of its subnet (``.1`` is the bridge)."""
    return str(cell_subnet(key).network_address + 2)


def network_name(key):
    return NETWORK_PREFIX + digest(key)[:HASH_CHARS]


def container_peer(key, cell_name, params, cell_container, timeout):
    """The ``peer`` section of a cn cell's plan.

    ``key``: the cell's unique key; ``cell_name``: the cell container's name (the peer's is derived
    from it); ``cell_container``: the cell's planned container (engine, image, CPUs, labels are
    shared); ``timeout``: the cell's timeout, which is the peer's lifetime.
    """
    subnet = cell_subnet(key)
    gateway, cell_address = (str(subnet.network_address + offset) for offset in (1, 3))
    address = peer_address(key)
    network = network_name(key)
    port = params.get("port", DEFAULT_PORT)
    pingpong_port = params.get("pingpong_port", DEFAULT_PINGPONG_PORT)
    command = ["python", "-m", PEER_MODULE, "--bind", address, "--port", str(port)]
    command += ["--pingpong-port", str(pingpong_port), "--lifetime", str(int(timeout))]
    labels = dict(cell_container["labels"])
    return {
        "address": address,
        "cell_address": cell_address,
        "port": port,
        "pingpong_port": pingpong_port,
        "network": {
            "name": network,
            "driver": "bridge",
            "subnet": str(subnet),
            "gateway": gateway,
            "internal": True,  # no route out: the two containers reach each other and nothing else
            "labels": labels,
        },
        "container": {
            "engine_host": cell_container["engine_host"],
            "name": f"{cell_name}-peer",
            "image": cell_container["image"],
            "image_id": cell_container["image_id"],
            "command": command,
            "env": {"PYTHONDONTWRITEBYTECODE": "1", "NVIDIA_VISIBLE_DEVICES": "void"},
            "cpuset_cpus": cell_container["cpuset_cpus"],
            "cpus": cell_container["cpus"],
            "network_mode": network,
            "networks": [{"name": network, "ipv4_address": address}],
            "labels": {**labels, "org.platbench.role": "micro_net-peer"},
        },
    }


def attach_cell(container, peer):
    """The cell's container on the peer's network at its fixed address (was ``network_mode: none``)."""
    network = peer["network"]["name"]
    container["network_mode"] = network
    container["networks"] = [{"name": network, "ipv4_address": peer["cell_address"]}]
    return container
