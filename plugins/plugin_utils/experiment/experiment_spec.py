# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An experiment file, ``experiments/NAME.yml``: found, loaded (a size picked, overrides merged, the emulated
guests' subset narrowed) and validated, every problem named with the field and what to write instead.

What is valid here is what ``matrix.py`` expands into cells: the fields (REQUIRED_FIELDS, OPTIONAL_FIELDS), their
choices, the workloads' parameters and needs (plugins/module_utils/workload_needs.py), the deployment knobs, the
schedule, the instances and an injected overhead.
"""

from __future__ import annotations

import copy
import os
import re

import yaml
from ansible_collections.platbench.lab.plugins.module_utils import platforms, workload_needs
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import cell_labels, inject, scenario, schedule

CPU_CONFIGS, PROCESSORS = scenario.CPU_CONFIGS, scenario.PROCESSORS
# single: one instance; distributed and shared: several (plugins/plugin_utils/cells/several.py).
MODES = ("single", *several.MODES_WITH_INSTANCES)

REQUIRED_FIELDS = ("name", "workload", "platforms", "scaleup", "cpu_config", "processor", "repeats")
OPTIONAL_FIELDS = {
    "description": "",
    "mode": "single",
    "params": {},
    "workload_params": {},
    "dataset": None,
    "emulated": None,
    "sizes": {},
    # Cells with several instances (plugins/plugin_utils/cells/several.py): their count and CPUs, the distributed
    # cells' network paths (a dimension), the shared cells' background job.
    "instances": None,
    "network": None,
    "background": None,
    # Samani 2022's deployment knobs (see _check_deployment): the data directory's storage class, a dimension of
    # the inventory's classes; idle_cores: none gives the instance every host core and leaves none idle.
    "storage": None,
    "idle_cores": None,
    # How the workload reads its data directory (see _check_deployment): a bind mount of the host's directory (what
    # every kind does), or through a read-only overlayfs over it (as from an image layer); a dimension.
    "data_path": None,
    # How a libvirt guest is set up, cumulatively (see _check_deployment): floating vCPUs, then pinned one to one, then
    # huge pages, then virtio devices in place of emulated ones; a dimension of the guests' cells only.
    "guest_setup": None,
    # Deployment dimensions that apply to some platforms only, {FIELD: [platforms]}: the others' cells take the
    # field's first value (platbench explain's rungs of a path: cn's data through overlayfs, the rest bound).
    "only_on": None,
    # numa: spill says the biggest pinned scale-up is meant to cross a NUMA node (plugins/plugin_utils/cells/sizing.py).
    "numa": None,
    # The order the cells run in (plugin_utils/experiment/schedule.py): rounds shuffled per round, or sequential; the
    # seed of the shuffle (absent: one made from the campaign's name, so a resumed campaign keeps its order).
    "schedule": schedule.DEFAULT,
    "schedule_seed": None,
    # A known overhead injected into the cells (plugin_utils/experiment/inject.py): {spin: S} or {cpu_quota: Q}, or a
    # dimension of them.
    "inject": None,
    # The platforms the injection applies to (the others' cells run without it): a known overhead in one rung of a
    # ladder (platbench explain's known-answer check); absent: every platform's cells.
    "inject_into": None,
    # What each platform is compared with in place of bm (plugin_utils/experiment/schedule.py: a ladder of platforms,
    # each beside the one below it in duet pairs); absent: bm.
    "baselines": None,
    # How a process cell on the runner host is placed (placements/process/): in a cgroup of its own, as a
    # container is (the default), or, with none, where the harness is (the report marks it).
    "isolation": "cgroup",
}
ISOLATIONS = ("cgroup", "none")
DATA_PATHS = ("bind", "overlay")
# A libvirt guest's set-up, each value adding to the one before it (placements/guest/).
GUEST_SETUPS = ("floating", "pinned", "hugepages", "virtio")
# The deployment dimensions only_on may limit to some platforms.
ONLY_ON_FIELDS = ("data_path", "guest_setup", "network")
EMULATED_FIELDS = ("scaleup", "cpu_config", "repeats", "params", "workloads", "workload_params")
# Labels every cell carries (cell_labels.py); a workload parameter may not shadow them.
CELL_LABELS = cell_labels.CELL_LABELS
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_EXPERIMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_SCALARS = (str, int, float, bool)


class ExperimentError(ValueError):
    """An experiment file is missing or invalid; the message says where and what to change."""


def available_experiments(experiments_dir):
    """Names of the experiments in ``experiments_dir`` (``NAME.yml`` files), sorted."""
    if not os.path.isdir(experiments_dir):
        return []
    return sorted(
        entry[: -len(".yml")]
        for entry in os.listdir(experiments_dir)
        if entry.endswith(".yml") and not entry.startswith(".")
    )


def deep_merge(base, overrides):
    """``base`` updated by ``overrides``: mappings merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _with_size(data, size, path):
    """``data`` with its named size (``sizes: {small: {overrides}}``) merged in; the sizes themselves dropped."""
    sizes = data.get("sizes") or {}
    if not isinstance(sizes, dict) or not all(isinstance(value, dict) for value in sizes.values()):
        raise ExperimentError(f"{path}: sizes: must map a size name to the fields it overrides, got {sizes!r}")
    if size in (None, ""):
        return {key: value for key, value in data.items() if key != "sizes"}
    if size not in sizes:
        raise ExperimentError(
            f"{path}: unknown size {size!r}; this experiment has "
            + (", ".join(sorted(sizes)) if sizes else "no sizes (it runs at the size its file gives)")
            + " (-e size=NAME, or SIZE=NAME with make)"
        )
    if "sizes" in sizes[size] or "name" in sizes[size]:
        raise ExperimentError(f"{path}: sizes.{size}: may not set name or sizes")
    merged = deep_merge({key: value for key, value in data.items() if key != "sizes"}, sizes[size])
    if "workload" in sizes[size] and "workload_params" in merged:
        # A size of another workload: the file's parameters of the workloads it no longer runs go, as overrides'.
        kept = set(map(str, as_list(merged.get("workload"))))
        merged["workload_params"] = _kept_workload_params(
            merged["workload_params"], sizes[size].get("workload_params"), kept
        )
    return merged


