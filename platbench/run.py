"""Run an experiment: plan it here, then drive playbooks/experiment.yml through ansible-runner and follow it.

The experiment (a name in experiments/, or any experiment file's path) is planned in this process, once (load,
validate, check the workload parameters, expand): bad input stops here with its message alone, before any host is
touched. The plan is written to the campaign's plan file (results/CAMPAIGN/plan.json, plugin_utils/experiment/
plan_file.py), which the playbook executes without planning again. Then the playbook runs; its events drive a line
per cell (i/N, the cell, its time, the ETA per platform kind) and a closing summary. Exit status: 0 every cell ok (or
skipped by design; or none left to run in a resumed campaign), 1 a cell or the playbook failed, 2 bad input, no host can
run any cell of the plan, or another run holds the campaign (its lock, platbench/campaign_lock.py), 130 Ctrl-C, 143
SIGTERM (after the running cell is stopped and cleaned up: rerun the same command, same --campaign, to resume). A run
that finds the campaign left by a run that died (SIGKILL, a crashed controller) first stops what is left of it and
removes the cells' leftovers (teardown.yml).

With ``--precision P`` the run goes on until the answer is decided (platbench/decide.py): after each pass it reads
the comparisons the report prints first and adds rounds (``--repeats``, the same campaign resumed) until every ratio's
interval is within ±P, every budget is decided, or ``--max-time`` is spent; the summary says which.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import ansible_runner
import yaml

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    EMULATED_FIELDS,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    ExperimentError,
    experiment_name,
    is_experiment_path,
    load_experiment,
    workloads_of,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.inject import KNOBS as INJECT_KNOBS
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import read_samples
from ansible_collections.platbench.lab.workloads.common.args import positive_int

from platbench import budgets, campaign_lock, decide, quiet
from platbench.campaign import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    SAMPLES_FILE,
    Campaign,
    SamplesTail,
    human,
)
from platbench.processes import kill_sessions, process_table, sessions_below
from platbench.progress import display_for
from platbench.report.command import table_so_far

REPO = Path(__file__).resolve().parent.parent
PLAYBOOK = REPO / "playbooks" / "experiment.yml"
TEARDOWN = REPO / "playbooks" / "teardown.yml"
EXPERIMENTS = REPO / "experiments"
INVENTORY = REPO / "inventories" / "local"
RESULTS = REPO / "results"
ANSIBLE_LOG = "ansible.log"  # Ansible's own output of each run, next to the samples
# How often the display moves and a Ctrl-C is acted on; the waits between block. No faster: this loop is the harness,
# and it shares the CPUs of the cells it runs (module_utils/quiet.py).
POLL_SECONDS = 1.0
MAX_EVENT_CHARS = 256 * 1024 * 1024  # the biggest task result handed over whole (see _ansible_environment)
DEFAULT_MAX_TIME = "60m"  # run until decided, at most this long unless --max-time says otherwise
# What ends a run until decided before its time (--until): the precision or every budget decided; the precision alone.
UNTIL = ("either", "precision")
_CAMPAIGN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

# What --set may set: the experiment's fields (experiment_spec.py), mappings by their keys. An UPPER-CASE key stands
# for any name (a workload parameter, a workload); None: a value (a scalar or a list).
_PARAMS = {"NAME": None}
_WORKLOAD_PARAMS = {"WORKLOAD": {"NAME": None}}
_MAPPINGS = {
    "params": _PARAMS,
    "workload_params": _WORKLOAD_PARAMS,
    "dataset": {"generator": None, "args": _PARAMS},
    "background": {"workload": None, "params": _PARAMS, "settle": None},
    "baselines": {"PLATFORM": None},
    "only_on": {"FIELD": None},
    "inject": dict.fromkeys(INJECT_KNOBS),
    "emulated": {
        field: {"params": _PARAMS, "workload_params": _WORKLOAD_PARAMS}.get(field) for field in EMULATED_FIELDS
    },
}
_NOT_SET = ("name", "sizes")  # the file's own: its name, and the sizes --size picks from
SET_KEYS = {field: _MAPPINGS.get(field) for field in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS) if field not in _NOT_SET}
# The mappings that --set may also give whole, as a list: inject is one injection (inject.discard=0.2) or a dimension
# of them (inject=[none, {discard: 0.5}]).
_WHOLE_OR_KEYS = ("inject",)
# The options that set a field themselves, and the extra variables they own.
_OPTION_FIELDS = {"platforms": "--platforms", "workload": "--workloads", "repeats": "--repeats"}
# The plan file the playbook executes (plan_file.py; playbooks/experiment.yml).
PLAN_FILE_VAR = "platbench_plan_file"
_RESERVED_VARS = ("experiment", "campaign", "experiment_overrides", "size", "platbench_results_dir", PLAN_FILE_VAR)


class UsageError(Exception):
    """Bad input: its message is all that is printed, and the exit status is 2."""


def add_arguments(parser):
    parser.add_argument(
        "experiment",
        help="an experiment of experiments/ (its file name without .yml), or the path of an experiment file (PATH.yml)",
    )
    parser.add_argument(
        "--campaign",
        help="the campaign's name, results/CAMPAIGN (default: EXPERIMENT-YYYYmmdd-HHMMSS); "
        "an existing campaign is resumed: the cells it holds are not run again",
    )
    parser.add_argument("--size", default="", help="a size the experiment names in its `sizes` field, e.g. small")
    parser.add_argument(
        "--platforms", type=_names, help="run only these of the experiment's platforms, comma-separated: bm,cn"
    )
    parser.add_argument(
        "--workloads", type=_names, help="run only these of the experiment's workloads, comma-separated"
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a field of the experiment, dotted keys into it (params.steps=10, scaleup=[1,2], "
        "emulated.repeats=1); the value is YAML (a scalar or a list); repeatable",
    )
    parser.add_argument("--repeats", type=positive_int, help="repeats of every scenario")
    parser.add_argument(
        "--inventory", "-i", default=str(INVENTORY), help="the lab's inventory (default: inventories/local)"
    )
    parser.add_argument(
        "--results-dir",
        default=str(RESULTS),
        help="where campaigns are written, DIR/CAMPAIGN/samples.jsonl (default: results/ of this repository)",
    )
    parser.add_argument(
        "--extra-vars",
        "-e",
        dest="extra_vars",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Ansible variable for the playbook (e.g. openstack_instances_cloud=CLOUD, "
        "platform_run_skip_unavailable=true); the value is YAML; repeatable",
    )
    parser.add_argument(
        "--budgets",
        metavar="FILE",
        help='a budgets file (docs/src/reading-a-report.md "Budgets") to check against the plan before any cell: bad '
        "budgets are refused; `platbench report --budgets FILE` gives their verdicts",
    )
    parser.add_argument(
        "--hosts",
        type=_names,
        help="run the cells on these runner hosts of the inventory only, comma-separated (Ansible's --limit)",
    )
    parser.add_argument(
        "--precision",
        type=float,
        metavar="P",
        help="run until decided: add rounds until every ratio to bm's 95%% interval is within ±P (0.02: ±2%%), "
        "every budget is decided, or --max-time is spent",
    )
    parser.add_argument(
        "--max-time",
        metavar="DURATION",
        help=f"with --precision: the campaign's time at most (90s, 30m, 1h30m; default {DEFAULT_MAX_TIME})",
    )
    parser.add_argument(
        "--until",
        choices=UNTIL,
        help="with --precision: what ends the run before --max-time: the precision or every budget of --budgets "
        "decided (either, the default), or the precision alone (precision: a budget decided on a wide interval does "
        "not stop it; the verdicts are still reported)",
    )
    parser.set_defaults(handler=main)


def _names(text):
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: give names separated by commas, e.g. bm,cn")
    return names


# -- input -> the playbook's variables ----------------------------------------------------------------------


def allowed_set_keys(shape=None, prefix=""):
    """The keys --set takes, as the user writes them (``params.NAME``, ``emulated.repeats``...)."""
    keys = []
    for key, below in (SET_KEYS if shape is None else shape).items():
        name = prefix + key
        keys += [name] if below is None else allowed_set_keys(below, name + ".")
    return keys


def _parse_value(option, text):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{option}: the value is not valid YAML: {str(exc).splitlines()[0]}") from None


def parse_setting(text):
    """``KEY=VALUE`` of --set: ``(path, value)``, the key checked against the experiment's fields."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise UsageError(f"--set {text}: give KEY=VALUE, e.g. --set params.steps=10")
    path, shape = key.split("."), SET_KEYS
    for depth, part in enumerate(path):
        placeholders = [name for name in shape if name.isupper()]
        if part in shape and not part.isupper():
            below = shape[part]
        elif placeholders and part:
            below = shape[placeholders[0]]
        else:
            raise UsageError(
                f"--set {text}: unknown key {key!r}; allowed keys: {', '.join(allowed_set_keys())} "
                "(UPPER-CASE parts stand for any name)"
            )
        if below is None and depth < len(path) - 1:
            field = ".".join(path[: depth + 1])
            raise UsageError(f"--set {text}: {field} is a value, it has no key {path[depth + 1]!r}")
        shape = below
    if shape is not None and key not in _WHOLE_OR_KEYS:
        wanted = ", ".join(allowed_set_keys(shape, key + "."))
        raise UsageError(f"--set {text}: {key} is a mapping; set its keys one by one: {wanted}")
    parsed = _parse_value(f"--set {text}", value)
    if isinstance(parsed, dict):
        raise UsageError(f"--set {text}: the value must be a scalar or a list, not a mapping")
    return path, parsed


