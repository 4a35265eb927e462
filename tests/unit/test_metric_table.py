"""Every metric a workload can emit has an entry in workloads/common/metric_table.py.

The emitted names are read from the workloads' code: every ``metric(NAME, VALUE, UNIT)`` call and every
dict that sets ``"metric"``. A constant name must have an entry; a computed one (an f-string, a renamed
entry) must be one of the dynamic producers below, whose real names the test generates by calling them.
Adding a metric without an entry, or a new way of naming one, fails here.
"""

import ast
import json
from pathlib import Path

import pytest

from workloads.common import metric_table, stats
from workloads.dl_tools import cli as dl_tools_cli
from workloads.inference_e2e.phases import PhaseTimes

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "workloads"
# Where a metric gets a computed name: (file, the name's template as written) -> the test that covers it.
DYNAMIC = {
    ("workloads/common/stats.py", "step_time_{name}"): "test_step_time_names",
    ("workloads/dl_tools/cli.py", "renamed"): "test_dl_tools_batch_time_names",
    ("workloads/inference_e2e/phases.py", "{name}_time"): "test_inference_phase_names",
    ("workloads/inference_e2e/phases.py", "{name}_p50"): "test_inference_phase_names",
    ("workloads/inference_e2e/phases.py", "{name}_p90"): "test_inference_phase_names",
}
# The record module defines metric() itself and reads entries back: no name of its own.
DEFINITIONS = {"workloads/common/record.py"}


def _template(node):
    """A name argument as text: the constant, an f-string with its fields as {source}, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.JoinedStr):
        fields = [
            part.value if isinstance(part, ast.Constant) else f"{{{ast.unparse(part.value)}}}" for part in node.values
        ]
        return "".join(fields), True
    return None, True


def emitted():
    """[(file, name or template, unit or None, computed)] of every metric entry built in workloads/."""
    found = []
    for path in sorted(WORKLOADS.rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if relative in DEFINITIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "metric":
                name, computed = _template(node.args[0])
                unit = _template(node.args[2])[0] if len(node.args) > 2 else None
                found.append((relative, name, unit, computed))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=False):
                    if isinstance(key, ast.Constant) and key.value == "metric":
                        name, computed = _template(value)
                        found.append((relative, name if not computed else "renamed", None, computed))
    return found


def test_the_scan_finds_the_workloads_metrics():
    names = {name for _, name, _, _ in emitted()}
    assert {"throughput", "elapsed", "h2d_time", "mfu", "gpu_kernel_time", "roofline_peak_flops"} <= names
    assert {"user_time", "system_time", "step_time_{name}"} <= names


def test_every_constant_metric_has_an_entry_and_its_unit():
    missing, wrong_unit = [], []
    for path, name, unit, computed in emitted():
        if computed:
            continue
        info = metric_table.lookup(name)
        if info is None:
            missing.append(f"{path}: {name}")
        elif unit is not None and not metric_table.unit_matches(info, unit.replace("{unit}", "images")):
            wrong_unit.append(f"{path}: {name} in {unit}, the table says {info.unit}")
    assert not missing, "metrics without an entry in workloads/common/metric_table.py: " + ", ".join(missing)
    assert not wrong_unit, "; ".join(wrong_unit)


def test_every_computed_name_is_a_known_producer():
    unknown = [f"{path}: {name}" for path, name, _, computed in emitted() if computed and (path, name) not in DYNAMIC]
    assert not unknown, (
        "metric names computed in a new way: give them entries in workloads/common/metric_table.py "
        "and a test here that generates them: " + ", ".join(unknown)
    )


def test_every_entry_is_well_formed():
    for name, info in metric_table.METRICS.items():
        assert info.better in metric_table.DIRECTIONS, name
        assert info.component in metric_table.COMPONENTS, name
        assert info.unit, name


def test_step_time_names():
    for entry in stats.step_time_metrics([0.1, 0.2, 0.4]):
        assert metric_table.lookup(entry["metric"]) == metric_table.MetricInfo("s", "lower", "training")


def test_dl_tools_batch_time_names():
    run = dl_tools_cli.EpochRun(startup=1.0, losses=[[2.0, 1.9], [1.8, 1.7]], batch_times=[[0.3, 0.2], [0.1, 0.1]])
    for entry in dl_tools_cli._metrics(run, 32, "images", 0.5):
        info = metric_table.lookup(entry["metric"])
        assert info is not None, entry["metric"]
        assert metric_table.unit_matches(info, entry["unit"]), entry


@pytest.mark.parametrize("timed", [("pre", "inference", "post"), ("inference",)])
def test_inference_phase_names(timed):
    phases = PhaseTimes(3, timed)
    for phase in timed:
        phases.add_batch(phase, [0, 1, 2], 0.3)
    for entry in phases.metrics():
        assert metric_table.lookup(entry["metric"]) == metric_table.MetricInfo("s", "lower", "inference"), entry


@pytest.mark.parametrize("fixture", sorted((REPO / "tests/unit/data").glob("*.jsonl")), ids=lambda path: path.name)
def test_every_metric_of_the_sample_fixtures_has_an_entry(fixture):
    names = {json.loads(line)["metric"] for line in fixture.read_text(encoding="utf-8").splitlines() if line.strip()}
    names -= {"failed", "skipped"}  # the callback's record of a failed or skipped cell, not a workload's metric
    assert not [name for name in sorted(names) if metric_table.lookup(name) is None]


def test_an_unknown_name_has_no_entry():
    assert metric_table.lookup("no_such_metric") is None
