"""The cell plan, for every built platform x CPU configuration, on injected host topologies."""

from __future__ import annotations

import ipaddress
import json
import shlex
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.filter.cells import cell_plan as cell_plan_filter
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import (
    CellPlanError,
    choose_cpus,
    dataset_dir,
    instance_name,
)
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options, sized, split_line
from unbuilt import REASON, make_unbuilt

REPO = Path(__file__).resolve().parents[2]
ONE_NODE = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 0,
    "gpus": [],
}
# Two nodes, CPUs interleaved between them as many two-socket servers number them.
TWO_NODES = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": [0, 2, 4, 6], "1": [1, 3, 5, 7]},
    "gpu_count": 0,
    "gpus": [],
}
# One GPU left with the host (bm, cn), one assigned to guests and bound to vfio-pci (vm, vmcn).
GPU_HOST = {
    **ONE_NODE,
    "gpu_count": 2,
    "gpus": [
        {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"},
        {"pci_address": "0000:af:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "40"},
    ],
}
GPU_ASSIGNMENT = {"0000:af:00.0": "guests"}
OPTIONS = plan_options(
    host="runner-a",
    campaign="c1",
    guest_image={
        "container_image_id": "sha256:" + "ab" * 32,
        "sif_disk": "/var/lib/platbench/guest/sif-abababababab.img",
        "sif_image_id": "sha256:" + "ab" * 32,
        "apptainer_version": "1.4.5",
        "firecracker": {"kernel": "/var/lib/platbench/guest/r.vmlinux", "rootfs": "/var/lib/platbench/guest/r.raw"},
    },
    engines={
        "docker": {
            "answers": True,
            "version": "24.0.5",
            "image_id": "sha256:" + "cd" * 32,
            "runtimes": {"runc": [], "runsc": ["--platform=ptrace", "--network=none"]},
        },
        "podman": {"answers": True, "version": "4.3.1", "image_id": "sha256:" + "cd" * 32},
    },
    k8s_node="runner-a",
    sif={"sif": "/var/lib/platbench/sif/workload-cdcdcdcdcdcd.sif", "image_id": "sha256:" + "cd" * 32},
    apptainer_version="1.4.5",
)
# The OpenStack platforms run on the campaign's instances: tests/unit/test_openstack_instances_cellplan.py.
BUILT = [p.label for p in platforms.PLATFORMS if p.placement and not p.remote]
# Each built platform's kind, its placement (roles/platform_run/tasks/<kind>.yml); a guest's inner kind.
KINDS = {
    "bm": "process",
    "cr": "chroot",
    "ns": "oci_bundle",
    "sc": "oci_bundle",
    "cn": "container",
    "pd": "container",
    "gv": "container",
    "lx": "lxc",
    "vm": "guest",
    "vmcn": "guest",
    "vmsg": "guest",
    "sg": "process",
    "k8s": "k8s_job",
    "mvm": "micro_vm",
}
GUEST_INNER = {"vm": "process", "vmcn": "container", "vmsg": "process"}
# The PATH of a runner host's process cell, on which `env -i` sets the plan's variables alone.
CLEAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def make_cell(platform, scaleup=2, cpu_config="pin", processor="cpu", **params):
    scenario = f"{platform}/{scaleup}/{cpu_config}/{processor}"
    params = {"framework": "tensorflow", "steps": 3, **params}
    return {
        "id": f"{scenario}|r0",
        "scenario": scenario,
        "params": params,
        "labels": {
            **params,
            "platform": platform,
            "scaleup": scaleup,
            "cpu_config": cpu_config,
            "processor": processor,
            "workload": "cnn_train",
            "repeat": 0,
            "host": "runner-a",
        },
    }


@pytest.mark.parametrize(
    "topology, pinned_cpus, node", [(ONE_NODE, [6, 7], "0"), (TWO_NODES, [5, 7], "1")], ids=["one-node", "two-nodes"]
)
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
@pytest.mark.parametrize("platform", BUILT)
def test_every_built_platform_and_cpu_config_is_planned(platform, cpu_config, topology, pinned_cpus, node):
    plan = cell_plan(make_cell(platform, cpu_config=cpu_config), topology, OPTIONS)
    pinned = cpu_config == "pin"
    assert plan["placement"] == plan["kind"] == KINDS[platform] == platforms.get(platform).kind
    assert plan["platform"] == platform
    # On k8s kubelet's static CPU manager chooses the cores (tests/unit/test_k8s_job.py).
    chosen = pinned and platform != "k8s"
    assert plan["cpus"] == (pinned_cpus if chosen else [])
    assert plan["cpuset"] == (",".join(map(str, pinned_cpus)) if chosen else "")
    assert plan["numa_node"] == (node if chosen else None)
    assert plan["cpu_quota"] == (None if pinned else 2.0)
    assert plan["argv"][:4] == ["-m", "workloads.cnn_train", "--threads", "2"]
    assert all(plan["env"][name] == "2" for name in THREAD_VARS)
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == ""  # a cpu cell sees no GPU
    assert plan["runtime"]["cpuset_requested"] == (plan["cpuset"] or None)
    assert plan["name"] == instance_name("c1", "runner-a", plan["cell"])
    sections = {key for key in ("process", "container", "guest") if key in plan}
    expected = {
        "bm": {"process"},
        "cr": {"process"},  # and its `chroot`: tests/unit/test_chroot_kind.py
        "ns": {"process"},  # and its `oci_bundle`: tests/unit/test_oci_bundle_kind.py
        "sc": {"process"},
        "cn": {"container"},
        "pd": {"container"},
        "gv": {"container"},
        "lx": set(),  # its `lxc`: tests/unit/test_kinds.py
        "vm": {"guest", "process"},
        "vmcn": {"guest", "container"},
        "k8s": set(),  # its `job` and `kubernetes`: tests/unit/test_k8s_job.py
        "vmsg": {"guest", "process"},
        "sg": {"process"},
        "mvm": {"process"},  # and its `micro_vm`: tests/unit/test_firecracker.py
    }
    assert sections == expected[platform]
    if platform == "bm":
        # Unpinned, the cell gets every CPU the host allows back: the harness that starts it may be kept off some.
        taskset = ["taskset", "--cpu-list", plan["cpuset"] if pinned else "0-7"]
        assert plan["process"]["argv"] == taskset + ["/opt/platbench/venv/bin/python"] + plan["argv"]
        assert plan["process"]["env"]["PYTHONPATH"] == "/opt/platbench"
        assert plan["runtime"]["launcher"] == ("taskset" if pinned else "process")
    if "container" in plan:
        container = plan["container"]
        assert container["command"] == ["python"] + plan["argv"] and container["network_mode"] == "none"
        assert container["cpus"] == (None if pinned else 2.0)
        # No GPU: Docker gets no device request, Podman no CDI device (each engine only its own key).
        gpu_key = {"docker": "device_requests", "podman": "devices"}[container["engine"]]
        assert container[gpu_key] == [] and not ({"device_requests", "devices"} - {gpu_key}) & set(container)
        assert container["labels"] == {
            "org.platbench.cell": plan["cell"],
            "org.platbench.campaign": "c1",
            "org.platbench.host": "runner-a",
        }
    if platform in ("cn", "pd"):
        assert plan["container"]["engine"] == {"cn": "docker", "pd": "podman"}[platform]
        assert plan["container"]["engine_host"] == "runner-a" and plan["container"]["cpuset_cpus"] == (
            plan["cpuset"] or None
        )
        assert plan["container"]["image"] == "platbench/workload:latest"
        assert plan["container"]["volumes"] == ["/var/cache/platbench:/var/cache/platbench:rw"]
    if "container" in plan:
        # Docker's exited containers on the runner host are pruned with the campaign; the others go with their cell.
        expected_removal = "campaign" if platform in ("cn", "gv") else "cell"
        assert plan["container"]["removal"] == expected_removal
    # A chroot's and a bundle's lines wrap their process's: test_chroot_kind.py, test_oci_bundle_kind.py.
    if "process" in plan and not {"chroot", "oci_bundle"} & set(plan):
        # A process runs on the runner, or in the guest (reached over ssh by its name).
        assert plan["process"]["host"] == (plan["name"] if {"guest", "micro_vm"} & set(plan) else "runner-a")
        # The shell line that ansible.builtin.raw runs is the same directory, environment and argv, quoted, under
        # coreutils' timeout with the cell's timeout (3600 s here), and the task's own timeout after its SIGKILL.
        command = plan["process"]["command"]
        if platform in ("bm", "sg"):
            # On the runner host the line first moves itself into the cell's own uncapped cgroup, back to nice 0 and
            # the normal policy (the harness runs at SCHED_IDLE), and runs the workload in a clean environment.
            cgroup = plan["process"]["cgroup"]
            assert cgroup == {
                "path": f"/sys/fs/cgroup/{cpu_quota.cgroup_name(plan['name'])}",
                "version": "v2",
                "quota_us": cpu_quota.UNLIMITED,
                "period_us": 100000,
            }
            assert plan["runtime"]["uncapped_cgroup"] == {
                "cgroup": cgroup["path"],
                "applied_by": "cgroup v2 cpu.max=max 100000",
            }
            assert plan["process"]["normal_policy"] is plan["process"]["clean_env"] is True
            line = split_line(command)
            assert (line["chdir"], line["enter"]) == (plan["process"]["chdir"], cpu_quota.shell_enter(cgroup))
            start = "renice -n 0 -p $$ >/dev/null && chrt --other 0 "
            assert line["workload"].startswith(start)
            words = shlex.split(line["workload"].removeprefix(start))
            assert words[:5] == ["timeout", "--verbose", "--kill-after=10", "3600", "env"]
            assert words[5:9] == ["-i", CLEAN_PATH, "HOME=/root", "LANG=C.UTF-8"]
            env_words = words[9 : 9 + len(plan["process"]["env"])]
        else:
            # In a guest: its own processes, neither moved into a cgroup nor given another policy or environment.
            assert not {"cgroup", "normal_policy", "clean_env"} & set(plan["process"])
            assert "uncapped_cgroup" not in plan["runtime"]
            words = shlex.split(command)
            assert words[:4] == ["cd", plan["process"]["chdir"], "&&", "exec"]
            assert words[4:9] == ["timeout", "--verbose", "--kill-after=10", "3600", "env"]
            env_words = words[9 : 9 + len(plan["process"]["env"])]
        assert dict(word.split("=", 1) for word in env_words) == plan["process"]["env"]
        assert words[9 + len(env_words) :] == plan["process"]["argv"]
        assert plan["process"]["task_timeout"] == 3600 + 10 + 30
    if "guest" in plan:
        guest = plan["guest"]
        assert guest["inner"] == GUEST_INNER[platform]
        assert guest["name"] == plan["name"] and guest["vcpus"] == 2
        assert guest["cpu_pins"] == guest["emulator_cpus"] == plan["cpus"]
        assert guest["with_container_disk"] == (platform == "vmcn")
    if platform == "vm":
        assert plan["process"]["argv"] == ["/opt/platbench/venv/bin/python"] + plan["argv"]
        assert plan["runtime"]["launcher"] == "ssh"
    if platform == "vmcn":
        # The vCPUs are pinned on the host; in the guest the container takes all of them.
        assert plan["container"]["engine"] == "docker" and plan["container"]["engine_host"] == plan["guest"]["name"]
        assert plan["container"]["cpuset_cpus"] == ("0,1" if pinned else None)
        assert plan["container"]["image"] == OPTIONS["guest_image"]["container_image_id"]


def test_the_scale_up_too_big_for_one_node_fills_one_then_spills_to_the_next():
    # node 1 (up to CPU 7) is filled, then node 0's highest CPUs: CPU 0 still goes last
    cpus, node = choose_cpus(range(8), 6, numa_nodes=TWO_NODES["numa_nodes"])
    assert cpus == [1, 3, 4, 5, 6, 7] and node is None


def test_reserved_cpus_and_cpu_zero_go_last():
    assert choose_cpus(range(4), 2, reserved=[3]) == ([1, 2], None)
    assert choose_cpus(range(8), 4, reserved=[7], numa_nodes=TWO_NODES["numa_nodes"]) == ([0, 2, 4, 6], "0")
    # the node whose free CPUs reach highest wins: node 1 lost CPU 7, so node 0 (up to 6) does
    assert choose_cpus(range(8), 2, reserved=[7], numa_nodes=TWO_NODES["numa_nodes"]) == ([4, 6], "0")


def test_two_hosts_on_one_machine_each_get_their_own_cpu():
    a = cell_plan(
        make_cell("bm", scaleup=1),
        {"cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}, "cpus_allowed": [0, 1]},
        {**OPTIONS, "reserved_cpus": [0]},
    )
    b = cell_plan(
        make_cell("bm", scaleup=1),
        {"cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}, "cpus_allowed": [0, 1]},
        {**OPTIONS, "host": "runner-b", "reserved_cpus": [1]},
    )
    assert (a["cpuset"], b["cpuset"]) == ("1", "0")
    assert a["name"] != b["name"]


# The GPU cells themselves: tests/unit/test_gpu_plan.py.


def test_data_is_mounted_read_only_and_passed_to_the_workload():
    dataset = {"generator": "mnist", "args": {"images": 600}}
    plan = cell_plan(make_cell("cn"), ONE_NODE, {**OPTIONS, "dataset": dataset, "datasets_dir": "/data"})
    directory = dataset_dir("/data", dataset)
    assert directory.startswith("/data/mnist-") and len(directory) == len("/data/mnist-") + 10
    assert plan["data_dir"] == directory and plan["argv"][-2:] == ["--data-dir", directory]
    assert plan["container"]["volumes"][0] == f"{directory}:{directory}:ro"
    own = cell_plan(make_cell("cn", data_dir="/srv/imagenet"), ONE_NODE, OPTIONS)
    assert own["container"]["volumes"][0] == "/srv/imagenet:/srv/imagenet:ro"


def test_names_depend_on_campaign_host_and_cell():
    names = {instance_name(c, h, i) for c in ("c1", "c2") for h in ("a", "b") for i in ("x", "y")}
    assert len(names) == 8 and all(len(name) == len("platbench-") + 12 for name in names)


@pytest.mark.parametrize(
    "cell, facts, options, message",
    [
        (
            make_cell("bm", scaleup=16),
            ONE_NODE,
            OPTIONS,
            r"cell bm/16/pin/cpu\|r0 on runner-a: scale-up 16 needs 16 CPUs",
        ),
        (make_cell("cn", processor="gpu"), ONE_NODE, OPTIONS, "a 'gpu' cell needs a GPU"),
        (make_cell("lxc"), ONE_NODE, OPTIONS, "unknown platform 'lxc'; known: bm"),
        (
            make_cell("bm"),
            ONE_NODE,
            {"campaign": "c"},
            r"option\(s\) host \(from inventory_hostname\), .*given",
        ),
        (
            make_cell("bm"),
            ONE_NODE,
            {**OPTIONS, "host": None},
            r"^option\(s\) host \(from inventory_hostname\) must be given$",
        ),
        (make_cell("bm"), ONE_NODE, {**OPTIONS, "colour": 1}, "unknown option"),
    ],
)
def test_cells_that_cannot_be_placed_say_why(cell, facts, options, message):
    with pytest.raises(CellPlanError, match=message):
        cell_plan(cell, facts, options)


def test_the_filter_names_itself_in_its_errors():
    from ansible.errors import AnsibleFilterError

    # A cell that did not come through cells_to_run (which sizes it for its host) is refused, not sized again.
    with pytest.raises(AnsibleFilterError, match="cell_plan: cell .* is not sized for this host .* cells_to_run"):
        cell_plan_filter(make_cell("bm", scaleup=16), ONE_NODE, OPTIONS)
    # The filter's keyword gives the host, alone or over the options' own.
    without_host = {name: value for name, value in OPTIONS.items() if name != "host"}
    cell = sized(make_cell("bm"), ONE_NODE, OPTIONS)
    assert cell_plan_filter(cell, ONE_NODE, without_host, host="h")["host"] == "h"
    assert cell_plan_filter(cell, ONE_NODE, {**OPTIONS, "host": "r"}, host="h")["host"] == "h"


@pytest.mark.parametrize("processor", ["cpu", "gpu"])
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
@pytest.mark.parametrize("platform", BUILT)
def test_the_plan_is_exactly_what_its_entry_point_declares(platform, cpu_config, processor):
    """The contract: every plan passes the argument specs of its placement entry point, key for key."""
    cell = make_cell(platform, cpu_config=cpu_config, processor=processor)
    options = {**OPTIONS, "dataset": {"generator": "mnist"}, "gpu_assignment": GPU_ASSIGNMENT}
    if processor == "gpu" and platforms.get(platform).gpu_view == "none":  # mvm, gv, lx: no GPU to hand over
        with pytest.raises(CellPlanError, match="passes no GPU through"):
            cell_plan(cell, GPU_HOST, options)
        return
    assert_plan_matches_its_specs(cell_plan(cell, GPU_HOST, options))


def micro_net_cell(platform, cell_id=None, cpu_config="pin", **params):
    cell = make_cell(platform, cpu_config=cpu_config)
    cell["params"] = {"duration": 1, **params}
    cell["labels"] = {**{k: v for k, v in cell["labels"].items() if k not in ("framework", "steps")}, **params}
    cell["labels"]["workload"] = "micro_net"
    if cell_id:
        cell["id"] = cell_id
    return cell


def _peer_round(plan):
    """micro_net's one round: (its peer, the workload), each an instance of the plan."""
    (round_,) = plan["instances"]["rounds"]
    serve, workload = round_
    assert (serve["role"], serve["index"], serve["background"]) == ("peer", 1, True)
    assert (workload["role"], workload["index"], workload["background"]) == ("foreground", 0, False)
    return serve, workload


def _serve_argv(address, lifetime, port="5201", pingpong_port="5202"):
    return ["-m", "workloads.micro_net.peer", "--bind", address, "--port", port, "--pingpong-port", pingpong_port] + [
        "--lifetime",
        str(lifetime),
    ]


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_micro_net_on_bm_runs_beside_its_peer_a_second_process_on_loopback(cpu_config):
    plan = cell_plan(micro_net_cell("bm", cpu_config=cpu_config), ONE_NODE, {**OPTIONS, "timeout": 900})
    assert plan["placement"] == "instances" and plan["instances"]["cpus"] == "shared"
    assert plan["task_file"] == "instances.yml"  # what cell.yml includes
    assert plan["instances"]["network"]["path"] == "loopback" and plan["instances"]["network"]["measure"] is None
    serve, workload = _peer_round(plan)
    python = f"{OPTIONS['prefix']}/venv/bin/python"
    taskset = ["taskset", "--cpu-list", plan["cpuset"]] if cpu_config == "pin" else []
    # Both on the cell's CPUs: the two ends of the path on the same cores, as on cn.
    assert serve["argv"] == taskset + [python] + _serve_argv("127.0.0.1", 900)
    assert workload["argv"][: len(taskset) + 1] == taskset + [python]
    at = workload["argv"].index("--peer")
    assert workload["argv"][len(taskset) + 1 : at] == plan["argv"]
    assert workload["argv"][at : at + 2] == ["--peer", "127.0.0.1"]
    assert "--serve-peer" not in workload["argv"]
    assert json.loads(workload["argv"][-1]) == {"instance_index": 0, "instance_role": "foreground"}
    assert plan["runtime"]["peer_address"] == "127.0.0.1"
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_micro_net_on_cn_runs_beside_its_peer_container_on_a_bridge_of_the_cell(cpu_config):
    plan = cell_plan(micro_net_cell("cn", cpu_config=cpu_config), ONE_NODE, {**OPTIONS, "timeout": 900})
    network = plan["instances"]["network"]
    assert network["path"] == "bridge" and network["measure"] is None  # micro_net measures the path itself
    addresses = [member["address"] for member in network["members"]]
    for address in addresses:
        assert ipaddress.ip_address(address) in ipaddress.ip_network("198.18.0.0/15")
        assert ipaddress.ip_address(address) not in ipaddress.ip_network("198.18.0.0/24")  # left to tests
    serve, workload = _peer_round(plan)
    # Each joins the namespace of its holder, which the path's bridge joins to the other's; never `host`.
    holders = [holder["name"] for holder in network["holders"]]
    for instance in (workload, serve):
        at = instance["argv"].index("--network") + 1
        assert instance["argv"][at] == f"container:{holders[instance['index']]}"
        assert "host" not in instance["argv"] and "--publish" not in instance["argv"]
        if cpu_config == "pin":
            assert instance["argv"][instance["argv"].index("--cpuset-cpus") + 1] == plan["cpuset"]
        else:
            assert instance["argv"][instance["argv"].index("--cpus") + 1] == "2.0"
    image = plan["container"]["image"] if "container" in plan else network["holders"][0]["image"]
    assert serve["argv"][serve["argv"].index(image) + 1 :] == ["python"] + _serve_argv(addresses[1], 900)
    command = workload["argv"][workload["argv"].index(image) + 1 :]
    assert command[: len(plan["argv"]) + 3] == ["python"] + plan["argv"] + ["--peer", addresses[1]]
    assert serve["stop"][-3:] == ["rm", "--force", serve["name"]]
    assert plan["runtime"]["peer_address"] == addresses[1]
    assert_plan_matches_its_specs(plan)


def test_the_peer_path_is_the_same_for_a_cell_and_differs_between_cells():
    def addresses(cell_id, campaign="c1"):
        plan = cell_plan(micro_net_cell("cn", cell_id), ONE_NODE, {**OPTIONS, "campaign": campaign})
        return tuple(member["address"] for member in plan["instances"]["network"]["members"])

    assert addresses("cn/2/pin/cpu|r0") == addresses("cn/2/pin/cpu|r0")
    subnets = [addresses(f"cn/2/pin/cpu|r{repeat}") for repeat in range(20)] + [addresses("cn/2/pin/cpu|r0", "c2")]
    # 511 subnets: 21 cells share one now and then (a host runs its cells one at a time, so only a leftover
    # path of another cell can be in the way), most get their own.
    assert len(set(subnets)) >= len(subnets) - 3


def test_the_peer_ports_follow_the_cell_params():
    plan = cell_plan(micro_net_cell("cn", port=6201, pingpong_port=6202), ONE_NODE, OPTIONS)
    serve, workload = _peer_round(plan)
    assert serve["argv"][-6:-2] == ["--port", "6201", "--pingpong-port", "6202"]
    at = workload["argv"].index("--peer")
    assert workload["argv"][at - 4 : at] == ["--port", "6201", "--pingpong-port", "6202"]


@pytest.mark.parametrize(
    "platform, params, message",
    [
        ("vm", {}, "micro_net needs a peer, which the lab provides on bm .* and cn .* only, not on vm"),
        ("bm", {"peer": "127.0.0.2"}, "micro_net's peer is chosen by the platform"),
        ("cn", {"serve_peer": True}, "micro_net's serve_peer is chosen by the platform"),
    ],
)
def test_micro_net_cells_the_platform_cannot_give_a_peer_say_why(platform, params, message):
    with pytest.raises(CellPlanError, match=message):
        cell_plan(micro_net_cell(platform, **params), ONE_NODE, OPTIONS)


def test_a_platform_not_built_is_refused_with_the_reason(monkeypatch):
    make_unbuilt(monkeypatch, "sg")
    with pytest.raises(CellPlanError, match=f"platform sg is not built by this release of platbench .{REASON}"):
        cell_plan(make_cell("sg"), ONE_NODE, OPTIONS)


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_an_emulated_guest_runs_onednn_kernels_no_higher_than_sse41_and_says_so(platform):
    cell = make_cell(platform)
    emulated = {**cell, "labels": {**cell["labels"], "emulated": True}}
    plan = cell_plan(emulated, ONE_NODE, OPTIONS)
    inner = plan["process"] if platform == "vm" else plan["container"]
    assert plan["env"]["ONEDNN_MAX_CPU_ISA"] == inner["env"]["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    assert plan["runtime"]["emulated_env"] == {"ONEDNN_MAX_CPU_ISA": "SSE41"}
    if platform == "vm":
        assert "ONEDNN_MAX_CPU_ISA=SSE41" in plan["process"]["command"]
    # On KVM the guest's kernels are the host's own.
    assert "ONEDNN_MAX_CPU_ISA" not in cell_plan(cell, ONE_NODE, OPTIONS)["env"]
