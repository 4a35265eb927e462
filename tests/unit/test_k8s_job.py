"""The k8s platform's Job: valid against Kubernetes 1.33's schema for every cpu_config x processor, the QoS
class that gives pinned cores, GPUs by the device plugin, data read-only, and what a finished Job says."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter.kubernetes import k8s_job_outcome as outcome_filter
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes.job_spec import (
    K8sJobError,
    job_outcome,
    label_value,
    qos_class,
    quantity,
)
from plan_options import cell_plan, plan_options

KUBERNETES = "1.33.0"
# One GPU left with the host (the device plugin advertises it), one given to guests on vfio-pci.
GPU_NODE = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 2,
    "gpus": [
        {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"},
        {"pci_address": "0000:af:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "40"},
    ],
}
OPTIONS = plan_options(
    host="Runner-A",
    campaign="lin2018 single",
    k8s_node="runner-a",
    image="platbench/workload:0123456789ab",
    gpu_assignment={"0000:af:00.0": "guests"},
)
DATASET = {"generator": "mnist", "args": {"images": 600}}
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def make_cell(scaleup=2, cpu_config="pin", processor="cpu"):
    scenario = f"k8s/{scaleup}/{cpu_config}/{processor}"
    params = {"framework": "tensorflow", "steps": 3}
    labels = {**params, "platform": "k8s", "scaleup": scaleup, "cpu_config": cpu_config, "processor": processor}
    return {
        "id": f"{scenario}|r0",
        "scenario": scenario,
        "params": params,
        "labels": {**labels, "workload": "cnn_train", "repeat": 0},
    }


def plan_for(cpu_config="pin", processor="cpu", dataset=None, **options):
    return cell_plan(
        make_cell(cpu_config=cpu_config, processor=processor), GPU_NODE, {**OPTIONS, "dataset": dataset, **options}
    )


def pod_spec(plan):
    return plan["job"]["spec"]["template"]["spec"]


def container(plan):
    (only,) = pod_spec(plan)["containers"]
    return only


@pytest.mark.parametrize("dataset", [None, DATASET], ids=["synthetic", "dataset"])
@pytest.mark.parametrize("processor", ["cpu", "gpu"])
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_the_job_is_a_valid_kubernetes_object(cpu_config, processor, dataset):
    plan = plan_for(cpu_config, processor, dataset)
    job = plan["job"]
    kubernetes_validate.validate(job, KUBERNETES, strict=True)
    assert plan["placement"] == "k8s_job" and job["metadata"]["name"] == plan["name"]
    assert job["metadata"]["namespace"] == plan["kubernetes"]["namespace"] == "platbench"
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == plan["timeout"] == 3600
    assert spec["ttlSecondsAfterFinished"] > 0
    pod = pod_spec(plan)
    assert pod["restartPolicy"] == "Never" and pod["nodeSelector"] == {"kubernetes.io/hostname": "runner-a"}
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    workload = container(plan)
    assert workload["image"] == "platbench/workload:0123456789ab" and workload["imagePullPolicy"] == "Never"
    assert workload["command"] == ["python"] + plan["argv"]
    assert {item["name"]: item["value"] for item in workload["env"]} == plan["env"]
    # Waiting for the Job outlasts its deadline, so Kubernetes says DeadlineExceeded before the wait gives up.
    cluster = plan["kubernetes"]
    assert cluster["poll_delay"] * cluster["poll_retries"] >= plan["timeout"] + 60


def test_labels_are_valid_label_values_and_annotations_keep_the_cell_whole():
    metadata = plan_for()["job"]["metadata"]
    assert metadata["labels"] == {
        "org.platbench.cell": "k8s_2_pin_cpu_r0",
        "org.platbench.campaign": "lin2018_single",
        "org.platbench.host": "Runner-A",
    }
    assert metadata["annotations"]["org.platbench.cell"] == "k8s/2/pin/cpu|r0"
    assert label_value("-" + "x" * 80 + "|") == "x" * 62 and LABEL_VALUE.match(label_value("a/" * 40 + "."))
    assert all(LABEL_VALUE.match(value) for value in metadata["labels"].values())


def test_pin_is_guaranteed_with_whole_cpus_and_vnl_burstable_with_a_cpu_limit():
    pinned, vanilla = plan_for("pin"), plan_for("vnl")
    assert container(pinned)["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert qos_class(pod_spec(pinned)) == "Guaranteed"
    assert container(vanilla)["resources"] == {
        "requests": {"cpu": "100m", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert qos_class(pod_spec(vanilla)) == "Burstable"
    # kubelet's CPU manager picks the cores: platbench chooses none, the workload reports those it got.
    assert pinned["cpus"] == [] and pinned["cpuset"] == "" and pinned["runtime"]["cpuset_requested"] is None
    assert pinned["runtime"]["k8s_cpu_request"] == "2" and vanilla["runtime"]["k8s_cpu_request"] == "100m"
    assert vanilla["cpu_quota"] == 2.0 and pinned["cpu_quota"] is None


def spec_of(*resources, init=()):
    return {
        "containers": [{"name": f"c{i}", "image": "x", "resources": r} for i, r in enumerate(resources)],
        "initContainers": [{"name": f"i{i}", "image": "x", "resources": r} for i, r in enumerate(init)],
    }


FULL = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    "spec, expected",
    [
        (spec_of({}), "BestEffort"),
        (spec_of({"limits": {"nvidia.com/gpu": "1"}}), "BestEffort"),  # only cpu and memory count
        (spec_of({"limits": FULL}), "Guaranteed"),  # requests default to limits
        (spec_of({"requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": FULL}), "Guaranteed"),
        (spec_of({"requests": {"cpu": "500m"}, "limits": FULL}), "Burstable"),
        (spec_of({"requests": FULL}), "Burstable"),  # no limits
        (spec_of({"limits": {"cpu": "1"}}), "Burstable"),  # no memory limit
        (spec_of({"limits": FULL}, {}), "Burstable"),  # one container without anything
        (spec_of({"limits": FULL}, init=[{"limits": {"cpu": "2", "memory": "1Gi"}, "requests": FULL}]), "Burstable"),
    ],
)
def test_qos_class_follows_kubernetes_definition(spec, expected):
    assert qos_class(spec) == expected


def test_quantities():
    assert quantity("500m") == quantity("0.5") and quantity("1Gi") == quantity("1024Mi") == 2**30
    assert quantity(2) == 2 and quantity("1e3") == 1000 and quantity("1k") == 1000
    with pytest.raises(K8sJobError, match=r"'4GB' is not a Kubernetes quantity"):
        quantity("4GB")


def test_a_gpu_cell_asks_the_device_plugin_for_as_many_gpus_as_cn_would_get():
    plan = plan_for("pin", "gpu", gpus_per_cell=2)
    # One GPU is the host's: the other is the guests', so the cell gets one, chosen by the device plugin.
    assert container(plan)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in container(plan)["resources"]["requests"]
    assert pod_spec(plan)["runtimeClassName"] == "nvidia"
    assert plan["gpus"] == [] and plan["runtime"]["k8s_gpus_requested"] == 1
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0" and "NVIDIA_VISIBLE_DEVICES" not in plan["env"]
    assert json.loads(plan["env"]["PLATBENCH_EXPECTED_GPUS"]) == {"count": 1, "pci_bus_ids": None}
    assert qos_class(pod_spec(plan)) == "Guaranteed"


def test_a_cpu_cell_sees_no_gpu():
    plan = plan_for("vnl", "cpu")
    assert "runtimeClassName" not in pod_spec(plan) and "nvidia.com/gpu" not in container(plan)["resources"]["limits"]
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "" and plan["env"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert json.loads(plan["env"]["PLATBENCH_EXPECTED_GPUS"]) == {"count": 0, "pci_bus_ids": None}


def test_data_is_a_read_only_host_path_and_the_cache_read_write():
    plan = plan_for(dataset=DATASET)
    volumes = {volume["name"]: volume["hostPath"] for volume in pod_spec(plan)["volumes"]}
    mounts = {mount["name"]: mount for mount in container(plan)["volumeMounts"]}
    data = next(name for name, mount in mounts.items() if mount["mountPath"] == plan["data_dir"])
    cache = next(name for name, mount in mounts.items() if mount["mountPath"] == "/var/cache/platbench")
    assert mounts[data]["readOnly"] is True and volumes[data] == {"path": plan["data_dir"], "type": "Directory"}
    assert mounts[cache]["readOnly"] is False
    assert volumes[cache] == {"path": "/var/cache/platbench", "type": "DirectoryOrCreate"}
    assert "--data-dir" in plan["argv"] and plan["data_dir"] in plan["argv"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"k8s_node": None}, "no Kubernetes node for Runner-A: set platform_run_k8s_node"),
        ({"k8s_memory": "4GB"}, "platform_run_k8s_memory: '4GB' is not a Kubernetes quantity"),
        ({"k8s_memory": "0"}, "platform_run_k8s_memory: '0' must be more than 0"),
        (
            {"k8s_cpu_request": "2"},
            "platform_run_k8s_cpu_request: '2' must be more than 0 and less than the scale-up 2",
        ),
    ],
)
def test_bad_options_say_which_setting(options, message):
    with pytest.raises(CellPlanError, match=re.escape(message)):
        plan_for("vnl", **options)


def job_with(*conditions):
    return [{"status": {"conditions": [{"type": t, "status": "True", **extra} for t, extra in conditions]}}]


def pod_with(state, qos="Guaranteed"):
    return [
        {
            "metadata": {"name": "platbench-x-abcde"},
            "spec": {"nodeName": "runner-a"},
            "status": {"qosClass": qos, "containerStatuses": [{"name": "workload", "state": state}]},
        }
    ]


def test_a_completed_job_succeeds_with_the_pod_it_ran_in():
    result = job_outcome(
        job_with(("SuccessCriteriaMet", {}), ("Complete", {})), pod_with({"terminated": {"exitCode": 0}})
    )
    assert result == {
        "finished": True,
        "succeeded": True,
        "reason": "",
        "rc": 0,
        "pod": "platbench-x-abcde",
        "node": "runner-a",
        "qos_class": "Guaranteed",
    }


@pytest.mark.parametrize(
    "jobs, pods, reason, rc",
    [
        (
            job_with(
                ("Failed", {"reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"})
            ),
            pod_with({"terminated": {"exitCode": 3, "reason": "Error"}}),
            "the Job failed: BackoffLimitExceeded (Job has reached the specified backoff limit); "
            "the workload exited with 3",
            3,
        ),
        (
            job_with(("Failed", {"reason": "DeadlineExceeded"})),
            [],
            "the Job failed: DeadlineExceeded",
            None,
        ),
        (
            job_with(),
            pod_with({"waiting": {"reason": "ErrImageNeverPull", "message": "image not present"}}),
            "its container cannot start: ErrImageNeverPull image not present",
            None,
        ),
        ([], None, "the Job is gone", None),
    ],
)
def test_a_failed_job_says_why(jobs, pods, reason, rc):
    result = job_outcome(jobs, pods)
    assert result["finished"] and not result["succeeded"] and result["reason"].startswith(reason)
    assert result["rc"] == rc


def test_a_running_job_is_not_finished():
    assert not job_outcome(job_with(), pod_with({"running": {}}))["finished"]
    assert not outcome_filter(job_with(("Suspended", {})))["finished"]
    with pytest.raises(AnsibleFilterError, match="k8s_job_outcome: the Job's resources must be the list"):
        outcome_filter({"resources": []})
