"""The plans of ironic, nova and magnum cells: on the campaign's instance of the scenario, never on the runner's
CPUs or GPUs, and exactly what their placement entry points declare."""

from __future__ import annotations

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

# The runner: 2 CPUs and no GPU; the cells ask for more, which their flavors give on the cloud.
RUNNER = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1],
    "numa_nodes": {"0": [0, 1]},
    "gpu_count": 0,
    "gpus": [],
}
OPTIONS = plan_options(host="localhost", campaign="c1", image="registry.example/platbench/workload:1", gpus_per_cell=2)
# What runs on each platform's instance (its inner kind), and what the instance is called in messages.
INNER = {"ironic": "process", "nova": "process", "magnum": "k8s_job"}
NOUN = {"ironic": "instance", "nova": "instance", "magnum": "cluster"}


def make_cell(platform, scaleup=4, cpu_config="pin", processor="gpu"):
    labels = {
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": cpu_config,
        "processor": processor,
        "workload": "cnn_train",
        "framework": "tensorflow",
        "repeat": 0,
        "host": "localhost",
    }
    return {
        "id": f"{platform}/{scaleup}/{cpu_config}/{processor}|r0",
        "scenario": f"{platform}/{scaleup}/{cpu_config}/{processor}",
        "params": {"framework": "tensorflow", "steps": 3},
        "labels": labels,
    }


@pytest.mark.parametrize("processor", ["cpu", "gpu"])
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
@pytest.mark.parametrize("platform", platforms.REMOTE)
def test_the_plan_is_exactly_what_its_entry_point_declares(platform, cpu_config, processor):
    cell = make_cell(platform, cpu_config=cpu_config, processor=processor)
    plan = cell_plan(cell, RUNNER, OPTIONS)
    assert plan["placement"] == plan["kind"] == "cloud_instance"
    assert_plan_matches_its_specs(plan)
    # The instance the role adds under its platform's group, by the same function.
    assert plan["openstack"] == {
        "instance": openstack_plan.instance_name("c1", cell["labels"]),
        "group": f"platbench_{platform}",
        "failed_group": f"platbench_{platform}_failed",
        "inner": INNER[platform],
        # The inner kind's placement, which the kind's place.yml includes on the instance.
        "inner_task_file": placements.KINDS[INNER[platform]].task_file,
        "noun": NOUN[platform],
    }
    assert plan["cpus"] == [] and plan["gpus"] == [] and plan["cpuset"] == ""
    gpus = 2 if processor == "gpu" else 0
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(str(index) for index in range(gpus))
    assert plan["env"]["OMP_NUM_THREADS"] == "4"


def test_nova_runs_the_workload_env_over_ssh_and_pins_through_its_flavor():
    plan = cell_plan(make_cell("nova"), RUNNER, OPTIONS)
    assert plan["process"]["argv"] == ["/opt/platbench/venv/bin/python"] + plan["argv"]
    assert plan["process"]["env"]["PYTHONPATH"] == "/opt/platbench"
    assert plan["runtime"]["launcher"] == "ssh" and plan["runtime"]["openstack_instance"].endswith("nova-4-pin-gpu")


def test_ironic_pins_with_taskset_on_the_node():
    pinned = cell_plan(make_cell("ironic"), RUNNER, OPTIONS)
    assert pinned["process"]["argv"][:3] == ["taskset", "--cpu-list", "0-3"]
    vanilla = cell_plan(make_cell("ironic", cpu_config="vnl"), RUNNER, OPTIONS)
    assert vanilla["process"]["argv"][0] == "/opt/platbench/venv/bin/python"


def test_magnum_is_a_job_on_the_clusters_kubeconfig_without_a_node():
    plan = cell_plan(make_cell("magnum"), RUNNER, {**OPTIONS, "openstack_kubeconfig_dir": "/srv/kube"})
    instance = plan["openstack"]["instance"]
    assert plan["kubernetes"]["kubeconfig"] == f"/srv/kube/{instance}.kubeconfig"
    assert plan["kubernetes"]["node"] is None
    pod = plan["job"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {}
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["containers"][0]["image"] == OPTIONS["image"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
