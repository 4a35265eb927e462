"""Duet pairs launched directly, with no orchestration: the known answer platbench's harness is checked against.

`make lab`'s answer (experiments/smoke.yml, size ``answer``) runs cn beside bm in duet pairs. This module runs the
same pairs from this process alone: no ansible-playbook, no worker, no module waiting on a cell, nothing polling.

- What each side runs comes from platbench's own plan of a smoke-answer pair (cellplan.cell_plan of the
  experiment's first pair, planned for this machine): the workload's argv and environment, the bm process's
  directory, the cn container's command, mounts and network. A change to the plan reaches the direct pairs too.
- bm: the lab's workload venv (``PREFIX/venv/bin/python``) under ``taskset --cpu-list C`` at the normal scheduling
  policy, set explicitly (``chrt --other 0``: this process may have inherited another), in a cgroup of its own in
  the host's cpu hierarchy (cgroup v1 or v2, read from /proc/self/mountinfo), created before the pair and removed
  after; its environment is the plan's with PATH, LANG and HOME, nothing inherited: a container starts as clean.
- cn: ``docker run --rm --cpuset-cpus C`` of the image the lab's cn cells run (by its id), with the same workload
  and environment and the cells' mounts, which hold the start line's directory at the same path. The docker CLI,
  which only relays the container's output, runs at idle priority (dockerd starts the container, not the CLI).
- Each side starts in a session of its own, and both meet at the start line (workloads/common/duet.py) in a
  directory of the pair's own before they time the same window. This process then blocks on both sides' pidfds:
  nothing of it wakes until a side ends, or the pair's timeout kills both.
- The CPU sets swap every pair: cn on the lower set and bm on the higher in even pairs, the reverse in odd ones.
- Each side's record is read from its output (workloads/common/record.py), or from its record file where the plan
  gives the workload one (``PLATBENCH_RECORD_FILE``, pointed into the pair's directory here).

``python -m platbench.direct_duet --pairs 6`` prints a line per pair and the summary: the geometric mean of cn/bm,
its 95% paired interval as the report computes it (report_stats.paired_ratio_interval, blocked on the CPU sets), and
the log spread, the standard deviation of the log-ratios. It needs root, Docker and the lab built by site.yml; the
containers (``platbench-direct-*``), cgroups and start lines it makes are removed after each pair, however it ends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pwd
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota, engines, platforms
from ansible_collections.platbench.lab.plugins.modules.host_facts import numa_nodes
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cellplan, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from ansible_collections.platbench.lab.workloads.common.duet import DIR_ENV, SIDE_ENV
from ansible_collections.platbench.lab.workloads.common.record import RECORD_FILE_ENV, RecordError, parse_result_lines

from platbench.report.stats import paired_ratio_interval

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"
ROLE_DEFAULTS = REPO / "roles" / "platform_run" / "defaults" / "main.yml"  # the one default of every plan option
EXPERIMENT, SIZE = "smoke", "answer"  # make lab's answer


def _answer_platforms():
    """(the compared platform, the baseline) of the smoke answer's question, as its experiment file names them."""
    sizes = yaml.safe_load((EXPERIMENTS / f"{EXPERIMENT}.yml").read_text(encoding="utf-8"))["sizes"]
    compared = [label for label in sizes[SIZE]["platforms"] if label != platforms.BASELINE]
    return compared[0], platforms.BASELINE


PLATFORM, BASELINE = _answer_platforms()
SIDE_NUMBERS = {PLATFORM: 0, BASELINE: 1}  # each side's mark at the start line (workloads/common/duet.py)
# The image the lab's cn cells run: platform_run_image, whose default names it (roles/platform_run/defaults).
IMAGE = "platbench/workload:latest"
NAME_PREFIX = "platbench-direct-"  # every container, cgroup and start line made here
METRIC = "throughput"
NORMAL_POLICY = ["chrt", "--other", "0"]
IDLE_POLICY = ["chrt", "--idle", "0"]
# What the bm side's environment holds besides the plan's, as a container's holds its image's: nothing of this
# process's environment reaches it.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# The bm side's shell moves itself into its cgroup and back to nice 0 (this process may run niced), then execs the
# workload: nothing of it runs outside the cgroup.
ENTER_CGROUP = 'echo $$ > "$1" && renice -n 0 -p $$ >/dev/null && shift && exec "$@"'
DEFAULT_PAIRS = 6
PAIR_TIMEOUT = 600.0  # seconds a pair may take, startup and warmup included, before both sides are killed
TAIL_CHARS = 2000


