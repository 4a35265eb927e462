# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""micro_net's peer in a cell plan: the other instance of the platform the network is measured against.

A micro_net cell is a cell with two instances (placements/instances.py), as any other: the workload (role
``foreground``, index 0) and its peer (role ``peer``, index 1: ``python -m workloads.micro_net.peer``, started first,
confirmed running, stopped when the workload is done). The path between them is the platform's (the registry's
``peer`` field, a network path of plugins/module_utils/network_path.py):

- bm: ``loopback``, a second process on 127.0.0.1 under the same ``taskset`` as the workload;
- cn: ``bridge``, a second container of the same image; both join the namespaces of holder containers joined by
  a Linux bridge of the cell's own with a /24 of the benchmarking range 198.18.0.0/15 (no route out, no published
  port), removed with the holders after the cell, whatever happened.

Both instances get the cell's CPUs (``cpus: shared``): the two ends of the measured path on the same cores, on every
platform. The workload is told the peer's address on the path (``--peer``).
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms

WORKLOAD = "micro_net"
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
    "loopback": f"a second process on {LOOPBACK_PEER}",
    "bridge": "a second container on a bridge of the cell's own",
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


def instances_spec(platform, params, where):
    """The instances of a micro_net cell on ``platform`` (a registry entry): the workload and its peer, sharing the
    cell's CPUs, on the platform's path; cell["instances"] for placements/instances.py."""
    check_params(params, where)
    if platform.peer not in PEER_WORDS:
        offered = platforms.in_words([f"{p.label} ({PEER_WORDS[p.peer]})" for p in _peer_platforms()])
        raise PeerPlanError(
            f"{where}: micro_net needs a peer, which the lab provides on {offered} only, not on {platform.label}: "
            f"leave {platform.label} out of this experiment's micro_net cells"
        )
    return {
        "count": 2,
        "cpus": "shared",
        "gpus": "shared",
        "roles": ["foreground", "peer"],
        "network": platform.peer,
        "peer": {
            "port": params.get("port", DEFAULT_PORT),
            "pingpong_port": params.get("pingpong_port", DEFAULT_PINGPONG_PORT),
        },
    }


def serve_argv(spec, address, lifetime):
    """The peer's python arguments: serve iperf3 and ping-pong on ``address`` for at most ``lifetime`` seconds."""
    peer = spec["peer"]
    return [
        *("-m", PEER_MODULE, "--bind", address, "--port", str(peer["port"])),
        *("--pingpong-port", str(peer["pingpong_port"]), "--lifetime", str(int(lifetime))),
    ]
