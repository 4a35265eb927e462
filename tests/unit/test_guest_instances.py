"""Cells with several instances of a guest platform (vm, vmcn): a guest per instance, each with a NIC on the cell's
bridge. Guests run under TCG on this machine, too slow for a live multi-guest cell in the suite's budget, so what is
checked here is static: the plans, each guest's domain XML as platbench.lab.vm renders it (the guest kind's
tasks/boot.yml in check mode), the commands that configure each guest's end of the path, the ranks' command lines and
environment, the refusals. A live run needs a KVM host (README, "What is verified where")."""

from __future__ import annotations

import ipaddress
import json
import shlex
import subprocess
import xml.etree.ElementTree as ET

import guest_domain
import pytest
import yaml
from ansible_collections.platbench.lab.plugins.module_utils import guest_path, network_path, network_state, path_measure
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options, sized
from playbook_run import REPO

PLAYBOOK = REPO / "tests/roles/platform_run/guest_instances_check.yml"
RENDER = "Render the domain XML"
BENCHMARKING = ipaddress.ip_network("198.18.0.0/15")
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpus": [],
    "gpu_count": 0,
    "vm_accelerator": "kvm",
    "qemu_binary": "/usr/bin/qemu-system-x86_64",
}
SSH_KEY = "/home/runner/.platbench/guest/id_ed25519"
GUEST_IMAGE = {"ssh_key": SSH_KEY, "container_image_id": "sha256:" + "ab" * 32}
OPTIONS = plan_options(host="runner-a", campaign="c1", guest_image=GUEST_IMAGE)
DISTRIBUTED = """
name: ranks
workload: cnn_train
platforms: [vm, vmcn]
scaleup: [2]
cpu_config: [pin, vnl]
processor: [cpu]
repeats: 1
mode: distributed
instances: {count: COUNT}
network: [bridge, overlay]
params: {model: tiny, steps: 5, framework: FRAMEWORK}
"""
SHARED = """
name: noisy
workload: cnn_train
platforms: [vm, vmcn]
scaleup: [1]
cpu_config: [pin]
processor: [cpu]
repeats: 1
mode: shared
instances: {cpus: CPUS}
background: {workload: cnn_train, params: {model: alexnet, batch_size: 32}, settle: 3}
params: {model: tiny, steps: 5}
"""


def cells(text, **values):
    for name, value in values.items():
        text = text.replace(name.upper(), str(value))
    return {cell["id"]: cell for cell in expand(validate_experiment(yaml.safe_load(text)))}


def distributed(cell_id, count=3, framework="torch", options=OPTIONS):
    plan = cell_plan(cells(DISTRIBUTED, count=count, framework=framework)[cell_id], FACTS, options)
    assert_plan_matches_its_specs(plan)
    return plan


def remote_line(argv):
    """The shell line a rank's ssh runs in its guest, split as the guest's shell splits it."""
    assert argv[argv.index("--") - 1].startswith("platbench-")
    return shlex.split(argv[argv.index("--") + 1])


def env_of(words):
    """The variables of ``cd DIR && exec env NAME=VALUE... python ...``."""
    start = words.index("env") + 1
    pairs = [word for word in words[start:] if "=" in word and not word.startswith("-")]
    return dict(pair.split("=", 1) for pair in pairs[: len(pairs)])


def docker_env(words):
    return dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "--env")


def render(playbook, tmp_path, cell):
    """Each guest's domain XML, by domain name, as platbench.lab.vm renders it for the cell's plan."""
    image = guest_domain.guest_image(tmp_path)
    key = json.loads(image.read_text())["ssh_key"]
    options = {**OPTIONS, "guest_image": {**GUEST_IMAGE, "ssh_key": key}}
    variables = {
        "host_facts": FACTS,
        "cell": sized(cell, FACTS, options),  # as cells_to_run hands it to cell.yml
        "plan_options": options,
        "vm_image_description": str(image),
        "vm_state_dir": str(tmp_path / "vms"),
        "vm_libvirt_uri": "test:///default",  # libvirt's own test driver, in the process
    }
    run = playbook(PLAYBOOK, variables, "--check")
    domains = [ET.fromstring(result["ansible_facts"]["vm_domain_xml"]) for result in run.results(RENDER)]
    assert not (tmp_path / "vms").exists()  # check mode wrote nothing
    return {domain.findtext("./name"): domain for domain in domains}


