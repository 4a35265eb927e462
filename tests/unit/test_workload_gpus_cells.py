"""A workload run with exactly the environment the cell plan gives: a CPU cell sees no GPU and says so.

The variables are the ones plugins/plugin_utils/cells/cellplan.py computes for a cell: a CPU cell
hides every GPU (CUDA_VISIBLE_DEVICES="", NVIDIA_VISIBLE_DEVICES=void for the container runtime) and
plans none (PLATBENCH_EXPECTED_GPUS). On a GPU host the same run proves the frameworks obey it.
"""

import json
import subprocess
import sys

import pytest
from plan_options import cell_plan, plan_options
from workload_run import ENV, FRAMEWORKS, REPO_ROOT, metric_values, only_record, records_of

# A bm cpu cell on a host with two GPUs (one kept by the host, one for guests): the GPU variables
# exactly as the cell plan sets them.
_GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x2330", "driver": "nvidia", "iommu_group": "7"},
    {"pci_address": "0000:af:00.0", "device_id": "0x2330", "driver": "vfio-pci", "iommu_group": "9"},
]
_CELL = {
    "id": "bm/1/pin/cpu|r0",
    "scenario": "bm/1/pin/cpu",
    "labels": {"platform": "bm", "scaleup": 1, "cpu_config": "pin", "processor": "cpu", "workload": "cnn_train"},
    "params": {"model": "tiny"},
}
_PLAN = cell_plan(
    _CELL,
    {
        "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
        "cpus_allowed": [0, 1],
        "numa_nodes": {"0": [0, 1]},
        "gpus": _GPUS,
        "gpu_count": 2,
    },
    plan_options(host="gpu1", campaign="c1", gpu_assignment={"0000:af:00.0": "guests"}),
)
CPU_CELL_ENV = {
    name: _PLAN["env"][name]
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "PLATBENCH_EXPECTED_GPUS")
}


def test_the_plan_hides_every_gpu_from_a_cpu_cell():
    assert CPU_CELL_ENV["CUDA_VISIBLE_DEVICES"] == "" and CPU_CELL_ENV["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert json.loads(CPU_CELL_ENV["PLATBENCH_EXPECTED_GPUS"])["count"] == 0


TINY = "--model tiny --image-size 32 --batch-size 8 --warmup-steps 1 --steps 2 --threads 1 --peak-gflops 100".split()


def run_cell(env, *args):
    command = [sys.executable, "-m", "workloads.cnn_train", *args]
    process = subprocess.run(
        command, cwd=REPO_ROOT, env={**ENV, **env}, capture_output=True, text=True, timeout=300, check=False
    )
    return process, only_record(process, records_of(process.stdout))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_cpu_cell_trains_on_the_cpu_and_records_no_device(framework):
    process, record = run_cell(CPU_CELL_ENV, "--framework", framework, *TINY)
    assert (process.returncode, record["status"], record["error"]) == (0, "ok", None), process.stderr[-3000:]
    metadata = record["metadata"]
    assert metadata["devices"] == []
    assert metadata["device"] == {"torch": "cpu", "tensorflow": "/CPU:0"}[framework]
    assert "gpus" not in metadata
    values = metric_values(record)
    assert values["throughput"] > 0
    assert "h2d_time" not in values and "h2d_bytes" not in values, "CPU cells copy nothing to a device"


def test_a_gpu_cell_without_its_gpu_fails_before_training_and_says_why():
    plan = {
        "CUDA_VISIBLE_DEVICES": "",  # the GPU did not reach the process: e.g. a driver missing where it runs
        "PLATBENCH_EXPECTED_GPUS": '{"count":1,"pci_bus_ids":["0000:3b:00.0"]}',
    }
    process, record = run_cell(plan, "--framework", "torch", *TINY)
    assert (process.returncode, record["status"], record["metrics"]) == (1, "failed", [])
    assert record["error"] == (
        "cnn_train --mode single would use 0 GPU(s) (--num-gpus unset, visible: none) but the cell was planned "
        "with 1; set --num-gpus to the plan's count or leave it out"
    )
    assert record["metadata"]["devices"] == []
    assert "Traceback" not in process.stderr, "a planned failure, not a crash"


def test_a_malformed_plan_is_a_failed_record_naming_the_variable():
    process, record = run_cell({"PLATBENCH_EXPECTED_GPUS": "1"}, "--framework", "torch", *TINY)
    assert (process.returncode, record["status"]) == (1, "failed")
    assert record["error"].startswith("PLATBENCH_EXPECTED_GPUS='1' is not valid: ")
