"""Running the record_cell action as Ansible does, on the controller, for the tests."""

import json
from types import SimpleNamespace

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import action_loader

TASK_VARS = {
    "inventory_hostname": "lab1",
    "ansible_facts": {
        "hostname": "lab1",
        "kernel": "6.8.0",
        "distribution": "Debian",
        "distribution_version": "12",
        "platbench": {"cpu_model": "Xeon", "cpu_count": 8, "numa_nodes": {"0": [0, 1]}},
    },
}
# The runner's engines, as cell.yml passes them (platform_run_engines).
ENGINES = {"docker": {"answers": True, "version": "27.3.1", "image_id": "sha256:" + "a" * 64}}
RUNTIME = {"container_id": "abc123", "cpuset_requested": "2-3", "launcher": "docker", "rc": 0}


def record_line(status="ok", error=None, throughput=41.7):
    record = {
        "schema": 1,
        "workload": "cnn_train",
        "status": status,
        "error": error,
        "timestamp": 1764000000.0,
        "labels": {"workload": "cnn_train", "framework": "tensorflow", "model": "tiny"},
        "metrics": [
            {"metric": "throughput", "value": throughput, "unit": "images/sec"},
            {"metric": "elapsed", "value": 9.5, "unit": "sec"},
        ]
        if status == "ok"
        else [],
        "metadata": {"cpuset": "2-3", "framework_version": "2.20"},
    }
    return "PLATBENCH_RESULT " + json.dumps(record)


def make_cell(cell_id="cn/2/pin/cpu|r0"):
    scenario = cell_id.split("|")[0]
    platform, scaleup, cpu_config, processor = scenario.split("/")
    return {
        "id": cell_id,
        "scenario": scenario,
        "params": {"model": "tiny"},
        "labels": {
            "experiment": "smoke",
            "platform": platform,
            "scaleup": int(scaleup),
            "cpu_config": cpu_config,
            "processor": processor,
            "repeat": 0,
            "model": "tiny",
        },
    }


def make_campaign(results_dir):
    return {"name": "smoke-20261122", "results_dir": str(results_dir), "experiment": {"name": "smoke", "repeats": 1}}


def run_record_cell(args, task_vars=None, **keywords):
    """The action's result for a task ``platbench.lab.record_cell: args``."""
    task = Task.load({"name": "Record the cell", "platbench.lab.record_cell": args, **keywords}, loader=DataLoader())
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
    action = action_loader.get(
        "platbench.lab.record_cell",
        task=task,
        connection=connection,
        play_context=PlayContext(),
        loader=DataLoader(),
        templar=None,
        shared_loader_obj=None,
    )
    return action.run(task_vars=TASK_VARS if task_vars is None else task_vars)


def record_cell(results_dir, cell_id="cn/2/pin/cpu|r0", output=None, runtime=None, **args):
    """The result of recording one cell: its output (one ok record by default) and any of error/failure."""
    return run_record_cell(
        {
            "cell": make_cell(cell_id),
            "campaign": make_campaign(results_dir),
            "output": record_line() + "\n" if output is None else output,
            "runtime": dict(RUNTIME) if runtime is None else runtime,
            "engines": ENGINES,
            **args,
        }
    )