def is_experiment_path(reference):
    """Whether ``reference`` names an experiment file by its path (it ends in .yml or .yaml, or holds a /) rather
    than by its name in the experiments directory."""
    return isinstance(reference, str) and (reference.endswith((".yml", ".yaml")) or "/" in reference)


def experiment_name(reference):
    """The experiment's name: a name as it is, a path's file stem."""
    if is_experiment_path(reference):
        return os.path.basename(reference).rsplit(".", 1)[0]
    return reference


def experiment_file(experiments_dir, reference):
    """``(path, name)`` of the experiment ``reference``: a name finds ``experiments_dir/NAME.yml``; a path (see
    is_experiment_path; relative to the working directory) is taken as it is, and its name is the file's stem, which
    the file's ``name`` field repeats. Raises ExperimentError saying what exists instead."""
    if is_experiment_path(reference):
        path = os.path.abspath(os.path.expanduser(reference))
        if not os.path.isfile(path):
            raise ExperimentError(
                f"experiment file {reference}: no such file ({path}); give an experiment file's path, or the name "
                f"of one in {experiments_dir}"
            )
        return path, experiment_name(path)
    available = available_experiments(experiments_dir)
    if reference not in available:
        raise ExperimentError(
            f"unknown experiment {reference!r} in {experiments_dir}; available: "
            + (", ".join(available) if available else "none (no NAME.yml files there)")
            + "; or give the path of an experiment file (PATH.yml)"
        )
    return os.path.join(experiments_dir, reference + ".yml"), reference