@pytest.mark.parametrize(
    ("cell_id", "count", "bridged"),
    [("vm/2/pin/cpu|network=overlay|r0", 3, True), ("vmcn/2/pin/cpu|network=bridge|r0", 2, True)],
)
def test_each_rank_is_a_guest_pinned_to_its_slice_with_a_nic_on_the_cells_bridge(
    playbook, tmp_path, cell_id, count, bridged
):
    cell = cells(DISTRIBUTED, count=count, framework="torch")[cell_id]
    plan = cell_plan(cell, FACTS, OPTIONS)
    tag = network_path.tag_of(plan["instances"]["network"]["key"])
    domains = render(playbook, tmp_path, cell)
    names = [f"{plan['name']}-{index}" for index in range(count)]
    assert sorted(domains) == names
    slices = [["6", "7"], ["4", "5"], ["2", "3"]][:count]  # disjoint: the highest CPUs to the chief
    for index, name in enumerate(names):
        domain = domains[name]
        assert [pin.get("cpuset") for pin in domain.findall("./cputune/vcpupin")] == slices[index]
        assert domain.find("./cputune/emulatorpin").get("cpuset") == ",".join(slices[index])
        assert domain.findtext("./vcpu") == "2" and domain.findtext("./memory") == str(OPTIONS["vm_memory_mb"])
        (nic,) = domain.findall("./devices/interface")
        assert nic.get("type") == "bridge" and nic.find("./model").get("type") == "virtio"
        assert nic.find("./source").get("bridge") == f"{tag}br"
        assert nic.find("./mac").get("address") == f"06:{tag[2:4]}:{tag[4:6]}:{tag[6:8]}:{tag[8:10]}:{index:02x}"
        assert nic.find("./target").get("dev") == f"{tag}t{index}"  # network_path.LINK_NAME knows it as the cell's
        assert network_path.tag_of_name(f"{tag}t{index}") == tag
        assert nic.find("./mtu").get("size") == "1500"
        # SSH stays on the restricted user-net NIC, forwarded on 127.0.0.1 only
        args = [
            arg.get("value") for arg in domain.findall("./{http://libvirt.org/schemas/domain/qemu/1.0}commandline/*")
        ]
        assert any(arg.startswith("user,id=pbnet0,restrict=on,hostfwd=tcp:127.0.0.1:") for arg in args)
        disks = [disk.find("./source").get("file").rsplit("/", 1)[-1] for disk in domain.findall("./devices/disk")]
        assert ("docker.qcow2" in disks) is cell_id.startswith("vmcn/")


def test_the_host_makes_only_the_bridge_with_no_address_for_guests():
    planned = network_path.plan("k", "overlay", 3, "vm", bridge_filtered=True)
    tag = planned["tag"]
    assert planned["guests"] and planned["gateway"] is None
    assert planned["commands"] == [
        ["ip", "link", "add", f"{tag}br", "type", "bridge"],
        ["ip", "link", "set", "dev", f"{tag}br", "addrgenmode", "none"],
        ["ip", "link", "set", f"{tag}br", "up"],
        ["iptables", "-I", "FORWARD", "1", "-i", f"{tag}br", "-o", f"{tag}br", "-m", "comment", "--comment", tag,
         "-j", "ACCEPT"],
    ]  # fmt: skip
    assert all(instance["netns"] is None and "host_veth" not in instance for instance in planned["instances"])
    # Built, the host holds the bridge alone; the guests' taps (libvirt's) are never read, compared or removed.
    bridge = {"kind": "bridge", "up": True, "addresses": [], "mtu": 1500, "master": None, "mac": None, "vxlan": None}
    state = {"links": {f"{tag}br": bridge}, "netns": {}, "forward_rules": [planned["forward_rule"]]}
    assert network_state.differences(planned, state) == []
    shown = [
        {"ifname": f"{tag}br", "flags": ["UP"], "mtu": 1500, "linkinfo": {"info_kind": "bridge"}, "addr_info": []},
        {"ifname": f"{tag}t0", "flags": ["UP"], "mtu": 1500, "master": f"{tag}br",
         "linkinfo": {"info_kind": "tun", "info_data": {"type": "tap"}}, "addr_info": []},
    ]  # fmt: skip
    assert list(network_state.parse_links(json.dumps(shown))) == [f"{tag}br"]
    assert network_state.removal_commands(state, [tag])[0] == ["ip", "link", "del", f"{tag}br"]


