import textwrap

import pytest
from ansible_collections.platbench.lab.plugins.module_utils.platforms import LABELS
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    available_experiments,
    load_experiment,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import (
    cores_needed,
    emulated_subset,
    expand,
    scenario_name,
)

SMOKE = """\
name: smoke
description: Bare metal vs Docker container, tiny CNN, both CPU configs.
workload: cnn_train
platforms: [bm, cn]
scaleup: [1, 2]
cpu_config: [pin, vnl]
processor: [cpu]
mode: single
repeats: 3
params:
  framework: tensorflow
  model: tiny
  batch_size: 32
  image_size: 32
  warmup_steps: 5
  steps: 30
"""


@pytest.fixture
def experiments(tmp_path):
    (tmp_path / "smoke.yml").write_text(SMOKE)
    return tmp_path


def write(directory, name, text):
    (directory / f"{name}.yml").write_text(textwrap.dedent(text))


def test_available_experiments_are_sorted_yml_names(experiments):
    write(experiments, "alpha", "name: alpha\n")
    (experiments / "notes.txt").write_text("not an experiment")
    assert available_experiments(experiments) == ["alpha", "smoke"]


def test_smoke_expands_to_every_combination(experiments):
    experiment = load_experiment(experiments, "smoke")
    cells = expand(experiment)
    assert len(cells) == 2 * 2 * 2 * 1 * 3
    assert cores_needed(experiment) == 2


def test_repeats_are_outermost_and_platforms_interleave(experiments):
    cells = expand(load_experiment(experiments, "smoke"))
    assert [cell["labels"]["repeat"] for cell in cells] == [0] * 8 + [1] * 8 + [2] * 8
    assert [cell["id"] for cell in cells[:4]] == [
        "bm/1/pin/cpu|r0",
        "cn/1/pin/cpu|r0",
        "bm/1/vnl/cpu|r0",
        "cn/1/vnl/cpu|r0",
    ]
    # every repeat runs the scenarios in the same order
    assert [cell["scenario"] for cell in cells[:8]] == [cell["scenario"] for cell in cells[8:16]]


def test_cell_ids_are_unique_and_cells_carry_labels_and_params(experiments):
    cells = expand(load_experiment(experiments, "smoke"))
    assert len({cell["id"] for cell in cells}) == len(cells)
    cell = cells[-1]
    assert cell["id"] == "cn/2/vnl/cpu|r2"
    assert cell["scenario"] == "cn/2/vnl/cpu"
    assert cell["params"] == {
        "framework": "tensorflow",
        "model": "tiny",
        "batch_size": 32,
        "image_size": 32,
        "warmup_steps": 5,
        "steps": 30,
    }
    assert cell["labels"] == {
        **cell["params"],
        "experiment": "smoke",
        "workload": "cnn_train",
        "platform": "cn",
        "scaleup": 2,
        "cpu_config": "vnl",
        "processor": "cpu",
        "mode": "single",
        "repeat": 2,
        "scenario": "cn/2/vnl/cpu",
        "cell": "cn/2/vnl/cpu|r2",
        "schedule": "rounds",
    }


def test_list_valued_params_are_dimensions(experiments):
    write(
        experiments,
        "models",
        """\
        name: models
        workload: cnn_train
        platforms: bm
        scaleup: 4
        cpu_config: pin
        processor: gpu
        repeats: 2
        params:
          framework: tensorflow
          model: [resnet50, alexnet]
          batch_size: [32, 512]
        """,
    )
    cells = expand(load_experiment(experiments, "models"))
    assert len(cells) == 2 * 2 * 2
    assert cells[0]["id"] == "bm/4/pin/gpu|model=resnet50,batch_size=32|r0"
    assert cells[1]["id"] == "bm/4/pin/gpu|model=resnet50,batch_size=512|r0"
    assert cells[1]["params"] == {"framework": "tensorflow", "model": "resnet50", "batch_size": 512}
    assert cells[1]["labels"]["batch_size"] == 512
    assert len({cell["id"] for cell in cells}) == len(cells)


def test_overrides_merge_into_params_and_replace_lists(experiments):
    experiment = load_experiment(
        experiments, "smoke", {"repeats": 1, "params": {"steps": 3}, "platforms": ["cn"], "scaleup": [1]}
    )
    assert experiment["params"]["steps"] == 3
    assert experiment["params"]["model"] == "tiny"  # untouched params stay
    assert experiment["platforms"] == ["cn"]
    assert len(expand(experiment)) == 1 * 1 * 2 * 1 * 1


