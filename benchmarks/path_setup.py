"""Benchmark (not a test): what a cell's network path costs to set up and tear down, on bm and on cn.

It times the path two ways, per platform, path and instance count, and prints them side by side:

- ``module``: the module a cell runs, ``platbench.lab.network_path``, as Ansible runs it on the host (its file with
  the arguments, no controller around it):
  - bm: building the path (a bridge, and per instance a namespace with a veth, plus a VXLAN device for overlay)
    and removing it;
  - cn: the same into the namespaces of holder containers (``docker run --network none``, as
    roles/platform_run/tasks/instances.yml starts them), with starting and removing the holders counted in, since a
    cell makes them only for its path.
- ``cell``: real cells of lin2018-distributed (its ``small`` size: 2 ranks; a tiny model, a few steps) run through
  ``platbench run`` on the lab, the path's tasks of roles/platform_run/tasks/instances.yml timed as Ansible ran
  them, controller included. The results callback records no task durations (run.json's ``overhead`` runs from
  the cell's start to its workload's launch, the path's measurement included), so the times come from
  ansible-runner's events, which carry each task's start and end on its host: set-up from the start of the
  holders' task to the end of "Build the cell's network path", tear-down from the start of "Remove the cell's
  network path" to the end of the holders' removal (the skipped tasks of the other engine counted in, as a cell
  pays for them).

Target: set-up plus tear-down under 2 s a cell. Run as root on a host with iproute2 (and Docker for cn); the
``cell`` rows need the lab that site.yml builds (--cell-repeats 0 leaves them out). Every name carries the
benchmark's own tag or campaign and is removed afterwards, also when a step fails.

    python benchmarks/path_setup.py [--platforms bm,cn] [--paths bridge,overlay] [--instances 2,3]
                                    [--repeats 5] [--image platbench/workload]
                                    [--cell-repeats 1] [--inventory inventories/local]
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from _runs import REPO_ROOT

COLLECTIONS = os.path.join(REPO_ROOT, "collections")
MODULE = os.path.join(COLLECTIONS, "ansible_collections", "platbench", "lab", "plugins", "modules", "network_path.py")
TARGET_SECONDS = 2.0
STEP_TIMEOUT = 120

# The real cells: lin2018-distributed at its small size (2 ranks of one core), cut to a tiny model and a few steps.
CELL_EXPERIMENT = "lin2018-distributed"
CELL_SETTINGS = (
    "params.framework=torch",
    "params.model=tiny",
    "params.image_size=32",
    "params.batch_size=8",
    "params.warmup_steps=1",
    "params.steps=2",
)
# The path's tasks in roles/platform_run/tasks/instances.yml, in the order they run; their names are the link.
SETUP_TASKS = (
    "Start the holders of the containers' network namespaces (Docker)",
    "Start the holders of the containers' network namespaces (Podman)",
    "Build the cell's network path",
)
TEARDOWN_TASKS = (
    "Remove the cell's network path",
    "Remove the holders of the containers' network namespaces (Docker)",
    "Remove the holders of the containers' network namespaces (Podman)",
)
TASK_EVENTS = ("runner_on_ok", "runner_on_skipped", "runner_on_failed")
RECORD_ACTION = "platbench.lab.record_cell"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platforms", default="bm,cn", help="comma-separated, of bm and cn")
    parser.add_argument("--paths", default="bridge,overlay", help="comma-separated, of bridge and overlay")
    parser.add_argument("--instances", default="2,3", help="comma-separated instance counts")
    parser.add_argument("--repeats", type=int, default=5, help="set-ups and tear-downs per combination")
    parser.add_argument("--image", default="platbench/workload", help="the holders' image (cn): the lab's own")
    parser.add_argument(
        "--cell-repeats",
        type=int,
        default=1,
        help=f"real cells of {CELL_EXPERIMENT} (2 instances) per platform and path, through `platbench run` on the "
        "lab; 0: the module alone",
    )
    parser.add_argument(
        "--inventory", default=os.path.join(REPO_ROOT, "inventories", "local"), help="the lab's (for the cells)"
    )
    args = parser.parse_args(argv)
    args.platforms, args.paths = args.platforms.split(","), args.paths.split(",")
    args.instances = [int(count) for count in args.instances.split(",")]
    for name, given, allowed in (
        ("--platforms", args.platforms, ("bm", "cn")),
        ("--paths", args.paths, ("bridge", "overlay")),
    ):
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    if args.repeats < 0 or args.cell_repeats < 0 or args.repeats + args.cell_repeats == 0:
        parser.error("--repeats and --cell-repeats: 0 or more each, and not both 0")
    if os.geteuid() != 0:
        parser.error("namespaces, bridges and VXLAN devices are made on this host: run as root")
    return args


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
    return done.stdout


def network_path(**args):
    """Run the module with ``args`` on this host, as Ansible would: its result, or RuntimeError with its message."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
        handle.flush()
        done = subprocess.run(
            [sys.executable, MODULE, handle.name],
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            env=dict(os.environ, PYTHONPATH=COLLECTIONS),
            check=False,
        )
    result = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    if done.returncode != 0 or result.get("failed"):
        raise RuntimeError(f"network_path {args}: {result.get('msg') or done.stderr.strip()}")
    return result


