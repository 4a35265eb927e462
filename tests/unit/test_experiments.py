"""Every shipped experiment loads, expands, and hands its workload arguments it accepts; bad ones stop the plan."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible_collections.platbench.lab.plugins.filter.experiments import workload_argv
from ansible_collections.platbench.lab.plugins.module_utils import workload_needs
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    available_experiments,
    load_experiment,
    workloads_of,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import emulated_subset, expand
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.params_check import check_experiment_params

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def experiments_and_sizes():
    """Every shipped experiment at its own size and at each size its `sizes` field names."""
    for name in available_experiments(EXPERIMENTS):
        yield name, None
        for size in yaml.safe_load((EXPERIMENTS / f"{name}.yml").read_text()).get("sizes") or {}:
            yield name, size


EIGHT_CORES = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
}


@pytest.mark.parametrize("name, size", list(experiments_and_sizes()))
def test_experiment_cells_parse_with_their_workload(name, size):
    experiment = load_experiment(EXPERIMENTS, name, size=size)
    cells = expand(experiment)
    assert len(cells) == len({cell["id"] for cell in cells})
    if experiment["emulated"]:  # the guests' cut-down cells (same ids) must parse too
        cells += [cell for cell in emulated_subset(cells, experiment["emulated"]) if cell["labels"].get("emulated")]
    parsers = {}
    for cell in cells:
        workload = cell["labels"]["workload"]  # an experiment may list several
        if workload not in parsers:
            parsers[workload] = importlib.import_module(f"workloads.{workload}.cli").build_parser()
        # What platform_run adds: the scale-up as threads (a relative one resolved on a host of 8 cores) and, for a
        # generated dataset, its directory.
        cell = sizing.sized(cell, EIGHT_CORES)
        params = {"threads": cell["labels"]["scaleup"], **cell["params"]}
        if experiment["dataset"]:
            params["data_dir"] = "/var/lib/platbench/datasets/example"
        argv = workload_argv(params, workload)
        assert argv[:2] == ["-m", f"workloads.{workload}"]
        parsers[workload].parse_args(argv[2:])
    assert set(parsers) <= set(workloads_of(experiment))


@pytest.mark.parametrize(
    "name",
    sorted(
        {
            (load_experiment(EXPERIMENTS, n)["dataset"] or {}).get("generator")
            for n in available_experiments(EXPERIMENTS)
        }
        - {None}
    ),
)
def test_dataset_generators_exist(name):
    module = importlib.import_module(f"workloads.datasets.{name}")
    assert hasattr(module, "main")


# Plan-time checks through the experiment lookup, with the real workloads and their own parsers.


REPO = EXPERIMENTS.parent


def plan(name="smoke", overrides=None):
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader(), templar=None)
    return lookup.run([name], variables={}, experiments_dir=str(EXPERIMENTS), overrides=overrides or {})[0]


def plan_error(name="smoke", overrides=None):
    with pytest.raises(AnsibleLookupError) as caught:
        plan(name, overrides)
    return str(caught.value)


def test_the_plan_keeps_the_size_and_overrides_given_for_run_json():
    assert plan()["as_run"] == {"size": None, "overrides": {}}
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader(), templar=None)
    [small] = lookup.run(
        ["samani2022-ic"], variables={}, experiments_dir=str(EXPERIMENTS), overrides={"repeats": 1}, size="small"
    )
    assert small["as_run"] == {"size": "small", "overrides": {"repeats": 1}}
    assert small["repeats"] == 1 and small["scaleup"] == ["half", "all"]


def test_an_unknown_model_stops_the_plan_naming_file_key_value_and_choices():
    message = plan_error(overrides={"params": {"model": "resnet9000"}})
    assert message.startswith(f"{EXPERIMENTS / 'smoke.yml'} (with overrides ")
    assert (
        "params.model: 'resnet9000' is refused by workloads.cnn_train: argument --model: invalid choice: "
        "'resnet9000' (choose from 'tiny', 'alexnet', 'resnet50', 'inception3')"
    ) in message
    assert message.count("params.model") == 1  # one line for all 8 cells


def test_a_batch_size_of_zero_stops_the_plan():
    message = plan_error(overrides={"params": {"batch_size": 0}})
    assert (
        "params.batch_size: 0 is refused by workloads.cnn_train: argument --batch-size: expected a positive "
        "integer, got '0'" in message
    )


def test_both_problems_at_once():
    message = plan_error(overrides={"params": {"model": "resnet9000", "batch_size": 0}})
    assert "params.model: 'resnet9000'" in message and "params.batch_size: 0" in message


def test_a_shared_cell_without_a_background_job_stops_the_plan():
    message = plan_error(overrides={"mode": "shared"})
    assert "background: a shared cell needs the job that runs beside it" in message


def test_an_unknown_workload_lists_the_workloads():
    message = plan_error(overrides={"workload": "resnet_bench"})
    assert "workload: unknown workload 'resnet_bench'; available: cnn_train, dl_tools, " in message


def test_a_good_plan_has_its_cells():
    experiment = plan(overrides={"repeats": 1})
    assert experiment["name"] == "smoke" and len(experiment["cells"]) == len(expand(experiment))
    assert experiment["dropped"] == []


def test_the_plan_lists_the_cells_a_workload_cannot_run(monkeypatch):
    # As if cnn_train needed a peer that only bm gives: its cn cells leave the plan and are listed.
    monkeypatch.setitem(workload_needs.NEEDS, "cnn_train", workload_needs.Needs(peer=True))
    monkeypatch.setattr(workload_needs, "peer_platforms", lambda: ("bm",))
    experiment = plan(overrides={"repeats": 1, "scaleup": [2], "cpu_config": ["pin"], "platforms": ["bm", "cn"]})
    assert [cell["id"] for cell in experiment["cells"]] == ["bm/2/pin/cpu|r0"]
    assert experiment["dropped"] == [
        {
            "workload": "cnn_train",
            "platform": "cn",
            "reason": "cnn_train needs a peer, which the lab gives only on bm",
            "cells": 1,
        }
    ]
    message = plan_error(overrides={"platforms": ["cn"]})
    assert "workload: cnn_train needs a peer (a second instance of its platform), supported on bm" in message


def test_a_plan_of_several_workloads_checks_each_with_its_own_params():
    message = plan_error(
        overrides={
            "workload": ["cnn_train", "small_models"],
            "params": {},
            "workload_params": {"cnn_train": {"model": "resnet9000"}},
        }
    )
    assert "workload_params.cnn_train.model: 'resnet9000' is refused by workloads.cnn_train" in message


@pytest.mark.parametrize("name", available_experiments(EXPERIMENTS))
def test_every_shipped_experiment_passes_the_plan_time_check(name):
    problems, warnings = check_experiment_params(load_experiment(EXPERIMENTS, name), str(REPO))
    assert problems == []
    assert all("has no --check-args" in warning for warning in warnings)


def test_the_workloads_own_checks_run_at_plan_time():
    # --data-dir without --data real passes argparse; only cnn_train's own check refuses it.
    message = plan_error(overrides={"params": {"data_dir": "/srv/imagenet"}})
    assert (
        "params.data_dir: '/srv/imagenet' is refused by workloads.cnn_train: --data-dir is read only with --data real"
    ) in message


def test_a_size_is_a_named_override_of_the_file():
    small = load_experiment(EXPERIMENTS, "xu2017-micro", size="small")
    full = load_experiment(EXPERIMENTS, "xu2017-micro")
    assert (full["repeats"], small["repeats"]) == (20, 3)
    assert small["workload_params"]["micro_cpu"]["hpl_n"] == "2000,4000"
    assert not small["sizes"]  # merged in, not carried along
    # User overrides apply on top of the size.
    one = load_experiment(EXPERIMENTS, "xu2017-micro", {"repeats": 1}, size="small")
    assert (one["repeats"], one["workload_params"]["micro_mem"]["chase_mb"]) == (1, "1,64,512")


def test_an_unknown_size_names_the_sizes_there_are():
    with pytest.raises(ExperimentError, match=r"unknown size 'huge'; this experiment has small, tiny"):
        load_experiment(EXPERIMENTS, "xu2017-micro", size="huge")
    with pytest.raises(ExperimentError, match=r"unknown size 'small'; this experiment has no sizes"):
        load_experiment(EXPERIMENTS, "calibrate", size="small")


def test_an_emulated_override_of_a_varying_parameter_runs_the_guest_cell_once():
    """xu2017-micro's guests run only HPL (suite: hpcc), where bm and cn run HPL and HPCG."""
    experiment = load_experiment(EXPERIMENTS, "xu2017-micro", size="tiny")
    guest_cells = [
        cell
        for cell in emulated_subset(expand(experiment), experiment["emulated"])
        if cell["labels"]["platform"] == "vm" and cell["labels"]["workload"] == "micro_cpu"
    ]
    assert [cell["params"]["suite"] for cell in guest_cells] == ["hpcc"]
    assert guest_cells[0]["id"] == "vm/2/pin/cpu|workload=micro_cpu,suite=hpcc|r0"


