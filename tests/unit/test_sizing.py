"""Sizing a cell on its runner host (plugins/plugin_utils/cells/sizing.py): relative scale-ups, CHR, NUMA spill-over and
the guests' NUMA layout, over injected two- and four-node topologies."""

from __future__ import annotations

import guest_domain
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter.cells import cells_to_run as cells_to_run_filter
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, choose_cpus
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import cell_plan as real_cell_plan
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import cells_to_run, plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

# Two sockets of 8 cores each, numbered in blocks.
TWO_NODES = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(16)),
    "numa_nodes": {"0": list(range(8)), "1": list(range(8, 16))},
}
# Four nodes of 4 CPUs each, numbered round-robin (CPU n on node n % 4) as some servers do.
FOUR_NODES = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(16)),
    "numa_nodes": {str(node): list(range(node, 16, 4)) for node in range(4)},
}
ONE_NODE = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
}
READY = {label: {"ready": True} for label in ("bm", "cn", "vm", "vmcn")}
OPTIONS = plan_options(host="runner-a", campaign="c1", guest_image={"container_image_id": "sha256:" + "ab" * 32})


def experiment(**fields):
    base = {
        "name": "sizing",
        "workload": "cnn_train",
        "platforms": ["bm", "cn"],
        "scaleup": [2, "half", "all"],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
        "params": {"steps": 3},
    }
    plan = validate_experiment({**base, **fields})
    return {**plan, "cells": expand(plan)}


def labels_by_id(cells):
    return {cell["id"]: cell["labels"] for cell in cells}


# --- the experiment: syntax -------------------------------------------------------------------------------------


def test_relative_scale_ups_load_beside_numbers_and_keep_their_form_in_the_cell_ids():
    plan = experiment(scaleup=[4, "all", "half", "all-but-2"])
    assert plan["scaleup"] == [4, "all", "half", "all-but-2"]
    ids = [cell["id"] for cell in plan["cells"]]
    # numbers name their cells as before, so that campaigns resume
    assert "bm/4/pin/cpu|r0" in ids and "cn/4/pin/cpu|r0" in ids
    assert {"bm/all/pin/cpu|r0", "cn/half/pin/cpu|r0", "cn/all-but-2/pin/cpu|r0"} <= set(ids)


@pytest.mark.parametrize(
    "scaleup, expected",
    [
        (["most"], "'most' is not a positive integer, all, half or all-but-N"),
        (["all-but-0"], "'all-but-0' must be all-but-N with N a whole number >= 1"),
        (["all-but-x"], "'all-but-x' must be all-but-N"),
        ([0], "0 is not positive"),
        ([True], "True is not a positive integer"),
    ],
)
def test_a_bad_scale_up_is_named_with_the_forms_allowed(scaleup, expected):
    with pytest.raises(ExperimentError) as error:
        experiment(scaleup=scaleup)
    assert expected in str(error.value) and "all, half, all-but-N" in str(error.value)


def test_a_relative_scale_up_given_twice_is_named():
    with pytest.raises(ExperimentError, match=r"scaleup: \['half', 4, 'half'\] lists a value twice"):
        experiment(scaleup=["half", 4, "half"])


def test_relative_scale_ups_are_refused_for_platforms_sized_by_flavors():
    with pytest.raises(ExperimentError, match="relative to the runner host's cores.*flavors"):
        experiment(platforms=["bm", "nova"], scaleup=["half"])


def test_numa_takes_spill_or_nothing():
    assert experiment(numa="spill")["numa"] == "spill"
    assert experiment()["numa"] is None
    with pytest.raises(ExperimentError, match="numa: 'pack' is unknown; numa: spill says"):
        experiment(numa="pack")


# --- resolving on a host ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requested, usable, share, cores",
    [
        ("all", 16, 1, 16),
        ("half", 16, 1, 8),
        ("half", 15, 1, 7),
        ("all-but-2", 16, 1, 14),
        ("all", 16, 2, 8),  # two instances with cores of their own share the host
        ("all-but-4", 16, 3, 4),
        (6, 16, 1, 6),
    ],
)
def test_relative_scale_ups_resolve_against_the_usable_cores(requested, usable, share, cores):
    assert sizing.resolve(requested, usable, share)[0] == cores


def test_half_of_one_core_is_capped_to_one_and_says_so():
    cores, note = sizing.resolve("half", 1, host="edge")
    assert cores == 1 and "capped to 1" in note


@pytest.mark.parametrize("spared", [16, 17])
def test_all_but_n_with_n_at_or_above_the_cores_stops(spared):
    with pytest.raises(sizing.SizingError, match=f"all-but-{spared} leaves no core on h1, which offers 16 usable"):
        sizing.resolve(f"all-but-{spared}", 16, host="h1")


