"""Cells with several instances: the experiment fields, the cells they expand into, each instance's plan, and
the shared cell's degradation. A guest per instance (vm, vmcn): test_guest_instances.py."""

from __future__ import annotations

import json
import textwrap

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import load_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import cell_outcome
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

EIGHT_CPUS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 0,
    "gpus": [],
}
TWO_CPUS = {
    **EIGHT_CPUS,
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1],
    "numa_nodes": {"0": [0, 1]},
}
OPTIONS = plan_options(host="runner-a", campaign="c1")
SHARED = """
name: noisy
workload: cnn_train
platforms: [bm, cn, vm]
scaleup: [1]
cpu_config: [pin, vnl]
processor: [cpu]
repeats: 1
mode: shared
background:
  workload: cnn_train
  params: {model: alexnet, batch_size: [512, 32]}
  settle: 3
params: {model: tiny, steps: 5}
"""
DISTRIBUTED = """
name: ranks
workload: cnn_train
platforms: [bm, cn]
scaleup: [2]
cpu_config: [pin]
processor: [cpu]
repeats: 1
mode: distributed
instances: {count: 3}
network: [bridge, overlay]
params: {model: tiny, steps: 5}
"""


def cells_of(tmp_path, name, text):
    (tmp_path / f"{name}.yml").write_text(textwrap.dedent(text))
    return expand(load_experiment(tmp_path, name))


def one(cells, cell_id):
    return next(cell for cell in cells if cell["id"] == cell_id)


def labels_of(argv):
    return json.loads(argv[argv.index("--labels-json") + 1])


def test_a_shared_experiment_has_a_cell_per_background_job(tmp_path):
    cells = cells_of(tmp_path, "noisy", SHARED)
    ids = [cell["id"] for cell in cells if cell["scenario"] == "bm/1/pin/cpu"]
    assert ids == [
        "bm/1/pin/cpu|background=cnn_train:model=alexnet,batch_size=512|r0",
        "bm/1/pin/cpu|background=cnn_train:model=alexnet,batch_size=32|r0",
    ]
    cell = one(cells, ids[0])
    assert cell["labels"]["background"] == "cnn_train:model=alexnet,batch_size=512"
    assert cell["instances"]["roles"] == ["foreground", "background"]
    assert cell["instances"]["background"]["params"] == {"model": "alexnet", "batch_size": 512}