class DirectDuetError(RuntimeError):
    """A pair that cannot be launched or read; the message says what and what to do."""


@dataclass(frozen=True)
class Sides:
    """What the two sides of every pair run, from platbench's plan of a smoke-answer pair on this machine."""

    argv: list  # python's arguments, the same on both sides (-m workloads.cnn_train ... --steps auto)
    python: str  # the lab's workload venv's python (the bm side)
    chdir: str  # where the bm process runs
    bm_env: dict  # the bm cell's environment (the start line's variables are the pair's own, set per pair)
    cn_env: dict  # the cn cell's
    cn_command: list  # the container's command (python and argv)
    image: str  # what docker run starts: the image's id where known, else its reference
    volumes: list  # the cn cell's mounts, in docker's SOURCE:TARGET:MODE form
    network: str  # the cn cell's network mode
    cache_dir: str  # the runner's cache, which both sides see at the same path: the start lines live below it
    cpu_sets: tuple  # the pair's two CPU sets (cpu lists), lower first
    cgroup: dict  # the host's cpu hierarchy: {"version": "v1" | "v2", "directory"}


# -- planning: what a smoke-answer pair runs ------------------------------------------------------------------------


def cpu_hierarchy(mountinfo, offers_cpu=None):
    """Where the host's cpu controller is mounted, from /proc/self/mountinfo's text: ``{"version": "v2",
    "directory"}`` where the unified hierarchy offers cpu (its cgroup.controllers, read by ``offers_cpu(directory)``),
    else ``{"version": "v1", "directory"}`` of the v1 mount whose options name cpu; None where neither is."""
    offers_cpu = offers_cpu or _offers_cpu
    unified, legacy = [], []
    for line in mountinfo.splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, kind, options = fields[4], tail[0], tail[2].split(",")
        if kind == "cgroup2":
            unified.append(mount_point)
        elif kind == "cgroup" and "cpu" in options:
            legacy.append(mount_point)
    for directory in unified:
        if offers_cpu(directory):
            return {"version": "v2", "directory": directory}
    return {"version": "v1", "directory": legacy[0]} if legacy else None


def _offers_cpu(directory):
    try:
        return "cpu" in Path(directory, "cgroup.controllers").read_text(encoding="utf-8").split()
    except OSError:
        return False


def plan_options(image, image_id, reserved=()):
    """The options of platbench's cell plan as the role would pass them on this machine: the role's own defaults
    (roles/platform_run/defaults/main.yml), and what the role works out at run time given here."""
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text(encoding="utf-8"))
    at_run_time = {
        "host": "localhost",
        "campaign": NAME_PREFIX.rstrip("-"),
        "image": image,
        "reserved_cpus": list(reserved),
        "engines": {"docker": {"answers": True, "version": None, "image_id": image_id}},
        "dataset": None,
        "guest_image": {},
        "gpu_assignment": {},
        "k8s_node": None,
        "sif": {},
        "apptainer_version": None,
        "runners": None,
        "storage": {},
    }
    options = {}
    for name, variable in cellplan.OPTIONS.items():
        value = defaults.get(variable)
        options[name] = at_run_time[name] if name in at_run_time or "{{" in str(value) else value
    return options


def pair_plans(facts, options, overrides=None):
    """``{"cn": plan, "bm": plan}``: platbench's cell plans of the first duet pair of the smoke experiment's size
    answer (with ``overrides``, as ``platbench run --set`` gives them), on a host with ``facts``."""
    plan, _ = plan_experiment(str(EXPERIMENTS), EXPERIMENT, overrides, size=SIZE, campaign=options["campaign"])
    cells = {cell["id"]: cell for cell in plan["cells"]}
    lead = next(
        (
            cell
            for cell in plan["cells"]
            if cell["labels"].get("platform") == PLATFORM and cell["labels"].get(schedule.DUET_ROLE) == "lead"
        ),
        None,
    )
    if lead is None or lead["labels"].get(schedule.DUET_PARTNER) not in cells:
        raise DirectDuetError(
            f"experiments/{EXPERIMENT}.yml, size {SIZE}: no {PLATFORM} cell beside a {BASELINE} partner in its plan "
            "(schedule: duet, platforms [bm, cn]): the direct pairs run what that size's pairs run"
        )
    partner = cells[lead["labels"][schedule.DUET_PARTNER]]
    try:
        return {
            PLATFORM: cellplan.cell_plan(_sized(lead, facts, options), facts, options),
            BASELINE: cellplan.cell_plan(_sized(partner, facts, options), facts, options),
        }
    except cellplan.CellPlanError as exc:
        raise DirectDuetError(f"the smoke-answer pair cannot be planned on this machine: {exc}") from None


