"""What a runner host runs of an experiment: prechecks, the cells it chooses, resume per host."""

from __future__ import annotations

import json

import pytest
from ansible_collections.platbench.lab.plugins.filter.cells import cells_to_run as cells_to_run_filter
from ansible_collections.platbench.lab.plugins.filter.experiments import done_cells as done_cells_filter
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import cells_to_run, plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import validate_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples, done_cells
from unbuilt import make_unbuilt

FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1],
    "gpu_count": 0,
    "docker_engine": True,
    "vm_accelerator": "tcg",
    "libvirt_daemon": True,
}
GUEST = {"container_image_id": "sha256:1"}
# What platbench.lab.platform_status found of the container engines: Docker answers, with the workload image.
ENGINES = {"docker": {"answers": True, "version": "26.1.5", "image_id": "sha256:1"}}
NO_DOCKER = {"docker": {"answers": False, "version": None, "image_id": None}}
READY = platform_status(FACTS, "/opt/platbench", True, "img", "sha256:1", "/g.json", GUEST, engines_found=ENGINES)


def experiment(**fields):
    base = {
        "name": "smoke",
        "workload": "cnn_train",
        "platforms": ["bm", "cn", "vm"],
        "scaleup": [1, 2],
        "cpu_config": ["pin", "vnl"],
        "processor": ["cpu"],
        "repeats": 2,
        "params": {"steps": 30},
        "emulated": {"scaleup": [2], "cpu_config": ["pin"], "repeats": 1, "params": {"steps": 10}},
    }
    plan = validate_experiment({**base, **fields})
    return {**plan, "cells": expand(plan)}


def test_cells_are_labelled_with_their_host_and_guests_cut_to_the_emulated_subset():
    chosen = cells_to_run(experiment(), READY, "runner-a")
    ids = [cell["id"] for cell in chosen["cells"]]
    assert len([i for i in ids if i.startswith("bm/")]) == 8 and chosen["done"] == 0
    assert [i for i in ids if i.startswith("vm/")] == ["vm/2/pin/cpu|r0"]
    # The emulated guest's cell runs after every comparable cell, which keep the plan's interleaved order.
    assert ids[-1] == "vm/2/pin/cpu|r0"
    assert ids[:-1] == [cell["id"] for cell in experiment()["cells"] if not cell["id"].startswith("vm/")]
    assert all(cell["labels"]["host"] == "runner-a" for cell in chosen["cells"])
    vm = next(cell for cell in chosen["cells"] if cell["id"].startswith("vm/"))
    assert vm["params"]["steps"] == 10 and vm["labels"]["emulated"] is True


def test_platforms_not_ready_are_left_out():
    status = platform_status(
        {**FACTS, "docker_engine": False}, "/opt/platbench", True, "img", None, "/g", {}, engines_found=NO_DOCKER
    )
    ids = [cell["id"] for cell in cells_to_run(experiment(), status, "a")["cells"]]
    assert ids and all(i.startswith("bm/") for i in ids)


def sample(cell, host, metric="throughput"):
    labels = {"cell": cell}
    if host:
        labels["host"] = host
    return {"metric": metric, "value": 1.0, "unit": "x", "timestamp": 0, "labels": labels, "metadata": {}}


def test_resume_skips_only_the_cells_this_host_measured(tmp_path):
    campaign = tmp_path / "c1"
    append_samples(
        str(campaign / "samples.jsonl"),
        [
            sample("bm/1/pin/cpu|r0", "runner-a"),
            sample("cn/1/pin/cpu|r0", "runner-a"),
            sample("bm/1/vnl/cpu|r0", "runner-b"),
            sample("cn/1/vnl/cpu|r0", "runner-b", metric="failed"),
        ],
    )
    path = str(campaign / "samples.jsonl")
    assert done_cells(path, "runner-a") == {"bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0"}
    assert done_cells(path, "runner-b") == {"bm/1/vnl/cpu|r0"}  # a failed cell is run again
    assert done_cells(path) == {"bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0", "bm/1/vnl/cpu|r0"}
    assert done_cells_filter(campaign, "runner-b") == ["bm/1/vnl/cpu|r0"]
    plan = experiment(platforms=["bm", "cn"], repeats=1, emulated=None)
    for host, measured in (
        ("runner-a", {"bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0"}),
        ("runner-b", {"bm/1/vnl/cpu|r0"}),
        ("runner-c", set()),
    ):
        chosen = cells_to_run_filter(plan, READY, host, str(campaign))
        assert {cell["id"] for cell in chosen["cells"]} == {cell["id"] for cell in plan["cells"]} - measured
        assert chosen["done"] == len(measured)


def test_samples_without_a_host_count_for_every_host(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(sample("bm/1/pin/cpu|r0", None)) + "\n")
    assert done_cells(str(path), "anyone") == {"bm/1/pin/cpu|r0"}


def problems(plan, status=READY, facts=FACTS, **options):
    return plan_problems(plan, status, facts, "runner-a", **options)


def test_a_plan_this_host_can_run_has_no_problem():
    assert problems(experiment()) == {"problems": [], "skipped": {}, "gpu_summary": "", "sizing": []}


