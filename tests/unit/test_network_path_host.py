"""platbench.lab.network_path and network_path_measure on this host, as root: real bridges, namespaces, veths
and VXLAN devices, measured, then removed, also when half-built.

Each test has a cell key of its own and its own /28s of 198.18.0.0/24 (the /24 no cell is given), so tests
run side by side without meeting, and nothing talks outside 198.18.0.0/15. Every test's finalizer removes
whatever carries its tag, by the tools themselves, whether the module's removal worked or not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import network_path
from playbook_run import ENV, REPO

from tests import skips

pytestmark = [skips.needs_root("network namespaces, bridges and VXLAN devices are made on this host")]
# After the lab is built (marker lab, the lab fixture): its host_prep installs iproute2, iperf3 and ping, which a
# fresh machine running the unit tests first may lack.
measuring = skips.needs_lab("ip", "bridge", "iperf3", "ping")
building = skips.needs_lab("ip", "bridge")
MODULE_SECONDS = 120


def run_module(module, args, check=False):
    """(rc, result) of one run of ``platbench.lab.<module>`` on this host."""
    argv = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-m", f"platbench.lab.{module}"]
    argv += ["-a", json.dumps(args)] + (["--check"] if check else [])
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=MODULE_SECONDS, env=ENV)
    assert "=>" in done.stdout, f"no module result (rc {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.returncode, json.loads(done.stdout.split("=>", 1)[1])


def _ip_json(*argv):
    done = subprocess.run(["ip", "-j", *argv], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout or "[]")


def held(tag):
    """Every link, namespace and FORWARD rule of this host that carries ``tag``."""
    links = [link["ifname"] for link in _ip_json("link", "show") if link["ifname"].startswith(tag)]
    netns = [entry["name"] for entry in _ip_json("netns", "list") if entry["name"].startswith(tag)]
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, timeout=30).stdout
    return links + netns + [line for line in rules.splitlines() if tag in line]


def _remove_by_hand(tag):
    for entry in _ip_json("netns", "list"):
        if entry["name"].startswith(tag):
            subprocess.run(["ip", "netns", "del", entry["name"]], timeout=30, check=False)
    for link in sorted(_ip_json("link", "show"), key=lambda link: link["ifname"].endswith("br")):
        if link["ifname"].startswith(tag):
            subprocess.run(["ip", "link", "del", link["ifname"]], timeout=30, check=False)
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, timeout=30).stdout
    for line in rules.splitlines():
        if f"--comment {tag}" in line:
            subprocess.run(["iptables", "-D", *line.split()[1:]], timeout=30, check=False)


class Cell:
    """A test's cell: its key, tag and /28s; ``args`` are the module's for it."""

    def __init__(self, block):
        self.key = f"test-network-path-{uuid.uuid4()}"
        self.tag = network_path.tag_of(self.key)
        self.subnet, self.overlay = f"198.18.0.{block * 32}/28", f"198.18.0.{block * 32 + 16}/28"

    def args(self, path, **more):
        more = {"platform": "bm", **more}
        return {"key": self.key, "path": path, "subnet": self.subnet, "overlay_subnet": self.overlay, **more}

    def absent(self):
        return run_module("network_path", {"key": self.key, "state": "absent"})


@pytest.fixture
def cell(request):
    """A cell whose tag holds nothing after the test, whatever the test did."""
    made = []

    def make(block):
        made.append(Cell(block))
        return made[-1]

    yield make
    for one in made:
        one.absent()
        _remove_by_hand(one.tag)
        assert held(one.tag) == [], f"left behind by {request.node.name}"


@pytest.fixture
def stand_ins():
    """Processes with a network namespace of their own each, as containers started with --network none;
    they sleep at most 60 s and are killed after the test."""
    started = []

    def start(count):
        for _ in range(count):
            started.append(subprocess.Popen(["unshare", "--net", "sleep", "60"]))
        return [process.pid for process in started[-count:]]

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=10)


def _measure(built):
    first, second = built["instances"][:2]
    return run_module(
        "network_path_measure",
        {"client_netns": first["netns"], "server_netns": second["netns"], "address": second["address"], "seconds": 1},
    )


@measuring
@pytest.mark.parametrize(("path", "block", "mtu"), [("bridge", 0, 1500), ("overlay", 1, 1450)])
def test_a_path_is_built_measured_and_removed(cell, path, block, mtu):
    one = cell(block)
    rc, built = run_module("network_path", one.args(path))
    assert rc == 0 and built["changed"], built
    assert built["mtu"] == mtu and all(i["address"].startswith("198.18.0.") for i in built["instances"])
    rc, figures = _measure(built)
    assert rc == 0, figures
    by_metric = {sample["metric"]: sample for sample in figures["samples"]}
    assert by_metric["path_throughput"]["value"] > 0 and by_metric["path_throughput"]["unit"] == "Gbit/s"
    assert by_metric["path_rtt"]["value"] > 0 and figures["rtt"]["received"] == figures["rtt"]["sent"] == 10
    assert by_metric["path_mtu"]["value"] == mtu and figures["device"] == built["instances"][0].get(
        "vxlan", f"{one.tag}v0"
    )
    print(
        f"{path}: {figures['throughput']['throughput_gbps']:.2f} Gbit/s, rtt {figures['rtt']['avg_ms']} ms, mtu {mtu}"
    )
    rc, removed = one.absent()
    assert rc == 0 and removed["changed"] and removed["removed_tags"] == [one.tag]
    assert held(one.tag) == []
    assert one.absent()[1]["changed"] is False


@building
def test_check_mode_changes_nothing_and_a_second_present_changes_nothing(cell):
    one = cell(2)
    rc, planned = run_module("network_path", one.args("overlay"), check=True)
    assert rc == 0 and planned["changed"] and f"{one.tag}br is missing" in planned["differences"]
    assert held(one.tag) == []
    assert run_module("network_path", one.args("overlay"))[1]["changed"]
    rc, again = run_module("network_path", one.args("overlay"))
    assert rc == 0 and (again["changed"], again["differences"], again["commands"]) == (False, [], [])
    rc, checked = run_module("network_path", one.args("overlay"), check=True)
    assert (rc, checked["changed"]) == (0, False)
    built = held(one.tag)
    rc, checked = run_module("network_path", {"key": one.key, "state": "absent"}, check=True)
    assert rc == 0 and checked["changed"] and checked["commands"] and held(one.tag) == built


@building
def test_a_half_built_path_is_removed_and_rebuilt(cell):
    one = cell(3)
    tag = one.tag
    for argv in (
        ["ip", "netns", "add", f"{tag}-0"],
        ["ip", "link", "add", f"{tag}br", "type", "bridge"],
        ["ip", "link", "add", f"{tag}h0", "type", "veth", "peer", "name", f"{tag}v0"],
        ["ip", "link", "set", f"{tag}v0", "netns", f"{tag}-0"],
        ["ip", "-n", f"{tag}-0", "link", "add", f"{tag}x0", "type", "vxlan", "id", "1", "dstport", "8472"],
    ):
        subprocess.run(argv, check=True, timeout=30)
    rc, rebuilt = run_module("network_path", one.args("bridge"))
    assert rc == 0 and rebuilt["changed"]
    assert f"{tag}x0 in {tag}-0 is not of this plan" in rebuilt["differences"]
    assert f"{tag}br: up is False, not True" in rebuilt["differences"]
    assert f"namespace {tag}-1 is missing" in rebuilt["differences"]
    assert run_module("network_path", one.args("bridge"))[1]["changed"] is False
    subprocess.run(["ip", "-n", f"{tag}-1", "link", "del", f"{tag}v1"], check=True, timeout=30)
    subprocess.run(["ip", "link", "add", f"{tag}h7", "type", "bridge"], check=True, timeout=30)
    rc, removed = one.absent()
    assert rc == 0 and removed["changed"] and held(tag) == []


@building
def test_a_build_that_fails_halfway_leaves_nothing(cell):
    one = cell(4)
    no_such_process = 2**22 + 1  # above the kernel's largest pid_max
    rc, failed = run_module("network_path", one.args("bridge", platform="cn", pids=[no_such_process, no_such_process]))
    assert rc != 0 and f"could not build the bridge path {one.tag}: ip netns attach" in failed["msg"]
    assert held(one.tag) == []


@measuring
def test_instances_join_the_namespaces_of_running_processes(cell, stand_ins):
    one = cell(5)
    pids = stand_ins(2)
    rc, built = run_module("network_path", one.args("overlay", platform="cn", pids=pids))
    assert rc == 0 and built["changed"], built
    inside = subprocess.run(
        ["nsenter", "--target", str(pids[1]), "--net", "ip", "-j", "addr", "show", f"{one.tag}x1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert built["instances"][1]["address"] in inside.stdout
    assert run_module("network_path", one.args("overlay", platform="cn", pids=pids))[1]["changed"] is False
    rc, figures = _measure(built)
    assert rc == 0 and figures["throughput"]["throughput_gbps"] > 0, figures
    assert one.absent()[1]["changed"] and held(one.tag) == []
    # the processes keep their namespaces, with nothing of the cell left in them
    for pid in pids:
        links = subprocess.run(
            ["nsenter", "--target", str(pid), "--net", "ip", "-j", "link", "show"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert [link["ifname"] for link in json.loads(links.stdout)] == ["lo"]


@building
def test_cleanup_all_removes_every_cells_leftovers_and_nothing_else(cell):
    first, second = cell(6), cell(7)
    for one in (first, second):
        assert run_module("network_path", one.args("bridge"))[0] == 0
    subprocess.run(["ip", "link", "add", "pbr0keep", "type", "bridge"], check=True, timeout=30)
    try:
        rc, removed = run_module("network_path", {"state": "absent", "cleanup_all": True})
        assert rc == 0 and {first.tag, second.tag} <= set(removed["removed_tags"])
        assert held(first.tag) == held(second.tag) == []
        assert "pbr0keep" in [link["ifname"] for link in _ip_json("link", "show")]
    finally:
        subprocess.run(["ip", "link", "del", "pbr0keep"], check=False, timeout=30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "loopback", "platform": "cn"}, "network path 'loopback' cannot join 2 instances of cn"),
        (
            {"path": "bridge", "platform": "bm", "subnet": "192.168.7.0/24"},
            "subnet 192.168.7.0/24 is outside 198.18.0.0/15",
        ),
        ({"path": "bridge"}, "state is present but all of the following are missing: platform"),
        ({"path": "bridge", "platform": "xx"}, "unknown platform 'xx'"),
    ],
)
@building
def test_bad_input_fails_before_anything_is_made(args, message):
    key = f"test-network-path-{uuid.uuid4()}"
    rc, result = run_module("network_path", {"key": key, **args})
    assert rc != 0 and message in result["msg"]
    assert held(network_path.tag_of(key)) == []