def test_each_guest_gives_its_nic_found_by_mac_an_address_and_a_vxlan_device_as_flannel_does():
    plan = distributed("vm/2/pin/cpu|network=overlay|r0")
    guests, network = plan["guests"], plan["instances"]["network"]
    planned = network_path.plan(network["key"], "overlay", 3, "vm")
    tag = planned["tag"]
    underlay = [instance["underlay_address"] for instance in planned["instances"]]
    overlay = [instance["address"] for instance in planned["instances"]]
    assert [member["address"] for member in network["members"]] == overlay and network["mtu"] == 1450
    assert all(ipaddress.ip_address(address) in BENCHMARKING for address in underlay + overlay)
    assert len({ipaddress.ip_network(f"{a}/24", strict=False) for a in underlay + overlay}) == 2  # two /24s
    for index, guest in enumerate(guests):
        commands = guest_path.guest_commands(planned, index)
        nic, vxlan, mac = f"{tag}v{index}", f"{tag}x{index}", planned["instances"][index]["mac"]
        assert commands[:4] == [
            ["ip", "link", "set", "dev", nic, "mtu", "1500"],
            ["ip", "addr", "add", f"{underlay[index]}/24", "dev", nic],
            ["ip", "link", "set", "dev", nic, "addrgenmode", "none"],
            ["ip", "link", "set", nic, "up"],
        ]
        assert commands[4] == [
            "ip", "link", "add", vxlan, "address", mac, "mtu", "1450", "type", "vxlan", "id", "1", "dstport", "8472",
            "local", underlay[index], "dev", nic, "nolearning",
        ]  # fmt: skip
        assert commands[5] == ["ip", "addr", "add", f"{overlay[index]}/24", "dev", vxlan]
        fdb = [command for command in commands if command[0] == "bridge"]
        peers = [peer for peer in planned["instances"] if peer["index"] != index]
        assert fdb == [
            entry
            for peer in peers
            for entry in (
                ["bridge", "fdb", "append", "00:00:00:00:00:00", "dst", peer["underlay_address"], "dev", vxlan],
                ["bridge", "fdb", "append", peer["mac"], "dst", peer["underlay_address"], "dev", vxlan],
            )
        ]
        assert commands[-1] == ["ip", "link", "set", vxlan, "up"]
        # The script the guest runs: the NIC found by its MAC, renamed, then those commands, each quoted.
        script = guest["path_script"]
        assert script == guest_path.guest_script(planned, index)
        assert f"= {guest['path_nics'][0]['mac']} ]" in script and guest["path_nics"][0]["mac"].startswith("06:")
        assert f'ip link set dev "$found" name {nic}' in script
        assert all(shlex.join(command) in script for command in commands)
        assert script.rstrip().endswith("echo configured") and "echo unchanged; exit 0" in script
        assert script.index(f"ip link set dev {nic} mtu") > script.index(f"name {nic}")  # named before configured
        checked = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True, check=False)
        assert checked.returncode == 0, checked.stderr  # the guest's /bin/sh parses it


def test_a_bridge_path_gives_the_guests_their_nic_only():
    plan = distributed("vmcn/2/pin/cpu|network=bridge|r0", count=2)
    planned = network_path.plan(plan["instances"]["network"]["key"], "bridge", 2, "vmcn")
    commands = guest_path.guest_commands(planned, 1)
    assert len(commands) == 4 and not any("vxlan" in command for command in commands)
    assert plan["instances"]["network"]["members"][1]["device"] == f"{planned['tag']}v1"
    assert plan["instances"]["network"]["mtu"] == 1500


def test_vm_ranks_run_the_guest_venv_over_ssh_and_meet_on_the_chiefs_path_address():
    plan = distributed("vm/2/pin/cpu|network=overlay|r0")
    network = plan["instances"]["network"]
    (ranks,) = plan["instances"]["rounds"]
    assert [rank["role"] for rank in ranks] == ["chief", "worker", "worker"]
    for index, rank in enumerate(ranks):
        name = f"{plan['name']}-{index}"
        config = f"/home/runner/.platbench/guest/ssh_config-{name}"
        assert rank["argv"][:7] == ["ssh", "-F", config, "-o", "BatchMode=yes", name, "--"]
        words = remote_line(rank["argv"])
        assert words[:3] == ["cd", "/opt/platbench", "&&"] and words[3:5] == ["exec", "env"]
        python = words.index("/opt/platbench/venv/bin/python")
        assert words[python + 1 : python + 3] == ["-m", "workloads.cnn_train"]
        assert json.loads(words[-1]) == {"instance_index": index, "instance_role": rank["role"]}
        env = env_of(words[:python])
        assert env["MASTER_ADDR"] == network["members"][0]["address"]
        assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_PORT"]) == (str(index), "3", str(network["port"]))
        assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == network["members"][index]["device"]
        assert env["GLOO_SOCKET_IFNAME"].endswith(f"x{index}") and env["OMP_NUM_THREADS"] == "2"
        assert rank["stop"][:7] == rank["argv"][:7]
        assert shlex.split(rank["stop"][-1])[:4] == ["pkill", "--signal", "KILL", "--full"]
        assert rank["env"] == {} and rank["chdir"] is None  # the controller's ssh needs nothing of its own
    # the measurement: from the chief's guest to the first worker's, its server bounded
    measure = network["measure"]
    assert (measure["client_host"], measure["server_host"]) == (f"{plan['name']}-0", f"{plan['name']}-1")
    assert measure["address"] == network["members"][1]["address"]
    assert measure["server_argv"][:3] == ["timeout", "--kill-after=2", str(measure["server_seconds"])]
    assert measure["server_argv"][3:] == ["iperf3", "--server", "--one-off", "--bind", measure["address"], "--port",
                                          str(measure["port"]), "--forceflush"]  # fmt: skip
    assert plan["runtime"]["guest_domains"] == [f"{plan['name']}-{index}" for index in range(3)]
    assert plan["runtime"]["instance_cpusets"] == ["6,7", "4,5", "2,3"]