def _sized(cell, facts, options):
    """``cell`` sized for this machine, as cells_to_run hands it to the plan."""
    return sizing.sized(cell, facts, options["reserved_cpus"] or [], options["host"])


def sides_of(plans, cgroup):
    """The ``Sides`` of a pair from its two cell plans (``pair_plans``) and the host's cpu hierarchy."""
    cn, bm = plans[PLATFORM], plans[BASELINE]
    process, container = bm.get("process") or {}, cn.get("container") or {}
    if not process or not container:
        raise DirectDuetError("the smoke-answer pair's plans hold no bm process or no cn container")
    python = next((part for part in process["argv"] if part.endswith("/venv/bin/python")), None)
    if python is None or process["argv"][process["argv"].index(python) + 1 :] != bm["argv"]:
        raise DirectDuetError(f"the bm cell's command {process['argv']} does not end in the venv's python and argv")
    if container["command"][1:] != cn["argv"] or bm["argv"] != cn["argv"]:
        raise DirectDuetError("the cn and bm cells of the smoke-answer pair do not run the same workload")
    cache = bm["duet_dir"].rsplit("/duet/", 1)[0]
    return Sides(
        argv=list(bm["argv"]),
        python=python,
        chdir=process["chdir"],
        bm_env=_without_pair(process["env"]),
        cn_env=_without_pair(container["env"]),
        cn_command=list(container["command"]),
        image=container.get("image_id") or container["image"],
        volumes=list(container["volumes"]),
        network=container["network_mode"],
        cache_dir=cache,
        cpu_sets=tuple(sorted((cn["cpuset"], bm["cpuset"]), key=_first_cpu)),
        cgroup=dict(cgroup),
    )


def _without_pair(env):
    return {name: value for name, value in env.items() if name not in (DIR_ENV, SIDE_ENV)}


def _first_cpu(cpu_list):
    return int(str(cpu_list).split(",")[0].split("-")[0])


