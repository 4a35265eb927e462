"""Workload parameters checked at plan time by the workload's own parser, run as a subprocess.

A fake workload package in a temporary directory stands in for ``workloads``, so these tests hold
whether or not the real workloads have ``--check-args`` yet.
"""

import sys
import textwrap
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.params_check import (
    DATA_DIR_PLACEHOLDER,
    available_generators,
    available_workloads,
    cell_runs,
    check_experiment_params,
    checked_params,
)

# A workload as the workloads engineer writes them: --check-args parses, validates and exits 0 (or 2 through
# parser.error); without it, it would train, which here leaves a file behind so the tests can see it never ran.
TRAIN = """
import argparse, os, sys

def positive_int(text):
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)

parser = argparse.ArgumentParser(prog="python -m fakeloads.train")
parser.add_argument("--model", choices=("tiny", "resnet50"), default="tiny")
parser.add_argument("--batch-size", type=positive_int)
parser.add_argument("--steps", type=positive_int, default=10)
parser.add_argument("--threads", type=positive_int)
parser.add_argument("--data", choices=("synthetic", "real"), default="synthetic")
parser.add_argument("--data-dir")
parser.add_argument("--check-args", action="store_true")
args = parser.parse_args()
if args.data_dir and args.data != "real":
    parser.error("--data-dir is read only with --data real")
if args.check_args:
    sys.exit(0)
open(os.environ["TRAINED"], "a").write(" ".join(sys.argv[1:]) + "\\n")
"""
# A workload from before --check-args: its parser runs and then refuses the flag.
OLD = (
    TRAIN.replace('parser.add_argument("--check-args", action="store_true")', "")
    .replace("if args.check_args:", "if False:")
    .replace("fakeloads.train", "fakeloads.old")
)
GENERATOR = """
import argparse, sys
parser = argparse.ArgumentParser(prog="python -m fakeloads.datasets.gen")
parser.add_argument("--out", required=True)
parser.add_argument("--images", type=int)
parser.add_argument("--check-args", action="store_true")
args = parser.parse_args()
if args.images is not None and args.images <= 0:
    parser.error(f"--images must be positive, got {args.images}")
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    package = tmp_path / "fakeloads"
    for name, text in (("train", TRAIN), ("old", OLD), ("crash", "raise ImportError('no numpy here')\n")):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
        (package / name / "__main__.py").write_text(textwrap.dedent(text))
    (package / "datasets").mkdir()
    (package / "__init__.py").write_text("")
    (package / "datasets" / "__init__.py").write_text("")
    (package / "datasets" / "base.py").write_text("")
    (package / "datasets" / "gen.py").write_text(GENERATOR)
    trained = tmp_path / "trained.txt"
    monkeypatch.setenv("TRAINED", str(trained))
    return {"root": str(tmp_path), "trained": trained}


def experiment(**changes):
    data = {
        "name": "t",
        "workload": "train",
        "platforms": ["bm", "cn"],
        "scaleup": [1, 2],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 3,
        "params": {"model": "tiny", "batch_size": 8},
    }
    data.update(changes)
    return validate_experiment(data, "t.yml")


def check(fake, exp, **keywords):
    return check_experiment_params(exp, fake["root"], package="fakeloads", **keywords)


def test_workloads_and_generators_are_found_by_their_files(fake):
    assert available_workloads(fake["root"], "fakeloads") == ["crash", "old", "train"]
    assert available_generators(fake["root"], "fakeloads") == ["gen"]


def test_distinct_command_lines_only_as_placement_builds_them():
    # 2 platforms x 2 scale-ups x 3 repeats x 2 models = 24 cells, 4 distinct command lines.
    runs = cell_runs(experiment(params={"model": ["tiny", "resnet50"], "batch_size": 8}))
    assert sorted((run["threads"], run["model"]) for run in runs) == [
        (1, "resnet50"),
        (1, "tiny"),
        (2, "resnet50"),
        (2, "tiny"),
    ]
    with_data = cell_runs(experiment(scaleup=[1], dataset={"generator": "gen"}))
    assert with_data == [{"threads": 1, "model": "tiny", "batch_size": 8, "data_dir": DATA_DIR_PLACEHOLDER}]


def test_emulated_guests_are_checked_with_their_own_params():
    runs = cell_runs(experiment(platforms=["bm", "vm"], scaleup=[2], emulated={"params": {"steps": 0}}))
    assert sorted(str(run.get("steps", "-")) for run in runs) == ["-", "0"]


def test_valid_parameters_pass_and_nothing_trains(fake):
    assert check(fake, experiment()) == ([], [])
    assert not fake["trained"].exists()


def test_every_bad_value_is_named_with_what_is_allowed_once(fake):
    problems, warnings = check(fake, experiment(params={"model": ["resnet9000", "tiny"], "batch_size": 0}))
    assert problems == [
        "params.model: 'resnet9000' is refused by fakeloads.train: argument --model: invalid choice: "
        "'resnet9000' (choose from 'tiny', 'resnet50')",
        # argparse stops at the first bad option; the next one is still found
        "params.batch_size: 0 is refused by fakeloads.train: argument --batch-size: expected a positive "
        "integer, got '0'",
    ]
    assert warnings == []
    assert not fake["trained"].exists()


def test_unknown_parameter_and_parser_checks_name_the_key(fake):
    problems, _ = check(fake, experiment(params={"colour": "red", "data_dir": "/data"}))
    assert problems == [
        "params.colour: fakeloads.train has no option --colour; see `python -m fakeloads.train --help`",
        "params.data_dir: '/data' is refused by fakeloads.train: --data-dir is read only with --data real",
    ]


def test_the_threads_option_comes_from_the_scaleup(fake):
    problems, _ = check(fake, experiment(params={"threads": 0}))
    assert problems == [
        "params.threads: 0 is refused by fakeloads.train: argument --threads: expected a positive integer, got '0'"
    ]


def test_a_check_of_threads_against_the_controllers_cpus_is_left_to_the_host(fake):
    # Like workloads.common.args.resolve_threads, which --check-args may run on the controller.
    (Path(fake["root"]) / "fakeloads" / "train" / "__main__.py").write_text(
        TRAIN.replace(
            "if args.check_args:",
            "if args.threads and args.threads > 2:\n"
            '    parser.error(f"--threads must be at most 2, the CPUs this process may use, got {args.threads}")\n'
            "if args.check_args:",
        )
    )
    assert check(fake, experiment(scaleup=[64])) == ([], [])
    assert check(fake, experiment(scaleup=[64], params={"model": "big"}))[0] == [
        "params.model: 'big' is refused by fakeloads.train: argument --model: invalid choice: 'big' "
        "(choose from 'tiny', 'resnet50')"
    ]


def test_unknown_workload_lists_the_available_ones(fake):
    assert check(fake, experiment(workload="x")) == (
        ["workload: unknown workload 'x'; available: crash, old, train"],
        [],
    )


def test_a_workload_without_check_args_is_checked_by_its_parser_and_warned_about(fake):
    assert check(fake, experiment(workload="old")) == (
        [],
        [
            "fakeloads.old has no --check-args: its parser's type and choice checks ran at plan time, "
            "its own further checks did not"
        ],
    )
    problems, _ = check(fake, experiment(workload="old", params={"model": "big"}))
    assert problems == [
        "params.model: 'big' is refused by fakeloads.old: argument --model: invalid choice: 'big' "
        "(choose from 'tiny', 'resnet50')"
    ]
    assert not fake["trained"].exists()


def test_a_workload_that_cannot_start_is_a_problem_not_a_pass(fake):
    [problem], _ = check(fake, experiment(workload="crash", scaleup=[1], params={}))
    assert problem.startswith(
        "params: could not be checked: `python -m fakeloads.crash --check-args --threads 1` "
        "exited with 1: ImportError: no numpy here"
    )


def test_dataset_generator_and_its_args_are_checked(fake):
    params = {"model": "tiny", "data": "real"}
    problems, _ = check(fake, experiment(params=params, dataset={"generator": "gen", "args": {"images": 0}}))
    assert problems == ["dataset.args.images: 0 is refused by fakeloads.datasets.gen: --images must be positive, got 0"]
    # The generated data's --data-dir is part of the cells' command line too.
    problems, _ = check(fake, experiment(dataset={"generator": "gen"}))
    assert problems == ["dataset: 'gen' is refused by fakeloads.train: --data-dir is read only with --data real"]
    # A workload that looks into its data directory at check time cannot see data the host will generate.
    scanning = TRAIN.replace(
        "if args.check_args:",
        "if args.data_dir and not os.path.isdir(args.data_dir):\n"
        '    parser.error(f"--data-dir: {args.data_dir} does not exist")\nif args.check_args:',
    )
    (Path(fake["root"]) / "fakeloads" / "train" / "__main__.py").write_text(scanning)
    assert check(fake, experiment(params=params, dataset={"generator": "gen"})) == ([], [])
    assert check(fake, experiment(params={**params, "data_dir": "/nowhere"}))[0] == [
        "params.data_dir: '/nowhere' is refused by fakeloads.train: --data-dir: /nowhere does not exist"
    ]
    problems, _ = check(fake, experiment(params=params, dataset={"generator": "nope"}))
    assert problems == ["dataset.generator: unknown generator 'nope'; available: gen"]


def test_checks_run_with_the_given_python_and_environment(fake, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "TRAINED": str(fake["trained"])}
    assert check(fake, experiment(), python=sys.executable, env=env, jobs=1) == ([], [])
    [problem], _ = check(fake, experiment(scaleup=[1]), python=str(tmp_path / "no-python"))
    assert "could not be checked" in problem and "no-python" in problem


def test_checked_params_raises_one_error_naming_the_file(fake):
    with pytest.raises(ExperimentError) as caught:
        checked_params(
            experiment(params={"model": "resnet9000", "batch_size": 0}),
            "experiments/t.yml",
            fake["root"],
            package="fakeloads",
        )
    message = str(caught.value)
    assert message.startswith("experiments/t.yml: invalid experiment:\n  - params.model: 'resnet9000'")
    assert "\n  - params.batch_size: 0" in message
    assert checked_params(experiment(), "t.yml", fake["root"], package="fakeloads") == []


def test_the_shared_argv_rule_builds_what_placement_builds():
    from ansible_collections.platbench.lab.plugins.filter.experiments import workload_argv as filter_argv
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import (
        WorkloadArgsError,
        key_of,
        workload_argv,
    )

    params = {"threads": 2, "batch_size": 32, "lr": 0.1, "launch_local": True, "xla": False, "model": "tiny"}
    assert (
        workload_argv(params, "cnn_train")
        == filter_argv(params, "cnn_train")
        == [
            "-m",
            "workloads.cnn_train",
            "--threads",
            "2",
            "--batch-size",
            "32",
            "--lr",
            "0.1",
            "--launch-local",
            "--model",
            "tiny",
        ]
    )
    assert key_of("--batch-size") == "batch_size"
    with pytest.raises(WorkloadArgsError, match="'model' must be a scalar"):
        workload_argv({"model": ["a"]}, "cnn_train")


def test_each_workload_of_an_experiment_is_checked_with_its_own_params(fake):
    exp = experiment(
        workload=["train", "old"],
        params={"model": "tiny"},
        workload_params={"train": {"batch_size": 0}, "old": {"steps": 5}},
    )
    problems, warnings = check(fake, exp)
    assert problems == [
        "workload_params.train.batch_size: 0 is refused by fakeloads.train: argument --batch-size: expected a "
        "positive integer, got '0'"
    ]
    assert warnings == [
        "fakeloads.old has no --check-args: its parser's type and choice checks ran at plan time, "
        "its own further checks did not"
    ]
    assert not fake["trained"].exists()


def test_every_unknown_workload_is_named(fake):
    problems, _ = check(fake, experiment(workload=["train", "nope", "gone"]))
    assert problems == [
        "workload: unknown workload 'nope'; available: crash, old, train",
        "workload: unknown workload 'gone'; available: crash, old, train",
    ]