def test_vmcn_ranks_run_the_guests_engine_on_the_guests_network_and_vcpus():
    plan = distributed("vmcn/2/pin/cpu|network=bridge|r0", count=2, framework="tensorflow")
    network = plan["instances"]["network"]
    for index, rank in enumerate(plan["instances"]["rounds"][0]):
        words = remote_line(rank["argv"])
        name = f"{plan['name']}-{index}"
        assert words[:5] == ["docker", "run", "--rm", "--name", name]
        assert words[words.index("--network") + 1] == "host"  # the guest's NIC on the path
        assert words[words.index("--cpuset-cpus") + 1] == "0,1"  # every vCPU of its guest
        config = json.loads(docker_env(words)["TF_CONFIG"])
        port = network["port"]
        assert config == {
            "cluster": {"worker": [f"{m['address']}:{port + i}" for i, m in enumerate(network["members"])]},
            "task": {"type": "worker", "index": index},
        }
        assert words[words.index(GUEST_IMAGE["container_image_id"]) + 1 :][:3] == [
            "python",
            "-m",
            "workloads.cnn_train",
        ]
        assert shlex.split(rank["stop"][-1]) == ["docker", "rm", "--force", name]
    assert [guest["cpu_pins"] for guest in plan["guests"]] == [[6, 7], [4, 5]]
    assert all(guest["with_container_disk"] for guest in plan["guests"])


def test_vanilla_guests_are_left_to_the_host_scheduler():
    plan = distributed("vm/2/vnl/cpu|network=bridge|r0", count=2)
    assert [(guest["cpu_pins"], guest["emulator_cpus"], guest["vcpus"]) for guest in plan["guests"]] == [
        ([], [], 2)
    ] * 2


