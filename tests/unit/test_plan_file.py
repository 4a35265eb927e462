"""A campaign is planned once: `platbench run` writes the plan file, playbooks/experiment.yml executes it without
planning again, a resumed campaign is checked against it, and an experiment file may be anywhere."""

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import ExperimentError
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples

from platbench import run

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = str(REPO / "experiments")
# A user's own experiment file, as they would write it.
TINY = """\
name: tiny
workload: cnn_train
platforms: [bm, cn]
scaleup: 1
cpu_config: pin
processor: cpu
repeats: 2
params: {steps: 3}
"""


@pytest.fixture
def tiny(tmp_path):
    """An experiment file outside experiments/: tmp_path/elsewhere/tiny.yml."""
    path = tmp_path / "elsewhere" / "tiny.yml"
    path.parent.mkdir()
    path.write_text(TINY)
    return path


def planner_that_fails(*args, **kwargs):
    raise AssertionError("planned again")


def test_a_plan_file_round_trips(tmp_path, tiny):
    plan, _ = plan_experiment(EXPERIMENTS, str(tiny), campaign="c1")
    path = plan_file.path_in(tmp_path)
    plan_file.write(path, plan, "c1")
    again, campaign = plan_file.read(path)
    assert campaign == "c1"
    assert again == json.loads(json.dumps(plan))  # every cell, its labels, params, schedule position and pair
    assert [cell["id"] for cell in again["cells"]] == [cell["id"] for cell in plan["cells"]]
    assert json.loads(Path(path).read_text())["plan_version"] == plan_file.PLAN_VERSION


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"plan_version": 99, "plan": {"cells": []}}', "plan_version 99, this platbench reads 1"),
        ("{not json", "cannot be read as JSON"),
        ('{"plan_version": 1}', "not a plan"),
        ('{"plan_version": 1, "plan": {"cells": 3}}', "its plan has no list of cells"),
    ],
)
def test_a_plan_file_that_does_not_fit_is_refused_naming_it(tmp_path, content, expected):
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(plan_file.PlanFileError, match=expected) as raised:
        plan_file.read(str(path))
    assert str(path) in str(raised.value)


def test_the_lookup_returns_the_plan_files_plan_and_plans_nothing(tmp_path, tiny, monkeypatch):
    plan, _ = plan_experiment(EXPERIMENTS, str(tiny), campaign="c1")
    path = plan_file.path_in(tmp_path)
    plan_file.write(path, plan, "c1")
    lookup = lookup_loader.get("platbench.lab.experiment", loader=DataLoader())
    monkeypatch.setattr(sys.modules[type(lookup).__module__], "plan_experiment", planner_that_fails)
    [executed] = lookup.run(["no-such-experiment"], variables={}, plan_file=path, campaign="c1")
    assert executed == json.loads(json.dumps(plan))
    with pytest.raises(AnsibleLookupError, match="planned for campaign 'c1', not 'c2'"):
        lookup.run(["tiny"], variables={}, plan_file=path, campaign="c2")
    with pytest.raises(AssertionError, match="planned again"):  # without a plan file it plans (the planner above)
        lookup.run(["tiny"], variables={})


def test_the_playbook_executes_a_plan_file_without_planning(tmp_path, tiny, playbook):
    plan, _ = plan_experiment(EXPERIMENTS, str(tiny), campaign="c1")
    path = plan_file.path_in(tmp_path)
    plan_file.write(path, plan, "c1")
    # An experiment that does not exist: the playbook would fail, had it planned.
    variables = {"experiment": "no-such-experiment", "campaign": "c1", "platbench_results_dir": str(tmp_path)}
    ran = playbook("playbooks/experiment.yml", {**variables, run.PLAN_FILE_VAR: path})
    assert ran.rc == 0, ran.output[-3000:]
    assert "Experiment tiny: 4 cells of cnn_train" in ran.output
    assert "campaign c1" in ran.output


def test_an_experiment_file_anywhere_is_planned_with_its_path_and_digest(tiny):
    plan, _ = plan_experiment(EXPERIMENTS, str(tiny))
    assert plan["name"] == "tiny"
    assert plan["experiment_file"] == {"path": str(tiny), "sha256": hashlib.sha256(tiny.read_bytes()).hexdigest()}
    named, _ = plan_experiment(EXPERIMENTS, "smoke")  # a name still finds experiments/NAME.yml
    assert named["experiment_file"]["path"] == str(REPO / "experiments" / "smoke.yml")


def test_an_experiment_path_that_is_wrong_says_what_to_give(tmp_path, tiny):
    with pytest.raises(ExperimentError, match=r"experiment file .*/nope\.yml: no such file"):
        plan_experiment(EXPERIMENTS, str(tmp_path / "nope.yml"))
    other = tiny.with_name("other.yml")
    other.write_text(tiny.read_text())
    with pytest.raises(ExperimentError, match=r"name: 'tiny' must match the file name 'other'"):
        plan_experiment(EXPERIMENTS, str(other))


def parse(*argv):
    parser = argparse.ArgumentParser(prog="platbench run")
    run.add_arguments(parser)
    return parser.parse_args(argv)


def test_platbench_run_takes_a_path_and_hands_the_playbook_its_plan_file(tmp_path, tiny, monkeypatch):
    monkeypatch.chdir(tiny.parent)
    args = parse("tiny.yml", "--results-dir", str(tmp_path / "results"))
    plan, _, variables = run.prepare(args)
    assert variables["experiment"] == str(tiny) and args.campaign.startswith("tiny-")
    variables = run.keep_plan(args, plan, variables)
    path = tmp_path / "results" / args.campaign / plan_file.PLAN_FILE
    assert variables[run.PLAN_FILE_VAR] == str(path)
    written, campaign = plan_file.read(str(path))
    assert campaign == args.campaign and written["experiment_file"]["path"] == str(tiny)


def test_a_resumed_campaign_is_checked_against_its_plan_file(tmp_path, tiny):
    argv = (str(tiny), "--campaign", "c1", "--results-dir", str(tmp_path / "results"))
    args = parse(*argv)
    plan, _, variables = run.prepare(args)
    run.keep_plan(args, plan, variables)
    more = parse(*argv, "--repeats", "3")  # more rounds: the cells planned before are planned alike
    plan, _, variables = run.prepare(more)
    run.keep_plan(more, plan, variables)
    assert len(plan_file.read(plan_file.path_in(tmp_path / "results" / "c1"))[0]["cells"]) == 6
    edited = parse(*argv, "--set", "params.steps=5")
    plan, _, variables = run.prepare(edited)
    run.keep_plan(edited, plan, variables)  # no cell measured yet (or only failed ones): planned anew, nothing mixes
    measured = plan["cells"][0]
    append_samples(tmp_path / "results" / "c1" / "samples.jsonl", [sample_of(measured, "throughput")])
    append_samples(tmp_path / "results" / "c1" / "samples.jsonl", [sample_of(plan["cells"][1], "failed")])
    again = parse(*argv, "--set", "params.steps=7")
    plan, _, variables = run.prepare(again)
    with pytest.raises(
        run.UsageError, match=rf"is planned otherwise than campaign c1 was .*: cell {re.escape(measured['id'])} "
    ):
        run.keep_plan(again, plan, variables)


def sample_of(cell, metric):
    return {
        "metric": metric,
        "value": 1.0,
        "unit": "images/sec",
        "timestamp": 1.0,
        "labels": cell["labels"],
        "metadata": {},
    }