def image_id(image, docker="docker"):
    """The id Docker holds ``image`` under (``sha256:...``), or None where it holds no such image."""
    try:
        found = subprocess.run(
            [docker, *engines.IMAGE_ID_ARGV, image], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return engines.image_id(found.stdout) if found.returncode == 0 else None


def problems(prefix="/opt/platbench", docker="docker"):
    """What this machine lacks to launch the pairs, each with what to do; [] when nothing."""
    found = []
    if os.geteuid() != 0:
        found.append("run as root: the bm side gets a cgroup of its own, and Docker's socket is root's")
    if not os.access(f"{prefix}/venv/bin/python", os.X_OK):
        found.append(f"{prefix}/venv/bin/python is missing: build the lab's bm venv (ansible-playbook site.yml)")
    for tool in (docker, "taskset", "chrt", "renice"):
        if not shutil.which(tool):
            found.append(f"{tool} is not installed: build the lab (ansible-playbook site.yml)")
    return found


def prepare(image=IMAGE, reserved=(), overrides=None, docker="docker"):
    """The ``Sides`` of this machine's pairs; DirectDuetError naming everything missing."""
    found = problems(docker=docker)
    if found:
        raise DirectDuetError("cannot launch direct duet pairs here: " + "; ".join(found))
    identity = image_id(image, docker)
    if identity is None:
        raise DirectDuetError(
            f"Docker holds no image {image}: build the lab's workload image (ansible-playbook site.yml, role "
            "platbench.lab.workload_image), or name the cn cells' image with --image"
        )
    cgroup = cpu_hierarchy(Path("/proc/self/mountinfo").read_text(encoding="utf-8"))
    if cgroup is None:
        raise DirectDuetError(
            "no cgroup cpu controller is mounted (/proc/self/mountinfo): mount cgroup v2 with cpu, or v1's cpu"
        )
    facts = {
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "numa_nodes": numa_nodes(),
        "gpus": [],
        "cpu_cgroup": cgroup,
    }
    return sides_of(pair_plans(facts, plan_options(image, identity, reserved), overrides), cgroup)


# -- one pair: its CPUs, its two command lines, its records ------------------------------------------------------


def pair_cpus(cpu_sets, index):
    """``{"cn": cpus, "bm": cpus}`` of pair ``index``: cn on the first set in even pairs, on the second in odd ones."""
    first, second = cpu_sets
    return {PLATFORM: first, BASELINE: second} if index % 2 == 0 else {PLATFORM: second, BASELINE: first}


def pair_name(token, index):
    """The name of pair ``index``'s container, cgroup and start line: ``platbench-direct-TOKEN-INDEX``."""
    return f"{NAME_PREFIX}{token}-{index}"


def pair_env(env, pair_dir, side):
    """A side's environment for its pair: the start line in ``pair_dir``, and its record file there where the plan
    gives the workload one."""
    env = {**env, DIR_ENV: pair_dir, SIDE_ENV: str(side)}
    if RECORD_FILE_ENV in env:
        env[RECORD_FILE_ENV] = record_file(pair_dir, side)
    return env


def record_file(pair_dir, side):
    return f"{pair_dir}/record-{side}.jsonl"


def bm_command(sides, cpus, cgroup_path, pair_dir):
    """``(argv, env)`` of the bm side: into its cgroup, at the normal policy, pinned, the venv's python."""
    procs = f"{cgroup_path}/{cpu_quota.PROCS}"
    argv = ["/bin/sh", "-c", ENTER_CGROUP, "sh", procs, *NORMAL_POLICY, "taskset", "--cpu-list", cpus]
    env = {
        **BASE_ENV,
        "HOME": pwd.getpwuid(os.getuid()).pw_dir,
        **pair_env(sides.bm_env, pair_dir, SIDE_NUMBERS[BASELINE]),
    }
    return [*argv, sides.python, *sides.argv], env


def cn_command(sides, cpus, name, pair_dir, docker="docker"):
    """The argv of the cn side: ``docker run --rm`` of the cn cell's container on ``cpus``, its CLI at idle
    priority. The start line's directory is mounted at its own path where no mount of the cell holds it."""
    volumes = list(sides.volumes)
    if not any(_holds(volume, pair_dir) for volume in volumes):
        volumes.append(f"{pair_dir}:{pair_dir}:rw")
    env = pair_env(sides.cn_env, pair_dir, SIDE_NUMBERS[PLATFORM])
    argv = [*IDLE_POLICY, docker, "run", "--rm", "--name", name, "--cpuset-cpus", cpus, "--network", sides.network]
    argv += [part for volume in volumes for part in ("--volume", volume)]
    argv += [part for key, value in sorted(env.items()) for part in ("--env", f"{key}={value}")]
    return [*argv, sides.image, *sides.cn_command]


def _holds(volume, path):
    source, target, mode = (volume.split(":") + ["rw"])[:3]
    return source == target and mode == "rw" and (path == target or path.startswith(target.rstrip("/") + "/"))


def side_record(kind, output, record_text=None, returncode=None):
    """The ok record of side ``kind``: from its output, or where that holds none from its record file's text
    (``record_text``; the workload writes it whole, workloads/common/record.py). ``returncode``: its exit status, for
    the message."""
    said = []
    for text in (output, record_text or ""):
        try:
            records = parse_result_lines(text)
        except RecordError as exc:
            said.append(str(exc))
            continue
        ok = [record for record in records if record["status"] == "ok"]
        if ok:
            return ok[-1]
        said += [record["error"] or record["status"] for record in records]
    why = "; ".join(dict.fromkeys(said)) or "no record at all"
    exited = f", exit status {returncode}" if returncode is not None else ""
    raise DirectDuetError(
        f"the {kind} side left no ok record ({why}{exited}); its output ends:\n{output[-TAIL_CHARS:]}"
    )


def pair_result(index, records, cpus):
    """One pair's result from its two records: ``{"pair", "cn", "bm", "ratio", "cpus", "waited_seconds"}``.
    A side whose partner never reached the start line timed its window alone: no pair, an error."""
    values, waits = {}, {}
    for kind in (PLATFORM, BASELINE):
        record = records[kind]
        values[kind] = next((entry["value"] for entry in record["metrics"] if entry["metric"] == METRIC), None)
        if values[kind] is None:
            raise DirectDuetError(f"pair {index}: the {kind} side's record holds no {METRIC} metric")
        start = (record.get("metadata") or {}).get("duet_start") or {}
        if not start.get("partner_arrived"):
            raise DirectDuetError(
                f"pair {index}: the {kind} side's partner never reached the start line (the {kind} record's "
                f"duet_start: {start or 'none'}): the two windows did not coincide"
            )
        waits[kind] = start.get("waited_seconds")
    return {
        "pair": index,
        PLATFORM: values[PLATFORM],
        BASELINE: values[BASELINE],
        "ratio": values[PLATFORM] / values[BASELINE],
        "cpus": dict(cpus),
        "waited_seconds": waits,
    }


def wait_all(processes, timeout):
    """Block until every one of ``processes`` has ended, or ``timeout`` seconds have passed: those still running.
    One select on their pidfds, which wakes only when a side ends."""
    pending = {os.pidfd_open(process.pid): process for process in processes}
    deadline = time.monotonic() + timeout
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(pending), [], [], left)
            for descriptor in ready:
                pending.pop(descriptor).wait()
                os.close(descriptor)
        return list(pending.values())
    finally:
        for descriptor in pending:
            os.close(descriptor)


