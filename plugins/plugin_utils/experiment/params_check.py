# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Check an experiment's workload parameters against the workload's own parser, at plan time.

Each distinct command line the cells will run is handed to ``python -m workloads.<name> --check-args ...``
on the controller: the workload parses it as it would for a run, and exits 0 (valid) or 2 (invalid,
argparse's message on stderr) without training. So an unknown model or a batch size of 0 stops the
plan before the first cell, with the workload's own words for what is allowed.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys

from ansible_collections.platbench.lab.plugins.plugin_utils.cells.sizing import is_number
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    workloads_of,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import emulated_subset, expand
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.workload_args import (
    WorkloadArgsError,
    flag_of,
    key_of,
    workload_argv,
)

CHECK_FLAG = "--check-args"
PACKAGE = "workloads"
# Where platform_run puts a generated dataset is known only on the host, and the data exists only once
# generated there: the check gets this path, and a refusal that quotes it is not a parameter problem.
DATA_DIR_PLACEHOLDER = "/var/lib/platbench/datasets/plan-check"
CHECK_TIMEOUT = 60
MAX_JOBS = 8
_ARGUMENT_ERROR = re.compile(r"^argument ((?:-{1,2}[\w-]+)(?:/-{1,2}[\w-]+)*): (.*)$", re.S)
_UNRECOGNIZED = re.compile(r"^unrecognized arguments: (.*)$", re.S)
_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def available_workloads(root, package=PACKAGE):
    """The workloads under ``root/package`` (each a package with a ``__main__.py``), sorted."""
    directory = os.path.join(root, package)
    if not os.path.isdir(directory):
        return []
    return sorted(
        name for name in os.listdir(directory) if os.path.isfile(os.path.join(directory, name, "__main__.py"))
    )


def available_generators(root, package=PACKAGE):
    """The dataset generators under ``root/package/datasets`` (its modules but ``base``), sorted."""
    directory = os.path.join(root, package, "datasets")
    if not os.path.isdir(directory):
        return []
    return sorted(
        name[:-3]
        for name in os.listdir(directory)
        if name.endswith(".py") and not name.startswith("_") and name != "base.py"
    )


def workload_runs(experiment):
    """The distinct ``(workload, params)`` the cells run, as placement builds them: the scale-up
    as ``threads``, the cell's params, a generated dataset's ``data_dir``; the cut-down params of
    emulated guests included."""
    cells = expand(experiment)
    if experiment.get("emulated"):
        cells += [cell for cell in emulated_subset(cells, experiment["emulated"]) if cell["labels"].get("emulated")]
    runs = {}
    for cell in cells:
        # A relative scale-up (half...) is a number only on its host: any number checks how the arguments parse.
        scaleup = cell["labels"]["scaleup"]
        params = {"threads": scaleup if is_number(scaleup) else 1, **cell["params"]}
        if experiment.get("dataset") is not None:
            params["data_dir"] = DATA_DIR_PLACEHOLDER
        workload = cell["labels"]["workload"]
        runs.setdefault((workload, *sorted((key, repr(value)) for key, value in params.items())), (workload, params))
    return list(runs.values())


def cell_runs(experiment):
    """The distinct ``params`` of ``workload_runs`` (of every workload)."""
    return [params for _, params in workload_runs(experiment)]


def _last_error(stderr):
    """argparse's ``PROG: error: MESSAGE`` (the message), or the last line of stderr."""
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        if ": error: " in lines[index]:
            return " ".join([lines[index].split(": error: ", 1)[1]] + [line.strip() for line in lines[index + 1 :]])
    return lines[-1].strip() if lines else ""


def _where(key, params, experiment, prefix="params", workload=None):
    """The experiment field a command-line option came from, and its value."""
    own = (experiment.get("workload_params") or {}).get(workload) or {}
    if prefix == "params" and key in own:
        return f"workload_params.{workload}.{key}", params.get(key)
    if prefix == "params" and key == "threads" and "threads" not in experiment.get("params", {}):
        return "scaleup", params.get("threads")
    if prefix == "params" and key == "data_dir" and experiment.get("dataset") is not None:
        return "dataset", (experiment["dataset"] or {}).get("generator")
    return f"{prefix}.{key}", params.get(key)


def describe_refusal(module, stderr, params, experiment, prefix="params", workload=None):
    """``(problems, keys)``: what ``module`` refused (``field: value ...: why``) and the params it blamed.
    No problems when its only complaint is that it has no --check-args. ``prefix``: where params came from;
    ``workload``: the workload whose ``workload_params`` they may come from."""
    error = _last_error(stderr)

    match = _ARGUMENT_ERROR.match(error)
    if match:
        keys = [key_of(flag) for flag in match.group(1).split("/")]
        key = next((key for key in keys if key in params), keys[0])
        where, value = _where(key, params, experiment, prefix, workload)
        return [f"{where}: {value!r} is refused by {module}: {error}"], [key]
    match = _UNRECOGNIZED.match(error)
    if match:
        keys = [key_of(token) for token in match.group(1).split() if token.startswith("--") and token != CHECK_FLAG]
        return [
            f"{_where(key, params, experiment, prefix, workload)[0]}: {module} has no option {flag_of(key)}; "
            f"see `python -m {module} --help`"
            for key in keys
        ], keys
    # A check of the parser's own (parser.error): name the first option it mentions that the cell sets.
    key = next((key_of(flag) for flag in _FLAG.findall(error) if key_of(flag) in params), None)
    if key is None:
        return [f"{prefix}: refused by {module}: {error or 'no message'}"], []
    where, value = _where(key, params, experiment, prefix, workload)
    return [f"{where}: {value!r} is refused by {module}: {error}"], []


def _check(module, leading, params, experiment, prefix, run, workload=None):
    """``(problems, unsupported)`` of one command line. argparse stops at the first bad option, so a
    refused option is left out and the rest checked again, until the parser accepts or blames no option."""
    problems, params = [], dict(params)
    while True:
        command = ["-m", module, CHECK_FLAG, *leading, *workload_argv(params, "")[2:]]
        rc, stderr = run(command)
        if rc == 0:
            return problems, False
        if rc != 2:
            detail = f"exited with {rc}: {_last_error(stderr)}" if rc is not None else stderr
            return problems + [f"{prefix}: could not be checked: `python {' '.join(command)}` {detail}"], False
        if DATA_DIR_PLACEHOLDER in _last_error(stderr):
            # The generated data does not exist yet, on the controller least of all: not a parameter problem.
            return problems, False
        found, keys = describe_refusal(module, stderr, params, experiment, prefix, workload)
        if not keys and "threads" in params and "--threads" in _last_error(stderr):
            # A check of --threads beyond its type compares it with the CPUs here, on the controller;
            # the host's prechecks compare the scale-up with the host's CPUs. Check the rest without it.
            params.pop("threads")
            continue
        problems += found
        if not found or not keys or not set(keys) & set(params):
            return problems, not found
        for key in keys:
            params.pop(key, None)


def _run(command, root, env, timeout):
    try:
        done = subprocess.run(
            command,
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"took more than {timeout} s"
    except OSError as exc:
        return None, str(exc)
    return done.returncode, done.stderr


def check_experiment_params(
    experiment, root, python=sys.executable, env=None, package=PACKAGE, jobs=None, timeout=CHECK_TIMEOUT
):
    """``(problems, warnings)`` of an experiment's workload parameters and dataset arguments.

    ``root``: the directory holding ``package`` (the collection root), the checks' cwd and PYTHONPATH.
    ``python``, ``env``, ``package``: what runs the checks (tests inject a fake workload package).
    Each distinct command line is checked once, in parallel; the problems are deduplicated.
    """
    available = available_workloads(root, package)
    unknown = [workload for workload in workloads_of(experiment) if workload not in available]
    if unknown:
        return [
            f"workload: unknown workload {workload!r}; available: {', '.join(available) or 'none'}"
            for workload in unknown
        ], []
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (root, env.get("PYTHONPATH")) if part)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")

    checks = []  # (module, leading arguments, params, the experiment field they came from, workload)
    for workload, params in workload_runs(experiment):
        try:
            workload_argv(params, workload)
        except WorkloadArgsError as exc:
            return [str(exc)], []
        checks.append((f"{package}.{workload}", [], params, "params", workload))
    problems = []
    dataset = experiment.get("dataset")
    if dataset is not None:
        generators = available_generators(root, package)
        generator = dataset.get("generator")
        if generator not in generators:
            problems.append(
                f"dataset.generator: unknown generator {generator!r}; available: {', '.join(generators) or 'none'}"
            )
        else:
            checks.append(
                (
                    f"{package}.datasets.{generator}",
                    ["--out", DATA_DIR_PLACEHOLDER],
                    dataset.get("args") or {},
                    "dataset.args",
                    None,
                )
            )

    def run(command):
        return _run([python, *command], root, env, timeout)

    jobs = jobs or min(MAX_JOBS, len(checks), os.cpu_count() or 1) or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(lambda check: _check(*check[:3], experiment, check[3], run, check[4]), checks))
    unsupported = []
    for (name, *_), (found, no_check_flag) in zip(checks, outcomes, strict=False):
        problems += found
        if no_check_flag and name not in unsupported:
            unsupported.append(name)
    warnings = [
        f"{name} has no {CHECK_FLAG}: its parser's type and choice checks ran at plan time, "
        "its own further checks did not"
        for name in unsupported
    ]
    return list(dict.fromkeys(problems)), warnings


def checked_params(experiment, source, root, **runner):
    """Raise ExperimentError naming ``source`` with every problem of check_experiment_params; return its
    warnings. ``runner``: ``python``, ``env``, ``package``, ``jobs``, ``timeout`` of check_experiment_params."""
    problems, warnings = check_experiment_params(experiment, root, **runner)
    if problems:
        raise ExperimentError(f"{source}: invalid experiment:\n  - " + "\n  - ".join(problems))
    return warnings