def test_defaults_are_filled_in(experiments):
    write(
        experiments,
        "bare",
        """\
        name: bare
        workload: cnn_train
        platforms: [bm]
        scaleup: [1]
        cpu_config: [vnl]
        processor: [cpu]
        repeats: 1
        """,
    )
    experiment = load_experiment(experiments, "bare")
    assert (experiment["mode"], experiment["description"], experiment["params"]) == ("single", "", {})


def test_scenario_name():
    assert scenario_name("cn", 2, "pin", "cpu") == "cn/2/pin/cpu"


def test_unknown_experiment_lists_the_available_ones(experiments):
    write(experiments, "other", "name: other\n")
    with pytest.raises(ExperimentError, match=r"unknown experiment 'nope' .*available: other, smoke"):
        load_experiment(experiments, "nope")


def invalid(experiments, overrides):
    with pytest.raises(ExperimentError) as caught:
        load_experiment(experiments, "smoke", overrides)
    message = str(caught.value)
    assert "smoke.yml" in message  # always names the file
    return message


def test_unknown_platform_names_the_allowed_ones(experiments):
    message = invalid(experiments, {"platforms": ["bm", "docker"]})
    assert "platforms: unknown value 'docker'; allowed: " + ", ".join(LABELS) in message


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"scaleup": [0, 2]}, "scaleup: [0, 2] must be one or more positive integers"),
        ({"scaleup": ["2"]}, "scaleup: ['2'] must be one or more positive integers"),
        ({"scaleup": []}, "scaleup: [] must be one or more positive integers"),
        ({"scaleup": [2, 2]}, "scaleup: [2, 2] lists a value twice"),
        ({"repeats": 0}, "repeats: 0 must be an integer >= 1"),
        ({"repeats": True}, "repeats: True must be an integer >= 1"),
        ({"cpu_config": ["pinned"]}, "cpu_config: unknown value 'pinned'; allowed: pin, vnl"),
        ({"processor": "tpu"}, "processor: unknown value 'tpu'; allowed: cpu, gpu"),
        ({"mode": "batch"}, "mode: unknown value 'batch'; allowed: single, distributed, shared"),
        ({"mode": "shared"}, "background: a shared cell needs the job that runs beside it"),
        ({"mode": "distributed"}, "instances.count: a distributed cell needs the number of its ranks (2 or more)"),
        ({"mode": "distributed", "instances": {"count": 1}}, "instances.count: 1: a distributed cell needs at least 2"),
        (
            {"mode": "distributed", "instances": {"count": 2}, "network": ["vxlan"]},
            "network: unknown path 'vxlan'; allowed: loopback, bridge, overlay",
        ),
        ({"network": ["bridge"]}, "network: applies to cells with several instances (mode distributed or shared)"),
        (
            {"mode": "shared", "background": {"workload": "cnn_train"}, "network": ["bridge"]},
            "network: a shared cell's two jobs do not talk to each other",
        ),
        (
            {"mode": "shared", "background": {"workload": "cnn_train"}, "instances": {"cpus": "half"}},
            "instances.cpus: unknown value 'half'; allowed: disjoint, shared",
        ),
        ({"params": {"network": "bridge"}}, "params: key 'network' is reserved"),
        ({"platforms": []}, "platforms: must name at least one of bm"),
        ({"gpus": 2}, "unknown field(s) gpus; allowed: name, workload"),
        ({"params": {"model": {"name": "x"}}}, "params.model: must be a scalar"),
        ({"params": {"model": [["a"]]}}, "params.model: a list must hold one or more scalars"),
        ({"params": {"model": []}}, "params.model: a list must hold one or more scalars"),
        ({"params": {"model": None}}, "params.model: must be a scalar"),
        ({"params": {"platform": "x"}}, "params: key 'platform' is reserved"),
        ({"params": {"host": "x"}}, "params: key 'host' is reserved"),
        ({"params": {"Batch-Size": 1}}, "params: key 'Batch-Size' must be lower_snake_case"),
        ({"workload": "cnn-train"}, "workload: 'cnn-train' must be a lower_snake_case module name"),
        ({"name": "other"}, "name: 'other' must match the file name 'smoke'"),
    ],
)
def test_bad_fields_are_named_with_value_and_allowed_values(experiments, overrides, expected):
    assert expected in invalid(experiments, overrides)


def test_every_problem_is_reported_at_once(experiments):
    message = invalid(experiments, {"repeats": 0, "platforms": ["docker"]})
    assert "repeats: 0" in message and "'docker'" in message