def build_overrides(args, file_experiment=None):
    """``experiment_overrides`` from --platforms, --workloads, --repeats and --set; ``file_experiment``: the
    experiment as its file (and --size) gives it, which --platforms and --workloads must pick from."""
    overrides, given = {}, {}
    for text in args.settings:
        path, value = parse_setting(text)
        dotted = ".".join(path)
        if dotted in given:
            raise UsageError(f"--set {text}: {dotted} is already set by --set {given[dotted]}")
        for other in given:  # inject whole and inject.discard: one or the other
            if other.startswith(dotted + ".") or dotted.startswith(other + "."):
                raise UsageError(f"--set {text}: {other} is already set by --set {given[other]}: give one of the two")
        given[dotted] = text
        target = overrides
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    options = {"platforms": args.platforms, "workload": args.workloads, "repeats": args.repeats}
    for field, value in options.items():
        if value is None:
            continue
        if field in overrides:
            raise UsageError(f"{_OPTION_FIELDS[field]} and --set {given[field]} both set {field}: give one")
        overrides[field] = value
    if file_experiment is not None:
        name = file_experiment["name"]
        for field, wanted, offered in (
            ("platforms", args.platforms, file_experiment["platforms"]),
            ("workloads", args.workloads, workloads_of(file_experiment)),
        ):
            foreign = [value for value in wanted or [] if value not in offered]
            if foreign:
                raise UsageError(
                    f"--{field} {','.join(wanted)}: experiment {name} does not list "
                    f"{', '.join(foreign)}; its {field}: {', '.join(map(str, offered))} "
                    f"(--set {'workload' if field == 'workloads' else field}=[...] replaces the list instead)"
                )
    return overrides