# MLPerf's minimums: the samani2022 experiments' study size holds every measured cell to them.

SAMANI = [name for name in available_experiments(EXPERIMENTS) if name.startswith("samani2022-")]
# What one request is in each generator's arguments: rs serves a request of 100 rows.
REQUESTS_IN_DATASET = {
    "imagenet": ("images", 1),
    "squad": ("questions", 1),
    "librispeech": ("utterances", 1),
    "criteo": ("rows", 100),
}


@pytest.mark.parametrize("name", SAMANI)
def test_the_study_size_holds_every_measured_cell_to_mlperf_s_minimums_and_the_others_do_not(name):
    from workloads.inference_e2e.apps.base import get_app

    study = load_experiment(EXPERIMENTS, name, size="study")
    problems, _ = check_experiment_params(study, str(REPO))
    assert problems == []
    minimums = get_app(study["params"]["app"]).mlperf_minimums()
    cells = expand(study)
    assert cells and all(cell["params"]["mlperf_minimums"] is True for cell in cells)
    assert all(cell["params"]["requests"] >= minimums.min_samples for cell in cells)
    # The generated dataset holds that many requests.
    key, per_request = REQUESTS_IN_DATASET[study["dataset"]["generator"]]
    assert study["dataset"]["args"][key] >= minimums.min_samples * per_request
    # The emulated guests (functional only) are left scaled-down; so are the file's own size and small.
    if study["emulated"]:
        guests = [cell for cell in emulated_subset(cells, study["emulated"]) if cell["labels"].get("emulated")]
        assert guests and not any(cell["params"]["mlperf_minimums"] for cell in guests)
    for size in (None, "small"):
        assert not any(
            cell["params"].get("mlperf_minimums") for cell in expand(load_experiment(EXPERIMENTS, name, size=size))
        )


