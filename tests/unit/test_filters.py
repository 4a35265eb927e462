"""Filters and the experiment lookup, called directly and through Ansible's templating."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError, AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar, trust_as_template
from ansible_collections.platbench.lab.plugins.filter.cells import cpuset_for
from ansible_collections.platbench.lab.plugins.filter.experiments import expand_matrix, workload_argv
from plan_options import plan_options, sized

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = {
    "name": "tiny",
    "workload": "cnn_train",
    "platforms": ["bm", "cn"],
    "scaleup": [1],
    "cpu_config": ["pin"],
    "processor": ["cpu"],
    "repeats": 2,
    "params": {"batch_size": [8, 16]},
}


def test_cpuset_for_takes_the_highest_cpus_first():
    assert cpuset_for([0, 1, 2, 3], 2) == [2, 3]
    assert cpuset_for([3, 2, 1, 0], 1) == [3]
    assert cpuset_for(["0", "1", "2", "3"], 4) == [0, 1, 2, 3]


def test_cpuset_for_skips_reserved_cpus():
    assert cpuset_for([0, 1, 2, 3], 2, reserved=[3]) == [1, 2]
    assert cpuset_for(list(range(8)), 3, reserved=[7, 6]) == [3, 4, 5]


def test_cpuset_for_names_asked_and_available_when_too_few():
    with pytest.raises(AnsibleFilterError, match=r"asked for 4 CPUs but only 3 are available .*reserved: \[0\]"):
        cpuset_for([0, 1, 2, 3], 4, reserved=[0])


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "two"])
def test_cpuset_for_rejects_a_count_that_is_not_a_positive_integer(count):
    with pytest.raises(AnsibleFilterError, match="count must be a positive integer"):
        cpuset_for([0, 1], count)


def test_cpuset_for_rejects_non_numeric_cpus():
    with pytest.raises(AnsibleFilterError, match="topology_cpus must list CPU numbers, got 'cpu0'"):
        cpuset_for(["cpu0"], 1)


def test_workload_argv_kebab_cases_keys_and_handles_booleans():
    params = {"framework": "tensorflow", "batch_size": 32, "learning_rate": 0.1, "xla": True, "amp": False}
    assert workload_argv(params, "cnn_train") == [
        "-m",
        "workloads.cnn_train",
        "--framework",
        "tensorflow",
        "--batch-size",
        "32",
        "--learning-rate",
        "0.1",
        "--xla",
    ]


def test_workload_argv_rejects_list_values():
    with pytest.raises(AnsibleFilterError, match="parameter 'model' must be a scalar"):
        workload_argv({"model": ["a", "b"]}, "cnn_train")


def test_expand_matrix_accepts_the_lookup_result_and_rejects_bad_input():
    cells = expand_matrix({**EXPERIMENT, "cells": ["stale"]})
    assert [cell["id"] for cell in cells[:2]] == ["bm/1/pin/cpu|batch_size=8|r0", "cn/1/pin/cpu|batch_size=8|r0"]
    assert len(cells) == 2 * 2 * 2
    with pytest.raises(AnsibleFilterError, match="platforms: unknown value 'lxc'"):
        expand_matrix({**EXPERIMENT, "platforms": ["lxc"]})


def render(template, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))


def test_filters_by_fqcn_in_a_template():
    assert render("{{ [0, 1, 2, 3] | platbench.lab.cpuset_for(2, reserved=[3]) | join(',') }}") == "1,2"
    assert render("{{ 'vm' | platbench.lab.scenario_name(2, 'pin', 'gpu') }}") == "vm/2/pin/gpu"
    assert render("{{ experiment | platbench.lab.expand_matrix | length }}", experiment=EXPERIMENT) == 8
    assert render("{{ {'steps': 3} | platbench.lab.workload_argv('cnn_train') }}") == [
        "-m",
        "workloads.cnn_train",
        "--steps",
        "3",
    ]


def test_registry_and_cell_plan_filters_by_fqcn_in_a_template():
    assert render(
        "{{ 'all' | platbench.lab.platforms | selectattr('placement') | map(attribute='label') | list }}"
    ) == [
        "bm",
        "cr",
        "ns",
        "sc",
        "cn",
        "pd",
        "gv",
        "lx",
        "vm",
        "vmcn",
        "vmsg",
        "mvm",
        "sg",
        "k8s",
        "ironic",
        "nova",
        "magnum",
    ]
    assert (
        render("{{ ['vmcn'] | platbench.lab.platforms | map(attribute='cpu_pinning') | first }}")
        == "vcpupin + cpuset-cpus"
    )
    with pytest.raises(Exception, match=r"platbench_platforms: unknown platform\(s\) 'lxc'; known: bm"):
        render("{{ ['bm', 'lxc'] | platbench.lab.platforms(source='platbench_platforms') }}")
    cell = {
        "id": "bm/1/pin/cpu|r0",
        "scenario": "bm/1/pin/cpu",
        "params": {"steps": 3},
        "labels": {"platform": "bm", "scaleup": 1, "cpu_config": "pin", "processor": "cpu", "workload": "w"},
    }
    options, facts = (
        plan_options(host="h", campaign="c"),
        {"cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}, "cpus_allowed": [0, 1, 2]},
    )
    plan = render(
        "{{ cell | platbench.lab.cell_plan(facts, options) }}",
        cell=sized(cell, facts, options),
        options=options,
        facts=facts,
    )
    assert plan["process"]["argv"][:4] == ["taskset", "--cpu-list", "2", "/opt/platbench/venv/bin/python"]


def test_experiment_lookup_loads_merges_and_expands(tmp_path):
    (tmp_path / "tiny.yml").write_text(json.dumps(EXPERIMENT))  # JSON is YAML
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader())
    [experiment] = lookup.run(
        ["tiny"], variables={}, experiments_dir=str(tmp_path), overrides={"repeats": 1, "params": {"batch_size": 8}}
    )
    assert experiment["repeats"] == 1
    assert [cell["id"] for cell in experiment["cells"]] == ["bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0"]


def test_experiment_lookup_defaults_to_the_collection_experiments():
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader())
    with pytest.raises(AnsibleLookupError, match=r"unknown experiment 'no-such' .*available: .*smoke"):
        lookup.run(["no-such"], variables={})


def test_experiment_lookup_relative_dir_is_taken_from_the_playbook_dir(tmp_path):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "tiny.yml").write_text(json.dumps(EXPERIMENT))
    loader = DataLoader()
    loader.set_basedir(str(tmp_path))
    lookup = lookup_loader.get("platbench.lab.experiment", loader=loader)
    assert lookup.run(["tiny"], variables={}, experiments_dir="experiments")[0]["name"] == "tiny"


@pytest.mark.parametrize(
    "plugin_type, name",
    [
        ("callback", "platbench.lab.results"),
        ("lookup", "platbench.lab.experiment"),
        ("filter", "platbench.lab.expand_matrix"),
        ("filter", "platbench.lab.scenario_name"),
        ("filter", "platbench.lab.cpuset_for"),
        ("filter", "platbench.lab.workload_argv"),
        ("filter", "platbench.lab.done_cells"),
        ("filter", "platbench.lab.emulated_subset"),
        ("filter", "platbench.lab.platforms"),
        ("filter", "platbench.lab.cell_plan"),
        ("filter", "platbench.lab.dataset_dir"),
        ("filter", "platbench.lab.plan_problems"),
        ("filter", "platbench.lab.cells_to_run"),
        ("filter", "platbench.lab.gpus_assigned_to"),
        ("filter", "platbench.lab.gpu_assignment_problems"),
        ("filter", "platbench.lab.vfio_functions"),
        ("filter", "platbench.lab.pci_address"),
        ("filter", "platbench.lab.k8s_pods_started"),
        ("module", "platbench.lab.platform_status"),
        ("module", "platbench.lab.vcpu_threads"),
    ],
)
def test_ansible_doc_renders_the_plugin_documentation(plugin_type, name):
    ansible_doc = Path(sys.executable).parent / "ansible-doc"
    done = subprocess.run(
        [str(ansible_doc), "--json", "-t", plugin_type, name], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)[name]
    assert doc["doc"]["short_description"]
    assert "[WARNING]" not in done.stderr


def test_platform_roles_by_kind_and_host_group_in_registry_order_each_once():
    from ansible_collections.platbench.lab.plugins.filter.registry import platform_roles

    applied = ["platbench.lab.docker", "platbench.lab.workload_image"]
    labels = ["bm", "cn", "pd", "gv", "lx", "vm", "mvm"]
    assert platform_roles(labels, host_group="platbench_container_hosts", applied=applied) == [
        "platbench.lab.podman",
        "platbench.lab.lxc",
    ]
    assert platform_roles(labels, kind="container", applied=applied) == ["platbench.lab.podman"]
    assert platform_roles(labels, host_group="platbench_mvm_hosts") == [
        "platbench.lab.firecracker",
        "platbench.lab.guest_image",
    ]
    assert platform_roles(["bm"], host_group="platbench_mvm_hosts") == []  # mvm not in the inventory's platforms
    # The guest kind's cell role (platbench.lab.vm boots each cell's guest) is never a build step.
    guests = platform_roles(labels, host_group="platbench_vm_hosts")
    assert guests == ["platbench.lab.kvm_host", "platbench.lab.guest_image"]
    with pytest.raises(AnsibleFilterError, match="no platform is built on host group 'platbench_gpu_hosts'"):
        platform_roles(labels, host_group="platbench_gpu_hosts")
    with pytest.raises(AnsibleFilterError, match="unknown kind 'unikernel'"):
        platform_roles(labels, kind="unikernel")
    with pytest.raises(AnsibleFilterError, match="xx"):
        platform_roles(["xx"], source="platbench_platforms")