def extra_vars(items):
    """``-e KEY=VALUE`` as a mapping, the variables the options own refused."""
    variables = {}
    for text in items:
        key, equals, value = text.partition("=")
        if not equals or not key.isidentifier():
            raise UsageError(f"-e {text}: give KEY=VALUE with an Ansible variable name as KEY")
        if key in _RESERVED_VARS:
            raise UsageError(f"-e {text}: {key} is set by platbench run itself (see its options)")
        variables[key] = _parse_value(f"-e {text}", value)
    return variables


def prepare(args):
    """Check the input and plan the experiment: ``(plan, warnings, extravars)``. Raises UsageError."""
    if is_experiment_path(args.experiment):  # the playbook, the rerun command and the record name it absolutely
        args.experiment = os.path.abspath(os.path.expanduser(args.experiment))
    args.campaign = args.campaign or f"{experiment_name(args.experiment)}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not _CAMPAIGN_NAME.match(args.campaign):
        raise UsageError(f"--campaign {args.campaign}: use letters, digits, '.', '_' and '-' (a directory name)")
    _check_until_decided(args)
    variables = extra_vars(args.extra_vars)
    if cell_timeout.SETTING in variables:
        for problem in cell_timeout.problems(variables[cell_timeout.SETTING], f"-e {cell_timeout.SETTING}"):
            raise UsageError(problem)
    try:
        file_experiment = None
        if args.platforms or args.workloads:
            file_experiment = load_experiment(str(EXPERIMENTS), args.experiment, None, args.size or None)
        overrides = build_overrides(args, file_experiment)
        plan, warnings = plan_experiment(
            str(EXPERIMENTS), args.experiment, overrides, args.size or None, campaign=args.campaign
        )
    except ExperimentError as exc:
        raise UsageError(str(exc)) from None
    if args.budgets:
        try:
            budgets.check_experiment(budgets.load(args.budgets), plan, args.budgets)
        except budgets.BudgetError as exc:
            raise UsageError(str(exc)) from None
    if "," not in args.inventory and not Path(args.inventory).exists():
        raise UsageError(f"--inventory {args.inventory}: no such file or directory")
    variables.update(
        experiment=args.experiment,
        campaign=args.campaign,
        platbench_results_dir=str(Path(args.results_dir).resolve()),
    )
    if overrides:
        variables["experiment_overrides"] = overrides
    if args.size:
        variables["size"] = args.size
    return plan, warnings, variables


