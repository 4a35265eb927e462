# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The quiet instrument: platbench's own processes kept below the cells they measure, and what they cost measured.

``platbench run`` places itself here before it starts anything (platbench/run.py); every process it starts then
inherits the place: ansible-runner, ansible-playbook and its forked workers, the module processes waiting on cells,
the engine CLIs attached to containers, the callback. Three things, each where the host offers it:

- the scheduling policy ``SCHED_IDLE``: the harness runs only when a CPU has nothing else to run, and a harness
  process that wakes never preempts a workload (measured on this project's hosts: an ``ansible-playbook`` waiting
  on a task beside a direct duet turned cn/bm 1.01 into 1.06-1.10; at ``SCHED_IDLE`` it read 1.010 again);
- a cgroup of the harness's own at the lowest weight: ``cpu.idle`` 1 where the kernel has it (cgroup v2, and v1
  since Linux 5.15), else ``cpu.shares`` 2 (v1) or ``cpu.weight`` 1 (v2); on a host where systemd is PID 1 a
  transient scope with ``CPUWeight=idle`` instead, which systemd creates and removes;
- the CPUs outside the cells' (the inventory's ``platform_run_reserved_cpus``), where the host has any: the
  harness's affinity.

The cgroup also counts the harness's CPU time (cgroup v1 ``cpuacct.usage_percpu``, per CPU; v2 ``cpu.stat``, all
CPUs), read once a second into the campaign's ``harness-cpu.jsonl``; ``cpu_between`` gives what the harness used
during a cell's timed part, which its record keeps.

A workload must not inherit any of this: each kind's launch puts it back at the normal policy (``chrt --other 0``,
placements/process/ ``shell_command``) in a cgroup of its own, or is started by a daemon that never had it
(dockerd, libvirtd). Nothing here raises for a host that refuses a step: the state says what was not done and why,
and every answer line of the campaign repeats it.

