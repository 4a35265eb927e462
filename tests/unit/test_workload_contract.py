"""The one workload contract (workloads/common/workload.py): every workload CLI is a Workload declaration run by one
main, and a workload declared here, in the test, gets the whole harness from it."""

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

import workloads
from workloads.common.harness import Outcome
from workloads.common.record import metric, parse_result_lines
from workloads.common.workload import Workload
from workloads.datasets.base import DatasetError

WORKLOAD_PACKAGES = sorted(
    info.name
    for info in pkgutil.iter_modules(workloads.__path__)
    if info.ispkg and importlib.util.find_spec(f"workloads.{info.name}.cli") is not None
)


def test_the_nine_workloads_each_declare_one_spec_and_keep_no_main_of_their_own():
    assert WORKLOAD_PACKAGES == [
        "cnn_train",
        "dl_tools",
        "inference_e2e",
        "micro_cpu",
        "micro_disk",
        "micro_gpu",
        "micro_mem",
        "micro_net",
        "small_models",
    ]
    for name in WORKLOAD_PACKAGES:
        cli = importlib.import_module(f"workloads.{name}.cli")
        assert isinstance(cli.SPEC, Workload) and cli.SPEC.name == name
        assert cli.main == cli.SPEC.main and cli.parse_args == cli.SPEC.parse_args, name
        package_main = f"workloads.{name}.__main__"
        assert "from .cli import main" in importlib.util.find_spec(package_main).loader.get_source(package_main)


@pytest.mark.parametrize("name", WORKLOAD_PACKAGES)
def test_every_workloads_help_renders_and_names_the_common_options(name):
    # micro_cpu's and micro_mem's --help raised TypeError before: a "%" in their help that argparse expands.
    parser = importlib.import_module(f"workloads.{name}.cli").SPEC.build_parser()
    text = parser.format_help()
    assert parser.prog == f"python -m workloads.{name}"
    for option in ("--threads", "--seed", "--labels-json", "--check-args"):
        assert option in text, (name, option)


# The options a workload requires, so that the parser reaches the label check.
REQUIRED = {
    "dl_tools": ["--net", "fcn5", "--data-dir", "/nowhere"],
    "inference_e2e": ["--app", "ic", "--data-dir", "/nowhere"],
    "small_models": ["--net", "mnist_cnn", "--data-dir", "/nowhere"],
}


@pytest.mark.parametrize("name", WORKLOAD_PACKAGES)
def test_labels_json_may_not_rename_the_workload(name, capsys):
    spec = importlib.import_module(f"workloads.{name}.cli").SPEC
    required = REQUIRED.get(name, [])
    assert spec.parse_args(["--check-args", *required, "--labels-json", '{"scenario": "s"}']).labels_json
    with pytest.raises(SystemExit) as exit_info:
        spec.parse_args(["--check-args", *required, "--labels-json", json.dumps({"workload": "other"})])
    assert exit_info.value.code == 2
    assert "must not contradict the run's own labels: workload" in capsys.readouterr().err


def _arguments(parser):
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--data-dir")


def _validate(parser, args, allowed_cpus):
    if args.size > 10:
        parser.error(f"--size must be at most 10, got {args.size}")
    args.checked_cpus = allowed_cpus


def _load(data_dir, size):
    if data_dir == "/missing":
        raise DatasetError(f"no toy data in {data_dir}")
    return list(range(size))


def _body(args, run):
    data, seconds = TOY.load_data(_load, args.data_dir, args.size)
    run.metadata["loaded"] = len(data)
    return Outcome([metric("toy_sum", sum(data), "count"), metric("data_load", seconds, "s")])


TOY = Workload(
    name="toy",
    description="a workload declared only in this test",
    arguments=_arguments,
    validate=_validate,
    own_labels=lambda args: {"size": args.size},
    metadata=lambda args: {"toy_metadata": True},
    body=_body,
    not_checked="nothing depends on the host",
    sets_thread_env=False,
)


def test_a_workload_declared_in_a_test_gets_labels_metadata_and_one_record_from_main(capsys, in_process):
    code = TOY.main(["--size", "4", "--threads", "1", "--labels-json", '{"scenario": "t"}'])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (record,) = parse_result_lines(captured.out)
    assert record["status"] == "ok"
    assert record["labels"] == {"scenario": "t", "workload": "toy", "size": 4, "threads": 1}
    assert record["metadata"]["toy_metadata"] is True and record["metadata"]["seed"] == 0
    assert record["metadata"]["loaded"] == 4 and "hostname" in record["metadata"]
    assert {entry["metric"]: entry["value"] for entry in record["metrics"]}["toy_sum"] == 6


def test_the_contract_refuses_bad_input_with_exit_2_and_no_record(capsys, in_process):
    for argv, message in [
        (["--size", "11"], "--size must be at most 10, got 11"),
        (["--labels-json", '{"size": 5}'], "must not contradict the run's own labels: size"),
        (["--threads", "4096"], "--threads must be at most"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            TOY.main(argv)
        captured = capsys.readouterr()
        assert exit_info.value.code == 2 and message in captured.err and captured.out == "", argv
    # A usage error only the body finds: the data directory.
    with pytest.raises(SystemExit) as exit_info:
        TOY.main(["--data-dir", "/missing", "--threads", "1"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert "python -m workloads.toy: error: --data-dir: no toy data in /missing" in captured.err
    assert "PLATBENCH_RESULT" not in captured.out


def test_check_args_validates_without_running_the_body_and_without_the_runners_cpus(capsys):
    args = TOY.parse_args(["--check-args", "--size", "2"])
    assert args.checked_cpus is None and args.threads is None and not args.threads_given
    assert TOY.main(["--check-args", "--size", "2"]) == 0
    assert capsys.readouterr().out == ""


def test_a_workload_runs_through_its_package_main_as_the_controller_starts_it():
    done = subprocess.run(
        [sys.executable, "-m", "workloads.micro_disk", "--check-args", "--dd-sizes-mb", "3", "--dd-block-size", "2M"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--dd-sizes-mb 3 MiB is not a whole number of --dd-block-size (2097152 bytes) blocks" in done.stderr