def keep_plan(args, plan, extravars):
    """Write the pass's plan to the campaign's plan file (plan_file.py), which the playbook executes, and return the
    extra variables that hand it over. A plan file an earlier pass or run of the campaign wrote must plan every cell
    the campaign measured alike: a pass that only adds rounds passes, an edited experiment is refused (UsageError)
    before a cell of it mixes with the campaign's; the cells that failed or never ran are planned anew."""
    directory = Path(extravars["platbench_results_dir"]) / args.campaign
    path = plan_file.path_in(directory)
    if os.path.exists(path):
        try:
            planned, _ = plan_file.read(path)
        except plan_file.PlanFileError as exc:
            raise UsageError(f"{exc}; move it away to plan the campaign again") from None
        samples = directory / SAMPLES_FILE
        measured = {
            sample.labels.get("cell")
            for sample in (read_samples(samples) if samples.is_file() else [])
            if sample.metric != "failed"
        }
        changed = plan_file.changed_cell(planned, plan, measured)
        if changed:
            raise UsageError(
                f"{plan['experiment_file']['path']} is planned otherwise than campaign {args.campaign} was "
                f"({path}): {changed}; another pass would mix cells of both in results/{args.campaign}. Restore the "
                "file and rerun the same command (the campaign resumes), or run the new version as a campaign of "
                "its own (--campaign NEW)"
            )
    directory.mkdir(parents=True, exist_ok=True)
    plan_file.write(path, plan, args.campaign)
    return {**extravars, PLAN_FILE_VAR: path}


def _limit(hosts):
    """ansible-runner's limit for --hosts: those runner hosts, and the controller's own plays (localhost)."""
    return ",".join(["localhost", *hosts]) if hosts else None


def _check_until_decided(args):
    """--precision and --max-time: refused before anything runs, naming the option."""
    precision, max_time = getattr(args, "precision", None), getattr(args, "max_time", None)
    if precision is None:
        if max_time is not None:
            raise UsageError(f"--max-time {max_time}: it bounds a run until decided; give --precision too")
        if getattr(args, "until", None) is not None:
            raise UsageError(f"--until {args.until}: it says what ends a run until decided; give --precision too")
        return
    problem = decide.precision_problem(precision)
    if problem:
        raise UsageError(problem)
    try:
        args.max_seconds = decide.parse_duration(max_time or DEFAULT_MAX_TIME)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if any(setting.partition("=")[0] == "repeats" for setting in args.settings):
        raise UsageError("--precision adds rounds through --repeats: give the first rounds with --repeats, not --set")