Paths are arguments, so the unit tests work on a fake cgroup tree.
"""

from __future__ import annotations

import errno
import json
import os
import time

from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence

CGROUP_ROOT = "/sys/fs/cgroup"
PREFIX = "platbench-harness-"
IDLE_SHARES = "2"  # cgroup v1's least cpu.shares
IDLE_WEIGHT = "1"  # cgroup v2's least cpu.weight
SERIES_FILE = "harness-cpu.jsonl"  # in the campaign's directory
SAMPLE_SECONDS = 1.0  # how often the series is read: no faster, the reader is the harness too
SCOPE_ENV = "PLATBENCH_HARNESS_SCOPE"  # set inside the systemd scope platbench run re-executed itself in
# What a cell's launch puts its workload back to (placements/process/): the policy every container gets from its
# engine's daemon.
NORMAL_POLICY_ARGV = ["chrt", "--other", "0"]
# Podman has no daemon: its CLI forks conmon, which starts the container, and each inherits the CLI's SCHED_IDLE. The
# podman role installs this launcher (podman at the normal policy), which a runner host's pd cells run Podman by.
PODMAN_LAUNCHER = "/usr/local/libexec/platbench/podman"


def _read(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read().strip()
    except OSError:
        return None


def _write(path, value):
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(value)


def layout(cgroup_root=CGROUP_ROOT, pid1_comm=None):
    """Where this host's cgroup controllers are: ``{"version": "v2"|"v1"|None, "cpu": dir, "cpuacct": dir,
    "systemd": bool}``. v2: the unified hierarchy offering ``cpu`` (``cpuacct`` is the same directory); v1: the
    ``cpu`` controller's mount and the ``cpuacct`` one's (the same where they share a mount)."""
    systemd = (pid1_comm if pid1_comm is not None else _read("/proc/1/comm")) == "systemd"
    for directory in (cgroup_root, os.path.join(cgroup_root, "unified")):
        if "cpu" in (_read(os.path.join(directory, "cgroup.controllers")) or "").split():
            return {"version": "v2", "cpu": directory, "cpuacct": directory, "systemd": systemd}
    found = {}
    for name in ("cpu,cpuacct", "cpuacct,cpu", "cpu", "cpuacct"):
        directory = os.path.join(cgroup_root, name)
        if not os.path.isdir(directory):
            continue
        for controller in name.split(","):
            marker = "cpu.shares" if controller == "cpu" else "cpuacct.usage"
            if controller not in found and os.path.exists(os.path.join(directory, marker)):
                found[controller] = directory
    if "cpu" in found:
        return {"version": "v1", "cpu": found["cpu"], "cpuacct": found.get("cpuacct"), "systemd": systemd}
    return {"version": None, "cpu": None, "cpuacct": None, "systemd": systemd}


def placement(found, pid, spare_cpus=(), in_scope=False):
    """Where the harness goes on a host of ``layout`` ``found``: ``{"method", "policy", "cpus", "cgroups",
    "scope_argv", "accounting"}``.

    - ``method``: ``systemd-scope`` (systemd is PID 1 and the harness is not in its scope yet: ``scope_argv`` is
      the command line to re-execute under), ``cgroup-v1``, ``cgroup-v2``, or ``policy-only`` (no cpu controller);
    - ``cgroups``: ``[{"path", "files": [(name, value), ...]}]`` to create, in order, and enter;
    - ``cpus``: the affinity, a cpu list, or None to keep every CPU;
    - ``accounting``: ``{"kind": "percpu"|"total", "path"}``, the file that counts the harness's CPU time, or None.
    ``in_scope``: the harness already runs in its scope (re-executed): the scope's cgroup counts it."""
    cpus = cpu_fence.format_cpus(spare_cpus) if spare_cpus else None
    name = f"{PREFIX}{int(pid)}"
    chosen = {"method": "policy-only", "policy": "SCHED_IDLE", "cpus": cpus, "cgroups": [], "accounting": None}
    if found.get("systemd") and not in_scope:
        argv = ["systemd-run", "--scope", "--quiet", "--collect", f"--unit={name}", "--property=CPUWeight=idle"]
        if cpus:
            argv.append(f"--property=AllowedCPUs={cpus}")
        return {**chosen, "method": "systemd-scope", "scope_argv": argv}
    if found.get("systemd") and in_scope:
        return {**chosen, "method": "systemd-scope", "scope_argv": None, "accounting": _own_accounting(found)}
    if found.get("version") == "v2":
        path = os.path.join(found["cpu"], name)
        idle = os.path.exists(os.path.join(found["cpu"], "cpu.idle")) or _child_has(found["cpu"], "cpu.idle")
        files = [("cpu.idle", "1")] if idle else [("cpu.weight", IDLE_WEIGHT)]
        return {
            **chosen,
            "method": "cgroup-v2",
            "cgroups": [{"path": path, "files": files, "enable_cpu": True}],
            "accounting": {"kind": "total", "path": os.path.join(path, "cpu.stat")},
        }
    if found.get("version") == "v1":
        path = os.path.join(found["cpu"], name)
        # cpu.idle (Linux 5.15+) gives the group SCHED_IDLE's semantics, not only its weight.
        idle = os.path.exists(os.path.join(found["cpu"], "cpu.idle"))
        cgroups = [{"path": path, "files": [("cpu.idle", "1")] if idle else [("cpu.shares", IDLE_SHARES)]}]
        accounting = None
        if found.get("cpuacct"):
            counted = os.path.join(found["cpuacct"], name)
            if counted != path:
                cgroups.append({"path": counted, "files": []})
            accounting = {"kind": "percpu", "path": os.path.join(counted, "cpuacct.usage_percpu")}
        return {**chosen, "method": "cgroup-v1", "cgroups": cgroups, "accounting": accounting}
    return chosen


def _child_has(directory, name):
    """Whether a child cgroup of ``directory`` has the file ``name`` (v2's root has no cpu.idle of its own)."""
    try:
        return any(os.path.exists(os.path.join(directory, entry, name)) for entry in os.listdir(directory))
    except OSError:
        return False


def _own_accounting(found, cgroup_file="/proc/self/cgroup"):
    """The accounting file of the cgroup this process is in now (inside its systemd scope)."""
    lines = (_read(cgroup_file) or "").splitlines()
    if found.get("version") == "v2":
        path = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
        return {"kind": "total", "path": os.path.join(found["cpu"], path.lstrip("/"), "cpu.stat")} if path else None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and found.get("cpuacct"):
            return {"kind": "percpu", "path": os.path.join(found["cpuacct"], path.lstrip("/"), "cpuacct.usage_percpu")}
    return None


