"""A k8s cell with several instances, statically verified (no kubelet here): the ranks of a distributed cell as one
Indexed Job behind a headless Service, valid against Kubernetes 1.33's schema, each pod's rank from its completion
index, its own resources and the cell's labels; a shared cell's three Jobs on one node; the network paths a pod
cannot have, refused before any cell runs; and what the pods reported, mapped into the cell's output."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import kubernetes_validate
import pytest
from ansible_collections.platbench.lab.plugins.filter.kubernetes import k8s_pods_started
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import load_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes.job_spec import label_value, qos_class
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_k8s
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options
from unreachable_cluster import TOKEN, place_on_unreachable_cluster, unreachable_kubeconfig

from workloads.cnn_train.ranks import tf_place, torch_place

# Acts on the host where a live lab would see it or suffer from it: the real teardown.yml, which takes down the host's
# CPU fence. `make test` runs it first, before the lab is up (marker `host`, docs/src/tests.md).
pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[2]
UNREACHABLE = REPO / "tests/roles/platform_run/k8s_instances_unreachable.yml"
KUBERNETES = "1.33.0"  # as tests/unit/test_k8s_job.py
NODE = "runner-a"
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 0,
    "gpus": [],
}
GPU_HOST = {
    **FACTS,
    "gpu_count": 1,
    "gpus": [{"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"}],
}
OPTIONS = plan_options(host="Runner-A", campaign="k8s ranks", k8s_node=NODE, image="platbench/workload:0123456789ab")
CELL_LABELS = ("org.platbench.cell", "org.platbench.campaign", "org.platbench.host")
DISTRIBUTED = """
name: ranks
workload: cnn_train
platforms: [k8s]
scaleup: [2]
cpu_config: [pin, vnl]
processor: [cpu]
repeats: 1
mode: distributed
instances: {count: 3}
network: [overlay]
params: {framework: torch, model: tiny, steps: 5}
"""
SHARED = """
name: noisy
workload: cnn_train
platforms: [k8s]
scaleup: [1]
cpu_config: [pin]
processor: [cpu]
repeats: 1
mode: shared
background:
  workload: cnn_train
  params: {model: alexnet, batch_size: 512}
  settle: 3
