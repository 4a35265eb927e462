"""The k8s platform around its Job: readiness (kubeconfig, cluster, node, image), the prechecks of the
runner's node, and the k8s_job kind (its tasks/place.yml) against an API server that does not answer (the Job is still
deleted)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.modules import platform_status as module
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import validate_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import cell_plan, plan_options
from unreachable_cluster import place_on_unreachable_cluster

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "tests/roles/platform_run/k8s_unreachable.yml"
IMAGE = "platbench/workload:0123456789ab"
HOST = {"docker_engine": True, "vm_accelerator": "kvm", "libvirt_daemon": True}
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 0,
    "gpus": [],
}
ROLE_HINT = "run site.yml with the host in platbench_kubernetes_control_plane or platbench_kubernetes_workers"


def node(name="runner-a", ready="True", cpu="7", gpus=None, images=(f"docker.io/{IMAGE}",)):
    allocatable = {"cpu": cpu, "memory": "30Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
            "images": [{"names": [image, "docker.io/platbench/workload@sha256:ab"]} for image in images],
        },
    }


def k8s_status(present=True, error="", nodes=None, name="runner-a"):
    cluster = {
        "kubeconfig": "/etc/kubernetes/admin.conf",
        "kubeconfig_present": present,
        "node": name,
        "nodes": [node()] if nodes is None else nodes,
        "error": error,
    }
    return platform_status(
        HOST, "/opt/platbench", True, IMAGE, "sha256:" + "1" * 64, "/g.json", {}, kubernetes=cluster
    )["k8s"]


def test_a_ready_node_makes_k8s_ready_and_says_what_it_offers():
    entry = k8s_status(nodes=[node("other"), node(cpu="7500m", gpus="2")])
    assert entry["ready"] and entry["reason"] == "" and not entry["skip"]
    assert entry["node"] == {
        "name": "runner-a",
        "ready": True,
        "allocatable_cpus": 7,
        "allocatable_gpus": 2,
        "images_complete": True,
    }


@pytest.mark.parametrize(
    "change, reason, skip",
    [
        (
            {"present": False},
            f"no kubeconfig at /etc/kubernetes/admin.conf, so this host is no Kubernetes node: {ROLE_HINT}",
            True,
        ),
        (
            {"error": "Max retries exceeded with url: /api/v1/nodes (Connection refused)"},
            "the Kubernetes cluster does not answer with /etc/kubernetes/admin.conf (Max retries exceeded",
            False,
        ),
        (
            {"nodes": [node("other")]},
            "the cluster has no node runner-a (its nodes: other): run site.yml with the host in",
            False,
        ),
        ({"nodes": [node(ready="False")]}, "Kubernetes node runner-a is not Ready", False),
        (
            {"nodes": [node(images=["docker.io/library/busybox:1"])]},
            f"image {IMAGE} is not in the containerd of node runner-a: run site.yml (role platbench.lab.kubernetes",
            False,
        ),
    ],
)
def test_each_missing_piece_of_the_cluster_says_what_to_do(change, reason, skip):
    entry = k8s_status(**change)
    assert not entry["ready"] and entry["reason"].startswith(reason) and entry["skip"] is skip


def test_an_image_kubelet_does_not_list_is_not_held_against_the_node():
    # kubelet reports 50 images at most: beyond that, a missing one may be there.
    many = [f"docker.io/library/other:{index}" for index in range(50)]
    assert k8s_status(nodes=[node(images=many)])["ready"]


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_on_this_host_without_a_kubeconfig_k8s_is_skipped_with_the_reason(tmp_path, capsys):
    missing = tmp_path / "admin.conf"
    result = run_module(
        capsys, {"facts": HOST, "kubeconfig": str(missing), "k8s_nodes": {"skipped": True}, "platforms": ["k8s"]}
    )
    k8s = result["platforms"]["k8s"]
    assert not k8s["ready"] and k8s["skip"] and k8s["node"] is None
    assert result["summary"] == [
        f"k8s: skipped: no kubeconfig at {missing}, so this host is no Kubernetes node: "
        f"{ROLE_HINT} (role platbench.lab.kubernetes)"
    ]
    # kubelet names its node after the hostname, in lower case.
    assert result["k8s_node"] == socket.gethostname().lower()


def test_the_module_turns_a_failed_node_query_into_the_reason(tmp_path, capsys):
    kubeconfig = tmp_path / "admin.conf"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    failed = {"failed": True, "msg": "Failed to import the required Python library (kubernetes)"}
    result = run_module(
        capsys, {"facts": HOST, "kubeconfig": str(kubeconfig), "k8s_node": "Node-1", "k8s_nodes": failed}
    )
    k8s = result["platforms"]["k8s"]
    assert not k8s["ready"] and not k8s["skip"] and result["k8s_node"] == "node-1"
    assert f"does not answer with {kubeconfig} (Failed to import the required Python library" in k8s["reason"]
    asked = {"resources": [node("node-1", images=["docker.io/platbench/workload:latest"])]}
    result = run_module(
        capsys, {"facts": HOST, "kubeconfig": str(kubeconfig), "k8s_node": "Node-1", "k8s_nodes": asked}
    )
    assert result["platforms"]["k8s"]["ready"] and "k8s" in result["ready"]


def experiment(**fields):
    definition = {
        "name": "e",
        "workload": "cnn_train",
        "platforms": ["k8s"],
        "scaleup": [2, 8],
        "cpu_config": ["pin", "vnl"],
        "processor": ["cpu"],
        "repeats": 1,
        **fields,
    }
    checked = validate_experiment(definition)
    return {**checked, "cells": expand(checked)}


def ready_status(**node_fields):
    summary = {"name": "runner-a", "ready": True, "allocatable_cpus": 8, "allocatable_gpus": 0, **node_fields}
    return {"k8s": {"ready": True, "reason": "", "skip": False, "node": summary}}


def test_a_pinned_scale_up_beyond_the_node_allocatable_cpus_is_refused():
    result = plan_problems(experiment(), ready_status(allocatable_cpus=6), FACTS, "runner-a")
    assert result["problems"] == [
        "Experiment 'e' pins scale-up 8 on k8s, but node runner-a has 6 allocatable CPUs (its CPUs minus kubelet's "
        "reservedSystemCPUs): lower 'scaleup' in experiments/e.yml, or reserve fewer CPUs in platbench.lab.kubernetes."
    ]
    # vnl only asks for a CPU limit: the node need not have that many to spare.
    assert (
        plan_problems(experiment(cpu_config=["vnl"]), ready_status(allocatable_cpus=6), FACTS, "runner-a")["problems"]
        == []
    )


def test_a_gpu_scenario_on_a_node_without_the_device_plugin_is_refused():
    gpu_host = {
        **FACTS,
        "gpu_count": 1,
        "gpus": [{"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "1"}],
    }
    plan = experiment(scaleup=[2], processor=["gpu"])
    result = plan_problems(plan, ready_status(), gpu_host, "runner-a")
    assert result["problems"] == [
        "Experiment 'e': a GPU scenario on k8s needs the NVIDIA device plugin: node runner-a advertises no "
        "nvidia.com/gpu; run platbench.lab.kubernetes on a GPU node (it deploys the device plugin), or drop the "
        "k8s gpu scenarios."
    ]
    assert plan_problems(plan, ready_status(allocatable_gpus=1), gpu_host, "runner-a")["problems"] == []


def test_a_cluster_that_does_not_answer_fails_the_cell_and_the_job_is_still_deleted(tmp_path, playbook):
    cell = {
        "id": "k8s/1/pin/cpu|r0",
        "scenario": "k8s/1/pin/cpu",
        "params": {"framework": "tensorflow", "steps": 1},
        "labels": {"platform": "k8s", "scaleup": 1, "cpu_config": "pin", "processor": "cpu", "workload": "cnn_train"},
    }
    # The first call to the API server fails the cell with its error (the client library's own when the
    # runner lacks it, else the refused connection) ...
    plan, run, outcome = place_on_unreachable_cluster(
        playbook,
        PLAYBOOK,
        tmp_path,
        lambda kubeconfig: cell_plan(
            cell, FACTS, plan_options(host="localhost", campaign="c", k8s_node="n", kubeconfig=kubeconfig)
        ),
    )
    # ... and the Job is deleted all the same; its failure is ignored, so the cell's own error is what is recorded.
    assert outcome["deletion"]["failed"] is True
    assert "Job " + plan["name"] + " in namespace platbench was not deleted" in run.output
