"""The known overhead injected into a platform's cells (plugin_utils/experiment/inject.py): the field's refusals, each
naming it; the dimension's labels and cell ids; the platforms that cannot take it; the injected rows compared with
the same rows without injection."""

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample

from platbench.report.load import load_samples
from platbench.report.tables import baseline_rows, comparison, summarize

EXPERIMENT = {
    "name": "known",
    "workload": "cnn_train",
    "platforms": ["bm", "cn"],
    "scaleup": [1],
    "cpu_config": ["pin"],
    "processor": ["cpu"],
    "repeats": 2,
    "schedule": "sequential",
}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"cpu_quota": 0}, r"inject.cpu_quota: 0 must be a fraction of the cell's CPUs above 0 and at most 1"),
        ({"cpu_quota": 1.2}, r"inject.cpu_quota: 1.2 must be a fraction"),
        ({"cpu_quota": "half"}, r"inject.cpu_quota: 'half' must be a fraction"),
        ({"cpu_quota": True}, r"inject.cpu_quota: True must be a fraction"),
        ({"memory": 1}, r"inject: \{'memory': 1\}: inject: must be \{discard: D\} .* or \{cpu_quota: Q\}"),
        ({"discard": 1}, r"inject.discard: 1 must be a fraction of the timed steps from 0 up to, not including, 1"),
        ({"discard": -0.05}, r"inject.discard: -0.05 must be a fraction"),
        ({"spin": 1}, r"inject.spin: 1 must be a fraction of the timed part from 0 up to, not including, 1"),
        ({"spin": -0.1}, r"inject.spin: -0.1 must be a fraction"),
        ({"spin": "5%"}, r"inject.spin: '5%' must be a fraction"),
        ([], r"inject: \[\] lists nothing"),
        (["none", {"cpu_quota": -0.5}], r"inject\[1\].cpu_quota: -0.5 must be a fraction"),
        (["none", "none"], r"inject: \['none', 'none'\] lists an injection twice"),
    ],
)
def test_bad_injections_are_refused_naming_the_field(value, message):
    with pytest.raises(ExperimentError, match=message):
        validate_experiment({**EXPERIMENT, "inject": value})


def test_platforms_that_cannot_take_a_quota_are_refused_at_plan_time():
    with pytest.raises(
        ExperimentError, match=r"inject: vm, mvm cannot take an injected CPU quota .* inject a discard or a spin"
    ):
        validate_experiment({**EXPERIMENT, "platforms": ["bm", "vm", "mvm"], "inject": {"cpu_quota": 0.9}})
    # No overhead injected (only none): every platform is fine; a spin is the workload's, so every platform takes it.
    validate_experiment({**EXPERIMENT, "platforms": ["bm", "vm"], "inject": ["none"]})
    validate_experiment({**EXPERIMENT, "platforms": ["bm", "vm", "mvm"], "inject": ["none", {"spin": 0.05}]})
    validate_experiment({**EXPERIMENT, "platforms": ["bm", "vm", "mvm"], "inject": ["none", {"discard": 0.05}]})


def test_a_spin_or_a_discard_is_refused_for_a_workload_without_a_loop_of_steps():
    micro = {**EXPERIMENT, "workload": "micro_cpu", "params": {"tool": "hpcc"}}
    with pytest.raises(ExperimentError, match=r"inject: spin: the workload applies it to the steps .* micro_cpu has"):
        validate_experiment({**micro, "inject": ["none", {"spin": 0.05}]})
    with pytest.raises(ExperimentError, match=r"inject: discard and spin: .* or discard or spin in an experiment of"):
        validate_experiment({**micro, "inject": ["none", {"discard": 0.05}, {"spin": 0.05}]})
    validate_experiment({**micro, "inject": ["none", {"cpu_quota": 0.5}]})  # a quota is the platform's, not the loop's


def test_a_spin_or_discard_label_becomes_the_workloads_environment():
    assert inject.label_of({"spin": 0.05}) == "spin=0.05" and inject.label_of({"spin": 0}) == "spin=0"
    assert inject.label_of({"discard": 0.05}) == "discard=0.05"
    assert inject.workload_env("spin=0.05") == {"PLATBENCH_INJECT_SPIN": "0.05"}
    assert inject.workload_env("spin=0") == {"PLATBENCH_INJECT_SPIN": "0"}  # the placebo runs the same code path
    assert inject.workload_env("discard=0.05") == {"PLATBENCH_INJECT_DISCARD": "0.05"}
    assert inject.workload_env("discard=0") == {"PLATBENCH_INJECT_DISCARD": "0"}
    assert inject.workload_env("cpu_quota=0.95") == {} and inject.workload_env("none") == {}
    assert inject.workload_env(None) == {}
    assert inject.is_injected("spin=0")  # a placebo is compared with the cells without injection, as any injection


def test_a_dimension_labels_each_cell_and_keeps_the_ids_apart():
    cells = expand(validate_experiment({**EXPERIMENT, "inject": ["none", {"cpu_quota": 0.95}]}))
    assert [cell["id"] for cell in cells[:4]] == [
        "bm/1/pin/cpu|inject=none|r0",
        "cn/1/pin/cpu|inject=none|r0",
        "bm/1/pin/cpu|inject=cpu_quota=0.95|r0",
        "cn/1/pin/cpu|inject=cpu_quota=0.95|r0",
    ]
    assert inject.parse(cells[2]["labels"]["inject"]) == {"cpu_quota": 0.95}
    assert inject.parse("none") == {} and inject.parse(None) == {}
    # Without the field the cells carry no inject label: their ids are the ones every older campaign has.
    assert "inject" not in expand(validate_experiment(EXPERIMENT))[0]["labels"]


def sample(platform, injected, value, repeat):
    return throughput_sample(
        platform, value, repeat, 1.0 + repeat, "known", f"inject={injected}", schedule="rounds", inject=injected
    )


def test_an_injected_row_is_compared_with_the_same_platform_without_injection(tmp_path):
    drift = [1.0, 0.9, 1.1, 0.95]
    samples = []
    for repeat, factor in enumerate(drift):
        samples += [
            sample("bm", "none", 1000 * factor, repeat),
            sample("bm", "cpu_quota=0.7", 700 * factor, repeat),
            sample("cn", "none", 990 * factor, repeat),
            sample("cn", "cpu_quota=0.7", 693 * factor, repeat),
        ]
    append_samples(tmp_path / "samples.jsonl", samples)
    rows, keys, _ = summarize(load_samples(tmp_path), ["throughput"])
    assert "inject" in keys
    found = {}
    for row, baseline in zip(rows, baseline_rows(rows, keys), strict=True):
        found[row["platform"], row["inject"]] = (baseline.get("platform"), baseline.get("inject"), row, baseline)
    assert found["bm", "cpu_quota=0.7"][:2] == ("bm", "none")
    assert found["cn", "cpu_quota=0.7"][:2] == ("cn", "none")
    assert found["cn", "none"][:2] == ("bm", "none")
    _, _, row, baseline = found["bm", "cpu_quota=0.7"]
    assert comparison(row, baseline, "throughput")["estimate"] == pytest.approx(0.7)