def test_a_study_size_below_mlperf_s_minimum_is_refused_at_plan_time_naming_the_app_and_the_minimum():
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader(), templar=None)
    with pytest.raises(AnsibleLookupError) as caught:
        lookup.run(
            ["samani2022-nlp"],
            variables={},
            experiments_dir=str(EXPERIMENTS),
            overrides={"params": {"requests": 1000}},
            size="study",
        )
    message = str(caught.value)
    assert message.startswith(f"{EXPERIMENTS / 'samani2022-nlp.yml'} (size study) (with overrides ")
    assert (
        "params.requests: 1000 is refused by workloads.inference_e2e: --requests 1000 is below MLPerf's Offline "
        "minimum for app nlp (MLPerf's bert): 10833 samples; give --requests 10833 or more"
    ) in message
    # A minimum duration below MLPerf's, too.
    with pytest.raises(AnsibleLookupError) as caught:
        lookup.run(
            ["samani2022-sr"],
            variables={},
            experiments_dir=str(EXPERIMENTS),
            overrides={"params": {"min_duration_ms": 60000}},
            size="study",
        )
    assert (
        "params.min_duration_ms: 60000 is refused by workloads.inference_e2e: --min-duration-ms 60000 is below "
        "MLPerf's Offline minimum for app sr (MLPerf's rnnt): 600000 ms"
    ) in str(caught.value)