def load_experiment(experiments_dir, reference, overrides=None, size=None):
    """Load the experiment ``reference`` (a name in ``experiments_dir`` or a file's path: experiment_file), merge
    its named ``size`` then ``overrides`` into it, and validate it.

    A size is a set of overrides the file itself names (``sizes: {small: {...}}``): the study's sizes stay
    the file's own fields, and ``-e size=small`` runs a cut-down campaign that anyone can reproduce."""
    path, name = experiment_file(experiments_dir, reference)
    try:
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: expected a mapping of experiment fields, got {type(data).__name__}")
    data = _with_size(data, size, path)
    source = path if size in (None, "") else f"{path} (size {size})"
    if overrides:
        if not isinstance(overrides, dict):
            raise ExperimentError(f"{path}: overrides must be a mapping, got {overrides!r}")
        data = deep_merge(data, overrides)
        source = f"{source} (with overrides {overrides!r})"
        data = _narrowed(data, overrides)
    return validate_experiment(data, source, expected_name=name)


# The emulated subset's fields that pick values of an experiment dimension: field -> that dimension.
_EMULATED_PICKS = {"scaleup": "scaleup", "cpu_config": "cpu_config", "workloads": "workload"}


def _narrowed(data, overrides):
    """``data`` (the file merged with ``overrides``) without the file's settings that applied only to what the
    overrides removed: the ``workload_params`` (top level and emulated) of workloads no longer listed, and the
    values of the emulated subset's ``scaleup``, ``cpu_config`` and ``workloads`` that the overridden dimension
    no longer has (a subset field left with none cuts nothing). What the overrides give themselves is kept as
    given, and validated as strictly as the file's own fields."""
    data = copy.deepcopy(data)
    kept = set(map(str, as_list(data.get("workload"))))
    if "workload" in overrides and "workload_params" in data:
        data["workload_params"] = _kept_workload_params(data["workload_params"], overrides.get("workload_params"), kept)
    # An idle_cores dimension makes its none cells of the all scale-up only: overrides whose scaleup has no all
    # leave the dimension's any cells (the host as it is), as they narrow the emulated subset below.
    idle = data.get("idle_cores")
    narrowed_scaleup = "scaleup" in overrides and "all" not in as_list(data.get("scaleup"))
    if narrowed_scaleup and "idle_cores" not in overrides and isinstance(idle, list):
        data["idle_cores"] = [value for value in idle if value != "none"] or None
    emulated, given = data.get("emulated"), overrides.get("emulated", {})
    if not (isinstance(emulated, dict) and isinstance(given, dict)):
        return data  # none, replaced by the overrides, or not a mapping (validation says so)
    for field, dimension in _EMULATED_PICKS.items():
        if field not in emulated or field in given or dimension not in overrides:
            continue
        offered = as_list(data.get(dimension))
        picked = [value for value in as_list(emulated[field]) if value in offered]
        if picked:
            emulated[field] = picked
        else:
            del emulated[field]
    if "workload" in overrides and "workload_params" in emulated:
        emulated["workload_params"] = _kept_workload_params(
            emulated["workload_params"], given.get("workload_params"), kept
        )
    return data


def _kept_workload_params(workload_params, given, kept):
    """``workload_params`` without the entries of workloads not ``kept``, but for those the overrides ``given``."""
    if not isinstance(workload_params, dict):
        return workload_params
    given = given if isinstance(given, dict) else {}
    return {key: value for key, value in workload_params.items() if key in kept or key in given}


def as_list(value):
    return value if isinstance(value, list) else [value]


def workloads_of(experiment):
    """The workloads of an experiment, as a list (its ``workload`` field is a name or a list of names)."""
    return list(as_list(experiment["workload"]))


def _is_scalar(value):
    return isinstance(value, _SCALARS)


def _check_choices(field, values, allowed, problems):
    if not values:
        problems.append(f"{field}: must name at least one of {', '.join(allowed)}")
    unknown = {repr(value): value for value in values if value not in allowed}  # each named once
    for value in unknown.values():
        problems.append(f"{field}: unknown value {value!r}; allowed: {', '.join(allowed)}")
    if len(set(map(str, values))) != len(values):
        problems.append(f"{field}: {values!r} lists a value twice")


