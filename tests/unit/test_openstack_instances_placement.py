"""run_nova.yml without a cloud: a cell whose server nova put in ERROR is recorded as failed, nova's fault message
its error, through platform_run's cell.yml, record_cell and the results callback."""

from __future__ import annotations

import json

from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan

CAMPAIGN = "placement1"
LABELS = {
    "experiment": "live",
    "platform": "nova",
    "scaleup": 1,
    "cpu_config": "pin",
    "processor": "gpu",
    "workload": "cnn_train",
    "framework": "tensorflow",
    "model": "tiny",
    "repeat": 0,
}
# As cells_to_run hands it to cell.yml: sized (a cloud instance's cores are its flavor's: no chr, no NUMA nodes).
CELL = sizing.sized(
    {"id": "nova/1/pin/gpu|r0", "scenario": "nova/1/pin/gpu", "params": {"framework": "tensorflow"}, "labels": LABELS},
    {},
)
FAULT = "nova: No valid host was found. There are not enough hosts available."


def plays(instance, group, failure):
    return [
        {
            "name": "Add the instance as openstack_instances does",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Add it",
                    "ansible.builtin.add_host": {
                        "name": instance,
                        "groups": [group],
                        "platbench_platform": "nova",
                        "platbench_openstack_failure": failure,
                    },
                }
            ],
        },
        {
            "name": "Run and record the cell as platform_run does",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": [
                {"name": "Read the facts", "platbench.lab.host_facts": {}},
                {
                    "name": "Run the cell",
                    "ansible.builtin.include_role": {"name": "platbench.lab.platform_run", "tasks_from": "cell.yml"},
                    "vars": {
                        "platform_run_cell": CELL,
                        "platform_run_plan": {"name": "live", "cells": [CELL]},
                        "platform_run_campaign": CAMPAIGN,
                        "platform_run_engines": {},
                        "platform_run_guest": {},
                        "platform_run_sif": {},
                        "platform_run_apptainer_version": None,
                        "platform_run_k8s_node_name": None,
                    },
                },
            ],
        },
    ]


def test_a_cell_whose_server_failed_is_recorded_with_novas_reason(tmp_path, playbook):
    instance = openstack_plan.instance_name(CAMPAIGN, LABELS)
    results = tmp_path / "results" / CAMPAIGN
    run = playbook(plays(instance, "platbench_nova_failed", FAULT), {"platform_run_results_dir": str(results)})
    assert run.rc == 0, run.output[-4000:]
    (sample,) = [json.loads(line) for line in (results / "samples.jsonl").read_text().splitlines()]
    assert sample["metric"] == "failed"
    assert f"nova instance {instance} of campaign {CAMPAIGN} is not up: {FAULT}" in sample["metadata"]["error"]
    assert sample["labels"]["platform"] == "nova" and sample["labels"]["scaleup"] == 1
