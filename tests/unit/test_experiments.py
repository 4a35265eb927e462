"""Every shipped experiment loads, expands, and hands its workload arguments it accepts."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from ansible_collections.platbench.lab.plugins.filter.platbench import workload_argv
from ansible_collections.platbench.lab.plugins.module_utils.matrix import available_experiments, expand, load_experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.mark.parametrize("name", available_experiments(EXPERIMENTS))
def test_experiment_cells_parse_with_their_workload(name):
    experiment = load_experiment(EXPERIMENTS, name)
    cells = expand(experiment)
    assert len(cells) == len({cell["id"] for cell in cells})
    parser = importlib.import_module(f"workloads.{experiment['workload']}.cli").build_parser()
    for cell in cells:
        # What platform_run adds: the scale-up as threads and, for a generated dataset, its directory.
        params = {"threads": cell["labels"]["scaleup"], **cell["params"]}
        if experiment["dataset"]:
            params["data_dir"] = "/var/lib/platbench/datasets/example"
        argv = workload_argv(params, experiment["workload"])
        assert argv[:2] == ["-m", f"workloads.{experiment['workload']}"]
        parser.parse_args(argv[2:])


@pytest.mark.parametrize("name", sorted({(load_experiment(EXPERIMENTS, n)["dataset"] or {}).get("generator")
                                          for n in available_experiments(EXPERIMENTS)} - {None}))
def test_dataset_generators_exist(name):
    module = importlib.import_module(f"workloads.datasets.{name}")
    assert hasattr(module, "main")