def _until_decided(args, code, plan, lock, kept, started, out, err):
    """Add rounds to the campaign until it is decided (decide.state) or the time is spent; each pass resumes the
    campaign with more repeats, so only the new rounds run. Returns the exit status of the last pass."""
    stated = budgets.load(args.budgets) if args.budgets else None
    directory = Path(args.results_dir).resolve() / args.campaign
    repeats = plan["repeats"]
    # `platbench reproduce` decides by its findings' relations instead (reproduce/command.py): a decide.State and
    # its line, ``precise`` once every finding of the campaign is settled.
    judge = getattr(args, "judge", None)
    while code == EXIT_OK:
        if judge is not None:
            current, line = judge(directory)
            print(f"until decided: {line}", file=out)
        else:
            current = decide.state(directory, args.precision, stated, args.budgets or "budgets")
            print(f"until decided: {decide.describe(current, args.precision)}", file=out)
        if current.precise:
            if judge is None:
                print(f"until decided: every ratio to bm is within ±{args.precision:.1%}: decided", file=out)
            return code
        if current.budgets_decided and getattr(args, "until", None) != "precision":
            print("until decided: every budget is decided (pass or fail)", file=out)
            return code
        left = args.max_seconds - (time.monotonic() - started)
        add = decide.rounds_to_add(current, left)
        if add < 1:
            described = line if judge is not None else decide.describe(current, args.precision)
            print(
                f"until decided: the time is spent (--max-time {human(args.max_seconds)}): undecided; {described}",
                file=out,
            )
            return code
        repeats += add
        args.repeats = repeats
        try:
            plan, warnings, extravars = prepare(args)
            extravars = keep_plan(args, plan, extravars)
        except UsageError as exc:
            print(f"until decided: {exc}", file=err)
            return EXIT_BAD_INPUT
        for warning in warnings:
            print(f"warning: {warning}", file=err)
        print(f"until decided: adding {add} round(s), {repeats} in all", file=out)
        code = _run(args, plan, extravars, lock, kept, out, err)
    return code


# -- driving ansible-runner ---------------------------------------------------------------------------------


class Interrupts:
    """SIGINT and SIGTERM counted instead of raised, so that the loops stop the run in order."""

    def __init__(self):
        self.count, self.first, self._previous = 0, None, {}

    def __enter__(self):
        for number in (signal.SIGINT, signal.SIGTERM):
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        return False

    def _handle(self, number, frame):
        self.count += 1
        self.first = self.first or number

    @property
    def exit_code(self):
        return EXIT_INTERRUPTED if self.first in (None, signal.SIGINT) else 128 + self.first

    @property
    def what(self):
        """How the run ended, as its messages begin: ``interrupted`` (Ctrl-C), ``stopped by SIGTERM``."""
        return "interrupted" if self.first in (None, signal.SIGINT) else f"stopped by {signal.Signals(self.first).name}"


def _ansible_environment():
    venv_bin = str(Path(sys.executable).parent)  # where ansible-playbook is, also when the venv is not active
    return {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        # ansible-runner's event plugin replaces a result bigger than MAX_EVENT_RES characters (700,000 by
        # default) with {}: a cell of many steps records more than that (its per-step times), and a big plan's
        # platform_run_selection may too. The samples file stays the backstop for the cells (Campaign.observe).
        "MAX_EVENT_RES": str(MAX_EVENT_CHARS),
    }


def _inventory(inventory):
    """ansible-runner's ``inventory``: a list (a string would be taken for inventory text when it is no path
    below its private directory), the path made absolute (the playbook runs in the repository)."""
    inventory = str(inventory)
    return [inventory if "," in inventory else str(Path(inventory).resolve())]


