"""A scenario is one value (plugin_utils/experiment/scenario.py): one string form, one parser, and whether its CPUs are
pinned asked of it, never compared where it is used."""

import ast
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import scenario
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    available_experiments,
    load_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import Scenario, ScenarioError

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"


def every_cell():
    for name in available_experiments(str(EXPERIMENTS)):
        yield from expand(load_experiment(str(EXPERIMENTS), name))


def test_every_planned_cell_is_its_scenarios_one_form_and_parses_back():
    cells = list(every_cell())
    assert len(cells) > 500  # every experiment of the repository, every cell
    varied = 0
    for cell in cells:
        labels = cell["labels"]
        text, _, repeat = cell["id"].rpartition("|r")
        parsed = Scenario.parse(text)
        assert str(parsed) == text and parsed.cell_id(int(repeat)) == cell["id"]
        assert parsed.name == cell["scenario"] == labels["scenario"]
        assert (parsed.platform, parsed.cpu_config, parsed.processor) == (
            labels["platform"],
            labels["cpu_config"],
            labels["processor"],
        )
        assert str(parsed.scaleup) == str(labels["scaleup"])
        assert parsed.pinned == (labels["cpu_config"] == "pin") == scenario.is_pinned(labels)
        varied += bool(parsed.varies)
    assert varied > 0  # experiments that vary a parameter or a dimension are among them


def test_a_scenario_writes_and_reads_what_it_varies():
    made = Scenario("cn", 2, "pin", "cpu", (("batch_size", "16"), ("storage", "ssd")))
    assert str(made) == "cn/2/pin/cpu|batch_size=16,storage=ssd"
    assert made.name == "cn/2/pin/cpu" and made.variant == "batch_size=16,storage=ssd"
    assert Scenario.parse(str(made)) == made
    assert Scenario.parse("vm/half/vnl/gpu") == Scenario("vm", "half", "vnl", "gpu")
    assert not Scenario.parse("vm/half/vnl/gpu").pinned and made.pinned


@pytest.mark.parametrize("text", ["cn/2/pin", "cn/2/pin/cpu/x", "", "cn//pin/cpu", "cn/2/pin/cpu|steps", None, 3])
def test_what_is_not_a_scenario_is_refused_saying_the_form(text):
    with pytest.raises(ScenarioError, match="PLATFORM/SCALEUP/CPUCFG/PROC|is not KEY=VALUE"):
        Scenario.parse(text)


def comparisons_with(path, literals):
    """The lines of ``path`` where a value is compared with (or looked up in) one of ``literals``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            values = []
            for operand in operands:
                if isinstance(operand, ast.Constant):
                    values.append(operand.value)
                elif isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                    values += [item.value for item in operand.elts if isinstance(item, ast.Constant)]
            if any(value in literals for value in values if isinstance(value, str)):
                found.append(f"{path}:{node.lineno}")
    return found


def test_no_code_compares_a_cpu_config_by_its_name_but_the_scenario():
    sources = [*(REPO / "plugins").rglob("*.py"), *(REPO / "platbench").rglob("*.py")]
    own = REPO / "plugins" / "plugin_utils" / "scenario.py"
    found = [line for path in sources if path != own for line in comparisons_with(path, set(scenario.CPU_CONFIGS))]
    assert found == [], "ask Scenario.pinned (scenario.is_pinned(labels)) instead of comparing cpu_config"


def test_the_guard_finds_a_single_comparison_and_one_in_a_list(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('if labels["cpu_config"] == "pin":\n    pass\nquota = cpu_config in ("vnl", "x")\nok = a == b\n')
    assert comparisons_with(sample, set(scenario.CPU_CONFIGS)) == [f"{sample}:1", f"{sample}:3"]
