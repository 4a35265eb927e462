"""The idle_cores fence over fake cgroup trees: put up and taken down exactly, idempotent, restored after a failed
write and by a later run; the module's check mode; and the plans and prechecks of idle_cores: none cells."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence
from ansible_collections.platbench.lab.plugins.modules import cpu_fence as module
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    load_experiment,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options


def v1_tree(root, groups):
    """A cgroup v1 cpuset mount under ``root``: the root's CPUs 0-3 and top-level ``groups`` (name -> cpus)."""
    cpuset = root / "cpuset"
    cpuset.mkdir(parents=True)
    (cpuset / "cpuset.cpus").write_text("0-3\n")
    (cpuset / "tasks").write_text("1\n")
    for name, cpus in groups.items():
        (cpuset / name).mkdir()
        (cpuset / name / "cpuset.cpus").write_text(cpus + "\n")
    return cpuset


def v2_tree(root, groups, enabled=False):
    """A cgroup v2 root offering cpuset, enabled for its children or not (then they have no cpuset.cpus)."""
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("cpuset memory\n" if enabled else "memory\n")
    (root / "cpuset.cpus.effective").write_text("0-3\n")
    for name, cpus in groups.items():
        (root / name).mkdir()
        if enabled:
            (root / name / "cpuset.cpus").write_text(cpus + "\n")
    return root


def contents(directory):
    return {
        entry.name: (entry / "cpuset.cpus").read_text().strip()
        for entry in sorted(directory.iterdir())
        if entry.is_dir() and (entry / "cpuset.cpus").exists()
    }


def test_cpu_lists_parse_and_format():
    assert cpu_fence.parse_cpus("0-2,5\n") == [0, 1, 2, 5] and cpu_fence.parse_cpus("") == []
    assert cpu_fence.format_cpus([5, 0, 1, 2, 7]) == "0-2,5,7"
    with pytest.raises(cpu_fence.FenceError, match="not a CPU list"):
        cpu_fence.parse_cpus("zero")


def test_v1_round_trip_restores_exactly_what_was_there(tmp_path):
    cpuset = v1_tree(tmp_path / "cg", {"docker": "0-3", "system.slice": "0", "user.slice": "2-3"})
    state_file = str(tmp_path / "run/fence.json")
    changed, state = cpu_fence.put_up("0-3", state_file, str(tmp_path / "cg"))
    assert changed and contents(cpuset) == {"docker": "0-3", "system.slice": "0-3", "user.slice": "0-3"}
    assert state["groups"] == {"system.slice": "0", "user.slice": "2-3"} and state["unchanged"] == ["docker"]
    assert cpu_fence.runtime(state)["fence"] == "cgroup v1 cpuset 0-3 on 3 groups"
    assert json.loads((tmp_path / "run/fence.json").read_text())["groups"] == state["groups"]
    # Idempotent: the same fence again changes nothing.
    assert cpu_fence.put_up([0, 1, 2, 3], state_file, str(tmp_path / "cg")) == (False, state)
    changed, restored, problems = cpu_fence.take_down(state_file)
    assert changed and not problems and restored["groups"] == state["groups"]
    assert contents(cpuset) == {"docker": "0-3", "system.slice": "0", "user.slice": "2-3"}
    assert not os.path.exists(state_file)
    assert cpu_fence.take_down(state_file) == (False, None, [])


def test_v2_enables_cpuset_for_the_top_level_groups_and_disables_it_again(tmp_path, monkeypatch):
    root = v2_tree(tmp_path / "cg", {"system.slice": "", "user.slice": ""})
    real_write = cpu_fence._write

    def kernel_write(path, value):
        # As the kernel does: enabling cpuset for the children makes their (empty) cpuset.cpus appear.
        real_write(path, value)
        if path.endswith("cgroup.subtree_control") and value == "+cpuset":
            for group in ("system.slice", "user.slice"):
                (root / group / "cpuset.cpus").write_text("\n")

    monkeypatch.setattr(cpu_fence, "_write", kernel_write)
    state_file = str(tmp_path / "fence.json")
    changed, state = cpu_fence.put_up("0-3", state_file, str(root))
    assert changed and state["cgroup"] == "v2" and state["enable_cpuset"]
    assert (root / "cgroup.subtree_control").read_text() == "+cpuset"
    assert contents(root) == {"system.slice": "0-3", "user.slice": "0-3"}
    cpu_fence.take_down(state_file)
    assert (root / "cgroup.subtree_control").read_text() == "-cpuset"
    assert contents(root) == {"system.slice": "", "user.slice": ""}