@pytest.mark.parametrize("timeout", [0, -1, "abc"])
def test_a_cell_timeout_that_is_no_positive_number_stops_the_plan(timeout):
    [problem] = problems(experiment(), cell_timeout_seconds=timeout)["problems"]
    assert problem.startswith(f"platform_run_cell_timeout={timeout!r}"), problem


def test_an_unbuilt_platform_and_a_missing_piece_fail_with_their_reason(monkeypatch):
    make_unbuilt(monkeypatch, "sg")
    status = platform_status(
        {**FACTS, "docker_engine": False}, "/opt/platbench", True, "img", None, "/g", {}, engines_found=NO_DOCKER
    )
    found = problems(experiment(platforms=["bm", "cn", "sg"]), status)["problems"]
    assert len(found) == 2
    assert found[0].startswith("Experiment 'smoke' asks for platform cn, which runner-a cannot run: no Docker engine")
    assert "platform sg, which runner-a cannot run: not built by this release" in found[1]
    assert "platform_run_skip_unavailable=true" in found[1]
    assert problems(experiment(platforms=["bm", "sg"]), status, skip_unavailable=True) == {
        "problems": [],
        "skipped": {"sg": status["sg"]["reason"]},
        "gpu_summary": "",
        "sizing": [],
    }


def test_openstack_cells_are_skipped_without_instances_and_never_checked_against_the_runner():
    status = platform_status(FACTS, "/opt/platbench", True, "img", "sha256:1", "/g", GUEST, engines_found=ENGINES)
    plan = experiment(platforms=["bm", "nova"])
    assert problems(plan, status) == {
        "problems": [],
        "skipped": {"nova": status["nova"]["reason"]},
        "gpu_summary": "",
        "sizing": [],
    }
    ready = platform_status(
        FACTS,
        "/opt/platbench",
        True,
        "img",
        "sha256:1",
        "/g",
        GUEST,
        openstack_instances={"nova": ["pb-x"]},
        engines_found=ENGINES,
    )
    # More CPUs and GPUs than the runner has: the flavor gives them on the cloud.
    big = {**plan, "cells": [cell for cell in plan["cells"] if cell["labels"]["platform"] == "nova"]}
    big["cells"] = [{**cell, "labels": {**cell["labels"], "scaleup": 64, "processor": "gpu"}} for cell in big["cells"]]
    assert problems(big, ready) == {"problems": [], "skipped": {}, "gpu_summary": "", "sizing": []}


def test_guests_without_qemu_are_skipped_not_failed():
    status = platform_status(
        {**FACTS, "vm_accelerator": None}, "/opt/platbench", True, "img", "sha256:1", "/g", GUEST, engines_found=ENGINES
    )
    result = problems(experiment(), status)
    assert result["problems"] == [] and list(result["skipped"]) == ["vm"]


def test_too_big_a_scale_up_names_what_the_host_offers():
    [found] = problems(experiment(scaleup=[2, 4], emulated=None), reserved_cpus=[0])["problems"]
    assert found == (
        "Experiment 'smoke' asks for scale-up 4, but runner-a offers 1 CPUs (2 allowed, 1 reserved by "
        "platbench_reserved_cpus). Lower 'scaleup' in experiments/smoke.yml or run on a bigger host."
    )


def test_gpu_scenarios_on_a_host_without_gpus_are_refused():
    [found] = problems(experiment(processor=["gpu"]))["problems"]
    assert found == (
        "Experiment 'smoke' has processor 'gpu' scenarios, but runner-a has no NVIDIA GPU on its PCI bus: "
        "use processor [cpu] here."
    )


@pytest.mark.parametrize("reads", [{"params": {"data_dir": "/data"}}, {"dataset": {"generator": "mnist"}}])
def test_files_reach_the_runner_hosts_guests(reads):
    """Guests read the data from a read-only disk made of it (tests/unit/test_guest_data.py), so nothing refuses."""
    assert problems(experiment(platforms=["bm", "cn", "vm", "vmcn"], **reads))["problems"] == []


def test_files_are_refused_for_cloud_instances_only():
    found = problems(experiment(params={"data_dir": "/data"}, platforms=["bm", "vm", "ironic", "nova"]))["problems"]
    assert found[0] == (
        "Experiment 'smoke' reads data from files (its dataset: or params.data_dir), which the instances of ironic "
        "and nova cannot reach: they hold no copy of the runner host's data, as its guests do (a read-only disk). "
        "Drop ironic and nova from its platforms or use data: synthetic."
    )
    assert not any("reads data" in problem for problem in found[1:])
    assert not any("reads data" in problem for problem in problems(experiment(platforms=["bm", "nova"]))["problems"])


def test_an_empty_plan_says_how_to_run_experiments():
    assert "playbooks/experiment.yml" in problems({"name": "x", "cells": []})["problems"][0]


@pytest.mark.parametrize("bad", [None, ["cells"]])
def test_the_filters_reject_what_is_not_a_plan(bad):
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="the plan must be a mapping"):
        cells_to_run_filter(bad, READY, "a")