def _check_params(params, problems, field="params"):
    if not isinstance(params, dict):
        problems.append(f"{field}: must be a mapping of workload parameters, got {params!r}")
        return
    for key, value in params.items():
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            problems.append(f"{field}: key {key!r} must be lower_snake_case (it becomes --{key} and a label)")
        elif key in CELL_LABELS:
            problems.append(f"{field}: key {key!r} is reserved for the cell labels {', '.join(CELL_LABELS)}")
        if isinstance(value, list):
            if not value or not all(_is_scalar(item) for item in value):
                problems.append(
                    f"{field}.{key}: a list must hold one or more scalars (string, number, boolean), got {value!r}"
                )
            elif len(set(map(str, value))) != len(value):
                problems.append(f"{field}.{key}: {value!r} lists a value twice")
        elif not _is_scalar(value):
            problems.append(
                f"{field}.{key}: must be a scalar (string, number, boolean) or a list of scalars, got {value!r}"
            )


def _check_workload(workload, problems):
    """``workload``: one lower_snake_case module name, or a non-empty list of distinct ones."""
    shape = "a lower_snake_case module name or a non-empty list of distinct ones"
    names = workload if isinstance(workload, list) else [workload]
    if not names or not all(isinstance(name, str) and _IDENTIFIER.match(name) for name in names):
        problems.append(f"workload: {workload!r} must be {shape}")
        return False
    if len(set(names)) != len(names):
        problems.append(f"workload: {workload!r} lists a workload twice")
        return False
    return True


def _check_workload_params(workload_params, workloads, problems, field="workload_params", scalars_only=False):
    """``{workload: {params}}``: parameters of one listed workload, merged over the shared ``params``."""
    if not isinstance(workload_params, dict):
        problems.append(f"{field}: must map workload names to their parameters, got {workload_params!r}")
        return
    for workload, params in workload_params.items():
        if workloads is not None and workload not in workloads:
            problems.append(
                f"{field}: {workload!r} is not a workload of this experiment ({', '.join(workloads)}); "
                "name one of them or add it to workload"
            )
        elif scalars_only:
            if not isinstance(params, dict) or not all(
                isinstance(key, str) and _IDENTIFIER.match(key) and _is_scalar(value) for key, value in params.items()
            ):
                problems.append(
                    f"{field}.{workload}: must map lower_snake_case parameter names to scalars, got {params!r}"
                )
        else:
            _check_params(params, problems, f"{field}.{workload}")


def _check_needs(experiment, workloads, problems):
    """What each workload needs from its cells (workload_needs): a workload no cell can serve stops the plan."""
    if not all(field in experiment for field in ("platforms", "processor")):
        return
    for workload in workloads:
        problems += workload_needs.plan_problems(workload, experiment["platforms"], experiment["processor"])


def _check_dataset(dataset, params, problems):
    """``dataset: {generator: NAME, args: {...}}`` makes ``python -m workloads.datasets.NAME`` write
    the data once per host; every cell then reads it through ``--data-dir``."""
    if dataset is None:
        return
    if not isinstance(dataset, dict) or set(dataset) - {"generator", "args"}:
        problems.append(f"dataset: must be a mapping with 'generator' and optional 'args', got {dataset!r}")
        return
    generator = dataset.get("generator")
    if not (isinstance(generator, str) and _IDENTIFIER.match(generator)):
        problems.append(
            f"dataset.generator: {generator!r} must name a module of workloads.datasets "
            "(e.g. imagenet, mnist, cifar10, ptb, imdb)"
        )
    args = dataset.get("args", {})
    if not isinstance(args, dict) or not all(
        isinstance(k, str) and _IDENTIFIER.match(k) and _is_scalar(v) for k, v in args.items()
    ):
        problems.append(f"dataset.args: must map lower_snake_case names to scalars, got {args!r}")
    if isinstance(params, dict) and "data_dir" in params:
        problems.append("dataset: give either 'dataset' (generated data) or params.data_dir (your own data), not both")


