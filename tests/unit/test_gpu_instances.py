"""GPUs of a cell with several instances, on a host with injected GPU facts: each instance's own GPUs (or the
cell's, shared), what each sees of them on bm, cn and pd, the refusals before any cell, the pools of
platbench_gpu_assignment, and the rank that trains on its GPU with NCCL."""

from __future__ import annotations

import json
import sys
import types

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import platforms as registry
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

FIRST, SECOND, THIRD, FOURTH = "0000:1a:00.0", "0000:3b:00.0", "0000:5e:00.0", "0000:af:00.0"


def gpu(address, driver="nvidia"):
    return {"pci_address": address, "device_id": "0x2330", "driver": driver, "iommu_group": "3", "slot_functions": []}


def facts(*gpus):
    return {
        "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
        "cpus_allowed": list(range(8)),
        "numa_nodes": {"0": list(range(8))},
        "gpus": list(gpus),
    }


TWO_GPUS = facts(gpu(FIRST), gpu(SECOND))
OPTIONS = plan_options(host="gpu1", campaign="c1", gpu_assignment={})


def experiment(mode, platforms=("bm", "cn"), framework="torch", **fields):
    data = {
        "name": "gpus",
        "workload": "cnn_train",
        "platforms": list(platforms),
        "scaleup": [1],
        "cpu_config": ["pin"],
        "processor": ["gpu"],
        "repeats": 1,
        "mode": mode,
        "params": {"framework": framework, "model": "tiny", "steps": 5},
    }
    if mode == "distributed":
        data.update(instances={"count": 2}, network=["bridge"])
    else:
        data["background"] = {"workload": "cnn_train", "params": {"model": "alexnet", "batch_size": 512}}
    data.update(fields)
    return data


def cell(platform, mode="distributed", **fields):
    cells = expand(validate_experiment(experiment(mode, **fields)))
    return next(entry for entry in cells if entry["labels"]["platform"] == platform)


def env_of(argv):
    """A container command line's --env values."""
    return dict(argv[at + 1].split("=", 1) for at, arg in enumerate(argv) if arg == "--env")


def option(argv, name):
    return [argv[at + 1] for at, arg in enumerate(argv) if arg == name]


def expected(*bus_ids):
    return json.dumps({"count": len(bus_ids), "pci_bus_ids": list(bus_ids)}, separators=(",", ":"))


# --- planning ----------------------------------------------------------------------------------


def test_the_instances_gpus_default_to_disjoint_and_the_cell_takes_a_gpu_per_instance():
    entry = cell("bm")
    assert entry["instances"]["gpus"] == "disjoint"
    assert several.gpus_needed(entry, 1) == 2 and several.gpus_needed(entry, 2) == 4
    shared = cell("bm", instances={"count": 3, "gpus": "shared"})
    assert several.gpus_needed(shared, 2) == 2
    assert several.split_gpus([FIRST, SECOND, THIRD, FOURTH], 2, "disjoint") == [[FIRST, SECOND], [THIRD, FOURTH]]
    assert several.split_gpus([FIRST], 2, "shared") == [[FIRST], [FIRST]]


def test_an_unknown_gpu_sharing_is_refused_with_the_allowed_values():
    with pytest.raises(ExperimentError) as refused:
        validate_experiment(experiment("distributed", instances={"count": 2, "gpus": "half"}))
    assert "instances.gpus: unknown value 'half'; allowed: disjoint, shared" in str(refused.value)


# --- distributed ranks, one GPU each -------------------------------------------------------------


