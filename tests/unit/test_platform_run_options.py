"""Each option of a cell plan is declared once: fed by one role variable with one default, and everything that
names it (cellplan.OPTIONS, vars/main.yml, defaults/main.yml, the argument specs) agrees."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import OPTIONAL, OPTIONS

ROLE = Path(__file__).resolve().parents[2] / "roles/platform_run"
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
MAPPING = yaml.safe_load((ROLE / "vars/main.yml").read_text())["platform_run_plan_options"]
MAIN = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
CAPABILITIES = (ROLE / "tasks/capabilities.yml").read_text()
# Set at run time by tasks/capabilities.yml from what the host reports, not by the user.
FOUND = {"platform_run_engines", "platform_run_guest", "platform_run_sif", "platform_run_apptainer_version"}
FOUND |= {"platform_run_k8s_node_name"}


def test_vars_pass_every_option_from_its_one_variable():
    assert list(MAPPING) == list(OPTIONS)
    for option, variable in OPTIONS.items():
        assert MAPPING[option] == "{{ %s }}" % variable, option


def test_every_user_variable_has_one_default_and_its_argument_spec_agrees():
    for option, variable in OPTIONS.items():
        if variable == "inventory_hostname" or variable in FOUND:
            continue
        assert variable in DEFAULTS, f"{variable} (option {option}) has no default in defaults/main.yml"
        assert variable in MAIN, f"{variable} (option {option}) is not in the main entry point's argument specs"
        default = DEFAULTS[variable]
        if "{{" not in str(default):
            assert MAIN[variable].get("default") == default, variable


def test_what_the_host_reports_is_set_by_the_capabilities_and_nowhere_defaulted():
    for variable in FOUND:
        assert re.search(rf"^\s+{variable}:", CAPABILITIES, re.M), variable
        assert variable not in DEFAULTS


def test_optional_options_are_options():
    assert set(OPTIONAL) <= set(OPTIONS)


def test_no_registered_result_shadows_a_role_variable():
    # A task's `register` outranks the role's defaults: registering under an option's variable would hand the plan
    # a module result instead of the option (a dataset's stat result once replaced the experiment's dataset).
    registered = {
        name
        for path in (ROLE / "tasks").glob("*.yml")
        for name in re.findall(r"^\s*register:\s*(\w+)\s*$", path.read_text(), flags=re.MULTILINE)
    }
    assert registered and not registered & (set(DEFAULTS) | set(OPTIONS.values()))