def _check_emulated(emulated, experiment, problems, workloads=None):
    """``emulated``: the subset of vm/vmcn cells run where guests are emulated (no KVM), e.g.
    ``{scaleup: [2], cpu_config: [pin], repeats: 1, params: {steps: 10}}``; absent = all cells.
    ``workloads``: the experiment's workloads emulated guests run (default: all); ``workload_params``:
    per-workload overrides, applied after ``params``.

    Its scaleup, cpu_config and workloads must pick from the experiment's (where overrides narrowed a
    dimension, load_experiment has already cut the file's own subset to what is left: ``_narrowed``).
    Returns ``emulated`` normalized."""
    if emulated is None:
        return None
    if not isinstance(emulated, dict) or set(emulated) - set(EMULATED_FIELDS):
        problems.append(f"emulated: must be a mapping with any of {', '.join(EMULATED_FIELDS)}, got {emulated!r}")
        return emulated
    emulated = dict(emulated)
    offers = {"scaleup": experiment.get("scaleup", []), "cpu_config": experiment.get("cpu_config", [])}
    if workloads is not None:
        offers["workloads"] = workloads
    for field, offered in offers.items():
        if field in emulated:
            values = as_list(emulated[field])
            kept = [value for value in values if value in offered]
            if not values or len(kept) != len(values):
                problems.append(
                    f"emulated.{field}: {emulated[field]!r} must pick from the experiment's {field} {offered!r}"
                )
    repeats = emulated.get("repeats", 1)
    if not (isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1):
        problems.append(f"emulated.repeats: {repeats!r} must be an integer >= 1")
    params = emulated.get("params", {})
    if not isinstance(params, dict) or not all(
        isinstance(key, str) and _IDENTIFIER.match(key) and _is_scalar(value) for key, value in params.items()
    ):
        problems.append(f"emulated.params: must map lower_snake_case parameter names to scalars, got {params!r}")
    if "workload_params" in emulated:
        _check_workload_params(
            emulated["workload_params"], workloads, problems, "emulated.workload_params", scalars_only=True
        )
    return emulated


IDLE_CORES = ("none",)
# In a list of idle_cores values, `any` is the host as it is (nothing fenced): [any, none] compares the two.
IDLE_CORES_LISTED = ("any", "none")