def lower_policy():
    """This thread (and what it starts from now on) to SCHED_IDLE; None, or why it could not be."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError) as exc:
        return f"SCHED_IDLE was refused ({getattr(exc, 'strerror', None) or exc})"
    return None


def apply(chosen, pid=None):
    """Put process ``pid`` (this one) where ``chosen`` (``placement``) says, but for a systemd scope, which the caller
    enters by re-executing under ``scope_argv``. Returns the state: ``{"isolated", "how", "problems", "cgroups",
    "accounting", "cpus"}``; ``isolated`` is false, and ``problems`` say why, where a step was refused."""
    pid = os.getpid() if pid is None else pid
    problems, entered = [], []
    previous = {"policy": os.sched_getscheduler(0), "affinity": sorted(os.sched_getaffinity(0))}
    refused = lower_policy()
    if refused:
        problems.append(refused)
    came_from = {}
    for cgroup in chosen["cgroups"]:
        try:
            came_from[cgroup["path"]] = _current(os.path.dirname(cgroup["path"]), pid)
            _enter(cgroup, pid)
            entered.append(cgroup["path"])
        except OSError as exc:
            problems.append(f"the cgroup {cgroup['path']} could not be made or entered ({exc.strerror or exc})")
    if chosen["method"] == "policy-only":
        problems.append("the host has no cgroup cpu controller to weigh the harness down")
    if chosen["cpus"]:
        try:
            os.sched_setaffinity(pid, cpu_fence.parse_cpus(chosen["cpus"]))
        except OSError as exc:
            problems.append(f"the harness could not be kept on CPUs {chosen['cpus']} ({exc.strerror or exc})")
    accounting = chosen["accounting"] if chosen["accounting"] and (entered or not chosen["cgroups"]) else None
    return {
        "isolated": not problems,
        "how": describe(chosen, entered),
        "problems": problems,
        "cgroups": entered,
        "accounting": accounting,
        "cpus": chosen["cpus"],
        "previous": previous,
        "came_from": came_from,
    }


def _current(mount, pid):
    """The cgroup directory process ``pid`` is in now, in the hierarchy mounted at ``mount`` (where it goes back)."""
    controllers = set(os.path.basename(mount).split(","))
    for line in (_read(f"/proc/{pid}/cgroup") or "").splitlines():
        _, names, path = line.split(":", 2)
        if (names == "" and os.path.exists(os.path.join(mount, "cgroup.controllers"))) or controllers & set(
            names.split(",")
        ):
            directory = os.path.join(mount, path.lstrip("/"))
            return directory if os.path.isdir(directory) else mount
    return mount


def _enter(cgroup, pid):
    parent = os.path.dirname(cgroup["path"])
    if cgroup.get("enable_cpu") and "cpu" not in (_read(os.path.join(parent, "cgroup.subtree_control")) or "").split():
        _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
    if not os.path.isdir(cgroup["path"]):
        os.mkdir(cgroup["path"])
    for name, value in cgroup["files"]:
        _write(os.path.join(cgroup["path"], name), value)
    _write(os.path.join(cgroup["path"], "cgroup.procs"), str(pid))


def describe(chosen, entered=None):
    """One line: how the harness is kept out of the cells' way."""
    parts = [chosen["policy"]]
    if chosen["method"] == "systemd-scope":
        parts.append("a systemd scope with CPUWeight=idle")
    for cgroup in chosen["cgroups"]:
        if entered is not None and cgroup["path"] not in entered:
            continue
        settings = ", ".join(f"{name} {value}" for name, value in cgroup["files"]) or "its CPU time counted"
        parts.append(f"cgroup {cgroup['path']} ({settings})")
    parts.append(f"on CPUs {chosen['cpus']}" if chosen["cpus"] else "on the cells' CPUs (no CPU is reserved)")
    return "; ".join(parts)