def _kill(process):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # its session: the shell, the workload, the CLI
    process.wait()


def run_pair(sides, index, token, timeout=PAIR_TIMEOUT, docker="docker"):
    """Launch pair ``index`` and read it (``pair_result``); its container, cgroup and start line are removed after,
    however it ends."""
    cpus = pair_cpus(sides.cpu_sets, index)
    name = pair_name(token, index)
    pair_dir = f"{sides.cache_dir}/duet/{name}"
    cgroup_path = os.path.join(sides.cgroup["directory"], name)
    logs = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    processes, ended_well = {}, False
    try:
        shutil.rmtree(pair_dir, ignore_errors=True)
        os.makedirs(pair_dir)
        try:
            cpu_quota.create(cgroup_path, sides.cgroup["version"], cpu_quota.UNLIMITED)
        except cpu_quota.QuotaError as exc:
            raise DirectDuetError(f"pair {index}: the bm side's cgroup: {exc}") from None
        bm_argv, bm_env = bm_command(sides, cpus[BASELINE], cgroup_path, pair_dir)
        launches = {
            # The container first: it takes longer to reach the start line.
            PLATFORM: (cn_command(sides, cpus[PLATFORM], name, pair_dir, docker), None, None),
            BASELINE: (bm_argv, bm_env, sides.chdir),
        }
        with contextlib.ExitStack() as files:
            for kind, (argv, env, cwd) in launches.items():
                out = files.enter_context(open(logs / f"{kind}.out", "wb"))
                err = files.enter_context(open(logs / f"{kind}.err", "wb"))
                processes[kind] = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True
                )
            late = wait_all(list(processes.values()), timeout)
        if late:
            raise DirectDuetError(f"pair {index}: still running after {timeout:g} s: both sides stopped")
        records = {}
        for kind, process in processes.items():
            output = (logs / f"{kind}.out").read_text(errors="replace")
            output += (logs / f"{kind}.err").read_text(errors="replace")
            file = Path(record_file(pair_dir, SIDE_NUMBERS[kind]))
            record_text = file.read_text(errors="replace") if file.is_file() else None
            records[kind] = side_record(kind, output, record_text, process.returncode)
        ended_well = processes[PLATFORM].returncode == 0
        return pair_result(index, records, cpus)
    finally:
        for process in processes.values():
            if process.returncode is None:
                _kill(process)
        if not ended_well:  # --rm removed it where it ended well
            subprocess.run([docker, "rm", "--force", name], capture_output=True, check=False, timeout=120)
        with contextlib.suppress(cpu_quota.QuotaError):
            cpu_quota.remove(cgroup_path)
        shutil.rmtree(pair_dir, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


def run_pairs(count, sides=None, timeout=PAIR_TIMEOUT, on_pair=None, docker="docker"):
    """``count`` pairs, one after the other (``sides``: ``prepare()``'s unless given): their results, in order;
    ``on_pair(result)`` is called after each."""
    sides = sides or prepare(docker=docker)
    token = f"{os.getpid()}-{time.strftime('%H%M%S')}"
    results = []
    for index in range(count):
        results.append(run_pair(sides, index, token, timeout, docker))
        if on_pair:
            on_pair(results[-1])
    return results


# -- the pairs' summary --------------------------------------------------------------------------------------------


def log_spread(pairs):
    """The standard deviation of the pairs' log-ratios, log(value / baseline); None below two pairs."""
    logs = [math.log(value / baseline) for value, baseline in pairs]
    return statistics.stdev(logs) if len(logs) >= 2 else None


def summary(pairs, sides=None):
    """``{"pairs", "estimate", "interval", "log_spread"}`` of (cn, bm) pairs: the geometric mean of cn/bm with its 95%
    paired t interval on the log-ratios, as the report computes a duet comparison (report_stats.paired_ratio_interval,
    blocked on ``sides``, the CPU set cn ran on in each pair, where each set holds two pairs), and the log spread.
    ``interval`` and ``log_spread`` are None below two pairs."""
    pairs = [(float(value), float(baseline)) for value, baseline in pairs]
    if not pairs:
        raise ValueError("no pairs to summarize")
    fitted = paired_ratio_interval(pairs, sides=list(sides) if sides else None)
    if fitted is None:
        estimate = math.exp(statistics.fmean(math.log(value / baseline) for value, baseline in pairs))
        interval = None
    else:
        estimate, interval = fitted[0], [fitted[1], fitted[2]]
    return {"pairs": len(pairs), "estimate": estimate, "interval": interval, "log_spread": log_spread(pairs)}


def summary_of(results):
    """``summary`` of ``run_pairs``' results."""
    return summary([(r[PLATFORM], r[BASELINE]) for r in results], [r["cpus"][PLATFORM] for r in results])


def pair_line(result):
    cpus, waits = result["cpus"], result["waited_seconds"]
    return (
        f"pair {result['pair']}: cn {result[PLATFORM]:.1f} on CPU {cpus[PLATFORM]}, bm {result[BASELINE]:.1f} on CPU "
        f"{cpus[BASELINE]}: cn/bm {result['ratio']:.4f} (start-line waits: cn {waits[PLATFORM]:.2f} s, bm "
        f"{waits[BASELINE]:.2f} s)"
    )


def summary_line(found, who="direct"):
    interval = found["interval"]
    within = f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else ""
    spread = found["log_spread"]
    spread_text = f", log spread {spread:.2%}" if spread is not None else ""
    return f"{who} cn/bm {found['estimate']:.4f}{within} over {found['pairs']} pair(s){spread_text}"


# -- python -m platbench.direct_duet --------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m platbench.direct_duet", description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help=f"pairs to run (default {DEFAULT_PAIRS})")
    parser.add_argument("--image", default=IMAGE, help=f"the cn cells' workload image (default {IMAGE})")
    parser.add_argument(
        "--reserved-cpus", default="", help="CPUs kept from the pairs, as the inventory's platbench_reserved_cpus"
    )
    parser.add_argument(
        "--timeout", type=float, default=PAIR_TIMEOUT, help=f"seconds a pair may take (default {PAIR_TIMEOUT:g})"
    )
    parser.add_argument("--output", help="also write the pairs and the summary to this JSON file")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error(f"--pairs {args.pairs}: run at least one pair")
    try:
        args.reserved = [int(cpu) for cpu in args.reserved_cpus.split(",") if cpu.strip()]
    except ValueError:
        parser.error(f"--reserved-cpus {args.reserved_cpus}: give CPU numbers separated by commas, e.g. 0,1")
    return args


def main(argv=None, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    args = parse_args(argv)
    # A SIGTERM ends the pair under way as a Ctrl-C does: its sides killed, its container and cgroup removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sides = prepare(args.image, args.reserved)
        results = run_pairs(
            args.pairs, sides, args.timeout, on_pair=lambda result: print(pair_line(result), file=out, flush=True)
        )
    except DirectDuetError as exc:
        print(f"direct duet: {exc}", file=err)
        return 1
    found = summary_of(results)
    print(summary_line(found), file=out)
    if args.output:
        Path(args.output).write_text(json.dumps({"pairs": results, "summary": found}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