def test_all_but_n_stops_the_plan_before_any_cell_with_every_other_problem_checked():
    plan = experiment(scaleup=[32, "all-but-16"])
    check = plan_problems(plan, READY, TWO_NODES, "h1")
    assert len(check["problems"]) == 2
    assert "Experiment 'sizing': scale-up all-but-16 leaves no core on h1" in check["problems"][0]
    # the numbers are still checked in the same run: one fix-and-rerun is enough
    assert "asks for scale-up 32, but h1 offers 16 CPUs" in check["problems"][1]
    # reserved CPUs are not usable: all-but-12 leaves none of 16 - 4
    check = plan_problems(experiment(scaleup=["all-but-12"]), READY, TWO_NODES, "h1", reserved_cpus=[0, 1, 2, 3])
    assert "offers 12 usable cores" in check["problems"][0]


def test_the_plan_says_what_relative_scale_ups_become_and_a_number_too_big_is_still_refused():
    check = plan_problems(experiment(scaleup=["half", "all-but-1"]), READY, TWO_NODES, "h1", reserved_cpus=[0])
    assert check["problems"] == []
    assert check["sizing"] == [
        "Experiment 'sizing' on h1: scale-up half = 7 of 15 usable cores.",
        "Experiment 'sizing' on h1: scale-up all-but-1 = 14 of 15 usable cores.",
    ]
    check = plan_problems(experiment(scaleup=[32, "all"]), READY, TWO_NODES, "h1")
    assert check["problems"] and "asks for scale-up 32, but h1 offers 16 CPUs" in check["problems"][0]


def test_cells_to_run_label_the_resolved_scale_up_its_form_chr_and_nodes_spanned():
    plan = experiment(scaleup=[2, "half", "all"], cpu_config=["pin", "vnl"])
    cells = cells_to_run(plan, READY, "h1", facts=TWO_NODES)["cells"]
    labels = labels_by_id(cells)
    assert labels["bm/2/pin/cpu|r0"]["scaleup"] == 2 and "scaleup_requested" not in labels["bm/2/pin/cpu|r0"]
    assert labels["bm/2/pin/cpu|r0"]["chr"] == 0.125 and labels["bm/2/pin/cpu|r0"]["numa_nodes"] == 1
    half = labels["cn/half/pin/cpu|r0"]
    assert (half["scaleup"], half["scaleup_requested"], half["chr"], half["numa_nodes"]) == (8, "half", 0.5, 1)
    every = labels["cn/all/pin/cpu|r0"]
    assert (every["scaleup"], every["scaleup_requested"], every["chr"], every["numa_nodes"]) == (16, "all", 1.0, 2)
    # the host scheduler places vnl cells: no nodes are chosen for them
    assert labels["cn/all/vnl/cpu|r0"]["numa_nodes"] is None and labels["cn/all/vnl/cpu|r0"]["chr"] == 1.0
    # the scenario keeps the form asked for: the same on every host
    assert next(cell for cell in cells if cell["id"] == "cn/half/pin/cpu|r0")["scenario"] == "cn/half/pin/cpu"


def test_chr_is_rounded_and_counts_only_usable_cores():
    cells = cells_to_run(experiment(scaleup=[1, 2]), READY, "h1", facts=TWO_NODES, reserved_cpus=[0, 1, 2, 3, 4])[
        "cells"
    ]
    assert {labels["scaleup"]: labels["chr"] for labels in labels_by_id(cells).values()} == {1: 0.091, 2: 0.182}


def test_the_cells_to_run_filter_says_where_a_relative_scale_up_cannot_be_resolved():
    with pytest.raises(AnsibleFilterError, match="cells_to_run: scale-up all-but-8 leaves no core on h1"):
        cells_to_run_filter(experiment(scaleup=["all-but-8"]), READY, "h1", facts=ONE_NODE)


def test_each_cell_is_sized_once_the_prechecks_and_the_plan_reuse_cells_to_runs_sizing(monkeypatch):
    plan = experiment(scaleup=[2, "half"], cpu_config=["pin", "vnl"])
    cells = cells_to_run(plan, READY, "h1", facts=TWO_NODES)["cells"]
    assert all(sizing.is_sized(cell) for cell in cells)
    _problems, _notes, checked = sizing.plan_sizing("sized", plan["cells"], TWO_NODES, set(), "h1")
    assert [cell["labels"]["chr"] for cell in checked] == [cell["labels"]["chr"] for cell in cells]

    def sized_again(*_):
        raise AssertionError("a cell of cells_to_run was sized again")

    monkeypatch.setattr(sizing, "cell_sizing", sized_again)
    for cell in cells:
        assert cell_plan(cell, TWO_NODES, {**OPTIONS, "host": "h1"})["threads"] == cell["labels"]["scaleup"]
    assert sizing.plan_sizing("sized", cells, TWO_NODES, set(), "h1")[2] == cells