def _check_deployment(experiment, problems):
    """``storage``: one or more storage class names (the inventory's ``platbench_storage_classes`` says where each
    is; the runner's prechecks check it names them), for a generated ``dataset``. ``idle_cores``: ``none`` (the
    instance gets every core of the host and nothing is left idle beside it), absent, or a list of ``any`` (the host
    as it is) and ``none``: a dimension whose ``none`` cells are made of the ``all`` scale-up only, the one that can
    leave no core idle. Normalised in place."""
    storage = experiment.get("storage")
    if storage is not None:
        storage = experiment["storage"] = as_list(storage)
        if not storage or not all(isinstance(name, str) and _IDENTIFIER.match(name) for name in storage):
            problems.append(
                f"storage: {storage!r} must name one or more storage classes of the inventory "
                "(platbench_storage_classes, e.g. [ssd, hdd]), lower_snake_case"
            )
        elif len(set(storage)) != len(storage):
            problems.append(f"storage: {storage!r} lists a class twice")
        if experiment.get("dataset") is None:
            problems.append(
                "storage: chooses where the generated dataset is written, and this experiment has no 'dataset' "
                "(with params.data_dir, point it at a directory of the class you want instead)"
            )
    data_path = experiment.get("data_path")
    if data_path is not None:
        data_path = experiment["data_path"] = as_list(data_path)
        if (
            not data_path
            or not all(value in DATA_PATHS for value in data_path)
            or len(set(data_path)) != len(data_path)
        ):
            problems.append(
                f"data_path: {data_path!r} must list bind (the host's data directory bound in) and overlay (read "
                "through a read-only overlayfs over it, as from an image layer), each once"
            )
        elif experiment.get("dataset") is None and "data_dir" not in (experiment.get("params") or {}):
            problems.append(
                "data_path: says how the workload reads its data directory, and this experiment has none: give it a "
                "'dataset' or params.data_dir, or drop data_path"
            )
    setups = experiment.get("guest_setup")
    if setups is not None:
        setups = experiment["guest_setup"] = as_list(setups)
        if not setups or not all(value in GUEST_SETUPS for value in setups) or len(set(setups)) != len(setups):
            problems.append(
                f"guest_setup: {setups!r} must list set-ups of a libvirt guest, each once, from "
                f"{', '.join(GUEST_SETUPS)} "
                "(each adds to the one before it: vCPUs floating over the cell's CPUs, pinned one to one, huge pages, "
                "virtio devices in place of emulated SATA and e1000)"
            )
        configs = as_list(experiment.get("cpu_config") or [])
        if not configs or not all(scenario.is_pinned({"cpu_config": config}) for config in configs):
            problems.append("guest_setup: its guests run on the cell's own CPUs: give cpu_config [pin] alone")
        if experiment.get("mode", "single") != "single":
            problems.append("guest_setup: a cell of one guest only (mode single)")
    only_on = experiment.get("only_on")
    if only_on is not None:
        if not isinstance(only_on, dict) or not only_on:
            problems.append(
                f"only_on: {only_on!r} must map dimension fields ({', '.join(ONLY_ON_FIELDS)}) to platforms"
            )
        else:
            planned = experiment.get("platforms") or []
            for field, labels in only_on.items():
                if field not in ONLY_ON_FIELDS:
                    problems.append(f"only_on.{field}: applies to {', '.join(ONLY_ON_FIELDS)} only")
                elif not isinstance(experiment.get(field), list) or len(experiment[field]) < 2:
                    problems.append(f"only_on.{field}: {field} is not a dimension of two values or more")
                if not isinstance(labels, list) or not labels or any(label not in planned for label in labels):
                    problems.append(
                        f"only_on.{field}: {labels!r} must list platforms of the experiment ({', '.join(planned)})"
                    )
    idle = experiment.get("idle_cores")
    if isinstance(idle, list):
        if not idle or not all(value in IDLE_CORES_LISTED for value in idle) or len(set(idle)) != len(idle):
            problems.append(
                f"idle_cores: {idle!r} must list any (the host as it is) and none (no core left idle), each once"
            )
        elif "none" in idle and "all" not in (experiment.get("scaleup") or []):
            problems.append(
                f"idle_cores: {idle!r} makes its none cells of the scale-up all (every core of the host), and scaleup "
                f"{experiment.get('scaleup')!r} has no all: add all to scaleup"
            )
    elif idle is not None and idle not in IDLE_CORES:
        problems.append(
            f"idle_cores: unknown value {idle!r}; allowed: none (the instance gets every core of the host, nothing "
            "is left idle beside it), a list of any and none, or leave the field out"
        )


def _check_scaleup(scaleup, platform_labels, problems):
    """``scaleup``: cores per instance, each a number or relative to the runner host (sizing.py)."""
    wrong = [problem for problem in map(sizing.scaleup_problem, scaleup) if problem]
    if not scaleup or wrong:
        problems.append(
            f"scaleup: {scaleup!r} must be one or more positive integers (cores per instance) or scale-ups relative "
            "to the runner host (all, half, all-but-N with N >= 1)" + (f": {'; '.join(wrong)}" if wrong else "")
        )
    elif len({str(value) for value in scaleup}) != len(scaleup):
        problems.append(f"scaleup: {scaleup!r} lists a value twice")
    remote = [label for label in as_list(platform_labels or []) if label in platforms.REMOTE]
    relative = [value for value in scaleup if sizing.is_relative(value)]
    if remote and relative:
        problems.append(
            f"scaleup: {', '.join(relative)} is relative to the runner host's cores, but the instances of "
            f"{platforms.in_words(remote)} are sized by their flavors, on other hosts: give them numbers "
            "(a separate experiment), or drop the relative scale-ups"
        )