def drive(playbook, inventory, extravars, private_dir, on_event=None, stop=lambda: False, tick=None, limit=None):
    """Run ``playbook`` through ansible-runner, each event handed to ``on_event`` in this thread, ``tick``
    called between events. Once ``stop()`` is true, the run is cancelled and every process it left on the
    controller is stopped. Returns ``(runner, stopped)``."""
    Path(private_dir).mkdir(parents=True, exist_ok=True)
    events = queue.Queue()
    cancel = threading.Event()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(private_dir),
        project_dir=str(REPO),
        playbook=str(playbook),
        inventory=_inventory(inventory),
        extravars=extravars,
        **({"limit": limit} if limit else {}),
        envvars=_ansible_environment(),
        quiet=True,
        event_handler=lambda event: _queued(events, event),
        cancel_callback=cancel.is_set,
        # pexpect's read of the playbook's output blocks up to this long between lines: no faster than the loop below.
        settings={"pexpect_timeout": POLL_SECONDS, "suppress_ansible_output": True},
    )
    playbook_pid, sessions = None, None
    while thread.is_alive() or not events.empty():
        if not cancel.is_set() and stop():
            # Read before the playbook dies: its workers' sessions are found through it.
            sessions = sessions_below(playbook_pid or os.getpid())
            cancel.set()
        try:
            event = events.get(timeout=POLL_SECONDS)
        except queue.Empty:
            event = None
        if event is not None:
            playbook_pid = playbook_pid or event.get("pid")
            if on_event:
                on_event(event)
        if tick:
            tick()
    thread.join()
    if sessions is not None:
        kill_sessions(sessions)
    return runner, sessions is not None


def _queued(events, event):
    events.put(event)
    return False  # handed over in memory: ansible-runner need not write it to disk


def _output(runner):
    """What ansible-playbook printed (ansible-runner keeps it in its artifacts); "" when it wrote nothing."""
    try:
        return (Path(runner.config.artifact_dir) / "stdout").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _keep_log(results_dir, campaign, text):
    directory = Path(results_dir) / campaign
    if not text or not directory.is_dir():
        return None
    path = directory / ANSIBLE_LOG
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(f"# platbench run, {time.strftime('%Y-%m-%d %H:%M:%S')}\n{text}\n")
    except OSError as exc:  # a full disk: the campaign's outcome is still told
        print(f"warning: Ansible's output was not kept in {path}: {exc}", file=sys.stderr)
        return None
    return path


def rerun_command(args):
    """The command line that resumes this campaign: the one given, with --campaign when it had none."""
    argv = list(getattr(args, "argv", None) or [args.experiment])
    if not any(arg == "--campaign" or arg.startswith("--campaign=") for arg in argv):
        argv += ["--campaign", args.campaign]
    return shlex.join(["platbench", "run", *argv])


def _teardown(args, extravars, interrupts, what, out):
    """teardown.yml with the run's inventory and variables: it removes the cells' containers, guests, network paths
    and fences and stops their workload processes. A second Ctrl-C (or the first, when ``interrupts`` counted none
    before) abandons it. Returns True once it removed everything; ``what`` begins its messages."""
    teardown_vars = {key: value for key, value in extravars.items() if key not in _RESERVED_VARS}
    before = interrupts.count
    with tempfile.TemporaryDirectory(prefix="platbench-teardown-") as private:
        runner, stopped = drive(
            TEARDOWN, args.inventory, teardown_vars, private, stop=lambda: interrupts.count > before
        )
        if stopped:
            print(
                f"{what} during the cleanup: leftovers may remain; remove them with "
                f"`ansible-playbook -i {shlex.quote(str(args.inventory))} playbooks/teardown.yml`, then rerun "
                f"`{rerun_command(args)}` to resume",
                file=out,
            )
            return False
        if runner.rc != 0:
            print(f"teardown.yml failed (rc {runner.rc}); its output ends with:", file=out)
            print("\n".join(_output(runner).strip().splitlines()[-10:]), file=out)
            return False
    return True


def _cleanup(args, campaign, interrupts, running, extravars, out):
    """After the run was cancelled (its controller processes already stopped): teardown.yml removes what the
    running cell left. A second Ctrl-C abandons it. Returns True once everything was removed."""
    cells = ", ".join(f"{cell} on {host}" if len(campaign.hosts) > 1 else cell for _, cell, host, _ in running)
    what = interrupts.what
    print(f"{what}: stopping {cells or 'the run'} and cleaning up (Ctrl-C again skips the cleanup) ...", file=out)
    cleaned = _teardown(args, extravars, interrupts, what, out)
    if cleaned:
        done = f"cell {cells}" if cells else "the run (no cell had started)"
        print(f"{what}: cleaned up {done}; rerun the same command to resume: {rerun_command(args)}", file=out)
    return cleaned