def test_missing_fields_are_listed(experiments):
    write(experiments, "partial", "name: partial\nworkload: cnn_train\n")
    with pytest.raises(
        ExperimentError,
        match=r"partial.yml.*\n.*missing field\(s\) platforms, scaleup, "
        r"cpu_config, processor, repeats",
    ):
        load_experiment(experiments, "partial")


def test_yaml_errors_and_non_mappings_name_the_file(experiments):
    write(experiments, "broken", "name: [unclosed\n")
    write(experiments, "listy", "- a\n- b\n")
    with pytest.raises(ExperimentError, match=r"broken.yml: not valid YAML"):
        load_experiment(experiments, "broken")
    with pytest.raises(ExperimentError, match=r"listy.yml: expected a mapping of experiment fields, got list"):
        load_experiment(experiments, "listy")


def test_overrides_must_be_a_mapping(experiments):
    with pytest.raises(ExperimentError, match="overrides must be a mapping"):
        load_experiment(experiments, "smoke", ["repeats=1"])


def test_dataset_section_is_validated():
    base = {
        "name": "d",
        "workload": "dl_tools",
        "platforms": ["bm"],
        "scaleup": [1],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
    }
    good = validate_experiment({**base, "dataset": {"generator": "mnist", "args": {"images": 64}}})
    assert good["dataset"]["generator"] == "mnist"
    assert validate_experiment(base)["dataset"] is None
    for dataset, message in (
        ({"generator": "../etc"}, "dataset.generator"),
        ({"generator": "mnist", "args": {"images": [1, 2]}}, "dataset.args"),
        ({"generator": "mnist", "path": "/x"}, "dataset: must be a mapping"),
    ):
        with pytest.raises(ExperimentError, match=message):
            validate_experiment({**base, "dataset": dataset})
    with pytest.raises(ExperimentError, match="not both"):
        validate_experiment({**base, "dataset": {"generator": "mnist"}, "params": {"data_dir": "/data"}})


GUESTS = {
    "platforms": ["bm", "vm", "vmcn"],
    "emulated": {"scaleup": [2], "cpu_config": "pin", "repeats": 1, "params": {"steps": 10}},
}


def test_emulated_subset_keeps_other_platforms_and_cuts_guests_to_the_subset(experiments):
    experiment = load_experiment(experiments, "smoke", overrides=GUESTS)
    cells = expand(experiment)
    kept = emulated_subset(cells, experiment["emulated"])
    guests = [cell for cell in kept if cell["labels"]["platform"] in ("vm", "vmcn")]
    assert [cell["id"] for cell in guests] == ["vm/2/pin/cpu|r0", "vmcn/2/pin/cpu|r0"]
    assert all(
        cell["params"]["steps"] == 10 and cell["labels"]["steps"] == 10 and cell["labels"]["emulated"]
        for cell in guests
    )
    bare = [cell for cell in kept if cell["labels"]["platform"] == "bm"]
    assert bare == [cell for cell in cells if cell["labels"]["platform"] == "bm"]
    assert all(cell["params"]["steps"] == 30 and "emulated" not in cell["labels"] for cell in bare)


def test_emulated_subset_changes_nothing_without_emulated_platforms_or_field(experiments):
    experiment = load_experiment(experiments, "smoke", overrides=GUESTS)
    cells = expand(experiment)
    assert emulated_subset(cells, experiment["emulated"], guests=()) == cells
    assert emulated_subset(cells, None) == cells


@pytest.mark.parametrize(
    "emulated, expected",
    [
        ({"scaleup": [4]}, "emulated.scaleup: [4] must pick from the experiment's scaleup [1, 2]"),
        ({"cpu_config": ["pinned"]}, "emulated.cpu_config: ['pinned'] must pick from"),
        ({"repeats": 0}, "emulated.repeats: 0 must be an integer >= 1"),
        ({"params": {"steps": [1, 2]}}, "emulated.params: must map lower_snake_case parameter names to scalars"),
        ({"steps": 10}, "emulated: must be a mapping with any of scaleup, cpu_config, repeats, params"),
    ],
)
def test_bad_emulated_fields_are_named(experiments, emulated, expected):
    assert expected in invalid(experiments, {"emulated": emulated})