@pytest.mark.parametrize(("sharing", "pins"), [("disjoint", [[7], [6]]), ("shared", [[7], [7]])])
def test_a_shared_vm_cell_runs_its_foreground_and_background_in_a_guest_each(sharing, pins):
    cell = cells(SHARED, cpus=sharing)["vm/1/pin/cpu|background=cnn_train:model=alexnet|r0"]
    plan = cell_plan(cell, FACTS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    assert [guest["cpu_pins"] for guest in plan["guests"]] == pins
    assert all(guest["path_nics"] == [] and guest["path_script"] is None for guest in plan["guests"])
    assert plan["instances"]["network"]["path"] is None and plan["instances"]["settle"] == 3.0
    (alone,), (background, beside) = plan["instances"]["rounds"]
    foreground, noise = (f"{plan['name']}-{index}" for index in range(2))
    assert alone["argv"][5] == beside["argv"][5] == foreground and background["argv"][5] == noise
    assert background["background"] is True and json.loads(remote_line(beside["argv"])[-1])["share"] == "shared"
    words = remote_line(background["argv"])
    assert words[words.index("--model") + 1] == "alexnet" and words[words.index("--steps") + 1] == "1000000"


def test_loopback_is_refused_for_guests_when_the_experiment_is_loaded():
    text = DISTRIBUTED.replace("COUNT", "2").replace("FRAMEWORK", "torch").replace("[bridge, overlay]", "[loopback]")
    with pytest.raises(ExperimentError) as refused:
        validate_experiment(yaml.safe_load(text), source="experiments/ranks.yml")
    message = str(refused.value)
    assert message.startswith("experiments/ranks.yml: invalid experiment")
    assert (
        "network: 'loopback' cannot join the instances of vm and vmcn, each a guest with a loopback of its own"
        in message
    )
    assert "give network: [bridge] or [overlay]" in message
    # on a process platform loopback stays what it was
    validate_experiment(yaml.safe_load(text.replace("[vm, vmcn]", "[bm]")))
    with pytest.raises(network_path.NetworkPathError, match="each guest has a loopback of its own"):
        network_path.plan("k", "loopback", 2, "vm")


@pytest.mark.parametrize(
    ("platform", "options", "message"),
    [
        ("vmsg", {**OPTIONS, "guest_image": {**GUEST_IMAGE, "sif_disk": "/x.img"}}, "Apptainer in a guest"),
        ("vm", {**OPTIONS, "guest_image": {"container_image_id": "x"}}, "names no ssh_key"),
    ],
)
def test_what_cannot_be_placed_in_several_guests_is_refused(platform, options, message):
    text = DISTRIBUTED.replace("[vm, vmcn]", f"[{platform}]").replace("COUNT", "2").replace("FRAMEWORK", "torch")
    cell = next(cell for cell in expand(validate_experiment(yaml.safe_load(text))))
    with pytest.raises(CellPlanError, match=message):
        cell_plan(cell, FACTS, options)


def test_what_the_guests_reported_goes_into_the_cells_runtime():
    plan = distributed("vm/2/pin/cpu|network=bridge|r0", count=2)
    names = plan["runtime"]["guest_domains"]
    guests = {
        name: {"accelerator": "kvm", "boot_to_ready_s": "12.5", "ssh_port": 40000 + i} for i, name in enumerate(names)
    }
    vcpus = {"results": [{"item": name, "vcpu_affinity": [[7 - 2 * i], [6 - 2 * i]]} for i, name in enumerate(names)]}
    ran = [{"name": name, "role": "chief", "index": 0, "round": 0, "rc": 0, "stdout": "X"} for name in names]
    seen = placements.observed(plan, {"guests": guests, "vcpus": vcpus, "instances": {"instances": ran}})
    assert seen.runtime["guests"][1] == {
        "name": names[1],
        "accelerator": "kvm",
        "boot_to_ready_s": 12.5,
        "ssh_port": 40001,
        "vcpu_affinity": [[5], [4]],
    }
    assert "guests" in placements.RESULTS


def test_a_server_in_another_guest_is_waited_for_only_while_it_refuses():
    refused = json.dumps({"error": "unable to connect to server - server may have stopped running: Connection refused"})
    assert path_measure.not_listening_yet(refused)
    assert not path_measure.not_listening_yet(json.dumps({"error": "unable to connect to server: No route to host"}))
    assert not path_measure.not_listening_yet("not json")


@pytest.mark.parametrize("jump", [None, "admin@kvm1.lab:2222"])
def test_the_ssh_config_the_ranks_use_reaches_the_guest_as_ansible_does(playbook, tmp_path, jump):
    """platbench.lab.vm's ssh_config-NAME, rendered as the role renders it, resolved by OpenSSH itself (ssh -G): the
    KVM host is the controller itself (no jump) or reached over SSH (the jump through it, as add_host's)."""
    variables = {
        "vm_name": "platbench-0123456789ab-1",
        "vm_port": {"port": 40022},
        "vm_image": {"ssh_key": "/home/runner/.cache/platbench/ssh/local_ed25519"},
        "vm_proxy_jump": jump or "",
    }
    template = REPO / "roles/vm/templates/ssh_config.j2"
    plays = [
        {
            "name": "Render the guest's ssh config",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Render",
                    "ansible.builtin.set_fact": {"rendered": f"{{{{ lookup('template', '{template}') }}}}"},
                }
            ],
        }
    ]
    (result,) = playbook(plays, variables).results("Render")
    config = tmp_path / "ssh_config"
    config.write_text(result["ansible_facts"]["rendered"])
    resolved = subprocess.run(
        ["ssh", "-G", "-F", str(config), variables["vm_name"]], text=True, capture_output=True, check=True
    ).stdout
    options = dict(line.split(" ", 1) for line in resolved.splitlines() if " " in line)
    assert (options["hostname"], options["port"], options["user"]) == ("127.0.0.1", "40022", "root")
    assert options["identityfile"] == variables["vm_image"]["ssh_key"] and options["identitiesonly"] == "yes"
    assert options["userknownhostsfile"] == f"/home/runner/.cache/platbench/ssh/known_hosts-{variables['vm_name']}"
    assert options["stricthostkeychecking"] == "true"
    assert options.get("proxyjump") == jump