def test_a_shared_bm_cell_runs_the_foreground_alone_then_beside_the_background_on_cores_of_their_own(tmp_path):
    cell = one(cells_of(tmp_path, "noisy", SHARED), "bm/1/pin/cpu|background=cnn_train:model=alexnet,batch_size=512|r0")
    plan = cell_plan(cell, EIGHT_CPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    assert (plan["placement"], plan["instances"]["settle"]) == ("instances", 3.0)
    alone, (background, beside) = plan["instances"]["rounds"]
    assert [spec["role"] for spec in alone] == ["foreground"] and background["background"] is True
    # disjoint: each instance a core of its own, from the highest down (CPU 0 goes last)
    assert alone[0]["argv"][:3] == ["taskset", "--cpu-list", "7"]
    assert background["argv"][:3] == ["taskset", "--cpu-list", "6"]
    assert beside["argv"] == alone[0]["argv"][:-1] + [beside["argv"][-1]]  # the same command, but for its labels
    assert labels_of(alone[0]["argv"]) == {"instance_index": 0, "instance_role": "foreground", "share": "alone"}
    assert labels_of(beside["argv"])["share"] == "shared"
    assert labels_of(background["argv"]) == {"instance_index": 1, "instance_role": "background"}
    argv = background["argv"]
    assert argv[argv.index("--model") + 1] == "alexnet" and argv[argv.index("--batch-size") + 1] == "512"
    assert argv[argv.index("--steps") + 1] == "1000000"  # it trains until it is stopped
    assert plan["runtime"]["instance_rounds"] == ["foreground 0", "background 1 + foreground 0"]


def test_a_shared_cn_cell_runs_containers_that_the_supervisor_removes(tmp_path):
    cell = one(cells_of(tmp_path, "noisy", SHARED), "cn/1/vnl/cpu|background=cnn_train:model=alexnet,batch_size=32|r0")
    plan = cell_plan(cell, EIGHT_CPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    alone = plan["instances"]["rounds"][0][0]
    argv = alone["argv"]
    assert argv[:4] == ["docker", "run", "--rm", "--name"] and argv[4] == plan["name"] + "-0"
    assert argv[argv.index("--cpus") + 1] == "1.0" and argv[argv.index("--network") + 1] == "none"
    assert "--cpuset-cpus" not in argv and alone["stop"] == ["docker", "rm", "--force", plan["name"] + "-0"]
    assert f"org.platbench.cell={cell['id']}" in argv and "org.platbench.role=foreground" in argv
    assert argv[argv.index("platbench/workload:latest") + 1 :][:3] == ["python", "-m", "workloads.cnn_train"]


def test_more_pinned_instances_times_scale_up_than_cpus_is_refused(tmp_path):
    cell = one(cells_of(tmp_path, "ranks", DISTRIBUTED), "bm/2/pin/cpu|network=bridge|r0")
    with pytest.raises(CellPlanError) as refused:
        cell_plan(cell, TWO_CPUS, OPTIONS)
    assert "3 pinned instances x scale-up 2 need 6 CPUs, but only 2 are free ([0, 1])" in str(refused.value)
    assert "instances: {cpus: shared}" in str(refused.value)


def test_distributed_cells_have_a_network_path_each_and_ranks_on_disjoint_cpus(tmp_path):
    cells = cells_of(tmp_path, "ranks", DISTRIBUTED)
    assert [cell["id"] for cell in cells] == [
        "bm/2/pin/cpu|network=bridge|r0",
        "cn/2/pin/cpu|network=bridge|r0",
        "bm/2/pin/cpu|network=overlay|r0",
        "cn/2/pin/cpu|network=overlay|r0",
    ]
    plan = cell_plan(cells[0], EIGHT_CPUS, OPTIONS)
    assert [member["cpuset"] for member in plan["instances"]["members"]] == ["6,7", "4,5", "2,3"]
    assert [member["role"] for member in plan["instances"]["members"]] == ["chief", "worker", "worker"]


def sample(metric, value, **labels):
    return {"metric": metric, "value": value, "unit": "s", "labels": labels, "metadata": {}}


def test_a_shared_cell_records_the_degradation_of_its_foreground():
    def record(share, elapsed):
        labels = {"instance_role": "foreground", "instance_index": 0, "share": share}
        metrics = [{"metric": "elapsed", "value": elapsed, "unit": "s"}]
        return "PLATBENCH_RESULT " + json.dumps(
            {"schema": 1, "workload": "cnn_train", "status": "ok", "error": None, "timestamp": 1.0,
             "labels": labels, "metrics": metrics, "metadata": {}}
        )  # fmt: skip

    output = "\n".join([record("alone", 10.0), record("shared", 12.5)])
    status, error, samples = cell_outcome({"platform": "bm", "cell": "c"}, output, None, {}, {})
    assert (status, error) == ("ok", None)
    degradation = [s for s in samples if s["metric"] == "degradation"]
    assert len(degradation) == 1 and degradation[0]["value"] == pytest.approx(25.0)
    assert "share" not in degradation[0]["labels"] and degradation[0]["unit"] == "%"
    assert (degradation[0]["metadata"]["elapsed_alone"], degradation[0]["metadata"]["elapsed_shared"]) == (10.0, 12.5)


def test_the_records_come_from_every_instance_but_the_stopped_background():
    ran = [
        {"name": "a", "role": "foreground", "index": 0, "round": 0, "background": False, "rc": 0, "stdout": "ALONE"},
        {"name": "b", "role": "background", "index": 1, "round": 1, "background": True, "rc": -15, "stdout": "NOISE"},
        {"name": "a", "role": "foreground", "index": 0, "round": 1, "background": False, "rc": 0, "stdout": "SHARED"},
    ]
    seen = placements.observed({"platform": "bm", "placement": "instances"}, {"instances": {"instances": ran}})
    assert "ALONE" in seen.output and "SHARED" in seen.output and "NOISE" not in seen.output
    assert [entry["rc"] for entry in seen.runtime["instances_ran"]] == [0, -15, 0]


def test_a_distributed_bm_rank_runs_in_its_namespace_and_meets_the_chief_on_the_path(tmp_path):
    cells = cells_of(tmp_path, "ranks", DISTRIBUTED.replace("params: {", "params: {framework: torch, "))
    plan = cell_plan(one(cells, "bm/2/pin/cpu|network=overlay|r0"), EIGHT_CPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    network = plan["instances"]["network"]
    assert network["path"] == "overlay" and network["holders"] == [] and network["mtu"] == 1450
    chief, worker = plan["instances"]["rounds"][0][:2]
    tag = network["members"][0]["netns"].rsplit("-", 1)[0]
    assert worker["argv"][:4] == ["ip", "netns", "exec", f"{tag}-1"]
    assert worker["argv"][4:7] == ["taskset", "--cpu-list", "4,5"]
    assert worker["env"]["MASTER_ADDR"] == network["members"][0]["address"] == chief["env"]["MASTER_ADDR"]
    assert (worker["env"]["RANK"], worker["env"]["WORLD_SIZE"], worker["env"]["GLOO_SOCKET_IFNAME"]) == (
        "1",
        "3",
        f"{tag}x1",  # the VXLAN device: gloo's sockets go over the overlay
    )
    assert network["measure"]["client_netns"] == f"{tag}-0" and network["measure"]["address"].startswith("198.1")


def test_a_distributed_cn_rank_joins_the_namespace_its_holder_keeps(tmp_path):
    plan = cell_plan(
        one(cells_of(tmp_path, "ranks", DISTRIBUTED), "cn/2/pin/cpu|network=bridge|r0"), EIGHT_CPUS, OPTIONS
    )
    assert_plan_matches_its_specs(plan)
    network = plan["instances"]["network"]
    assert [holder["name"] for holder in network["holders"]] == [f"{plan['name']}-{i}-net" for i in range(3)]
    assert network["engine"] == "docker"
    rank = plan["instances"]["rounds"][0][2]
    argv = rank["argv"]
    assert argv[argv.index("--network") + 1] == f"container:{plan['name']}-2-net"
    config = json.loads(next(arg for arg in argv if arg.startswith("TF_CONFIG=")).split("=", 1)[1])
    port = network["port"]
    addresses = [member["address"] for member in network["members"]]
    assert config == {
        "cluster": {"worker": [f"{address}:{port + i}" for i, address in enumerate(addresses)]},
        "task": {"type": "worker", "index": 2},
    }


def test_loopback_cannot_join_the_instances_of_a_container_platform(tmp_path):
    cell = one(
        cells_of(tmp_path, "ranks", DISTRIBUTED.replace("[bridge, overlay]", "[loopback]")),
        "cn/2/pin/cpu|network=loopback|r0",
    )
    with pytest.raises(CellPlanError, match="network path 'loopback' cannot join 3 instances of cn"):
        cell_plan(cell, EIGHT_CPUS, OPTIONS)


def test_a_failed_run_is_the_first_instance_to_fail_not_its_peers_failed_records():
    ran = [
        {
            "name": "r0",
            "role": "chief",
            "index": 0,
            "round": 0,
            "rc": 1,
            "stdout": 'PLATBENCH_RESULT {"status": "failed"}',
        },
        {"name": "r1", "role": "worker", "index": 1, "round": 0, "rc": -9, "stdout": ""},
    ]
    verdict = "worker 1 (r1) was killed by SIGKILL; its output ends:\n(no output)"
    result = {"failed": True, "msg": verdict, "instances": ran}
    seen = placements.observed({"platform": "bm", "placement": "instances"}, {"instances": result})
    assert seen.error == verdict


# -- where each instance runs: placed as the process kind places its cell ---------------------------------------------


def test_each_bm_instance_gets_a_cgroup_of_its_own_at_the_normal_policy_on_the_base_environment(tmp_path):
    # The supervisor runs at the harness's SCHED_IDLE, in its cgroup (module_utils/supervisor.py): each process
    # instance is put back, into a cgroup named as a cell's (teardown and the prechecks find a leftover one).
    cell = one(cells_of(tmp_path, "noisy", SHARED), "bm/1/pin/cpu|background=cnn_train:model=alexnet,batch_size=512|r0")
    plan = cell_plan(cell, EIGHT_CPUS, OPTIONS)
    alone, (background, beside) = plan["instances"]["rounds"]
    places = [alone[0]["place"], background["place"], beside["place"]]
    paths = [place["cgroup"]["path"] for place in places]
    assert alone[0]["name"] == beside["name"] and paths[0] == paths[2] != paths[1]
    assert all(cpu_quota.NAME.match(path.removeprefix("/sys/fs/cgroup/")) for path in paths)
    for place in places:
        assert place["cgroup"]["version"] == "v2" and place["cgroup"]["leave"] == []
        assert place["normal_policy"] is True
        assert place["base_env"] == {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
        }
    # The record names the instances' cgroups, not the one a single process would have had.
    assert plan["runtime"]["uncapped_cgroup"] == {
        "cgroups": sorted(set(paths)),
        "applied_by": "cgroup v2 cpu.max=max 100000",
    }
    assert_plan_matches_its_specs(plan)


def test_on_a_systemd_host_each_bm_instance_runs_in_a_scope_of_its_own(tmp_path):
    cell = one(cells_of(tmp_path, "ranks", DISTRIBUTED), "bm/2/pin/cpu|network=bridge|r0")
    plan = cell_plan(cell, {**EIGHT_CPUS, "systemd_pid1": True}, OPTIONS)
    ranks = plan["instances"]["rounds"][0]
    units = []
    for rank in ranks:
        argv = rank["argv"]
        scope = argv.index("systemd-run")
        assert argv[:scope] == ["ip", "netns", "exec", argv[3]]  # the rank's namespace, then its scope
        unit = next(arg for arg in argv if arg.startswith("--unit="))
        units.append(unit.removeprefix("--unit="))
        assert argv[argv.index("--") + 1 : argv.index("--") + 3] == ["taskset", "--cpu-list"]
        assert "cgroup" not in rank["place"] and rank["place"]["normal_policy"] is True
    assert len(set(units)) == len(ranks) and all(unit.startswith("platbench-cell-") for unit in units)
    assert plan["runtime"]["uncapped_cgroup"]["cgroups"] == sorted(f"system.slice/{unit}" for unit in units)


def test_a_podman_instance_starts_at_the_normal_policy_and_a_docker_one_as_it_is(tmp_path):
    # Podman's CLI forks conmon, which starts the container: both would inherit the supervisor's SCHED_IDLE.
    # Docker's container is containerd's child, never the CLI's.
    experiment = SHARED.replace("platforms: [bm, cn, vm]", "platforms: [cn, pd]")
    cells = cells_of(tmp_path, "noisy", experiment)
    options = plan_options(
        host="runner-a",
        campaign="c1",
        engines={"podman": {"answers": True, "version": "4.3.1", "image_id": "sha256:" + "cd" * 32}},
    )
    for platform, start in (("pd", ["chrt", "--other", "0", "podman", "run"]), ("cn", ["docker", "run"])):
        cell = one(cells, f"{platform}/1/pin/cpu|background=cnn_train:model=alexnet,batch_size=512|r0")
        plan = cell_plan(cell, EIGHT_CPUS, options)
        for spec in (spec for instances in plan["instances"]["rounds"] for spec in instances):
            assert spec["argv"][: len(start)] == start
            assert "place" not in spec