def test_a_failed_write_restores_every_group_changed_before_it(tmp_path, monkeypatch):
    cpuset = v1_tree(tmp_path / "cg", {"a": "0", "b": "1", "c": "2"})
    real_write = cpu_fence._write

    def refuse_c(path, value):
        if path.endswith("/c/cpuset.cpus") and value == "0-3":
            raise cpu_fence.FenceError(f"cannot write {value!r} to {path}: Device or resource busy")
        real_write(path, value)

    monkeypatch.setattr(cpu_fence, "_write", refuse_c)
    state_file = tmp_path / "fence.json"
    with pytest.raises(cpu_fence.FenceError, match="Device or resource busy; every group changed before it was"):
        cpu_fence.put_up("0-3", str(state_file), str(tmp_path / "cg"))
    assert contents(cpuset) == {"a": "0", "b": "1", "c": "2"} and not state_file.exists()


def test_a_fence_left_by_an_interrupted_run_is_restored_by_the_next(tmp_path):
    cpuset = v1_tree(tmp_path / "cg", {"a": "0", "gone": "1"})
    state_file = str(tmp_path / "fence.json")
    cpu_fence.put_up("0-3", state_file, str(tmp_path / "cg"))
    (cpuset / "gone" / "cpuset.cpus").unlink()
    (cpuset / "gone").rmdir()  # a container's group, removed with it since
    # A fence on other CPUs is refused while this one stands.
    with pytest.raises(cpu_fence.FenceError, match="already in place"):
        cpu_fence.put_up("0-1", state_file, str(tmp_path / "cg"))
    assert cpu_fence.take_down(state_file)[2] == [] and contents(cpuset) == {"a": "0"}


def test_a_restore_that_fails_keeps_the_state_file_for_the_next_try(tmp_path, monkeypatch):
    v1_tree(tmp_path / "cg", {"a": "0"})
    state_file = tmp_path / "fence.json"
    cpu_fence.put_up("0-3", str(state_file), str(tmp_path / "cg"))

    def refuse(path, value):
        raise cpu_fence.FenceError(f"cannot write {value!r} to {path}: Permission denied")

    monkeypatch.setattr(cpu_fence, "_write", refuse)
    changed, _, problems = cpu_fence.take_down(str(state_file))
    assert changed and problems and "Permission denied" in problems[0] and state_file.exists()


def test_no_cpuset_hierarchy_and_cpus_outside_the_host_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(cpu_fence.FenceError, match="no cpuset cgroup hierarchy under"):
        cpu_fence.put_up("0", str(tmp_path / "f.json"), str(tmp_path / "empty"))
    v1_tree(tmp_path / "cg", {})
    with pytest.raises(cpu_fence.FenceError, match="CPUs 4-5 are not in the host's cpuset"):
        cpu_fence.put_up("0-5", str(tmp_path / "f.json"), str(tmp_path / "cg"))


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_in_check_mode_says_what_it_would_change_and_writes_nothing(tmp_path, capsys):
    cpuset = v1_tree(tmp_path / "cg", {"system.slice": "0"})
    args = {"cpus": "0-3", "cgroup_root": str(tmp_path / "cg"), "state_file": str(tmp_path / "f.json")}
    result = run_module(capsys, {**args, "_ansible_check_mode": True})
    assert result["changed"] and result["fence"]["groups"] == {"system.slice": "0"}
    assert contents(cpuset) == {"system.slice": "0"} and not (tmp_path / "f.json").exists()
    result = run_module(capsys, args)
    assert result["changed"] and result["runtime"]["fence"] == "cgroup v1 cpuset 0-3 on 1 group"
    absent = {"state": "absent", "state_file": args["state_file"]}
    assert run_module(capsys, absent)["changed"] and contents(cpuset) == {"system.slice": "0"}
    assert not run_module(capsys, absent)["changed"]


FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
    "gpu_count": 0,
    "gpus": [],
}
GUEST = {"kernel": "/k", "initrd": "/i", "cmdline": "c", "rootfs": "/r", "container_image_id": "sha256:1"}


def experiment(**fields):
    base = {
        "name": "noidle",
        "workload": "cnn_train",
        "platforms": ["bm", "cn", "vm"],
        "scaleup": [4],
        "cpu_config": ["pin", "vnl"],
        "processor": ["cpu"],
        "repeats": 1,
        "idle_cores": "none",
    }
    plan = validate_experiment({**base, **fields})
    return {**plan, "cells": expand(plan)}