params: {model: tiny, steps: 5}
"""


def cells_of(tmp_path, name, text):
    (tmp_path / f"{name}.yml").write_text(textwrap.dedent(text))
    return expand(load_experiment(tmp_path, name))


def plan_of(tmp_path, text, cell_id, name="ranks", **options):
    cell = next(cell for cell in cells_of(tmp_path, name, text) if cell["id"] == cell_id)
    plan = cell_plan(cell, FACTS, {**OPTIONS, **options})
    assert_plan_matches_its_specs(plan)
    return plan


def env_of(job):
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container_of(job)["env"]}


def container_of(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def expanded(job, index):
    """The container's environment as the kubelet gives pod ``index``: the Downward API's value, $(NAME) expanded."""
    env = {}
    for entry in container_of(job)["env"]:
        if "valueFrom" in entry:
            field = entry["valueFrom"]["fieldRef"]["fieldPath"]
            assert field == f"metadata.annotations['{instances_k8s.INDEX_ANNOTATION}']"
            env[entry["name"]] = str(index)
            continue
        value = entry["value"]
        for name, known in env.items():  # only the variables defined before it
            value = value.replace(f"$({name})", known)
        assert "$(" not in value, entry
        env[entry["name"]] = value
    return env


def assert_cell_labels(manifest, plan):
    labels = manifest["metadata"]["labels"]
    assert {key: labels[key] for key in CELL_LABELS} == {
        "org.platbench.cell": label_value(plan["cell"]),
        "org.platbench.campaign": "k8s_ranks",
        "org.platbench.host": "Runner-A",
    }
    assert manifest["metadata"]["annotations"]["org.platbench.cell"] == plan["cell"]


def test_a_distributed_k8s_cell_is_an_indexed_job_behind_a_headless_service(tmp_path):
    plan = plan_of(tmp_path, DISTRIBUTED, "k8s/2/pin/cpu|network=overlay|r0")
    placed = plan["k8s_instances"]
    assert plan["placement"] == "k8s_instances" and "job" not in plan
    assert plan["task_file"] == "k8s_instances.yml"  # what cell.yml includes
    service, [only] = placed["service"], placed["rounds"]
    job = only["foreground"]
    assert only["background"] is None
    for manifest in (service, job):
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
        assert_cell_labels(manifest, plan)
    name = plan["name"]
    assert job["metadata"]["name"] == service["metadata"]["name"] == name
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {"job-name": name}
    assert service["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed",
        3,
        3,
        0,
    )
    assert spec["activeDeadlineSeconds"] == plan["timeout"]
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == name and pod["nodeSelector"] == {"kubernetes.io/hostname": NODE}
    assert_cell_labels(spec["template"], plan)
    # Each pod its own scale-up, requests = limits: Guaranteed, so the static CPU manager gives it whole cores.
    assert container_of(job)["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert qos_class(pod) == "Guaranteed"
    assert placed["objects"] == [
        {"api_version": "batch/v1", "kind": "Job", "name": name},
        {"api_version": "v1", "kind": "Service", "name": name},
    ]
    assert plan["runtime"]["instance_rounds"] == ["chief 0 + worker 1 + worker 2"]
    assert plan["runtime"]["network_path"] == "overlay" and plan["runtime"]["k8s_service"] == name


def test_each_torch_rank_is_its_completion_index_and_meets_the_chief_by_its_dns_name(tmp_path):
    job = plan_of(tmp_path, DISTRIBUTED, "k8s/2/pin/cpu|network=overlay|r0")["k8s_instances"]["rounds"][0]["foreground"]
    name = job["metadata"]["name"]
    # The index is the first variable, so that the others can refer to it.
    assert container_of(job)["env"][0]["name"] == instances_k8s.INDEX_ENV
    for index in range(3):
        env = expanded(job, index)
        assert env["MASTER_ADDR"] == f"{name}-0.{name}" and env["MASTER_PORT"] == "29500"
        assert env["GLOO_SOCKET_IFNAME"] == "eth0" and env["OMP_NUM_THREADS"] == "2"
        place = torch_place(env)  # what the workload reads, as it reads it
        assert (place.rank, place.world_size) == (index, 3)


def test_each_tensorflow_worker_is_its_completion_index_among_every_pods_name(tmp_path):
    text = DISTRIBUTED.replace("framework: torch", "framework: tensorflow")
    job = plan_of(tmp_path, text, "k8s/2/vnl/cpu|network=overlay|r0")["k8s_instances"]["rounds"][0]["foreground"]
    kubernetes_validate.validate(job, KUBERNETES, strict=True)
    name = job["metadata"]["name"]
    env = expanded(job, 2)
    config = json.loads(env["TF_CONFIG"])
    assert config == {
        "cluster": {"worker": [f"{name}-{index}.{name}:29500" for index in range(3)]},
        "task": {"type": "worker", "index": 2},
    }
    assert tuple(tf_place(env)) == (2, 3) and "RANK" not in env
    # vnl: a CPU limit of the scale-up and a smaller request, Burstable.
    resources = container_of(job)["resources"]
    assert resources["limits"]["cpu"] == "2" and resources["requests"]["cpu"] == "100m"
    assert qos_class(job["spec"]["template"]["spec"]) == "Burstable"


def test_a_shared_k8s_cell_runs_the_foreground_alone_then_beside_the_background_on_the_runners_node(tmp_path):
    plan = plan_of(tmp_path, SHARED, "k8s/1/pin/cpu|background=cnn_train:model=alexnet|r0", name="noisy")
    placed = plan["k8s_instances"]
    alone, beside = placed["rounds"]
    assert placed["service"] is None and alone["background"] is None and beside["settle"] == 3.0
    jobs = [alone["foreground"], beside["background"], beside["foreground"]]
    name = plan["name"]
    assert [job["metadata"]["name"] for job in jobs] == [f"{name}-0-alone", f"{name}-1", f"{name}-0-shared"]
    for job in jobs:
        kubernetes_validate.validate(job, KUBERNETES, strict=True)
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert {key: labels[key] for key in CELL_LABELS} == {key: job["metadata"]["labels"][key] for key in CELL_LABELS}
        assert labels["org.platbench.cell"] == "k8s_1_pin_cpu_background_cnn_train_model_alexnet_r0"
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": NODE}
        assert qos_class(job["spec"]["template"]["spec"]) == "Guaranteed"
        assert "completionMode" not in job["spec"]

    def labels(job):
        command = container_of(job)["command"]
        return json.loads(command[command.index("--labels-json") + 1])

    assert [labels(job) for job in jobs] == [
        {"instance_index": 0, "instance_role": "foreground", "share": "alone"},
        {"instance_index": 1, "instance_role": "background"},
        {"instance_index": 0, "instance_role": "foreground", "share": "shared"},
    ]
    noise = container_of(beside["background"])["command"]
    assert noise[noise.index("--model") + 1] == "alexnet" and noise[noise.index("--steps") + 1] == "1000000"
    assert jobs[1]["metadata"]["labels"]["org.platbench.role"] == "background"
    assert [item["name"] for item in placed["objects"]] == [job["metadata"]["name"] for job in jobs]
    assert plan["runtime"]["instance_rounds"] == ["foreground 0", "background 1 + foreground 0"]
    assert (
        plan["runtime"]["k8s_jobs"] == [job["metadata"]["name"] for job in jobs] and "job_name" not in plan["runtime"]
    )


def test_on_a_cluster_without_a_pinned_node_the_foreground_follows_the_background(tmp_path):
    plan = plan_of(tmp_path, SHARED, "k8s/1/pin/cpu|background=cnn_train:model=alexnet|r0", name="noisy")
    single = plan["k8s_instances"]["rounds"][0]["foreground"]
    ctx = SimpleNamespace(argv=plan["argv"], threads=1)
    members = plan["k8s_instances"]["members"]
    background = {"workload": "cnn_train", "params": {"model": "alexnet"}, "settle": 0}
    _, beside = instances_k8s._shared_rounds(ctx, single, members, background, node=None)
    kubernetes_validate.validate(beside["foreground"], KUBERNETES, strict=True)
    affinity = beside["foreground"]["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"job-name": members[1]["name"]}}, "topologyKey": "kubernetes.io/hostname"}
    ]


@pytest.mark.parametrize("path", ["loopback", "bridge"])
def test_a_path_a_pod_does_not_have_is_refused_before_any_cell_runs(tmp_path, path):
    text = DISTRIBUTED.replace("platforms: [k8s]", "platforms: [bm, k8s]").replace("[overlay]", f"[{path}]")
    experiment = load_experiment(_written(tmp_path, "ranks", text), "ranks")
    plan = {**experiment, "cells": expand(experiment)}
    status = {label: {"ready": True, "reason": "", "skip": False} for label in ("bm", "k8s")}
    problems = plan_problems(plan, status, FACTS, "runner-a")["problems"]
    assert problems == [
        f"Experiment 'ranks' asks for network path '{path}' between the pods of k8s (cell "
        f"k8s/2/pin/cpu|network={path}|r0), but a Kubernetes pod reaches another only over the cluster's CNI, "
        "flannel's VXLAN (overlay); each pod has a loopback and a bridge of its own: set network: [overlay] in "
        "experiments/ranks.yml, or run k8s in an experiment of its own with that network."
    ]
    # ... and by the planner, should a cell get there.
    cell = next(cell for cell in plan["cells"] if cell["labels"]["platform"] == "k8s")
    with pytest.raises(CellPlanError, match=f"network path '{path}' cannot join pods: .* use network: \\[overlay\\]"):
        cell_plan(cell, FACTS, OPTIONS)


def test_overlay_on_k8s_passes_the_prechecks(tmp_path):
    experiment = load_experiment(_written(tmp_path, "ranks", DISTRIBUTED), "ranks")
    plan = {**experiment, "cells": expand(experiment)}
    status = {"k8s": {"ready": True, "reason": "", "skip": False}}
    assert plan_problems(plan, status, FACTS, "runner-a")["problems"] == []


def test_pinned_pods_cannot_share_their_cpus(tmp_path):
    text = DISTRIBUTED.replace("instances: {count: 3}", "instances: {count: 3, cpus: shared}")
    with pytest.raises(CellPlanError, match="pinned pods cannot share their CPUs"):
        plan_of(tmp_path, text, "k8s/2/pin/cpu|network=overlay|r0")
    assert plan_of(tmp_path, text, "k8s/2/vnl/cpu|network=overlay|r0")["k8s_instances"]["cpus"] == "shared"


def _written(directory, name, text):
    (directory / f"{name}.yml").write_text(textwrap.dedent(text))
    return directory


def record(**labels):
    return "PLATBENCH_RESULT " + json.dumps(
        {"schema": 1, "workload": "cnn_train", "status": "ok", "error": None, "timestamp": 1.0, "labels": labels,
         "metrics": [{"metric": "elapsed", "value": 1.0, "unit": "s"}], "metadata": {}}
    )  # fmt: skip


def pod(name, index=None, rc=0, node=NODE):
    annotations = {instances_k8s.INDEX_ANNOTATION: str(index)} if index is not None else {}
    terminated = {"exitCode": rc, "reason": "Completed" if rc == 0 else "Error"}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"nodeName": node},
        "status": {
            "phase": "Succeeded" if rc == 0 else "Failed",
            "qosClass": "Guaranteed",
            "containerStatuses": [{"name": "workload", "state": {"terminated": terminated}}],
        },
    }


def test_each_ranks_log_becomes_records_labelled_with_its_role_and_index(tmp_path):
    plan = plan_of(tmp_path, DISTRIBUTED, "k8s/2/pin/cpu|network=overlay|r0")
    pods = [pod(f"p{index}", index) for index in (2, 0, 1)]
    logs = [{"item": "p0", "log": "training\n" + record()}, {"item": "p1", "log": ""}, {"item": "p2", "log": "x"}]
    complete = [{"status": {"conditions": [{"type": "Complete", "status": "True"}]}}]
    results = {"k8s_instances": {"rounds": [{"round": "0", "job": complete, "pods": pods, "logs": logs}]}}
    seen = placements.observed(plan, results)
    assert seen.error is None
    line = next(line for line in seen.output.splitlines() if line.startswith("PLATBENCH_RESULT "))
    assert json.loads(line.split(" ", 1)[1])["labels"] == {"instance_role": "chief", "instance_index": 0}
    assert [(entry["name"], entry["role"], entry["index"]) for entry in seen.runtime["instances_ran"]] == [
        ("p0", "chief", 0),
        ("p1", "worker", 1),
        ("p2", "worker", 2),
    ]
    assert {entry["node"] for entry in seen.runtime["instances_ran"]} == {NODE}
    # No rounds reported (the cell failed before a Job ran): nothing observed.
    assert placements.observed(plan, {"k8s_instances": {}}).output == ""


def test_a_failed_rank_fails_the_cell_with_kubernetes_reason(tmp_path):
    plan = plan_of(tmp_path, DISTRIBUTED, "k8s/2/pin/cpu|network=overlay|r0")
    failed = [
        {
            "status": {
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has "
                     "reached the specified backoff limit"}
                ]
            }
        }
    ]  # fmt: skip
    pods = [pod("p0", 0, rc=1), pod("p1", 1), pod("p2", 2)]
    results = {"k8s_instances": {"rounds": [{"round": 0, "job": failed, "pods": pods, "logs": []}]}}
    seen = placements.observed(plan, results)
    assert seen.error.startswith(f"Job {plan['name']} in namespace platbench: the Job failed: BackoffLimitExceeded")
    assert [entry["rc"] for entry in seen.runtime["instances_ran"]] == [1, 0, 0]


def test_a_shared_cells_records_come_from_both_foreground_runs(tmp_path):
    plan = plan_of(tmp_path, SHARED, "k8s/1/pin/cpu|background=cnn_train:model=alexnet|r0", name="noisy")
    complete = [{"status": {"conditions": [{"type": "Complete", "status": "True"}]}}]
    rounds = [
        {"round": 0, "job": complete, "pods": [pod("alone")], "logs": [{"item": "alone", "log": "ALONE"}]},
        {"round": 1, "job": complete, "pods": [pod("shared")], "logs": [{"item": "shared", "log": "SHARED"}]},
    ]
    running = [{"status": {"active": 1}}]
    rounds[1]["background"] = running
    seen = placements.observed(plan, {"k8s_instances": {"rounds": rounds}})
    assert seen.output == "ALONE\nSHARED" and seen.error is None
    assert [(entry["role"], entry["round"]) for entry in seen.runtime["instances_ran"]] == [
        ("foreground", 0),
        ("foreground", 1),
    ]
    # A background that ended before the foreground did: the shared run was not shared to the end.
    rounds[1]["background"] = [
        {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    ]
    seen = placements.observed(plan, {"k8s_instances": {"rounds": rounds}})
    assert seen.error.startswith(
        f"the background Job {plan['name']}-1 ended before the foreground did (the Job failed: BackoffLimitExceeded)"
    )


def test_the_background_has_started_once_its_pod_runs_or_ended():
    assert not k8s_pods_started([])
    assert not k8s_pods_started([{"status": {"phase": "Pending"}}])
    assert k8s_pods_started([{"status": {"phase": "Running"}}])
    assert k8s_pods_started([{"status": {"phase": "Failed"}}])


def test_a_cluster_that_does_not_answer_fails_the_cell_and_every_object_is_still_deleted(tmp_path, playbook):
    # Ansible validates the plan against the entry point's argument spec (include_role), then runs the task file.
    plan, run, outcome = place_on_unreachable_cluster(
        playbook,
        UNREACHABLE,
        tmp_path,
        lambda kubeconfig: plan_of(tmp_path, DISTRIBUTED, "k8s/2/pin/cpu|network=overlay|r0", kubeconfig=kubeconfig),
    )
    # Both the Job and the Service were asked to go, each failure ignored so the cell's own error is recorded.
    deleted = [
        (entry["item"]["kind"], entry["item"]["name"], entry["failed"]) for entry in outcome["deletion"]["results"]
    ]
    assert deleted == [("Job", plan["name"], True), ("Service", plan["name"], True)]
    assert f"Not deleted from namespace platbench: {plan['name']}, {plan['name']}" in run.output


def test_a_node_that_cannot_hold_a_cells_pods_at_once_is_refused(tmp_path):
    experiment = load_experiment(_written(tmp_path, "ranks", DISTRIBUTED.replace("[cpu]", "[cpu, gpu]")), "ranks")
    plan = {**experiment, "cells": expand(experiment)}
    node = {"name": NODE, "ready": True, "allocatable_cpus": 5, "allocatable_gpus": 2}
    status = {"k8s": {"ready": True, "reason": "", "skip": False, "node": node}}
    assert plan_problems(plan, status, GPU_HOST, "runner-a")["problems"] == [
        "Experiment 'ranks' pins 3 pods x scale-up 2 = 6 CPUs on k8s (cell k8s/2/pin/cpu|network=overlay|r0), but "
        f"node {NODE} has 5 allocatable CPUs: lower 'scaleup' or 'instances.count' in experiments/ranks.yml, or let "
        "vnl pods share the node's CPUs.",
        "Experiment 'ranks' runs 3 pods with a GPU each on k8s (cell k8s/2/pin/gpu|network=overlay|r0), but node "
        f"{NODE} advertises 2 nvidia.com/gpu: lower 'instances.count' in experiments/ranks.yml, or drop the k8s gpu "
        "scenarios.",
    ]
    node.update(allocatable_cpus=6, allocatable_gpus=3)
    assert plan_problems(plan, status, GPU_HOST, "runner-a")["problems"] == []


def test_each_pod_of_a_gpu_cell_asks_the_device_plugin_for_its_own(tmp_path):
    cell = next(
        cell
        for cell in cells_of(tmp_path, "ranks", DISTRIBUTED.replace("[cpu]", "[gpu]"))
        if cell["id"] == "k8s/2/pin/gpu|network=overlay|r0"
    )
    job = cell_plan(cell, GPU_HOST, OPTIONS)["k8s_instances"]["rounds"][0]["foreground"]
    kubernetes_validate.validate(job, KUBERNETES, strict=True)
    assert container_of(job)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert job["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    env = expanded(job, 1)
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and json.loads(env["PLATBENCH_EXPECTED_GPUS"])["count"] == 1


def test_teardown_goes_on_when_the_cluster_of_leftover_pods_does_not_answer(tmp_path, playbook):
    kubeconfig, _ = unreachable_kubeconfig(tmp_path)
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"children": {"platbench_runners": {"hosts": {"localhost": local}}}}}))
    variables = {
        "platform_run_prefix": str(tmp_path / "prefix"),
        "platform_run_kubeconfig": str(kubeconfig),
        "teardown_cell_networks": False,  # a campaign running on this machine keeps its cells' paths
    }
    run = playbook("playbooks/teardown.yml", variables, inventory=inventory)
    assert run.rc == 0, run.output[-3000:]
    assert f"The Kubernetes cluster of {kubeconfig} did not list the cells' objects" in run.output
    assert "kubectl delete jobs,services -n platbench -l org.platbench.cell" in run.output
    assert TOKEN not in run.output
