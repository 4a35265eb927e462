# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The CPU-bandwidth quota of an injected overhead around a process cell (an experiment's ``inject: {cpu_quota: Q}``,
plugins/plugin_utils/experiment/inject.py): a cgroup of its own per cell.

platbench creates the cell's cgroup in the host's ``cpu`` controller hierarchy before the cell, named after the cell
(``platbench-cell-`` and the 12 hex digits of the cell's instance name), with a CFS quota of Q x the cell's CPUs x
the period. The cell's shell line writes its own pid into the cgroup's ``cgroup.procs`` before it execs the workload,
so the workload and every process it starts run under the quota. The cgroup goes after the cell, whatever happened to
it; one that a stopped run left is a leftover the precheck names and ``playbooks/teardown.yml`` removes.

- cgroup v2: the unified hierarchy whose ``cgroup.controllers`` offers ``cpu``; one file, ``cpu.max`` =
  ``QUOTA PERIOD``. The controller is enabled for the root's children where it is not (and the module says so).
- cgroup v1: the ``cpu`` controller's own mount (``cpu``, or ``cpu,cpuacct`` where the two share one);
  ``cpu.cfs_period_us``, then ``cpu.cfs_quota_us``.

The cgroup root can be given, so the unit tests work on a fake tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import signal
import time

PREFIX = "platbench-cell-"
# A cell's cgroup, or one that a run of an earlier release left (its cells' cgroups were platbench-inject-*).
NAME = re.compile(r"^platbench-(cell|inject)-[0-9a-f]{12}$")
# The CFS period: the kernel's default, 100 ms. A quota is worked out as a share of it.
PERIOD_US = 100000
# The smallest quota the kernel takes (1 ms a period).
MIN_QUOTA_US = 1000
# A cgroup of the cell's own without a quota: an inject experiment's cells without the cap run in one, so that the
# cap is the only difference between them and the capped cells (a cgroup of its own changes how CFS shares a core).
UNLIMITED = -1
# v1: the names the cpu controller's own mount takes (alone, or sharing it with cpuacct).
V1_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
PROCS = "cgroup.procs"
# How long the cell's shell line waits for the processes it killed to leave the cgroup before it gives up removing it
# (they are exiting; playbooks/teardown.yml removes what is left), and how often it tries.
LEAVE_GRACE_S, LEAVE_POLL_S = 10.0, 0.05


class QuotaError(RuntimeError):
    """The quota cannot be applied or removed; the message says where and what to do."""


def _read(path):
    with open(path, encoding="utf-8") as stream:
        return stream.read().strip()


def _write(path, value):
    # A cgroup file takes one write per value.
    try:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(value)
    except OSError as exc:
        raise QuotaError(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


def _offers_cpu(directory):
    controllers = os.path.join(directory, "cgroup.controllers")
    return os.path.isfile(controllers) and "cpu" in _read(controllers).split()


def hierarchy(cgroup_root="/sys/fs/cgroup"):
    """Where the host's ``cpu`` controller is: ``{"version": "v2", "directory": ROOT}`` (the unified hierarchy offers
    it; on a hybrid host, the unified mount below the root that does), ``{"version": "v1", "directory": ROOT/cpu}``,
    or None when neither does."""
    for directory in (cgroup_root, os.path.join(cgroup_root, "unified")):
        if _offers_cpu(directory):
            return {"version": "v2", "directory": directory}
    for name in V1_MOUNTS:
        directory = os.path.join(cgroup_root, name)
        if os.path.isfile(os.path.join(directory, "cpu.cfs_quota_us")):
            return {"version": "v1", "directory": directory}
    return None


def quota_us(fraction, cpus, period_us=PERIOD_US):
    """The CFS quota, in microseconds a period, of ``fraction`` of ``cpus`` CPUs: Q x CPUs x period."""
    quota = int(round(float(fraction) * float(cpus) * int(period_us)))
    if quota < MIN_QUOTA_US:
        raise QuotaError(
            f"a CPU quota of {fraction:g} x {cpus:g} CPU(s) is {quota} us a {period_us} us period, below the "
            f"kernel's minimum of {MIN_QUOTA_US} us: inject a larger cpu_quota"
        )
    return quota


def cgroup_name(instance_name):
    """The cell's cgroup: ``platbench-cell-`` and the hex digits of its instance name (campaign, host, cell)."""
    return PREFIX + str(instance_name).rsplit("-", 1)[-1]


def settings(version, quota, period_us=PERIOD_US):
    """The files of the cgroup to write, in order, with their values."""
    if version == "v2":
        return [("cpu.max", f"{'max' if int(quota) == UNLIMITED else int(quota)} {int(period_us)}")]
    if version == "v1":
        # The period first: the quota of a new group is unlimited (-1), so no check of quota against period fails.
        return [("cpu.cfs_period_us", str(int(period_us))), ("cpu.cfs_quota_us", str(int(quota)))]
    raise QuotaError(f"cgroup version must be v1 or v2, got {version!r}")


def describe(version, quota, period_us=PERIOD_US):
    """What the record says was applied: ``cgroup v1 cpu.cfs_quota_us=95000 cpu.cfs_period_us=100000``."""
    if version == "v2":
        return f"cgroup v2 cpu.max={'max' if int(quota) == UNLIMITED else int(quota)} {int(period_us)}"
    return f"cgroup v1 cpu.cfs_quota_us={int(quota)} cpu.cfs_period_us={int(period_us)}"


def create(path, version, quota, period_us=PERIOD_US, check=False):
    """Create the cgroup at ``path`` with the quota, or bring an existing one to it; returns ``(changed, result)``:
    ``applied`` (each file's value read back), ``enabled_cpu`` (v2: the controller enabled for the parent's
    children). A value that does not read back as written is an error."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise QuotaError(
            f"{parent} does not exist: the host's cpu cgroup hierarchy is not where the cell's plan put it "
            "(host_facts' cpu_cgroup); gather the host's facts again"
        )
    wanted = settings(version, quota, period_us)
    enable = version == "v2" and "cpu" not in _read(os.path.join(parent, "cgroup.subtree_control")).split()
    exists = os.path.isdir(path)
    current = {name: _read_or_none(os.path.join(path, name)) for name, _ in wanted} if exists else {}
    differs = [name for name, value in wanted if _normal(current.get(name)) != _normal(value)]
    changed = enable or not exists or bool(differs)
    result = {"cgroup": path, "enabled_cpu": enable, "applied": dict(wanted) if check else current}
    if check or not changed:
        return changed, result
    if enable:
        _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
    if not exists:
        try:
            os.mkdir(path)
        except OSError as exc:
            raise QuotaError(f"cannot create the cgroup {path}: {exc.strerror or exc}") from None
    for name, value in wanted:
        _write(os.path.join(path, name), value)
    applied = {name: _read(os.path.join(path, name)) for name, _ in wanted}
    wrong = [f"{name} reads {applied[name]!r}" for name, value in wanted if _normal(applied[name]) != _normal(value)]
    if wrong:
        raise QuotaError(f"the quota of {path} did not take: {', '.join(wrong)} after writing {dict(wanted)}")
    return True, {**result, "applied": applied}


def _read_or_none(path):
    try:
        return _read(path)
    except FileNotFoundError:
        return None


def _normal(value):
    return None if value is None else " ".join(str(value).split())


def processes(path):
    """The pids in the cgroup at ``path`` ([] where it has no ``cgroup.procs``)."""
    try:
        return [int(pid) for pid in _read(os.path.join(path, PROCS)).split()]
    except FileNotFoundError:
        return []


def remove(path, grace=10.0, check=False):
    """Remove the cgroup at ``path``: SIGKILL to what is still in it (the cell's own processes, nothing else ever
    enters it), wait up to ``grace`` seconds for them to go, then remove it. Returns ``(changed, killed pids)``."""
    if not os.path.isdir(path):
        return False, []
    left = processes(path)
    if check:
        return True, left
    for pid in left:
        with contextlib.suppress(ProcessLookupError):  # gone already
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + float(grace)
    while True:
        try:
            os.rmdir(path)
            return True, left
        except FileNotFoundError:
            return True, left
        except OSError as exc:
            # EBUSY while a killed process is still exiting.
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                still = processes(path)
                raise QuotaError(
                    f"cannot remove the cgroup {path}: {exc.strerror or exc}"
                    + (f" (processes {', '.join(map(str, still))} still in it)" if still else "")
                    + "; once they are gone, run playbooks/teardown.yml (or rmdir it)"
                ) from None
        time.sleep(0.05)


def shell_enter(cgroup):
    """Shell commands, joined by ``&&``, that make the cell's cgroup (``cgroup``: its path, version, quota_us and
    period_us, as the cell's plan has it) with its quota and move the shell itself (``$$``) into it, then into each of
    ``cgroup["leave"]`` (other hierarchies' cgroup.procs). What the shell then starts runs in the cgroup.

    The cell's own shell line does this, not a task before it: a module's start costs each cell about 0.4 s, and two
    of them (make, remove) were most of a bm cell's orchestration. A write the kernel refuses fails the line there."""
    path = str(cgroup["path"])
    steps = []
    if cgroup["version"] == "v2":
        # The cpu controller offered to the parent's children, once for the host (create() does the same).
        control = shlex.quote(os.path.join(os.path.dirname(path), "cgroup.subtree_control"))
        steps.append(f"{{ grep -qw cpu {control} || echo +cpu > {control}; }}")
    # Not `mkdir -p`: a hierarchy that is not where the plan says must fail the line, not become plain directories.
    steps.append(f"{{ [ -d {shlex.quote(path)} ] || mkdir {shlex.quote(path)}; }}")
    for name, value in settings(cgroup["version"], cgroup["quota_us"], cgroup.get("period_us", PERIOD_US)):
        steps.append(f"echo {shlex.quote(value)} > {shlex.quote(os.path.join(path, name))}")
    for procs in [os.path.join(path, PROCS), *cgroup.get("leave", [])]:
        steps.append(f"echo $$ > {shlex.quote(procs)}")
    return " && ".join(steps)


def shell_leave(cgroup):
    """Shell commands that remove the cell's cgroup after the workload, whatever its status, as remove() does: the
    shell moves itself back to the hierarchy's root, kills what is still in the cgroup (nothing the cell started may
    outlive it), and removes it, trying for LEAVE_GRACE_S while killed processes exit. A cgroup that stays is named
    on stderr, which the cell's record keeps; the precheck and playbooks/teardown.yml find it."""
    path = str(cgroup["path"])
    quoted, procs = shlex.quote(path), shlex.quote(os.path.join(path, PROCS))
    root = shlex.quote(os.path.join(os.path.dirname(path), PROCS))
    tries = int(LEAVE_GRACE_S / LEAVE_POLL_S)
    gave_up = shlex.quote(
        f"platbench: the cell's cgroup {path} was not removed: processes are still in it; "
        "playbooks/teardown.yml removes it"
    )
    return (
        f"echo $$ > {root}; for pid in $(cat {procs} 2>/dev/null); do [ $pid = $$ ] || kill -9 $pid; done 2>/dev/null; "
        "tries=0; "
        f"until rmdir {quoted} 2>/dev/null || [ ! -d {quoted} ]; do tries=$((tries + 1)); "
        f"if [ $tries -ge {tries} ]; then echo {gave_up} >&2; break; fi; sleep {LEAVE_POLL_S:g}; done"
    )


def leftovers(cgroup_root="/sys/fs/cgroup"):
    """The cells' cgroups (NAME) in the host's cpu hierarchy, as paths; [] where the host has none."""
    found = hierarchy(cgroup_root)
    if found is None:
        return []
    directory = found["directory"]
    return [
        os.path.join(directory, name)
        for name in sorted(os.listdir(directory))
        if NAME.match(name) and os.path.isdir(os.path.join(directory, name))
    ]
