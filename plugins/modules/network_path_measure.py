#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Measure a cell's network path between two instances: iperf3 throughput, ping round-trip time, the MTU."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_path_measure
short_description: Measure the network path between two instances of a cell before it trains
description:
  - From the client instance's network namespace to the server instance's address (the C(instances) that
    M(platbench.lab.network_path) returns; instance 0 as client, instance 1 as server).
  - Round-trip time by C(ping) on the idle path (O(ping_count) packets 50 ms apart, each waited for 1 s).
  - Throughput by one iperf3 TCP test of O(seconds) (C(--json)); the server answers that one client and exits,
    and both are killed if they outlive their bound.
  - The MTU of the device the route to O(address) leaves by, in the client's namespace.
  - With O(server_running), the iperf3 server was started elsewhere, on another machine (for a cell's guests, in the
    server guest, with the same bounded command line); the client then tries to connect for up to 5 s.
  - Only addresses of 127.0.0.0/8 and 198.18.0.0/15 are measured.
  - Measuring changes nothing, but sends traffic; in check mode nothing is measured.
version_added: "0.12.0"
author: platbench developers (@platbench)
requirements:
  - iproute2, iperf3, ping (iputils), coreutils (timeout)
options:
  address:
    description: The server instance's address on the path.
    type: str
    required: true
  client_netns:
    description: The client instance's network namespace; the host's when omitted (loopback).
    type: str
  server_netns:
    description: The server instance's network namespace; the host's when omitted (loopback).
    type: str
  port:
    description: The iperf3 server's TCP port.
    type: int
    default: 5201
  server_running:
    description: The iperf3 server listens already, started by the caller where the server instance is.
    type: bool
    default: false
  seconds:
    description: The iperf3 test's duration.
    type: float
    default: 1.0
  ping_count:
    description: How many ICMP echo requests measure the round trip.
    type: int
    default: 10
attributes:
  check_mode:
    description: Measuring sends traffic, so check mode skips it.
    support: none
  diff_mode:
    description: Nothing changes.
    support: none
"""

EXAMPLES = r"""
- name: Measure the cell's path before training
  platbench.lab.network_path_measure:
    client_netns: "{{ cell_path.instances[0].netns }}"
    server_netns: "{{ cell_path.instances[1].netns }}"
    address: "{{ cell_path.instances[1].address }}"
  register: cell_path_figures
"""

RETURN = r"""
samples:
  description: The cell's metrics of its path, C(path_throughput) (Gbit/s), C(path_rtt) (ms, mean), C(path_mtu).
  returned: success
  type: list
  elements: dict
  sample: [{"metric": "path_throughput", "value": 9.87, "unit": "Gbit/s"}]
throughput:
  description: iperf3's figures, C(throughput_gbps), C(bytes), C(seconds), C(retransmits), C(loaded_rtt_ms).
  returned: success
  type: dict
rtt:
  description: ping's figures, C(sent), C(received), C(min_ms), C(avg_ms), C(max_ms), C(mdev_ms).
  returned: success
  type: dict
mtu:
  description: The MTU of the device the path leaves the client by.
  returned: success
  type: int
  sample: 1450
device:
  description: That device.
  returned: success
  type: str
  sample: pb3f2a9c01x0