def test_idle_cores_none_fences_host_cells_and_pins_guests_emulators_to_every_core():
    plans = {cell["id"]: cell_plan(cell, FACTS, plan_options(guest_image=GUEST)) for cell in experiment()["cells"]}
    assert sorted(plans) == [
        f"{platform}/4/{config}/cpu|idle_cores=none|r0" for platform in ("bm", "cn", "vm") for config in ("pin", "vnl")
    ]
    for cell_id, plan in plans.items():
        assert plan["runtime"]["idle_cores"] == "none"
        assert_plan_matches_its_specs(plan)
        if cell_id.startswith("vm/"):
            assert plan["fence"] is None and plan["guest"]["emulator_cpus"] == [0, 1, 2, 3]
            assert plan["runtime"]["emulator_pins_requested"] == "0,1,2,3"
        else:
            assert plan["fence"] == {"cpus": "0,1,2,3"}
    # Other experiments: no fence, and the guest's emulator left alone for vnl.
    plain = experiment(idle_cores=None)["cells"]
    assert all(cell_plan(cell, FACTS, plan_options(guest_image=GUEST))["fence"] is None for cell in plain)
    vnl_vm = next(cell for cell in plain if cell["id"] == "vm/4/vnl/cpu|r0")
    assert cell_plan(vnl_vm, FACTS, plan_options(guest_image=GUEST))["guest"]["emulator_cpus"] == []


def test_idle_cores_takes_only_none():
    with pytest.raises(ExperimentError, match="idle_cores: unknown value 'some'; allowed: none"):
        experiment(idle_cores="some")


def test_the_prechecks_refuse_pin_with_reserved_cpus_and_a_scale_up_short_of_every_core():
    plan = experiment(scaleup=[2], platforms=["bm"])
    problems = plan_problems(plan, {"bm": {"ready": True}}, FACTS, "runner-a", reserved_cpus=[0])["problems"]
    assert problems == [
        "Experiment 'noidle' on runner-a: idle_cores: none gives the instance every core of the host (4), but its "
        "scale-up is 2: set scaleup: 4 (or all) for this host",
        "Experiment 'noidle' on runner-a: idle_cores: none with pin needs every core, but platbench_reserved_cpus "
        "keeps [0] from pinned cells on this host: set platbench_reserved_cpus: [] for it, or use cpu_config: vnl "
        "with idle_cores: none",
    ]
    fine = experiment(platforms=["bm"])
    assert plan_problems(fine, {"bm": {"ready": True}}, FACTS, "runner-a")["problems"] == []


def test_a_cell_plan_refuses_what_the_prechecks_refuse():
    cell = experiment(platforms=["bm"], cpu_config=["pin"])["cells"][0]
    with pytest.raises(CellPlanError, match="platbench_reserved_cpus keeps \\[3\\]"):
        cell_plan(cell, FACTS, plan_options(reserved_cpus=[3]))


def test_idle_cores_as_a_dimension_makes_none_cells_of_the_all_scaleup_only():
    cells = experiment(scaleup=["half", "all"], cpu_config=["vnl"], platforms=["bm"], idle_cores=["any", "none"])[
        "cells"
    ]
    assert [cell["id"] for cell in cells] == [
        "bm/half/vnl/cpu|idle_cores=any|r0",
        "bm/all/vnl/cpu|idle_cores=any|r0",
        "bm/all/vnl/cpu|idle_cores=none|r0",
    ]
    plans = {cell["id"]: cell_plan(cell, FACTS, plan_options()) for cell in cells}
    assert plans["bm/all/vnl/cpu|idle_cores=none|r0"]["fence"] == {"cpus": "0,1,2,3"}
    assert plans["bm/all/vnl/cpu|idle_cores=any|r0"]["fence"] is None
    with pytest.raises(ExperimentError, match="makes its none cells of the scale-up all .* add all to scaleup"):
        experiment(scaleup=[2, "half"], idle_cores=["any", "none"])
    with pytest.raises(ExperimentError, match="must list any .* and none .*, each once"):
        experiment(scaleup=["all"], idle_cores=["none", "none"])


def test_overrides_without_the_all_scale_up_keep_the_idle_cores_dimensions_any_cells(tmp_path):
    (tmp_path / "knobs.yml").write_text(
        "name: knobs\nworkload: cnn_train\nplatforms: [bm]\nscaleup: [half, all]\ncpu_config: [vnl]\n"
        "processor: [cpu]\nrepeats: 1\nidle_cores: [any, none]\n"
    )
    narrowed = load_experiment(tmp_path, "knobs", overrides={"scaleup": [2]})
    assert narrowed["idle_cores"] == ["any"]
    assert [cell["id"] for cell in expand(narrowed)] == ["bm/2/vnl/cpu|idle_cores=any|r0"]
    kept = load_experiment(tmp_path, "knobs", overrides={"scaleup": ["all"]})
    assert [cell["id"] for cell in expand(kept)] == [
        "bm/all/vnl/cpu|idle_cores=any|r0",
        "bm/all/vnl/cpu|idle_cores=none|r0",
    ]