def _holders(image, tag, count):
    """Start the cell's holder containers (no network of their own); their names and process ids."""
    names = [f"{tag}-holder-{index}" for index in range(count)]
    for name in names:
        _run(["docker", "run", "--detach", "--rm", "--network", "none", "--name", name, image, "sleep", "300"])
    pids = [int(_run(["docker", "inspect", "--format", "{{.State.Pid}}", name]).strip()) for name in names]
    return names, pids


def one_cell(platform, path, count, image):
    """(set-up seconds, tear-down seconds) of one cell's path."""
    key = f"path-setup-bench-{uuid.uuid4().hex}"
    names = []
    try:
        started = time.perf_counter()
        pids = None
        if platform == "cn":
            names, pids = _holders(image, key[-12:], count)
        built = network_path(key=key, path=path, instances=count, platform=platform, **({"pids": pids} if pids else {}))
        if not built.get("changed"):
            raise RuntimeError(f"the {path} path was not built: {built}")
        ready = time.perf_counter()
        network_path(key=key, state="absent")
        if names:
            _run(["docker", "rm", "--force", *names])
            names = []
        return ready - started, time.perf_counter() - ready
    finally:
        # whatever a failed step left: the path by its tag, the holders by name
        try:
            network_path(key=key, state="absent")
        finally:
            if names:
                subprocess.run(
                    ["docker", "rm", "--force", *names], capture_output=True, timeout=STEP_TIMEOUT, check=False
                )


# -- real cells, through platbench run ------------------------------------------------------------------------


def _when(value):
    """A task's start or end in an event: an ISO time (aware), or None."""
    if isinstance(value, datetime.datetime):
        return value
    try:
        return datetime.datetime.fromisoformat(str(value))
    except ValueError:
        return None


def path_timings(events):
    """From ansible-runner's events of a campaign: ``[{platform, path, instances, cell, status, setup_s,
    teardown_s, tasks}]``, one per cell that built a path (its record attributes the tasks before it to its cell,
    host by host); ``tasks``: each path task's own seconds on its host, {name: seconds}."""
    pending, cells = {}, []
    for event in events:
        data = event.get("event_data") or {}
        host = data.get("host")
        if event.get("event") not in TASK_EVENTS or host is None:
            continue
        tasks = pending.setdefault(host, {})
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        if data.get("task") in SETUP_TASKS + TEARDOWN_TASKS:
            tasks[data["task"]] = {"start": _when(data.get("start")), "end": _when(data.get("end")), "res": res}
        elif data.get("task_action") == RECORD_ACTION and isinstance(res.get("platbench_cell"), dict):
            cell = pending.pop(host)
            built = cell.get(SETUP_TASKS[-1])
            if not built or not (built["res"].get("invocation") or {}).get("module_args"):
                continue  # no path (a failed start, the host path): nothing to time
            missing = [name for name in SETUP_TASKS + TEARDOWN_TASKS if name not in cell]
            if missing:
                raise RuntimeError(f"cell {res['platbench_cell'].get('id')}: no event of task(s) {missing}")
            setup = cell[SETUP_TASKS[-1]]["end"] - cell[SETUP_TASKS[0]]["start"]
            teardown = cell[TEARDOWN_TASKS[-1]]["end"] - cell[TEARDOWN_TASKS[0]]["start"]
            arguments = built["res"]["invocation"]["module_args"]
            cells.append(
                {
                    "cell": res["platbench_cell"].get("id"),
                    "status": res.get("platbench_status"),
                    "platform": arguments["platform"],
                    "path": arguments["path"],
                    "instances": int(arguments["instances"]),
                    "setup_s": setup.total_seconds(),
                    "teardown_s": teardown.total_seconds(),
                    "tasks": {
                        name: (cell[name]["end"] - cell[name]["start"]).total_seconds()
                        for name in SETUP_TASKS + TEARDOWN_TASKS
                    },
                }
            )
    return cells


