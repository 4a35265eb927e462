"""micro_net between two network namespaces of the test's own, joined by a veth pair in 198.19.x.0/30.

Needs root, iproute2's `ip netns` and iperf3 (the lab installs iperf3: roles/micro_tools), not the
lab itself: it is marked `lab` so that it runs with the lab tests, where those are present. The
namespaces (and with them the veth pair) are removed at the end, whether the test passed or not.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips
from workloads.common.record import parse_result_lines
from workloads.micro_net.peer import READY_PREFIX
from workloads.micro_net.processes import stop_process, wait_for_line

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.lab

COMMAND_SECONDS = 30
PEER_LIFETIME_SECONDS = 120
RUN_SECONDS = 120
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=COMMAND_SECONDS)


@pytest.fixture
def two_namespaces(request):
    """(peer's namespace, its address, client's namespace): fresh names, removed in the finalizer."""
    if shutil.which("iperf3") is None:
        request.getfixturevalue("lab")  # the lab build installs iperf3 (platbench.lab.micro_tools)
    skips.unless_root("network namespaces are created as root")
    skips.require(commands=["ip"], by="iproute2 (Debian: `apt-get install iproute2`)")
    skips.require(commands=["iperf3"], by="the lab (platbench.lab.micro_tools, run by site.yml)")
    tag = secrets.token_hex(3)
    peer_ns, client_ns = f"platbench-it-{tag}-peer", f"platbench-it-{tag}-client"
    peer_if, client_if = f"pbv{tag}p", f"pbv{tag}c"  # interface names: 15 characters at most
    block = int(tag, 16) % 64 * 4  # a /30 of 198.19.<third>.0/24 from the benchmarking range
    third = int(tag, 16) // 64 % 256
    peer_address, client_address = f"198.19.{third}.{block + 1}", f"198.19.{third}.{block + 2}"
    created = []
    try:
        for namespace in (peer_ns, client_ns):
            ip("netns", "add", namespace)
            created.append(namespace)
        ip("link", "add", peer_if, "type", "veth", "peer", "name", client_if)
        for namespace, interface, address in ((peer_ns, peer_if, peer_address), (client_ns, client_if, client_address)):
            ip("link", "set", interface, "netns", namespace)
            ip("-n", namespace, "addr", "add", f"{address}/30", "dev", interface)
            ip("-n", namespace, "link", "set", interface, "up")
            ip("-n", namespace, "link", "set", "lo", "up")
        yield peer_ns, peer_address, client_ns
    finally:
        # Removing a namespace removes its end of the veth pair, and so the pair.
        for namespace in created:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=COMMAND_SECONDS)
        leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=COMMAND_SECONDS)
        assert not any(namespace in leftover.stdout for namespace in created), leftover.stdout


def test_iperf3_and_the_ping_pong_between_two_namespaces(two_namespaces):
    peer_ns, peer_address, client_ns = two_namespaces
    peer = subprocess.Popen(
        ["ip", "netns", "exec", peer_ns, sys.executable, "-m", "workloads.micro_net.peer", "--bind", peer_address]
        + ["--lifetime", str(PEER_LIFETIME_SECONDS)],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        ready, output = wait_for_line(peer, READY_PREFIX, COMMAND_SECONDS)
        assert ready, f"the peer did not get ready: {output} {peer.stderr.read().decode() if peer.poll() else ''}"
        client = subprocess.run(
            ["ip", "netns", "exec", client_ns, sys.executable, "-m", "workloads.micro_net", "--peer", peer_address]
            + ["--path", "veth", "--duration", "1", "--streams", "1,2", "--pingpong-count", "200"],
            cwd=REPO,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
        )
    finally:
        stop_process(peer)
    records = parse_result_lines(client.stdout)
    assert len(records) == 1, client.stdout + client.stderr
    record = records[0]
    assert record["status"] == "ok", record["error"]
    throughput = [entry for entry in record["metrics"] if entry["metric"] == "net_throughput"]
    assert sorted(entry["labels"]["streams"] for entry in throughput) == [1, 2]
    assert all(entry["value"] > 0 for entry in throughput)
    rtt = next(entry["value"] for entry in record["metrics"] if entry["metric"] == "net_rtt")
    assert rtt > 0
    assert record["metadata"]["path"] == "veth" and record["metadata"]["peer"]["address"] == peer_address