def test_the_plan_of_a_relative_scale_up_takes_its_sizing_and_refuses_a_cell_not_sized():
    (cell,) = cells_to_run(experiment(scaleup=["half"], platforms=["bm"]), READY, "runner-a", facts=FOUR_NODES)["cells"]
    plan = real_cell_plan(cell, FOUR_NODES, OPTIONS)
    assert plan["threads"] == 8 and len(plan["cpus"]) == 8
    assert "--threads" in plan["argv"] and plan["argv"][plan["argv"].index("--threads") + 1] == "8"
    unsized = experiment(scaleup=["half"], platforms=["bm"])["cells"][0]
    with pytest.raises(CellPlanError, match="on runner-a: the cell is not sized for this host .its labels lack chr."):
        real_cell_plan(unsized, FOUR_NODES, OPTIONS)
    with pytest.raises(sizing.SizingError, match="scale-up all-but-9 leaves no core on runner-a"):
        cell_plan(experiment(scaleup=["all-but-9"], platforms=["bm"])["cells"][0], ONE_NODE, OPTIONS)


# --- NUMA: fill a node, then spill over ---------------------------------------------------------------------------


def test_pinned_cpus_fill_one_node_then_spill_to_the_next():
    cpus, node = choose_cpus(range(16), 12, numa_nodes=TWO_NODES["numa_nodes"])
    assert cpus == [4, 5, 6, 7, *range(8, 16)] and node is None
    assert sizing.nodes_spanned(cpus, TWO_NODES["numa_nodes"]) == ["0", "1"]
    # fits in one: one node, the one reaching highest
    assert choose_cpus(range(16), 8, numa_nodes=TWO_NODES["numa_nodes"]) == (list(range(8, 16)), "1")


def test_on_four_nodes_a_spill_takes_as_few_nodes_as_it_can():
    numa = FOUR_NODES["numa_nodes"]
    cpus, node = choose_cpus(range(16), 10, numa_nodes=numa)
    assert node is None and len(cpus) == 10
    # nodes 3 and 2 whole, then node 1's two highest CPUs
    assert cpus == sorted([3, 7, 11, 15, 2, 6, 10, 14, 9, 13])
    assert sorted(sizing.nodes_spanned(cpus, numa)) == ["1", "2", "3"]
    # a reserved CPU makes node 3 smaller: the full nodes go first
    cpus, _ = choose_cpus(range(16), 6, reserved=[15], numa_nodes=numa)
    assert sorted(sizing.nodes_spanned(cpus, numa)) == ["1", "2"] and 15 not in cpus


@pytest.mark.parametrize("scaleup, spanned", [(4, 1), (5, 2), (8, 2), (9, 3), ("all", 4), ("all-but-4", 3)])
def test_numa_nodes_counts_the_nodes_a_pinned_cell_spans_on_four_nodes(scaleup, spanned):
    cells = cells_to_run(experiment(scaleup=[scaleup], platforms=["bm"]), READY, "h1", facts=FOUR_NODES)["cells"]
    assert cells[0]["labels"]["numa_nodes"] == spanned


def test_numa_spill_on_a_one_node_host_is_a_warning_and_runs_as_one_node():
    plan = experiment(scaleup=["all"], numa="spill")
    check = plan_problems(plan, READY, ONE_NODE, "edge")
    assert check["problems"] == []
    assert check["sizing"][-1] == (
        "Experiment 'sizing' asks for numa: spill, but edge has one NUMA node, so nothing spills: its pinned cells "
        "run in one node (numa_nodes: 1)."
    )
    assert {cell["labels"]["numa_nodes"] for cell in cells_to_run(plan, READY, "edge", facts=ONE_NODE)["cells"]} == {1}


def test_numa_spill_warns_where_every_scale_up_fits_a_node_and_not_where_one_spans_two():
    fits = plan_problems(experiment(scaleup=[2, "half"], numa="spill"), READY, TWO_NODES, "h2")
    assert "every pinned cell fits in one of h2's 2 NUMA nodes (up to 8 CPUs each)" in fits["sizing"][-1]
    spans = plan_problems(experiment(scaleup=[2, "all"], numa="spill"), READY, TWO_NODES, "h2")
    assert not any("numa: spill" in line for line in spans["sizing"])
    # without the intent nothing is said about NUMA
    assert not any("numa" in line for line in plan_problems(experiment(), READY, ONE_NODE, "edge")["sizing"])


# --- the guest's NUMA layout -----------------------------------------------------------------------------------