def test_overriding_the_dimensions_keeps_what_is_left_of_the_emulated_subset(experiments):
    (experiments / "smoke.yml").write_text(SMOKE + "emulated: {scaleup: [2], cpu_config: [pin], repeats: 1}\n")
    guests = {"platforms": ["bm", "vm"]}
    # scale-up 2 is gone: the emulated subset no longer cuts scale-up, only cpu_config and repeats.
    experiment = load_experiment(experiments, "smoke", overrides={**guests, "scaleup": [1]})
    assert experiment["emulated"] == {"cpu_config": ["pin"], "repeats": 1}
    ids = [
        cell["id"]
        for cell in emulated_subset(expand(experiment), experiment["emulated"])
        if cell["labels"]["platform"] == "vm"
    ]
    assert ids == ["vm/1/pin/cpu|r0"]
    # What is still offered stays cut.
    experiment = load_experiment(experiments, "smoke", overrides={**guests, "scaleup": [2, 4]})
    assert experiment["emulated"]["scaleup"] == [2]
    # An `emulated` field given with the overrides is checked as strictly as the file's own.
    assert "emulated.scaleup: [2] must pick from" in invalid(
        experiments, {**guests, "scaleup": [1], "emulated": {"scaleup": [2]}}
    )


# Several workloads in one experiment.

MICRO = """\
name: micro
workload: [micro_cpu, micro_disk]
platforms: [bm, cn, vm]
scaleup: [2]
cpu_config: [pin]
processor: [cpu]
repeats: 2
params:
  size: small
workload_params:
  micro_cpu:
    hpl_n: [1000, 2000]
  micro_disk:
    size: tiny
    dd_sizes_mb: "1,100"
emulated:
  workloads: [micro_disk]
  workload_params:
    micro_disk:
      dd_sizes_mb: "1"
"""


def test_several_workloads_repeat_then_workload_then_params_then_scenarios(experiments):
    write(experiments, "micro", MICRO)
    cells = expand(load_experiment(experiments, "micro"))
    assert [cell["id"] for cell in cells[:9]] == [
        "bm/2/pin/cpu|workload=micro_cpu,hpl_n=1000|r0",
        "cn/2/pin/cpu|workload=micro_cpu,hpl_n=1000|r0",
        "vm/2/pin/cpu|workload=micro_cpu,hpl_n=1000|r0",
        "bm/2/pin/cpu|workload=micro_cpu,hpl_n=2000|r0",
        "cn/2/pin/cpu|workload=micro_cpu,hpl_n=2000|r0",
        "vm/2/pin/cpu|workload=micro_cpu,hpl_n=2000|r0",
        "bm/2/pin/cpu|workload=micro_disk|r0",
        "cn/2/pin/cpu|workload=micro_disk|r0",
        "vm/2/pin/cpu|workload=micro_disk|r0",
    ]
    assert len(cells) == 2 * (2 + 1) * 3 and len({cell["id"] for cell in cells}) == len(cells)
    cpu, disk = cells[0], cells[6]
    assert cpu["params"] == {"size": "small", "hpl_n": 1000}
    assert disk["params"] == {"size": "tiny", "dd_sizes_mb": "1,100"}  # its own params win over the shared ones
    assert (cpu["labels"]["workload"], disk["labels"]["workload"]) == ("micro_cpu", "micro_disk")
    assert disk["labels"]["size"] == "tiny"


def test_one_workload_keeps_its_cell_ids_for_resume(experiments):
    write(experiments, "micro", MICRO)
    ids = [cell["id"] for cell in expand(load_experiment(experiments, "micro", {"workload": "micro_cpu"}))]
    assert ids[0] == "bm/2/pin/cpu|hpl_n=1000|r0"
    smoke = expand(load_experiment(experiments, "smoke"))
    assert smoke[0]["id"] == "bm/1/pin/cpu|r0" and smoke[0]["labels"]["workload"] == "cnn_train"