"""

import ipaddress
import os
import select
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import path_measure

MEASURED_NETWORKS = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("198.18.0.0/15"))
SERVER_READY_S = 5  # the server says it listens within this time, or the measurement fails
SERVER_LISTENING = "Server listening"


def _checked(module, argv):
    rc, stdout, stderr = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"{' '.join(argv)} failed (rc {rc}): {(stderr or stdout).strip()[-500:]}", cmd=argv)
    return stdout


def _wait_listening(server):
    """True once the iperf3 server printed that it listens, False when it exits or SERVER_READY_S pass."""
    deadline, seen = time.monotonic() + SERVER_READY_S, b""
    while time.monotonic() < deadline and server.poll() is None:
        ready, _, _ = select.select([server.stdout], [], [], 0.1)
        if ready:
            # raw reads: a buffered readline could keep the line that says so where select does not see it
            seen += os.read(server.stdout.fileno(), 4096)
            if SERVER_LISTENING.encode() in seen:
                return True, seen.decode(errors="replace")
    return False, seen.decode(errors="replace")


def _remote_throughput(module, params, seconds):
    """The client against a server the caller started elsewhere: tried again while it cannot connect yet."""
    client = path_measure.client_argv(params["client_netns"], params["address"], params["port"], seconds)
    deadline = time.monotonic() + SERVER_READY_S
    while True:
        rc, stdout, stderr = module.run_command(client)
        try:
            return path_measure.parse_iperf3(stdout)
        except path_measure.MeasureError as error:
            if not path_measure.not_listening_yet(stdout) or time.monotonic() > deadline:
                module.fail_json(msg=f"{error} (rc {rc}; stderr: {stderr.strip()[-300:]})", cmd=client)
        time.sleep(0.2)


def _throughput(module, params, seconds):
    if params["server_running"]:
        return _remote_throughput(module, params, seconds)
    server_argv = path_measure.server_argv(
        params["server_netns"], params["address"], params["port"], seconds + path_measure.SLACK_S + SERVER_READY_S
    )
    server = subprocess.Popen(server_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        listening, seen = _wait_listening(server)
        if not listening:
            module.fail_json(msg=f"the iperf3 server did not start listening: {seen.strip()[-500:] or 'nothing'}")
        client = path_measure.client_argv(params["client_netns"], params["address"], params["port"], seconds)
        rc, stdout, stderr = module.run_command(client)
        try:
            return path_measure.parse_iperf3(stdout)
        except path_measure.MeasureError as error:
            module.fail_json(msg=f"{error} (rc {rc}; stderr: {stderr.strip()[-300:]})", cmd=client)
    finally:
        # a --one-off server exits after its client; one still there is stopped, bounded
        if server.poll() is None:
            server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


def main():
    module = AnsibleModule(
        argument_spec={
            "address": {"type": "str", "required": True},
            "client_netns": {"type": "str"},
            "server_netns": {"type": "str"},
            "port": {"type": "int", "default": 5201},
            "seconds": {"type": "float", "default": 1.0},
            "ping_count": {"type": "int", "default": 10},
            "server_running": {"type": "bool", "default": False},
        },
        supports_check_mode=False,
    )
    params = module.params
    try:
        address = ipaddress.ip_address(params["address"])
    except ValueError as error:
        module.fail_json(msg=f"address: {error}")
    if not any(address in network for network in MEASURED_NETWORKS):
        module.fail_json(msg=f"address {address} is refused: a cell's path is measured in 127.0.0.0/8 or 198.18.0.0/15")
    if not 0 < params["seconds"] <= 60 or not 1 <= params["ping_count"] <= 1000:
        module.fail_json(
            msg="seconds must be within (0, 60] and ping_count within [1, 1000]: the measurement is bounded"
        )
    inside = ["-n", params["client_netns"]] if params["client_netns"] else []
    try:
        device = path_measure.route_device(_checked(module, ["ip", *inside, "-j", "route", "get", str(address)]))
        mtu = path_measure.link_mtu(_checked(module, ["ip", *inside, "-j", "link", "show", "dev", device]))
    except path_measure.MeasureError as error:
        module.fail_json(msg=str(error))
    ping = path_measure.ping_argv(params["client_netns"], str(address), params["ping_count"])
    rc, stdout, stderr = module.run_command(ping)
    try:
        rtt = path_measure.parse_ping(stdout)
    except path_measure.MeasureError as error:
        module.fail_json(msg=f"{error} (rc {rc}; stderr: {stderr.strip()[-300:]})", cmd=ping)
    throughput = _throughput(module, params, params["seconds"])
    module.exit_json(
        changed=False,
        samples=path_measure.samples(throughput, rtt, mtu),
        throughput=throughput,
        rtt=rtt,
        mtu=mtu,
        device=device,
    )


if __name__ == "__main__":
    main()