def run_cells(bench):
    """Run the real cells through ``platbench run`` (its own code, in this process) and time their paths from
    the playbook's events, which platbench run hands to its display: a copy of each is kept here."""
    from platbench import run as platbench_run  # after _runs: the collection is on the import path

    events = []
    drive = platbench_run.drive

    def keeping_events(*args, on_event=None, **kwargs):
        def both(event):
            events.append(event)
            if on_event:
                on_event(event)

        return drive(*args, on_event=both, **kwargs)

    campaign = f"path-setup-{time.strftime('%Y%m%d-%H%M%S')}"
    with tempfile.TemporaryDirectory(prefix="path-setup-") as results:
        argv = [CELL_EXPERIMENT, "--size", "small", "--campaign", campaign, "--results-dir", results]
        argv += ["--inventory", bench.inventory, "--platforms", ",".join(bench.platforms)]
        argv += ["--repeats", str(bench.cell_repeats), "--set", f"network=[{','.join(bench.paths)}]"]
        for setting in CELL_SETTINGS:
            argv += ["--set", setting]
        parser = argparse.ArgumentParser(prog="platbench run")
        platbench_run.add_arguments(parser)
        args = parser.parse_args(argv)
        args.argv = argv
        print(f"platbench run {' '.join(argv)}", file=sys.stderr)
        platbench_run.drive = keeping_events
        try:
            code = platbench_run.main(args, out=sys.stderr, err=sys.stderr)
        finally:
            platbench_run.drive = drive
    if code != 0:
        raise RuntimeError(f"platbench run exited {code} (its output above says why)")
    cells = path_timings(events)
    if not cells:
        raise RuntimeError("platbench run ran no cell that built a network path")
    return cells


# -- the table ------------------------------------------------------------------------------------------------


def row(platform, path, count, how, runs):
    """A line of the table from ``runs`` [(set-up s, tear-down s)], and whether its median total meets the target."""
    setup = statistics.median(run[0] for run in runs)
    teardown = statistics.median(run[1] for run in runs)
    total = statistics.median(run[0] + run[1] for run in runs)
    met = total < TARGET_SECONDS
    line = f"{platform:8} {path:8} {count:>9} {how:6} {len(runs):>4} {setup:>9.3f} {teardown:>12.3f} {total:>8.3f}"
    return line + f"  {'met' if met else 'missed'}", met


def main(argv=None):
    bench = parse_args(argv)
    if "cn" in bench.platforms:
        _run(["docker", "image", "inspect", bench.image])  # fails now, naming the image, not halfway through
    timed = {}  # (platform, path, instances, how) -> [(set-up s, tear-down s)]
    tasks = {}  # (platform, path, instances) -> {task name: [seconds]}, of the cells
    if bench.repeats:
        for platform in bench.platforms:
            for path in bench.paths:
                for count in bench.instances:
                    runs = [one_cell(platform, path, count, bench.image) for _ in range(bench.repeats)]
                    timed[platform, path, count, "module"] = runs
    if bench.cell_repeats:
        for cell in run_cells(bench):
            key = (cell["platform"], cell["path"], cell["instances"], "cell")
            timed.setdefault(key, []).append((cell["setup_s"], cell["teardown_s"]))
            for name, seconds in cell["tasks"].items():
                tasks.setdefault(key[:3], {}).setdefault(name, []).append(seconds)
    print(f"target: set-up + tear-down < {TARGET_SECONDS} s a cell; medians over n runs")
    print("module: the network_path module alone; cell: a real cell's path tasks through platbench run")
    print(
        f"{'platform':8} {'path':8} {'instances':>9} {'how':6} {'n':>4} {'set-up s':>9} {'tear-down s':>12} "
        f"{'total s':>8}  verdict"
    )
    verdicts = []
    # Each combination's module row, then its cells' row.
    for key in sorted(timed, key=lambda key: (*key[:3], key[3] != "module")):
        line, met = row(*key, timed[key])
        verdicts.append(met)
        print(line)
    for (platform, path, count), seconds in sorted(tasks.items()):
        # Where a cell's time goes: each task's own time on the host; the rest is the controller between them.
        print(f"\n{platform} {path} {count} instances, cell: median seconds of each path task on the host")
        for name in SETUP_TASKS + TEARDOWN_TASKS:
            print(f"  {statistics.median(seconds[name]):>7.3f}  {name}")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