def _command_line(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _stop_dead_runs_playbook(record):
    """Stop what the ansible-playbook of a run that died left running: the playbook itself when only the run was
    killed, and the workers it forked (each in a session of its own, with the workload it runs) also when the
    playbook was killed too. They are the processes whose command line names the run's private directory, which
    ansible-runner hands the playbook; the run's tick left them unrecorded. Returns the pids stopped."""
    private = record.get("private_dir")
    if not isinstance(private, str) or not private.startswith(tempfile.gettempdir()):
        return []
    table = process_table()
    found = [pid for pid in table if private in _command_line(pid) and "ansible" in _command_line(pid)]
    sessions = set()
    for pid in found:
        sessions |= sessions_below(pid, table)
    stopped = kill_sessions(sessions) if sessions else []
    shutil.rmtree(private, ignore_errors=True)  # its TemporaryDirectory was never cleaned up
    return stopped


def _after_a_dead_run(args, lock, extravars, interrupts, out):
    """The campaign's lock file was left by a run that died (killed with SIGKILL, its controller crashed): stop its
    playbook if it runs on, and remove the leftovers of its cell with teardown.yml. Returns True when done."""
    print(
        f"the last run of campaign {args.campaign} ({campaign_lock.describe(lock.stale)}) ended without cleaning up: "
        "it was killed or its controller stopped. Stopping what it left running and removing its leftovers "
        "(teardown.yml) before resuming ...",
        file=out,
    )
    stopped = _stop_dead_runs_playbook(lock.stale)
    if stopped:
        print(f"stopped the {len(stopped)} processes its ansible-playbook left running", file=out)
    if not _teardown(args, extravars, interrupts, "interrupted", out):
        return False
    print(f"removed what the last run left; resuming campaign {args.campaign}", file=out)
    return True


def cut_writes(samples_path):
    """Warnings for the lines of the campaign's samples file that a crash cut short (they are skipped, and their
    cells run again): ``[line, ...]``."""
    if not Path(samples_path).is_file():
        return []
    warnings, rests = [], []

    def bad_line(number, line):
        warnings.append(
            f"{samples_path} line {number} is no whole sample (a write cut short by a crash?): skipped "
            f"({line[:80]!r}{'...' if len(line) > 80 else ''})"
        )

    def cut_write(numbers, cell):
        lines = f"line {numbers[0]}" if len(numbers) == 1 else f"lines {numbers[0]}-{numbers[-1]}"
        rests.append(
            f"{samples_path} {lines}: the rest of cell {cell}'s samples, whose write was cut short: skipped; "
            "that cell runs again"
        )

    try:
        read_samples(samples_path, on_bad_line=bad_line, on_cut_write=cut_write)
    except OSError as exc:
        warnings.append(f"{samples_path} cannot be read: {exc}")
    return warnings + rests


def main(args, out=None, err=None):
    """``platbench run``: the exit status (see the module's docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    # First, before any thread or child: every process the run starts inherits the harness's place (quiet.py).
    harness = quiet.isolate(args.inventory)
    try:
        return _placed(args, harness, out, err)
    finally:
        harness.stop()


def _placed(args, harness, out, err):
    """``platbench run`` once the harness is placed."""
    if harness.warning:
        print(f"warning: {harness.warning}: the campaign's answer lines will say so", file=err)
    try:
        plan, warnings, extravars = prepare(args)
    except UsageError as exc:
        print(exc, file=err)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted before the campaign started", file=err)
        return EXIT_INTERRUPTED
    for warning in warnings:
        print(f"warning: {warning}", file=err)
    directory = Path(extravars["platbench_results_dir"]) / args.campaign
    try:
        lock = campaign_lock.acquire(directory, args.campaign, rerun_command(args))
    except campaign_lock.CampaignBusy as exc:
        print(exc, file=err)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"the campaign's directory {directory} cannot be written: {exc}", file=err)
        return EXIT_BAD_INPUT
    try:
        extravars = keep_plan(args, plan, extravars)
    except UsageError as exc:
        lock.release(keep=lock.stale is not None)  # a dead run's leftovers are still the next run's to remove
        print(exc, file=err)
        return EXIT_BAD_INPUT
    kept = [True]  # the lock file stays, for the next run to clean up, unless this run ends cleaned up
    harness.start_series(directory)
    args.harness = harness  # every pass of the campaign hands the playbook where the harness is (_run)
    started = time.monotonic()
    try:
        code = _run(args, plan, extravars, lock, kept, out, err)
        if getattr(args, "precision", None) is not None:
            code = _until_decided(args, code, plan, lock, kept, started, out, err)
        return code
    finally:
        lock.release(keep=kept[0])


def _run(args, plan, extravars, lock, kept, out, err):
    """The campaign under its lock: ``kept[0]`` set False once nothing it started is left."""
    harness = getattr(args, "harness", None)
    if harness is not None:
        extravars = {**extravars, quiet.EXTRAVAR: harness.extravar()}
    samples = Path(extravars["platbench_results_dir"]) / args.campaign / SAMPLES_FILE
    for warning in cut_writes(samples):
        print(f"warning: {warning}", file=err)
    campaign = Campaign(args.campaign, plan["cells"], str(samples))
    tail = SamplesTail(samples)  # what this run appends to the campaign: cells done, their events come or not
    print(f"platbench: campaign {args.campaign}, {len(plan['cells'])} cells planned ({args.experiment})", file=out)
    display = display_for(campaign, out)
    with Interrupts() as interrupts, tempfile.TemporaryDirectory(prefix="platbench-run-") as private:
        lock.update(private_dir=private)  # what a run that dies leaves running is found by it (the next run)
        if lock.stale:
            if not _after_a_dead_run(args, lock, extravars, interrupts, out):
                return interrupts.exit_code if interrupts.count else EXIT_FAILED
            # Removed: the passes a run until decided adds after this one have nothing of the dead run to clean.
            lock.stale = None
        running = []

        def stop():
            if interrupts.count and not running:
                running.extend(campaign.running())
            return interrupts.count > 0

        table_shown = []

        def table_before_the_guests():
            # Emulated guests' cells run last and take long: the table of the others need not wait for them.
            if table_shown or not campaign.only_emulated_left():
                return
            # The cells this run measured, once the samples file holds them all (the next tick looks again).
            measured = [result.id for result in campaign.results if result.status == "ok"]
            table = table_so_far(Path(campaign.samples_path).parent, measured)
            if table is None:
                return
            table_shown.append(True)
            if table:
                display.line(
                    f"every cell but the emulated guests' is done: their table, while the "
                    f"{campaign.cells_left()} emulated cells follow (ETA {human(campaign.eta())}):\n{table}\n"
                )

        def on_event(event):
            for line in campaign.feed(event):
                display.line(line)
            if campaign.pid and "playbook_pid" not in lock.record:
                lock.update(playbook_pid=campaign.pid)  # a run that dies leaves it for the next to stop
            table_before_the_guests()

        def tick():
            for line in campaign.observe(tail.new()):
                display.line(line)
            table_before_the_guests()
            display.refresh()

        with display:
            runner, stopped = drive(
                PLAYBOOK,
                args.inventory,
                extravars,
                private,
                on_event=on_event,
                stop=stop,
                tick=tick,
                limit=_limit(getattr(args, "hosts", None)),
            )
            tick()  # the last cell's samples, should its event have been lost
        output = _output(runner)
        log = _keep_log(extravars["platbench_results_dir"], args.campaign, output)
        if stopped:
            kept[0] = not _cleanup(args, campaign, interrupts, running, extravars, out)
            return interrupts.exit_code
    kept[0] = False
    code, lines = campaign.outcome(runner.rc, output_tail="\n".join(output.strip().splitlines()[-20:]))
    if code == EXIT_FAILED and log and runner.rc != 0:
        lines.append(f"Ansible's output: {log}")
    print("\n".join(lines), file=err if code == EXIT_BAD_INPUT else out)
    return code