def test_distributed_bm_ranks_each_see_their_own_gpu_and_meet_over_nccl_on_the_path():
    plan = cell_plan(cell("bm"), TWO_GPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    assert plan["gpus"] == [FIRST, SECOND] and plan["instances"]["gpus"] == "disjoint"
    assert [member["gpus"] for member in plan["instances"]["members"]] == [[FIRST], [SECOND]]
    chief, worker = plan["instances"]["rounds"][0]
    # bm sees the host's GPUs: each rank's CUDA index among those the driver sees, in PCI order.
    assert (chief["env"]["CUDA_VISIBLE_DEVICES"], worker["env"]["CUDA_VISIBLE_DEVICES"]) == ("0", "1")
    assert chief["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(FIRST)
    assert worker["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(SECOND)
    assert worker["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and "NVIDIA_VISIBLE_DEVICES" not in worker["env"]
    device = plan["instances"]["network"]["members"][1]["device"]
    assert worker["env"]["NCCL_SOCKET_IFNAME"] == device and worker["env"]["LOCAL_RANK"] == "0"
    assert plan["runtime"]["instance_gpus"] == [FIRST, SECOND]
    assert plan["runtime"]["gpus_requested"] == f"{FIRST},{SECOND}"


def test_distributed_cn_ranks_request_their_own_gpu_from_docker_and_see_it_as_device_0():
    plan = cell_plan(cell("cn", framework="tensorflow"), TWO_GPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    chief, worker = plan["instances"]["rounds"][0]
    assert option(chief["argv"], "--gpus") == ['"device=0"'] and option(worker["argv"], "--gpus") == ['"device=1"']
    assert "--device" not in chief["argv"]
    assert env_of(chief["argv"])["CUDA_VISIBLE_DEVICES"] == env_of(worker["argv"])["CUDA_VISIBLE_DEVICES"] == "0"
    assert env_of(worker["argv"])["PLATBENCH_EXPECTED_GPUS"] == expected(SECOND)
    assert "TF_CONFIG" in env_of(worker["argv"]) and "TF_FORCE_GPU_ALLOW_GROWTH" not in env_of(worker["argv"])
    assert plan["runtime"]["instance_gpus"] == [FIRST, SECOND]


def test_distributed_pd_ranks_get_their_own_cdi_device():
    plan = cell_plan(cell("pd", platforms=("bm", "pd")), TWO_GPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    chief, worker = plan["instances"]["rounds"][0]
    assert option(chief["argv"], "--device") == ["nvidia.com/gpu=0"]
    assert option(worker["argv"], "--device") == ["nvidia.com/gpu=1"] and "--gpus" not in worker["argv"]
    assert env_of(worker["argv"])["CUDA_VISIBLE_DEVICES"] == "0"


def test_two_gpus_per_rank_are_a_run_of_the_pool_each_quoted_as_one_docker_field():
    four = facts(gpu(FIRST), gpu(SECOND), gpu(THIRD), gpu(FOURTH))
    options = {**OPTIONS, "gpus_per_cell": 2}
    bm = cell_plan(cell("bm"), four, options)
    chief, worker = bm["instances"]["rounds"][0]
    assert (chief["env"]["CUDA_VISIBLE_DEVICES"], worker["env"]["CUDA_VISIBLE_DEVICES"]) == ("0,1", "2,3")
    assert bm["runtime"]["instance_gpus"] == [f"{FIRST},{SECOND}", f"{THIRD},{FOURTH}"]
    cn = cell_plan(cell("cn"), four, options)
    chief, worker = cn["instances"]["rounds"][0]
    assert option(worker["argv"], "--gpus") == ['"device=2,3"']
    assert env_of(worker["argv"])["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env_of(worker["argv"])["PLATBENCH_EXPECTED_GPUS"] == expected(THIRD, FOURTH)


# --- the shared cell (Lin 2018: one GPU each) ------------------------------------------------------


def test_a_shared_cell_gives_the_foreground_and_the_background_a_gpu_each():
    plan = cell_plan(cell("bm", mode="shared", framework="tensorflow"), TWO_GPUS, OPTIONS)
    assert_plan_matches_its_specs(plan)
    (alone,), (background, beside) = plan["instances"]["rounds"]
    assert alone["env"]["CUDA_VISIBLE_DEVICES"] == beside["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert background["env"]["CUDA_VISIBLE_DEVICES"] == "1" and background["background"] is True
    assert background["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(SECOND)
    assert plan["runtime"]["instance_gpus"] == [FIRST, SECOND]
    cn = cell_plan(cell("cn", mode="shared", framework="tensorflow"), TWO_GPUS, OPTIONS)
    (alone,), (background, beside) = cn["instances"]["rounds"]
    assert option(alone["argv"], "--gpus") == option(beside["argv"], "--gpus") == ['"device=0"']
    assert option(background["argv"], "--gpus") == ['"device=1"']


def test_instances_that_share_their_gpus_take_one_set_and_let_tensorflow_grow_into_it():
    one_gpu = facts(gpu(SECOND))
    entry = cell("cn", mode="shared", framework="tensorflow", instances={"gpus": "shared"})
    plan = cell_plan(entry, one_gpu, OPTIONS)
    assert_plan_matches_its_specs(plan)
    assert plan["gpus"] == [SECOND] and plan["instances"]["gpus"] == "shared"
    (alone,), (background, beside) = plan["instances"]["rounds"]
    for instance in (alone, background, beside):
        assert option(instance["argv"], "--gpus") == ['"device=0"']
        assert env_of(instance["argv"])["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert plan["runtime"]["instance_gpus"] == [SECOND, SECOND]
    bm = cell_plan(cell("bm", mode="shared", instances={"gpus": "shared"}), one_gpu, OPTIONS)
    assert [i["env"]["CUDA_VISIBLE_DEVICES"] for rnd in bm["instances"]["rounds"] for i in rnd] == ["0", "0", "0"]


def test_a_cpu_cell_with_instances_hides_every_gpu_from_each_instance():
    entry = cell("bm", processor=["cpu"])
    plan = cell_plan(entry, TWO_GPUS, OPTIONS)
    assert plan["gpus"] == [] and plan["runtime"]["instance_gpus"] == [None, None]
    for instance in plan["instances"]["rounds"][0]:
        assert instance["env"]["CUDA_VISIBLE_DEVICES"] == "" and instance["env"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    cn = cell_plan(cell("cn", processor=["cpu"]), TWO_GPUS, OPTIONS)
    assert all("--gpus" not in instance["argv"] for instance in cn["instances"]["rounds"][0])


# --- refusals -------------------------------------------------------------------------------------


def test_too_few_gpus_for_disjoint_instances_is_refused_with_what_to_change():
    with pytest.raises(CellPlanError) as refused:
        cell_plan(cell("bm"), facts(gpu(FIRST)), OPTIONS)
    message = str(refused.value)
    assert message.startswith("cell bm/1/pin/gpu|network=bridge|r0 on gpu1: 2 instances x 1 GPU(s) each")
    assert "need 2 GPUs of their own, but bm cells get 1 here (0000:1a:00.0 (nvidia)" in message
    assert "lower platform_run_gpus_per_cell" in message and "instances: {gpus: shared}" in message
    with pytest.raises(CellPlanError, match="2 instances x 2 GPU\\(s\\) each .* need 4 GPUs"):
        cell_plan(cell("cn"), TWO_GPUS, {**OPTIONS, "gpus_per_cell": 2})


def test_torch_ranks_sharing_a_gpu_are_refused_as_nccl_runs_one_rank_per_gpu():
    entry = cell("bm", instances={"count": 2, "gpus": "shared"})
    with pytest.raises(CellPlanError, match="torch ranks on GPUs train with NCCL, which runs one rank per GPU"):
        cell_plan(entry, TWO_GPUS, OPTIONS)
    # TensorFlow's workers may share one.
    tf = cell_plan(cell("bm", framework="tensorflow", instances={"count": 2, "gpus": "shared"}), TWO_GPUS, OPTIONS)
    assert tf["runtime"]["instance_gpus"] == [FIRST, FIRST]


# --- platbench_gpu_assignment's pools -----------------------------------------------------------


def test_instances_take_their_gpus_from_the_host_pool_only():
    # The second GPU goes to guests (bound to vfio-pci): the ranks get the first and third, numbered among the
    # GPUs the NVIDIA driver sees.
    three = facts(gpu(FIRST), gpu(SECOND, "vfio-pci"), gpu(THIRD))
    options = {**OPTIONS, "gpu_assignment": {SECOND: "guests"}}
    bm = cell_plan(cell("bm"), three, options)
    assert [member["gpus"] for member in bm["instances"]["members"]] == [[FIRST], [THIRD]]
    assert [instance["env"]["CUDA_VISIBLE_DEVICES"] for instance in bm["instances"]["rounds"][0]] == ["0", "1"]
    cn = cell_plan(cell("cn"), three, options)
    assert [option(i["argv"], "--gpus") for i in cn["instances"]["rounds"][0]] == [['"device=0"'], ['"device=1"']]
    # With one of two GPUs given to guests, one is left for two ranks.
    with pytest.raises(CellPlanError, match="need 2 GPUs of their own, but bm cells get 1 here"):
        cell_plan(cell("bm"), TWO_GPUS, {**OPTIONS, "gpu_assignment": {SECOND: "guests"}})


# --- the precheck: before any cell -----------------------------------------------------------------


def precheck(data, gpus, **options):
    plan = validate_experiment(data)
    plan["cells"] = expand(plan)
    ready = {label: {"ready": True, "reason": ""} for label in registry.BY_LABEL}
    return plan_problems(plan, ready, facts(*gpus), "gpu1", **options)["problems"]


def test_the_precheck_stops_instances_that_need_more_gpus_than_the_host_pool_holds():
    [found] = precheck(experiment("distributed"), [gpu(FIRST)])
    assert found == (
        "Experiment 'gpus' gives each of 2 instances of a gpu cell 1 GPU(s) of its own (platform_run_gpus_per_cell), "
        "2 GPUs in a cell, but gpu1 leaves 1 to bm/cn/pd cells (0000:1a:00.0 (nvidia); platbench_gpu_assignment "
        "says which): lower platform_run_gpus_per_cell, assign more GPUs to the host, or let the instances share "
        "their GPUs (instances: {gpus: shared})."
    )
    two = [gpu(FIRST), gpu(SECOND)]
    assert precheck(experiment("distributed"), two) == []
    assert "4 GPUs in a cell, but gpu1 leaves 2" in precheck(experiment("shared"), two, gpus_per_cell=2)[0]
    assert "leaves 1" in precheck(experiment("distributed"), two, gpu_assignment={SECOND: "guests"})[0]
    shared = experiment("shared", instances={"gpus": "shared"})
    assert precheck(shared, [gpu(FIRST)]) == [] and precheck({**shared, "processor": ["cpu"]}, []) == []


# --- the rank's engine and device (workloads/cnn_train/distributed.py) --------------------------


class FakeCuda:
    def __init__(self, count):
        self.count, self.current = count, None

    def is_available(self):
        return self.count > 0

    def device_count(self):
        return self.count

    def set_device(self, index):
        self.current = index


@pytest.mark.parametrize("gpus, engine, device", [(1, "nccl", 0), (0, "gloo", None)])
def test_a_rank_trains_on_its_gpu_as_cuda_0_with_nccl_and_on_cpu_with_gloo(monkeypatch, gpus, engine, device):
    from workloads.cnn_train.distributed import TorchRanks

    cuda, started = FakeCuda(gpus), []
    dist = types.ModuleType("torch.distributed")
    dist.init_process_group = lambda backend, timeout: started.append(backend)
    torch = types.ModuleType("torch")
    torch.cuda, torch.distributed = cuda, dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    monkeypatch.setenv("LOCAL_RANK", "0")  # as the plan sets it: each rank sees only its own GPU(s)
    backend = types.SimpleNamespace(build_trainer=lambda *args, **kwargs: "trainer")
    args = types.SimpleNamespace(net_timeout=30, place=types.SimpleNamespace(rank=1, world_size=2))
    ranks = TorchRanks(args, backend)
    assert started == [engine] and cuda.current == device
    assert ranks.engine == f"torch.distributed {engine}, DistributedDataParallel"