def release(state, pid=None, grace=10.0):
    """Leave the harness's cgroups and remove them; the problems, [] when every one went. A cgroup another process
    still holds (a worker that has not exited) stays: playbooks/teardown.yml removes it with the other leftovers."""
    pid = os.getpid() if pid is None else pid
    problems = []
    previous = state.get("previous")
    if previous:  # a caller that goes on (a test, platbench calibrate's next step) gets its own place back
        try:
            os.sched_setscheduler(0, previous["policy"], os.sched_param(0))
            os.sched_setaffinity(0, previous["affinity"])
        except OSError as exc:
            problems.append(f"the harness's scheduling policy was not restored ({exc.strerror or exc})")
    for path in state.get("cgroups") or []:
        try:
            back = (state.get("came_from") or {}).get(path) or os.path.dirname(path)
            _write(os.path.join(back, "cgroup.procs"), str(pid))
            _remove_when_empty(path, back, grace)
        except OSError as exc:
            problems.append(f"the harness's cgroup {path} was not removed ({exc.strerror or exc})")
    return problems


def _remove_when_empty(path, back, grace):
    """rmdir ``path``, the harness's group. A run stopped by a signal has just killed its playbook's sessions, and a
    process of the harness may still be exiting in it (EBUSY): each one left is moved to ``back``, where the harness
    came from, until the group is empty or ``grace`` seconds have passed."""
    deadline = time.monotonic() + grace
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise
        for pid in (_read(os.path.join(path, "cgroup.procs")) or "").split():
            try:
                _write(os.path.join(back, "cgroup.procs"), pid)
            except OSError:
                continue  # gone meanwhile
        time.sleep(0.1)


def leftovers(found):
    """Harness cgroups whose process is gone (a run killed with SIGKILL), as paths."""
    paths = []
    for key in ("cpu", "cpuacct"):
        directory = found.get(key)
        if not directory or not os.path.isdir(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            path = os.path.join(directory, entry)
            if entry.startswith(PREFIX) and path not in paths and not os.path.exists(f"/proc/{entry[len(PREFIX) :]}"):
                paths.append(path)
    return paths


def reading(accounting):
    """The harness's CPU seconds so far: ``[per CPU ...]`` (percpu), ``[all CPUs]`` (total), or None."""
    if not accounting:
        return None
    text = _read(accounting["path"])
    if text is None:
        return None
    if accounting["kind"] == "percpu":
        return [int(value) / 1e9 for value in text.split()]
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return [int(value) / 1e6]
    return None


def append_reading(series_path, accounting, now):
    """One line of the series: ``{"t": seconds since the epoch, "cpu": reading}``; False when nothing was read."""
    value = reading(accounting)
    if value is None:
        return False
    with open(series_path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps({"t": round(now, 3), "cpu": value}, separators=(",", ":")) + "\n")
    return True


def read_series(series_path):
    """The series' readings in time order: ``[(t, [seconds ...]), ...]``; a torn last line is skipped."""
    found = []
    try:
        with open(series_path, encoding="utf-8") as stream:
            for line in stream:
                try:
                    entry = json.loads(line)
                    found.append((float(entry["t"]), [float(value) for value in entry["cpu"]]))
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        return []
    return found


def _at(series, moment, index):
    """The reading of CPU ``index`` at ``moment``, linear between the readings around it; None outside them."""
    before = [(t, cpu[index]) for t, cpu in series if t <= moment and index < len(cpu)]
    after = [(t, cpu[index]) for t, cpu in series if t >= moment and index < len(cpu)]
    if not before or not after:
        return None
    (t0, v0), (t1, v1) = before[-1], after[0]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (moment - t0) / (t1 - t0)


def cpu_between(series, start, end, cpus=None):
    """CPU seconds the harness used from ``start`` to ``end`` (seconds since the epoch) on ``cpus`` (a list of CPU
    numbers; None: all). A total reading (v2) counts every CPU. None where the series does not cover the window."""
    if not series or end < start:
        return None
    width = len(series[-1][1])
    indexes = [0] if width == 1 else [cpu for cpu in (cpus if cpus else range(width)) if cpu < width]
    total = 0.0
    for index in indexes:
        first, last = _at(series, start, index), _at(series, end, index)
        if first is None or last is None:
            return None
        total += max(0.0, last - first)
    return total
