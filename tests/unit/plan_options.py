"""Complete cell-plan options for tests: the role's own defaults (roles/platform_run/defaults/main.yml, the one
place each option's default lives), with plain test values where a default is worked out by Ansible."""

from __future__ import annotations

import copy
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


def _folder_spec(kind):
    """The plan_spec.yml of a kind's own folder."""
    return yaml.safe_load((Path(placements.KINDS[kind].folder) / "plan_spec.yml").read_text())


def _optional(section):
    return {**section, "required": False}


def kind_spec(name):
    """The argument spec a plan of kind (or instances placement) ``name`` is checked against, composed as the plans
    are: the keys every plan has (platform_run's argument_specs, &plan_common) with the sections of the kind's
    plan_spec.yml, those of the kinds it holds (``inner``: one of them is there), and of those it ``extends``; an
    instances placement's entry point with the sections it names from their kinds' folders."""
    if name in SPECS:
        spec = copy.deepcopy(SPECS[name])
        options = spec["options"]["platform_run_cell_plan"]["options"]
        for section, kind in (("process", "process"), ("container", "container")):
            if section in options:
                options[section] = _optional(_folder_spec(kind)["options"][section])
        if "guests" in options:  # each guest: the guest kind's section, with the instance's own fields
            options["guests"]["options"] = {
                **_folder_spec("guest")["options"]["guest"]["options"],
                **options["guests"]["options"],
            }
        if "kubernetes" in options:
            options["kubernetes"] = _folder_spec("k8s_job")["options"]["kubernetes"]
        return spec
    base = SPECS["instances"]["options"]["platform_run_cell_plan"]
    options = {key: value for key, value in base["options"].items() if key != "instances"}
    own = _folder_spec(name)
    for inner in placements.KINDS[name].inner:
        options.update({key: _optional(value) for key, value in _folder_spec(inner)["options"].items()})
    for extended in own.get("extends") or ():
        options.update(_folder_spec(extended)["options"])
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


def split_line(command):
    """A runner-host process cell's shell line with a cgroup (placements/process: shell_command) in its parts: the
    directory and what makes and enters the cell's cgroup, the workload's own command, what removes the cgroup."""
    opening, failed, finished = "{ cd ", "; } || { status=$?; echo ", "; status=$?; "
    assert command.startswith(opening) and command.endswith("; exit $status"), command
    head, rest = command.split("; exit $status; }; ", 1)
    workload, leave = rest.rsplit(finished, 1)
    chdir, enter = head[len(opening) : head.index(failed)].split(" && ", 1)
    # A line that could not place the workload removes what it made too, the same way.
    assert head.endswith(leave.removesuffix("; exit $status")), command
    return {"chdir": chdir, "enter": enter, "workload": workload, "leave": leave.removesuffix("; exit $status")}
