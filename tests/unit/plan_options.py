"""Complete cell-plan options for tests: the role's own defaults (roles/platform_run/defaults/main.yml, the one
place each option's default lives), with plain test values where a default is worked out by Ansible."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cellplan, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import OPTIONS

REPO = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = REPO / "roles/platform_run/defaults/main.yml"
DEFAULTS = yaml.safe_load(DEFAULTS_FILE.read_text())
# What the role works out at run time (templated defaults, platform_status's findings), as a test host would have it.
AT_RUN_TIME = {
    "host": "runner",
    "campaign": "c1",
    "image": "platbench/workload:latest",
    "reserved_cpus": [],
    "engines": {"docker": {"answers": True, "version": "26.1.5", "image_id": "sha256:" + "a" * 64}},
    "dataset": None,
    "guest_image": {},
    "gpu_assignment": {},
    "k8s_node": None,
    "sif": {},
    "apptainer_version": None,
    "runners": None,
}


def sized(cell, facts, options=None):
    """``cell`` as cells_to_run hands it to the plan on the options' host: sized there (sizing.sized)."""
    options = options or {}
    return sizing.sized(cell, facts or {}, options.get("reserved_cpus") or [], options.get("host") or "the host")


def cell_plan(cell, facts, options=None):
    """The plan of ``cell`` as the role makes it: sized by cells_to_run first (``sized``), then cellplan.cell_plan.
    A scale-up that does not resolve on the host is cells_to_run's error (sizing.SizingError), raised here."""
    return cellplan.cell_plan(sized(cell, facts, options), facts, options)


def plan_options(**overrides):
    """Every option cell_plan needs, as platbench.lab.platform_run passes them, with ``overrides``."""
    options = {}
    for name, variable in OPTIONS.items():
        value = DEFAULTS.get(variable)
        options[name] = AT_RUN_TIME[name] if name in AT_RUN_TIME or "{{" in str(value) else value
    unknown = set(overrides) - set(OPTIONS)
    assert not unknown, f"not cell_plan options: {unknown}"
    return {**options, **overrides}


SPECS = yaml.safe_load((REPO / "roles/platform_run/meta/argument_specs.yml").read_text())["argument_specs"]


def kind_spec(name):
    """The argument spec a plan of kind (or instances placement) ``name`` is checked against: its entry point's in
    platform_run's argument_specs, or, for a kind kept in a folder of its own, the common keys of every plan with the
    sections of its folder's plan_spec.yml (and those of the kind it ``extends``)."""
    kind = placements.KINDS.get(name)
    if kind is None or kind.folder is None:
        return SPECS[name]
    own = yaml.safe_load((Path(kind.folder) / "plan_spec.yml").read_text())
    # The process entry point's plan is the common keys and its one section, `process`.
    base = SPECS["process"]["options"]["platform_run_cell_plan"]
    options = dict(base["options"])
    if own.get("extends") != "process":
        options.pop("process")
        if own.get("extends"):
            options.update(SPECS[own["extends"]]["options"]["platform_run_cell_plan"]["options"])
    options.update(own["options"])
    return {"options": {"platform_run_cell_plan": {**base, "options": options}}}


# Sections only some plans of a kind have: micro_net's `peer` (a bridge peer), and the inner kind's section of a
# guest or a cloud instance (`process` or `container`; `process` or `job` and `kubernetes`).
WORKLOAD_SECTIONS = {"peer"}
INNER_SECTIONS = {"process": {"process"}, "container": {"container"}, "k8s_job": {"job", "kubernetes"}}


def assert_plan_matches_its_specs(plan, sections=frozenset()):
    spec = kind_spec(plan["placement"])["options"]
    declared = spec["platform_run_cell_plan"]["options"]
    inner = platforms.get(plan["platform"]).inner
    inner_sections = set().union(*INNER_SECTIONS.values()) & set(declared) if inner else set()
    expected = (set(declared) - WORKLOAD_SECTIONS - inner_sections) | set(sections)
    assert set(plan) == expected | (INNER_SECTIONS[inner] if inner else set())
    assert set(sections) <= set(declared)
    result = ArgumentSpecValidator(spec).validate({"platform_run_cell_plan": plan})
    assert result.error_messages == []