def test_a_guest_spanning_two_nodes_gets_a_cell_per_node_with_its_vcpus_and_memory():
    pins = [4, 5, 6, 7, 8, 9, 10, 11]
    numa = sizing.guest_numa(pins, TWO_NODES["numa_nodes"], 3000)
    assert numa["nodeset"] == "0,1"
    assert numa["cells"] == [
        {"id": 0, "cpus": "0-3", "memory_mib": 1500, "host_node": "0"},
        {"id": 1, "cpus": "4-7", "memory_mib": 1500, "host_node": "1"},
    ]
    assert numa["topology"] == {"sockets": 2, "cores": 4}


def test_an_uneven_split_keeps_the_memory_whole_and_one_socket():
    numa = sizing.guest_numa([5, 6, 7, 8, 9, 10, 11, 12, 13, 14], TWO_NODES["numa_nodes"], 1001)
    assert [cell["cpus"] for cell in numa["cells"]] == ["0-2", "3-9"]
    assert sum(cell["memory_mib"] for cell in numa["cells"]) == 1001
    assert numa["topology"] == {"sockets": 1, "cores": 10}


def test_a_guest_on_interleaved_nodes_gets_vcpu_lists_not_ranges():
    pins, _ = choose_cpus(range(16), 6, numa_nodes=FOUR_NODES["numa_nodes"])
    numa = sizing.guest_numa(pins, FOUR_NODES["numa_nodes"], 4096)
    covered = sorted(vcpu for cell in numa["cells"] for vcpu in _vcpus(cell["cpus"]))
    assert covered == list(range(6))
    assert numa["nodeset"] in ("2,3", "3,2") and len(numa["cells"]) == 2


def test_no_layout_where_unpinned_or_on_one_node():
    assert sizing.guest_numa([], TWO_NODES["numa_nodes"], 1024) is None
    assert sizing.guest_numa([0, 1], ONE_NODE["numa_nodes"], 1024) is None
    assert sizing.guest_numa([0, 1], {}, 1024) is None
    with pytest.raises(sizing.SizingError, match=r"pinned CPUs \[20\] lie in none"):
        sizing.guest_numa([1, 20], TWO_NODES["numa_nodes"], 1024)


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_a_vm_cell_spanning_nodes_plans_its_guest_numa_layout(platform):
    cell = experiment(scaleup=[12], platforms=[platform])["cells"][0]
    plan = cell_plan(cell, TWO_NODES, OPTIONS)
    assert_plan_matches_its_specs(plan)
    numa = plan["guest"]["numa"]
    assert numa["nodeset"] == "0,1" and [cell["cpus"] for cell in numa["cells"]] == ["0-3", "4-11"]
    assert plan["runtime"]["guest_numa_nodeset"] == "0,1"
    one_node = cell_plan(experiment(scaleup=[2], platforms=[platform])["cells"][0], ONE_NODE, OPTIONS)
    assert one_node["guest"]["numa"] is None


def _vcpus(cpuset):
    numbers = []
    for part in cpuset.split(","):
        first, _, last = part.partition("-")
        numbers += range(int(first), int(last or first) + 1)
    return numbers


# --- the domain XML platbench.lab.vm renders (check mode, guest_domain.py) ---------------------------------------

# A 4-CPU KVM host of four one-CPU NUMA nodes: the cell's scale-up 2 can only span two of them.
FOUR_TINY_NODES = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {str(cpu): [cpu] for cpu in range(4)},
    "gpus": [],
    "gpu_count": 0,
    "vm_accelerator": "kvm",
    "qemu_binary": "/usr/bin/qemu-system-x86_64",
}


def test_the_domain_of_a_guest_spanning_nodes_binds_its_memory_and_shows_it_the_nodes(playbook, tmp_path):
    # vmcn's guest is the same domain with a container inside (its plan: test_a_vm_cell_spanning_nodes_plans_...)
    domain, _ = guest_domain.render(
        playbook, tmp_path, "vm", "cpu", FOUR_TINY_NODES, plan_options(host="h4", campaign="c1")
    )
    pins = [pin.get("cpuset") for pin in domain.findall("./cputune/vcpupin")]
    assert pins == ["2", "3"]
    memory = domain.find("./numatune/memory")
    assert memory.attrib == {"mode": "strict", "nodeset": "2,3"}
    cells = domain.findall("./cpu/numa/cell")
    assert [(cell.get("id"), cell.get("cpus"), cell.get("unit")) for cell in cells] == [
        ("0", "0", "MiB"),
        ("1", "1", "MiB"),
    ]
    # the cells cover every vCPU once and hold the guest's memory between them
    covered = sorted(vcpu for cell in cells for vcpu in _vcpus(cell.get("cpus")))
    assert covered == list(range(int(domain.findtext("./vcpu"))))
    assert sum(int(cell.get("memory")) for cell in cells) == int(domain.findtext("./memory"))
    assert domain.find("./cpu/topology").attrib == {"sockets": "2", "dies": "1", "cores": "1", "threads": "1"}
