"""GPUs end to end on the controller side, on a host with injected facts: the inventory's GPU
assignment, the devices each cell's plan hands over on every platform, and the prechecks."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.platbench.lab.plugins.filter import cells as cell_filters
from ansible_collections.platbench.lab.plugins.filter import gpus as filters
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.modules.host_facts import slot_functions
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import validate_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.lab.gpus import assignment_problems, cuda_indexes
from plan_options import cell_plan, plan_options

HOST_GPU, GUEST_GPU = "0000:3b:00.0", "0000:af:00.0"


def gpu(address, driver, slot=()):
    return {
        "pci_address": address,
        "device_id": "0x20b0",
        "driver": driver,
        "iommu_group": "7",
        "slot_functions": list(slot),
    }


# Two GPUs: one stays with the NVIDIA driver, one was bound to vfio-pci by kvm_host for guests.
GPUS = [gpu(HOST_GPU, "nvidia"), gpu(GUEST_GPU, "vfio-pci", [GUEST_GPU[:-1] + "1"])]
ASSIGNMENT = {GUEST_GPU: "guests", HOST_GPU: "host"}
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
    "gpus": GPUS,
    "gpu_count": 2,
}
OPTIONS = plan_options(
    host="gpu1",
    campaign="c1",
    gpu_assignment=ASSIGNMENT,
    guest_image={"container_image_id": "sha256:" + "ab" * 32, "nvidia_driver": "580.95.05"},
)


def make_cell(platform, processor="gpu", scaleup=1):
    scenario = f"{platform}/{scaleup}/pin/{processor}"
    labels = {"platform": platform, "scaleup": scaleup, "cpu_config": "pin", "processor": processor}
    return {"id": scenario + "|r0", "scenario": scenario, "params": {"steps": 3}, "labels": {**labels, "workload": "w"}}


def expected(count, bus_ids):
    return json.dumps({"count": count, "pci_bus_ids": bus_ids}, separators=(",", ":"))


# --- the assignment -----------------------------------------------------------------------------


def test_gpus_are_split_between_host_and_guests_and_unnamed_ones_stay_with_the_host():
    third = gpu("0000:5e:00.0", "nvidia")
    gpus = GPUS + [third]
    assert filters.gpus_assigned_to({"0000:AF:00.0": "guests"}, "guests", gpus) == [GUEST_GPU]
    assert filters.gpus_assigned_to({"0000:AF:00.0": "guests"}, "host", gpus) == [HOST_GPU, "0000:5e:00.0"]
    assert filters.gpus_assigned_to({}, "host", gpus) == [HOST_GPU, "0000:5e:00.0", GUEST_GPU]
    assert filters.gpus_assigned_to({}, "guests", gpus) == []


def test_the_filter_works_by_fqcn_in_a_template():
    templar = Templar(loader=DataLoader(), variables={"assignment": ASSIGNMENT, "gpus": GPUS})
    text = "{{ assignment | platbench.lab.gpus_assigned_to('guests', gpus, host='gpu1') }}"
    assert templar.template(trust_as_template(text)) == [GUEST_GPU]
    with pytest.raises(Exception, match="not an NVIDIA GPU function of gpu1"):
        templar.template(
            trust_as_template(
                "{{ {'0000:01:00.0': 'host'} | platbench.lab.gpus_assigned_to('host', gpus, host='gpu1') }}"
            )
        )


@pytest.mark.parametrize(
    "assignment, message",
    [
        (
            {"af:00.0": "guests"},
            "platbench_gpu_assignment on gpu1: 'af:00.0' has no PCI domain; write it in full, as '0000:af:00.0'",
        ),
        ({"gpu0": "host"}, "'gpu0' is not a PCI address; write it as domain:bus:slot.function, e.g. '0000:3b:00.0'"),
        (
            {"0000:5e:00.0": "guests"},
            "platbench_gpu_assignment names 0000:5e:00.0, which is not an NVIDIA GPU function of gpu1; "
            "its NVIDIA GPUs are 0000:3b:00.0, 0000:af:00.0.",
        ),
        ({GUEST_GPU: "vm"}, "assigns 0000:af:00.0 to 'vm'; assign each GPU to 'host' (bm and cn cells) or 'guests'"),
        ([GUEST_GPU], None),  # a list (kvm_host_passthrough_gpus) is every address for guests
        ("0000:af:00.0", "must map PCI addresses to host or guests"),
    ],
)
def test_a_bad_assignment_says_what_is_wrong_and_how_to_write_it(assignment, message):
    found = filters.gpu_assignment_problems(assignment, GPUS, host="gpu1")
    if message is None:
        assert found == []
        return
    [problem] = found
    assert message in problem
    if isinstance(assignment, dict):
        with pytest.raises(AnsibleFilterError, match="gpus_assigned_to: "):
            filters.gpus_assigned_to(assignment, "host", GPUS, host="gpu1")


def test_an_address_of_a_gpu_function_that_is_not_the_gpu_is_refused():
    # The GPU's HDMI audio function is in the slot, but it is no GPU: kvm_host binds it along.
    [problem] = assignment_problems({GUEST_GPU[:-1] + "1": "guests"}, GPUS, "gpu1")
    assert "0000:af:00.1, which is not an NVIDIA GPU function of gpu1" in problem


def test_vfio_takes_each_gpu_with_the_other_functions_of_its_slot():
    assert filters.vfio_functions([GUEST_GPU], GPUS) == [GUEST_GPU, "0000:af:00.1"]
    assert filters.vfio_functions([], GPUS) == []


def test_pci_addresses_split_into_libvirt_fields():
    assert filters.pci_address("0000:AF:1f.7") == {"domain": "0x0000", "bus": "0xaf", "slot": "0x1f", "function": "0x7"}
    with pytest.raises(AnsibleFilterError, match="'af:00.0' is not a full PCI address"):
        filters.pci_address("af:00.0")


def test_host_facts_find_the_other_functions_of_a_gpu_slot(tmp_path):
    for name in ("0000:af:00.0", "0000:af:00.1", "0000:af:00.2", "0000:af:01.0", "0000:b0:00.0"):
        (tmp_path / name).mkdir()
    assert slot_functions(str(tmp_path / "0000:af:00.0")) == ["0000:af:00.1", "0000:af:00.2"]
    assert slot_functions(str(tmp_path / "0000:b0:00.0")) == []


def test_cuda_numbers_the_gpus_the_nvidia_driver_sees_in_pci_order():
    # A GPU assigned to guests but still on the NVIDIA driver (kvm_host not applied yet) counts.
    gpus = [gpu("0000:1a:00.0", "nvidia"), gpu(HOST_GPU, "nvidia"), gpu("0000:5e:00.0", "vfio-pci")]
    assert cuda_indexes([HOST_GPU], gpus) == [1]
    assert cuda_indexes([HOST_GPU], [gpu("0000:1a:00.0", "vfio-pci"), gpu(HOST_GPU, "nvidia")]) == [0]


# --- the cell plan ------------------------------------------------------------------------------


def test_a_bm_gpu_cell_sees_its_host_gpu_by_pci_order():
    plan = cell_plan(make_cell("bm"), FACTS, OPTIONS)
    env = plan["env"]
    assert plan["gpus"] == [HOST_GPU] and plan["runtime"]["gpus_requested"] == HOST_GPU
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["PLATBENCH_EXPECTED_GPUS"] == expected(1, [HOST_GPU])
    assert "NVIDIA_VISIBLE_DEVICES" not in env and plan["process"]["env"] == env


def test_bm_indexes_skip_gpus_on_vfio_and_count_guest_gpus_still_on_the_host_driver():
    gpus = [gpu("0000:1a:00.0", "nvidia"), gpu(HOST_GPU, "nvidia"), gpu("0000:5e:00.0", "nvidia")]
    facts = {**FACTS, "gpus": gpus}
    options = {**OPTIONS, "gpu_assignment": {"0000:1a:00.0": "guests"}, "gpus_per_cell": 2}
    bm = cell_plan(make_cell("bm"), facts, options)
    assert bm["gpus"] == [HOST_GPU, "0000:5e:00.0"] and bm["env"]["CUDA_VISIBLE_DEVICES"] == "1,2"
    cn = cell_plan(make_cell("cn"), facts, options)
    assert cn["container"]["device_requests"] == [
        {"driver": "nvidia", "device_ids": ["1", "2"], "capabilities": [["gpu"]]}
    ]
    assert cn["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert cn["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(2, [HOST_GPU, "0000:5e:00.0"])


def test_a_cn_gpu_cell_gets_its_gpu_through_the_nvidia_runtime():
    plan = cell_plan(make_cell("cn"), FACTS, OPTIONS)
    container = plan["container"]
    assert container["device_requests"] == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": [["gpu"]]}]
    assert container["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert container["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(1, [HOST_GPU])
    assert "NVIDIA_VISIBLE_DEVICES" not in container["env"]


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_a_guest_gpu_cell_passes_the_guest_gpu_through(platform):
    plan = cell_plan(make_cell(platform), FACTS, OPTIONS)
    assert plan["gpus"] == [GUEST_GPU] and plan["guest"]["hostdevs"] == [GUEST_GPU]
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    # The guest's bus ids are its own: only the count is checked there.
    assert plan["env"]["PLATBENCH_EXPECTED_GPUS"] == expected(1, None)
    if platform == "vmcn":
        requests = plan["container"]["device_requests"]
        assert requests == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": [["gpu"]]}]
        assert plan["container"]["env"] == plan["env"]
    else:
        assert "container" not in plan and plan["process"]["env"] == plan["env"]


@pytest.mark.parametrize("platform", ["bm", "cn", "vm", "vmcn"])
def test_a_cpu_cell_on_a_gpu_host_hides_every_gpu(platform):
    plan = cell_plan(make_cell(platform, processor="cpu"), FACTS, OPTIONS)
    env = plan["env"]
    assert plan["gpus"] == [] and plan["runtime"]["gpus_requested"] is None
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert json.loads(env["PLATBENCH_EXPECTED_GPUS"])["count"] == 0
    assert plan.get("container", {}).get("device_requests", []) == []
    assert plan.get("guest", {}).get("hostdevs", []) == []


@pytest.mark.parametrize(
    "platform, assignment, message",
    [
        ("vm", {}, r"no GPU is left for a vm cell: it takes the GPUs it assigns to guests"),
        (
            "bm",
            {HOST_GPU: "guests", GUEST_GPU: "guests"},
            r"no GPU is left for a bm cell: .* \(platbench_gpu_assignment\), and this host's GPUs \(assignment, "
            r"driver\) are 0000:3b:00.0 \(guests, nvidia\), 0000:af:00.0 \(guests, vfio-pci\)",
        ),
        (
            "bm",
            {"3b:00.0": "host"},
            r"platbench_gpu_assignment on gpu1: '3b:00.0' has no PCI domain; write it in full, as '0000:3b:00.0'",
        ),
    ],
)
def test_gpu_cells_that_cannot_get_a_gpu_say_why(platform, assignment, message):
    with pytest.raises(CellPlanError, match=rf"cell {platform}/1/pin/gpu\|r0 on gpu1: {message}"):
        cell_plan(make_cell(platform), FACTS, {**OPTIONS, "gpu_assignment": assignment})


def test_a_bad_assignment_stops_cpu_cells_too():
    with pytest.raises(CellPlanError, match="0000:5e:00.0, which is not an NVIDIA GPU function of gpu1"):
        cell_plan(make_cell("bm", processor="cpu"), FACTS, {**OPTIONS, "gpu_assignment": {"0000:5e:00.0": "host"}})


# --- the prechecks ------------------------------------------------------------------------------

STATUS = platform_status(
    {**FACTS, "docker_engine": True, "vm_accelerator": "kvm", "libvirt_daemon": True},
    "/opt/platbench",
    True,
    "img",
    "sha256:1",
    "/g.json",
    {"container_image_id": "sha256:1"},
    engines_found={"docker": {"answers": True, "version": "26.1.5", "image_id": "sha256:1"}},
)


def gpu_plan(platforms, processor=("gpu",)):
    plan = validate_experiment(
        {
            "name": "gpus",
            "workload": "cnn_train",
            "platforms": list(platforms),
            "scaleup": [1],
            "cpu_config": ["pin"],
            "processor": list(processor),
            "repeats": 1,
        }
    )
    return {**plan, "cells": expand(plan)}


def precheck(plan, facts=FACTS, assignment=ASSIGNMENT, guest_image=OPTIONS["guest_image"]):
    return cell_filters.plan_problems(plan, STATUS, facts, "gpu1", gpu_assignment=assignment, guest_image=guest_image)


def test_a_gpu_plan_the_host_can_serve_says_which_gpus_each_side_uses():
    result = precheck(gpu_plan(["bm", "cn", "vm", "vmcn"]))
    assert result["problems"] == []
    assert result["gpu_summary"] == (
        "GPUs on gpu1: bm/cn gpu scenarios use 0000:3b:00.0 (nvidia); "
        "vm/vmcn gpu scenarios use 0000:af:00.0 (vfio-pci)."
    )
    assert precheck(gpu_plan(["bm"], processor=["cpu"]))["gpu_summary"] == ""


def test_bm_gpu_scenarios_with_every_gpu_assigned_to_guests_are_refused():
    [found] = precheck(gpu_plan(["bm", "cn"]), assignment={HOST_GPU: "guests", GUEST_GPU: "guests"})["problems"]
    assert found == (
        "Experiment 'gpus' has processor 'gpu' scenarios, but bm/cn gpu scenarios use the GPUs left with the host, "
        "and platbench_gpu_assignment assigns every GPU of gpu1 to guests (0000:3b:00.0 (nvidia), "
        "0000:af:00.0 (vfio-pci)): assign one to host, or drop bm/cn gpu scenarios."
    )


def test_guest_gpu_scenarios_without_a_gpu_for_guests_are_refused():
    [found] = precheck(gpu_plan(["vm", "vmcn"]), assignment={})["problems"]
    assert "vm/vmcn gpu scenarios pass through the GPUs platbench_gpu_assignment assigns to guests" in found
    assert "it assigns none of gpu1's (0000:3b:00.0 (host, nvidia), 0000:af:00.0 (host, vfio-pci))" in found
    assert "set platbench_gpu_assignment (e.g. {'0000:af:00.0': guests}) and run site.yml" in found


def test_a_host_gpu_bound_to_vfio_is_refused_for_bm_cells():
    facts = {**FACTS, "gpus": [gpu(HOST_GPU, "vfio-pci"), GPUS[1]]}
    [found] = precheck(gpu_plan(["bm"]), facts=facts)["problems"]
    assert "0000:3b:00.0 (vfio-pci) is assigned to the host but bound to vfio-pci, so bm gpu scenarios" in found
    assert "run site.yml again (platbench.lab.kvm_host then binds only the GPUs assigned to guests)" in found
    assert "reboot gpu1, or assign it to guests in platbench_gpu_assignment" in found
    # Guests do not mind: that GPU is not theirs.
    assert precheck(gpu_plan(["vm"]), facts=facts)["problems"] == []


@pytest.mark.parametrize("guest_image", [{"nvidia_driver": None}, {}])
def test_guest_gpu_scenarios_on_an_image_without_the_nvidia_driver_are_refused(guest_image):
    [found] = precheck(gpu_plan(["vmcn"]), guest_image=guest_image)["problems"]
    assert "the guest image vmcn gpu scenarios boot has no NVIDIA driver" in found
    assert "build it again (run site.yml) now that platbench_gpu_assignment assigns 0000:af:00.0 to guests" in found


def test_guest_gpu_scenarios_on_emulated_guests_are_refused():
    status = {**STATUS, "vm": {**STATUS["vm"], "accelerator": "tcg", "emulated": True}}
    [found] = cell_filters.plan_problems(
        gpu_plan(["vm"]), status, FACTS, "gpu1", gpu_assignment=ASSIGNMENT, guest_image=OPTIONS["guest_image"]
    )["problems"]
    assert (
        "vm gpu scenarios pass a GPU through, which needs KVM, and gpu1 runs its guests under QEMU's emulator" in found
    )


def test_an_address_that_is_not_an_nvidia_gpu_is_refused_for_any_plan():
    plan = gpu_plan(["bm"], processor=["cpu"])
    [found] = precheck(plan, assignment={"0000:00:1f.3": "guests"})["problems"]
    assert found.startswith("platbench_gpu_assignment names 0000:00:1f.3, which is not an NVIDIA GPU function of gpu1")


def test_every_gpu_reason_is_given_at_once():
    [found] = precheck(gpu_plan(["bm", "vm"]), assignment={}, facts={**FACTS, "gpus": [gpu(HOST_GPU, "vfio-pci")]})[
        "problems"
    ]
    assert "bound to vfio-pci, so bm gpu scenarios" in found and "; and vm gpu scenarios pass through" in found
