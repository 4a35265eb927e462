"""The network path planner (names, addresses, MTU, commands, refusals), the reading of what a host holds, and
the parsers of the path's measurement, on captured output of iperf3 3.12 and iputils ping."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import network_path, network_state, path_measure

DATA = Path(__file__).parent / "data" / "network_path"
KEY = "campaign-a/runner-1/cell-0042"


def test_names_fit_ifnamsiz_and_carry_the_cells_prefix():
    plan = network_path.plan(KEY, "overlay", network_path.MAX_INSTANCES, "bm")
    tag = plan["tag"]
    names = [plan["bridge"]]
    for instance in plan["instances"]:
        names += [instance["host_veth"], instance["veth"], instance["vxlan"]]
    assert all(len(name) <= network_path.IFNAMSIZ for name in names)
    assert all(network_path.LINK_NAME.match(name) and network_path.tag_of_name(name) == tag for name in names)
    assert {network_path.tag_of_name(instance["netns"]) for instance in plan["instances"]} == {tag}
    assert len(set(names)) == len(names)
    # the host's own names are never taken for a cell's
    assert [network_path.tag_of_name(name) for name in ("eth0", "docker0", "pbr0", "pb12345678", "lo")] == [None] * 5


def test_addresses_are_the_cells_24s_of_the_benchmarking_range():
    plan = network_path.plan(KEY, "overlay", 3, "bm")
    underlay, overlay = ipaddress.ip_network(plan["subnet"]), ipaddress.ip_network(plan["overlay_subnet"])
    assert underlay == network_path.cell_subnet(KEY)
    for subnet in (underlay, overlay):
        assert subnet.prefixlen == 24 and subnet.subnet_of(network_path.SUPERNET)
        assert subnet != ipaddress.ip_network("198.18.0.0/24")
    assert not underlay.overlaps(overlay)
    assert plan["gateway"] == str(underlay.network_address + 1)
    assert [i["underlay_address"] for i in plan["instances"]] == [str(underlay.network_address + n) for n in (2, 3, 4)]
    assert [i["address"] for i in plan["instances"]] == [str(overlay.network_address + n) for n in (2, 3, 4)]


def test_the_overlay_never_gets_the_underlays_subnet():
    for n in range(300):
        assert network_path.overlay_subnet(f"cell-{n}") != network_path.cell_subnet(f"cell-{n}")


def test_the_overlay_mtu_leaves_room_for_vxlan_as_flannel_does():
    overlay = network_path.plan(KEY, "overlay", 2, "bm", mtu=9000)
    assert (overlay["underlay_mtu"], overlay["mtu"], overlay["vni"], overlay["vxlan_port"]) == (9000, 8950, 1, 8472)
    assert network_path.plan(KEY, "bridge", 2, "bm")["mtu"] == 1500
    assert network_path.plan(KEY, "loopback", 2, "bm")["mtu"] == 65536


def test_overlay_commands_write_every_peer_into_each_vxlan_device():
    plan = network_path.plan(KEY, "overlay", 3, "bm", subnet="198.18.0.0/28", overlay="198.18.0.16/28")
    first = plan["instances"][0]
    vxlan = [c for c in plan["commands"] if first["vxlan"] in c and "type" in c][0]
    assert vxlan[vxlan.index("mtu") + 1] == "1450" and vxlan[vxlan.index("dstport") + 1] == "8472"
    assert vxlan[vxlan.index("local") + 1] == "198.18.0.2" and "nolearning" in vxlan
    fdb = [c[5:] for c in plan["commands"] if c[:2] == ["bridge", "-n"] and c[2] == first["netns"]]
    assert fdb == [
        ["00:00:00:00:00:00", "dst", "198.18.0.3", "dev", first["vxlan"]],
        [plan["instances"][1]["mac"], "dst", "198.18.0.3", "dev", first["vxlan"]],
        ["00:00:00:00:00:00", "dst", "198.18.0.4", "dev", first["vxlan"]],
        [plan["instances"][2]["mac"], "dst", "198.18.0.4", "dev", first["vxlan"]],
    ]


def test_a_process_namespace_is_attached_instead_of_made():
    plan = network_path.plan(KEY, "bridge", 2, "cn", pids=[4242, 4343])
    assert ["ip", "netns", "attach", plan["instances"][1]["netns"], "4343"] in plan["commands"]
    assert not [c for c in plan["commands"] if c[:3] == ["ip", "netns", "add"]]


def test_a_filtering_bridge_gets_its_forward_rule():
    plan = network_path.plan(KEY, "bridge", 2, "bm", bridge_filtered=True)
    assert ["iptables", "-I", "FORWARD", "1", *plan["forward_rule"]] in plan["commands"]
    assert plan["forward_rule"][-3:] == [plan["tag"], "-j", "ACCEPT"]
    assert network_path.plan(KEY, "bridge", 2, "bm")["forward_rule"] is None


def test_loopback_builds_nothing():
    plan = network_path.plan(KEY, "loopback", 3, "bm")
    assert plan["commands"] == [] and {i["address"] for i in plan["instances"]} == {"127.0.0.1"}
    assert network_path.plan(KEY, "loopback", 1, "cn")["instances"][0]["address"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"subnet": "10.0.0.0/24"},
            "subnet 10.0.0.0/24 is outside 198.18.0.0/15: a cell's network path only uses the benchmarking range",
        ),
        ({"overlay": "198.20.0.0/24"}, "overlay subnet 198.20.0.0/24 is outside 198.18.0.0/15"),
        ({"subnet": "198.18.0.0/30"}, "subnet 198.18.0.0/30 has no room for 2 instances"),
        ({"subnet": "198.18.0.1/24"}, "subnet '198.18.0.1/24' is not an IPv4 network: 198.18.0.1/24 has host bits set"),
        ({"subnet": "198.18.0.0/28", "overlay": "198.18.0.0/29"}, "overlaps the underlay's 198.18.0.0/28"),
        ({"path": "vlan"}, "unknown network path 'vlan'; known: loopback, bridge, overlay"),
        (
            {"path": "loopback", "platform": "cn"},
            "network path 'loopback' cannot join 2 instances of cn: each container has a loopback of its own, "
            "which only workloads in the host's network namespace share (bm, cr or sg); use 'bridge' or 'overlay'",
        ),
        ({"path": "loopback", "platform": "vm"}, "each guest has a loopback of its own"),
        ({"instances": 0}, "instances must be a whole number from 1 to 64, got 0"),
        ({"pids": [1]}, "pids names 1 processes for 2 instances: give one per instance"),
        ({"mtu": 1000}, "mtu must be from 1280 to 65535, got 1000"),
    ],
)
def test_refusals_say_what_to_change(args, message):
    args = {"path": "overlay", "platform": "bm", "instances": 2, **args}
    path, platform, instances = args.pop("path"), args.pop("platform"), args.pop("instances")
    with pytest.raises(network_path.NetworkPathError) as refused:
        network_path.plan(KEY, path, instances, platform, **args)
    assert message in str(refused.value)


def _state_of(plan):
    """What a host that built ``plan`` holds, as the module reads it."""
    prefixlen = plan["subnet"].split("/")[1]
    links = {plan["bridge"]: _link("bridge", [f"{plan['gateway']}/{prefixlen}"])}
    netns = {}
    for instance in plan["instances"]:
        links[instance["host_veth"]] = _link("veth", [], master=plan["bridge"])
        inside = {instance["veth"]: _link("veth", [f"{instance['underlay_address']}/{prefixlen}"])}
        fdb = {}
        if plan["path"] == "overlay":
            inside[instance["vxlan"]] = _link("vxlan", [f"{instance['address']}/{prefixlen}"], mtu=plan["mtu"])
            inside[instance["vxlan"]].update(
                mac=instance["mac"],
                vxlan={"id": 1, "port": 8472, "local": instance["underlay_address"], "learning": False},
            )
            peers = [p for p in plan["instances"] if p is not instance]
            fdb[instance["vxlan"]] = [
                (mac, p["underlay_address"]) for p in peers for mac in (network_path.FLOOD_MAC, p["mac"])
            ]
        netns[instance["netns"]] = {"links": inside, "fdb": fdb, "attached_to_pid": bool(instance["pid"])}
    rules = [plan["forward_rule"]] if plan["forward_rule"] else []
    return {"links": links, "netns": netns, "forward_rules": rules}


def _link(kind, addresses, master=None, mtu=1500):
    return {"kind": kind, "mtu": mtu, "master": master, "up": True, "mac": None, "addresses": addresses, "vxlan": None}


def test_a_built_path_has_no_differences_and_a_broken_one_says_what_broke():
    plan = network_path.plan(
        KEY, "overlay", 2, "bm", subnet="198.18.0.0/24", overlay="198.18.1.0/24", bridge_filtered=True
    )
    state = _state_of(plan)
    assert network_state.differences(plan, state) == []
    second = plan["instances"][1]
    del state["netns"][second["netns"]]["links"][second["vxlan"]]
    state["links"][plan["bridge"]]["up"] = False
    state["forward_rules"] = []
    assert network_state.differences(plan, state) == [
        f"{plan['bridge']}: up is False, not True",
        f"{second['vxlan']} is missing in {second['netns']}",
        f"the FORWARD rule that lets {plan['bridge']}'s ports talk is missing",
    ]


def test_a_path_built_for_more_instances_differs():
    state = _state_of(network_path.plan(KEY, "bridge", 3, "bm"))
    found = network_state.differences(network_path.plan(KEY, "bridge", 2, "bm"), state)
    tag = network_path.tag_of(KEY)
    assert found == [f"{tag}h2 is not of this plan", f"namespace {tag}-2 is not of this plan"]


def test_removal_takes_only_the_cells_own_and_the_bridge_last():
    ours = network_path.plan(KEY, "overlay", 2, "bm", bridge_filtered=True)
    other = network_path.plan("another cell", "bridge", 2, "bm")
    state = _state_of(ours)
    theirs = _state_of(other)
    state["links"].update(theirs["links"])
    state["netns"].update(theirs["netns"])
    tag = ours["tag"]
    assert network_state.tags_in(state) == sorted([tag, other["tag"]])
    commands = network_state.removal_commands(state, [tag])
    assert all(tag in " ".join(command) for command in commands)
    assert commands[:3] == [
        ["ip", "-n", f"{tag}-0", "link", "del", f"{tag}x0"],
        ["ip", "-n", f"{tag}-0", "link", "del", f"{tag}v0"],
        ["ip", "netns", "del", f"{tag}-0"],
    ]
    assert commands[-2:] == [["ip", "link", "del", f"{tag}br"], ["iptables", "-D", "FORWARD", *ours["forward_rule"]]]


def test_what_ip_prints_is_read_for_the_cells_names_only():
    links = [
        {"ifname": "eth0", "mtu": 1500, "flags": ["UP"], "addr_info": []},
        {
            "ifname": "pb0123abcdx1",
            "mtu": 1450,
            "flags": ["BROADCAST", "UP", "LOWER_UP"],
            "address": "02:01:23:ab:cd:01",
            "addr_info": [
                {"family": "inet", "local": "198.18.5.3", "prefixlen": 24},
                {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
            ],
            "linkinfo": {
                "info_kind": "vxlan",
                "info_data": {"id": 1, "port": 8472, "local": "198.18.4.3", "learning": False},
            },
        },
    ]
    assert network_state.parse_links(json.dumps(links)) == {
        "pb0123abcdx1": {
            "kind": "vxlan",
            "mtu": 1450,
            "master": None,
            "up": True,
            "mac": "02:01:23:ab:cd:01",
            "addresses": ["198.18.5.3/24"],
            "vxlan": {"id": 1, "port": 8472, "local": "198.18.4.3", "learning": False},
        }
    }
    assert network_state.parse_netns('[{"name":"pb0123abcd-1","id":3},{"name":"blue"}]') == ["pb0123abcd-1"]
    assert network_state.parse_netns("") == []
    rules = "-P FORWARD DROP\n-A FORWARD -j DOCKER-USER\n"
    rules += "-A FORWARD -i pb0123abcdbr -o pb0123abcdbr -m comment --comment pb0123abcd -j ACCEPT\n"
    assert network_state.parse_forward_rules(rules) == [
        ["-i", "pb0123abcdbr", "-o", "pb0123abcdbr", "-m", "comment", "--comment", "pb0123abcd", "-j", "ACCEPT"]
    ]
    with pytest.raises(network_state.StateReadError, match="printed no JSON: Object"):
        network_state.parse_links('Object "addr" is unknown')


def test_iperf3_report_gives_the_received_throughput():
    figures = path_measure.parse_iperf3((DATA / "iperf3_overlay.json").read_text())
    assert figures["throughput_gbps"] == pytest.approx(10.164048824968697)
    assert (figures["retransmits"], figures["loaded_rtt_ms"]) == (1, 0.168)
    assert figures["bytes"] > 0 and figures["seconds"] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ((DATA / "iperf3_refused.json").read_text(), "iperf3 failed: unable to connect to server: Connection refused"),
        ("iperf3: error - unable to connect", "iperf3 printed no JSON report: iperf3: error - unable to connect"),
        ('{"end": {"sum_received": {"bits_per_second": 0}}}', "no throughput at end.sum_received.bits_per_second: 0"),
    ],
)
def test_iperf3_without_a_figure_says_why(text, message):
    with pytest.raises(path_measure.MeasureError) as failed:
        path_measure.parse_iperf3(text)
    assert message in str(failed.value)


def test_ping_summary_gives_the_round_trip():
    assert path_measure.parse_ping((DATA / "ping_overlay.txt").read_text()) == {
        "sent": 10,
        "received": 10,
        "min_ms": 0.110,
        "avg_ms": 0.303,
        "max_ms": 1.678,
        "mdev_ms": 0.460,
    }
    with pytest.raises(path_measure.MeasureError, match="ping got no reply to 3 packets: .*100% packet loss"):
        path_measure.parse_ping((DATA / "ping_unreachable.txt").read_text())
    with pytest.raises(path_measure.MeasureError, match="ping printed no packet counts: ping: unknown host"):
        path_measure.parse_ping("ping: unknown host")


def test_measurement_commands_are_bounded_and_run_in_the_instances_namespaces():
    server = path_measure.server_argv("pbabcdef01-1", "198.18.7.3", 5201, 16)
    assert server[:3] == ["timeout", "--kill-after=2", "16"] and server[3:7] == ["ip", "netns", "exec", "pbabcdef01-1"]
    assert "--one-off" in server
    client = path_measure.client_argv("pbabcdef01-0", "198.18.7.3", 5201, 1.0)
    assert client[2] == "11" and client[client.index("--time") + 1] == "1" and "--json" in client
    ping = path_measure.ping_argv(None, "127.0.0.1", 10)
    assert ping[3:] == ["ping", "-n", "-q", "-c", "10", "-i", "0.05", "-W", "1", "127.0.0.1"]
    assert path_measure.samples({"throughput_gbps": 9.87654}, {"avg_ms": 0.2}, 1450) == [
        {"metric": "path_throughput", "value": 9.8765, "unit": "Gbit/s"},
        {"metric": "path_rtt", "value": 0.2, "unit": "ms"},
        {"metric": "path_mtu", "value": 1450, "unit": "bytes"},
    ]
