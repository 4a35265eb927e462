"""What a workload needs from a cell (plugins/module_utils/workload_needs.py) and how the plan uses it."""

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import workload_needs
from ansible_collections.platbench.lab.plugins.module_utils.workload_needs import NEEDS, Needs, needs_of, tools_for
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import dropped_cells, expand


def micro(**changes):
    data = {
        "name": "micro",
        "workload": ["micro_cpu", "micro_net"],
        "platforms": ["bm", "cn", "vm"],
        "scaleup": [2],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
    }
    data.update(changes)
    return validate_experiment(data, "micro.yml")


def test_the_table_of_the_micro_suite():
    assert NEEDS["micro_gpu"] == Needs(processor="gpu")
    assert NEEDS["micro_net"].peer_platforms == ("bm", "cn") and NEEDS["micro_net"].tools == ("iperf3",)
    assert needs_of("cnn_train") == Needs()  # not in the table: needs nothing


def test_tools_are_sorted_and_unique():
    assert tools_for(["micro_cpu", "micro_mem", "micro_disk", "micro_net", "micro_gpu", "cnn_train"]) == [
        "dd",
        "fio",
        "hpcc",
        "ioping",
        "iperf3",
    ]
    assert tools_for([]) == []


def test_a_gpu_benchmark_in_a_cpu_experiment_stops_the_plan():
    with pytest.raises(ExperimentError) as caught:
        micro(workload=["micro_cpu", "micro_gpu"])
    assert (
        "workload: micro_gpu is a GPU benchmark and this experiment's processor is only cpu: "
        "add processor: [gpu] (a host with a GPU) or remove micro_gpu"
    ) in str(caught.value)


def test_a_mixed_experiment_drops_the_cpu_cells_of_a_gpu_benchmark():
    experiment = micro(workload=["micro_cpu", "micro_gpu"], processor=["cpu", "gpu"], platforms=["bm"])
    cells = expand(experiment)
    assert {(cell["labels"]["workload"], cell["labels"]["processor"]) for cell in cells} == {
        ("micro_cpu", "cpu"),
        ("micro_cpu", "gpu"),
        ("micro_gpu", "gpu"),
    }
    assert dropped_cells(experiment) == [
        {
            "workload": "micro_gpu",
            "processor": "cpu",
            "reason": "micro_gpu is a gpu benchmark: its cpu cells are left out",
            "cells": 1,
        }
    ]


def test_micro_net_runs_only_where_the_lab_gives_a_peer():
    experiment = micro()
    net = [cell["labels"]["platform"] for cell in expand(experiment) if cell["labels"]["workload"] == "micro_net"]
    assert net == ["bm", "cn"]
    assert dropped_cells(experiment) == [
        {
            "workload": "micro_net",
            "platform": "vm",
            "reason": "micro_net needs a peer, which the lab gives only on bm, cn",
            "cells": 1,
        }
    ]


def test_micro_net_without_a_peer_stops_the_plan():
    with pytest.raises(ExperimentError) as caught:
        micro(platforms=["vm", "vmcn"])
    assert (
        "workload: micro_net needs a peer (a second instance of its platform), supported on bm, cn; this "
        "experiment's platforms are vm, vmcn: add bm or cn to platforms or remove micro_net"
    ) in str(caught.value)


def test_needs_problems_are_listed_with_the_others():
    with pytest.raises(ExperimentError) as caught:
        micro(workload=["micro_gpu", "micro_net"], platforms=["vm"], repeats=0)
    message = str(caught.value)
    assert "repeats: 0 must be an integer >= 1" in message
    assert "micro_gpu is a GPU benchmark" in message and "micro_net needs a peer" in message


def test_plan_problems_and_drop_reason_directly():
    assert workload_needs.plan_problems("cnn_train", ["vm"], ["cpu"]) == []
    assert workload_needs.drop_reason("micro_cpu", "vm", "cpu") is None
    assert workload_needs.drop_reason("micro_net", "k8s", "cpu")[0] == "platform"