def test_emulated_guests_run_the_workloads_named_with_their_own_overrides(experiments):
    write(experiments, "micro", MICRO)
    experiment = load_experiment(experiments, "micro")
    kept = emulated_subset(expand(experiment), experiment["emulated"])
    guests = [cell for cell in kept if cell["labels"]["platform"] == "vm"]
    assert {cell["labels"]["workload"] for cell in guests} == {"micro_disk"}
    assert all(cell["params"]["dd_sizes_mb"] == "1" and cell["labels"]["emulated"] for cell in guests)
    assert len([cell for cell in kept if cell["labels"]["platform"] == "bm"]) == 2 * 3


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"workload": []}, "workload: [] must be a lower_snake_case module name or a non-empty list of distinct ones"),
        ({"workload": ["micro_cpu", "Bad-Name"]}, "workload: ['micro_cpu', 'Bad-Name'] must be a lower_snake_case"),
        ({"workload": ["micro_cpu", "micro_cpu"]}, "workload: ['micro_cpu', 'micro_cpu'] lists a workload twice"),
        (
            {"workload_params": {"micro_gpu": {"x": 1}}},
            "workload_params: 'micro_gpu' is not a workload of this experiment (micro_cpu, micro_disk); "
            "name one of them or add it to workload",
        ),
        ({"workload_params": {"micro_cpu": {"hpl_n": [1, 1]}}}, "workload_params.micro_cpu.hpl_n: [1, 1] lists"),
        (
            {"workload_params": {"micro_cpu": {"platform": "x"}}},
            "workload_params.micro_cpu: key 'platform' is reserved",
        ),
        ({"workload_params": ["micro_cpu"]}, "workload_params: must map workload names to their parameters"),
        (
            {"emulated": {"workloads": ["micro_net"]}},
            "emulated.workloads: ['micro_net'] must pick from the experiment's workloads ['micro_cpu', 'micro_disk']",
        ),
        (
            {"emulated": {"workload_params": {"micro_cpu": {"hpl_n": [1]}}}},
            "emulated.workload_params.micro_cpu: must map lower_snake_case parameter names to scalars",
        ),
    ],
)
def test_bad_workload_fields_are_named(changes, expected):
    data = {
        "name": "micro",
        "workload": ["micro_cpu", "micro_disk"],
        "platforms": ["bm"],
        "scaleup": [2],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
        **changes,
    }
    with pytest.raises(ExperimentError) as caught:
        validate_experiment(data, "micro.yml")
    assert expected in str(caught.value)


def test_overriding_the_workloads_keeps_the_files_emulated_subset_working(experiments):
    write(experiments, "micro", MICRO)
    experiment = load_experiment(experiments, "micro", {"workload": ["micro_cpu"]})
    assert "workloads" not in experiment["emulated"]  # none of its workloads is left: no cut
    assert {cell["labels"]["workload"] for cell in expand(experiment)} == {"micro_cpu"}


def test_a_value_listed_twice_is_named_once(experiments):
    message = invalid(experiments, {"platforms": ["bm", "xx", "xx"]})
    assert message.count("platforms: unknown value 'xx'") == 1
    assert "platforms: ['bm', 'xx', 'xx'] lists a value twice" in message
    assert len(message.splitlines()) == len(set(message.splitlines()))


def test_narrowing_drops_the_files_settings_of_what_it_removed_and_keeps_the_overrides_own(experiments):
    """The workload narrowed while other fields of workload_params and emulated are overridden too: the file's
    parameters of the workloads left out go, the subset's other fields stay; what the overrides give stays."""
    write(experiments, "micro", MICRO)
    experiment = load_experiment(
        experiments,
        "micro",
        {
            "workload": ["micro_cpu"],
            "workload_params": {"micro_cpu": {"hpl_n": 500}},
            "emulated": {"repeats": 1},
        },
    )
    assert experiment["workload_params"] == {"micro_cpu": {"hpl_n": 500}}
    assert experiment["emulated"] == {"repeats": 1, "workload_params": {}}
    assert {cell["labels"]["workload"] for cell in expand(experiment)} == {"micro_cpu"}
    # Parameters the overrides give for a workload they leave out are still refused.
    for overrides, expected in (
        (
            {"workload_params": {"micro_disk": {"size": "x"}}},
            "workload_params: 'micro_disk' is not a workload of this experiment (micro_cpu)",
        ),
        (
            {"emulated": {"workloads": ["micro_disk"]}},
            "emulated.workloads: ['micro_disk'] must pick from the experiment's workloads ['micro_cpu']",
        ),
    ):
        with pytest.raises(ExperimentError) as caught:
            load_experiment(experiments, "micro", {"workload": ["micro_cpu"], **overrides})
        assert expected in str(caught.value)


def test_narrowing_a_dimension_keeps_the_files_subset_when_the_overrides_set_other_subset_fields(experiments):
    (experiments / "smoke.yml").write_text(SMOKE + "emulated: {scaleup: [2], cpu_config: [pin], repeats: 1}\n")
    experiment = load_experiment(
        experiments, "smoke", {"platforms": ["bm", "vm"], "scaleup": [1], "emulated": {"params": {"steps": 1}}}
    )
    assert experiment["emulated"] == {"cpu_config": ["pin"], "repeats": 1, "params": {"steps": 1}}