def validate_experiment(data, source="experiment", expected_name=None):
    """Return ``data`` normalized (scalars of the dimension fields made lists, defaults
    filled in), or raise ExperimentError listing every problem, each naming ``source``.

    ``expected_name`` is the file's name, which the ``name`` field must repeat.
    """
    problems = []
    unknown = sorted(set(data) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS), key=str)
    if unknown:
        problems.append(
            f"unknown field(s) {', '.join(map(str, unknown))}; allowed: "
            f"{', '.join(REQUIRED_FIELDS + tuple(OPTIONAL_FIELDS))}"
        )
    missing = [field for field in REQUIRED_FIELDS if field not in data]
    if missing:
        problems.append(f"missing field(s) {', '.join(missing)}")
    experiment = {**copy.deepcopy(OPTIONAL_FIELDS), **copy.deepcopy(data)}
    for field in ("platforms", "scaleup", "cpu_config", "processor"):
        if field in experiment:
            experiment[field] = as_list(experiment[field])

    name = data.get("name")
    if "name" in data and not (isinstance(name, str) and _EXPERIMENT_NAME.match(name)):
        problems.append(f"name: {name!r} must be lower-case letters, digits, - and _")
    workloads = None
    if "workload" in data and _check_workload(data["workload"], problems):
        workloads = workloads_of(experiment)
    if expected_name is not None and "name" in data and data["name"] != expected_name:
        problems.append(f"name: {data['name']!r} must match the file name {expected_name!r}")
    if not isinstance(experiment["description"], str):
        problems.append(f"description: must be a string, got {experiment['description']!r}")
    if "platforms" in experiment:
        _check_choices("platforms", experiment["platforms"], platforms.LABELS, problems)
    for field, allowed in (("cpu_config", CPU_CONFIGS), ("processor", PROCESSORS)):
        if field in experiment:
            _check_choices(field, experiment[field], allowed, problems)
    if "scaleup" in experiment:
        _check_scaleup(experiment["scaleup"], experiment.get("platforms"), problems)
    if experiment["numa"] is not None and experiment["numa"] not in sizing.NUMA_INTENTS:
        problems.append(
            f"numa: {experiment['numa']!r} is unknown; numa: spill says the biggest pinned scale-up is meant to "
            "cross a NUMA node (pinned CPUs always fill a node, then spill to the next); leave it out otherwise"
        )
    if experiment["mode"] not in MODES:
        problems.append(f"mode: unknown value {experiment['mode']!r}; allowed: {', '.join(MODES)}")
    several.check_experiment(experiment, problems)
    repeats = experiment.get("repeats")
    if "repeats" in data and not (isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1):
        problems.append(f"repeats: {repeats!r} must be an integer >= 1")
    _check_params(experiment["params"], problems)
    _check_workload_params(experiment["workload_params"], workloads, problems)
    _check_dataset(experiment["dataset"], experiment["params"], problems)
    _check_deployment(experiment, problems)
    problems.extend(schedule.problems(experiment["schedule"], experiment["schedule_seed"]))
    if experiment["isolation"] not in ISOLATIONS:
        problems.append(
            f"isolation: unknown value {experiment['isolation']!r}; allowed: cgroup (each process cell in a cgroup of "
            "its own, as a container: the default) or none (where the harness is; the report marks it)"
        )
    inject_problems = inject.problems(experiment["inject"])
    problems.extend(inject_problems)
    if "platforms" in experiment and not inject_problems:
        takes_quota = {
            label: platforms.get(label).kind in placements.TAKES_QUOTA
            for label in experiment["platforms"]
            if label in platforms.LABELS
        }
        problems.extend(inject.platform_problems(experiment["inject"], takes_quota))
    if "workload" in experiment and not inject_problems:
        for workload in workloads_of(experiment):
            problems.extend(inject.workload_problems(experiment["inject"], workload))
    problems.extend(inject.into_problems(experiment["inject_into"], experiment["inject"], experiment.get("platforms")))
    problems.extend(schedule.baselines_problems(experiment["baselines"], experiment.get("platforms")))
    experiment["emulated"] = _check_emulated(experiment["emulated"], experiment, problems, workloads)
    if workloads is not None:
        _check_needs(experiment, workloads, problems)

    if problems:
        problems = list(dict.fromkeys(problems))  # two checks may find the same thing: it is said once
        raise ExperimentError(f"{source}: invalid experiment:\n  - " + "\n  - ".join(problems))
    return experiment
