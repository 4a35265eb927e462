# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The process kind: the workload as a process on a machine (the runner host, a guest, a cloud instance).

Its launcher (the registry's ``launcher``) is the workload environment's python (``venv``) or
``apptainer exec`` of the workload image's SIF (``apptainer``). On the runner host ``pin`` puts
``taskset`` in front; in a guest the vCPUs are pinned on the host instead, and on an instance its
flavor or ``taskset`` over its own CPUs does (the machine says which).

An injected overhead (``inject: {cpu_quota: Q}``, plugin_utils/experiment/inject.py) puts the process on the runner host
in a cgroup of the cell's own with a CFS quota of Q x its CPUs (module_utils/cpu_quota.py): tasks/place.yml
creates it before the cell and removes it after, and the shell line moves itself into it before it execs the
workload. For Apptainer's ``vnl`` that quota takes the place of Apptainer's own ``--cpus``, which would move the
workload into a cgroup of Apptainer's, out of the cell's.

Where systemd is PID 1 (host_facts' ``systemd_pid1``) systemd owns the cgroup tree, and a cell's cgroup is a transient
scope instead (``platbench-cell-`` and the same hex digits, in ``system.slice`` beside Docker's containers): the shell
line execs ``systemd-run --scope`` in front of the workload, systemd makes the scope's cgroup with the cell's
properties (an injected quota as ``CPUQuota``) and removes it when the workload's last process exits.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ansible_collections.platbench.lab.plugins.module_utils import apptainer, cpu_fence, cpu_quota, quiet
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import apptainer_plan, cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    PlacementError,
    command_observed,
    kind_file,
)

# The experiment's ``isolation: none`` (experiment_spec.py): its process cells stay where the harness is.
ISOLATION_LABEL, NO_ISOLATION = "isolation", "none"
# The cell's transient systemd scope (where systemd is PID 1): its unit's prefix and slice. A container of Docker's
# systemd cgroup driver is a scope in system.slice too, so the two sides of a comparison are placed alike.
SCOPE_PREFIX, SCOPE_SLICE = "platbench-cell-", "system.slice"
# A process cell's environment on the runner host: the plan's variables on this base, nothing of the controller's.
BASE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8")


@dataclass
class Machine:
    """Where the process runs, as the kind holding it describes it."""

    host: str  # the inventory host (or guest) the command is delegated to
    prefix: str  # where the workload environment is there
    taskset: str = ""  # CPUs (there) the process is pinned to with taskset, "" for none
    over_ssh: bool = False  # the runner reaches it over SSH (a guest, an instance)
    become: bool = True  # run as root (the runner host); guests and instances run as their user
    binds: list = field(default_factory=list)  # host directories Apptainer binds (on the runner host)
    scratch: list = field(default_factory=list)  # directories Apptainer gives as scratch (in a throwaway guest)
    sif: str | None = None  # the SIF there (launcher apptainer)
    sif_image_id: str | None = None
    apptainer_version: str | None = None
    apptainer_cpuset: str = ""  # CPUs Apptainer's taskset gets (in a guest: every vCPU for pin)


def runner_machine(ctx):
    """The runner host itself (bm, sg)."""
    sif = ctx.opts["sif"] or {}
    return Machine(
        host=ctx.opts["host"],
        prefix=ctx.opts["prefix"],
        taskset=ctx.cpuset if ctx.pinned else "",
        binds=ctx.mounts,
        sif=sif.get("sif"),
        sif_image_id=sif.get("image_id"),
        apptainer_version=ctx.opts["apptainer_version"] or sif.get("apptainer_version"),
        apptainer_cpuset=ctx.cpuset,
    )


def quota_cgroup(ctx, machine, fraction):
    """Where the cell runs on the runner host for an injected ``fraction`` of its CPUs: ``{"cgroup": ...}`` (path,
    cgroup version, quota and period: tasks/place.yml makes it) or, where systemd is PID 1, ``{"scope": ...}``
    (``cell_scope``); and what the record says was applied."""
    if machine.over_ssh:
        raise PlacementError(
            f"{ctx.where}: inject: the CPU quota cgroup is made around a process on the runner host only, not in "
            f"{machine.host}: inject into the runner host's platforms (bm, sg) or containers (cn, pd)"
        )
    found = ctx.facts.get("cpu_cgroup")
    if not found:
        raise PlacementError(
            f"{ctx.where}: inject: cpu_quota needs the cgroup cpu controller (cgroup v2 with cpu in "
            "/sys/fs/cgroup/cgroup.controllers, or v1's cpu mount with cpu.cfs_quota_us), and the host's facts "
            "(platbench.lab.host_facts: cpu_cgroup) found neither: mount the cpu controller, or drop inject"
        )
    try:
        quota = cpu_quota.quota_us(fraction, ctx.threads)
    except cpu_quota.QuotaError as exc:
        raise PlacementError(f"{ctx.where}: inject: {exc}") from None
    place, applied = _cell_place(ctx, found, quota)
    return place, {"cpu_quota": fraction, "quota_cpus": ctx.injected_cpus(fraction), **applied}


def _cell_place(ctx, found, quota_us):
    """The cell's own cgroup with ``quota_us`` (``cpu_quota.UNLIMITED``: none): a scope where systemd is PID 1, else
    one in the host's cpu hierarchy (``found``: host_facts' cpu_cgroup); and what the record says of it."""
    if ctx.facts.get("systemd_pid1"):
        scope = cell_scope(ctx, quota_us)
        return {"scope": scope}, {
            "cgroup": f"{scope['slice']}/{scope['unit']}",
            "applied_by": f"systemd scope {' '.join(scope['properties'])}",
        }
    cgroup = _cell_cgroup(ctx, found, quota_us)
    return {"cgroup": cgroup}, {
        "cgroup": cgroup["path"],
        "applied_by": cpu_quota.describe(cgroup["version"], quota_us, cgroup["period_us"]),
    }


def cell_scope(ctx, quota_us=cpu_quota.UNLIMITED):
    """The cell's transient scope: its unit, slice and properties. CPUWeight is the default, set so that systemd
    gives the scope the cpu controller (a group of its own, as a container's); a quota is CPUQuota, Q x CPUs x 100%
    over systemd's default period, the kernel's 100 ms (CPUQuotaPeriodSec, which systemd before 242 refuses, would
    only repeat it)."""
    digits = cpu_quota.cgroup_name(ctx.name).removeprefix(cpu_quota.PREFIX)
    properties = ["CPUAccounting=yes", "CPUWeight=100"]
    if int(quota_us) != cpu_quota.UNLIMITED:
        percent = round(int(quota_us) * 100 / cpu_quota.PERIOD_US, 2)
        properties.append(f"CPUQuota={percent:g}%")
    return {"unit": f"{SCOPE_PREFIX}{digits}.scope", "slice": SCOPE_SLICE, "properties": properties}


def scope_argv(scope):
    """systemd-run in front of the workload: it puts itself in the new scope, then execs what follows ``--``."""
    properties = [f"--property={setting}" for setting in scope["properties"]]
    unit = [f"--unit={scope['unit']}", f"--slice={scope['slice']}"]
    return ["systemd-run", "--scope", "--quiet", "--collect", *unit, *properties, "--"]


def _cell_cgroup(ctx, found, quota_us):
    """The cell's own cgroup in the host's cpu hierarchy (``found``: host_facts' cpu_cgroup), with ``quota_us``;
    ``leave``: the cgroup.procs files of the other hierarchies' roots the shell line also writes itself into (v1's
    cpuacct where it has a mount of its own: the harness's CPU time is counted there, the cell's must not be)."""
    cgroup = {
        "path": f"{str(found['directory']).rstrip('/')}/{cpu_quota.cgroup_name(ctx.name)}",
        "version": found["version"],
        "quota_us": quota_us,
        "period_us": cpu_quota.PERIOD_US,
    }
    counted = (ctx.facts.get("cpuacct_cgroup") or {}).get("directory")
    if found["version"] == "v1" and counted and counted != found["directory"]:
        cgroup["leave"] = [f"{counted.rstrip('/')}/{cpu_quota.PROCS}"]
    return cgroup


def own_cgroup(ctx, machine):
    """The cgroup of its own, without a quota, every process cell on the runner host runs in (``_cell_place``): a
    container runs in one its engine makes, and a process left in the root cgroup (or the harness's) would compete
    task by task instead of as a group, so the two sides of a comparison would not be placed alike. The cells of an
    inject experiment that run without a cap are in one too, so the cells compared differ only by what is injected.
    (None, None) on a machine over SSH (a guest's or an instance's processes are inside it) or where the experiment
    says ``isolation: none``. A runner host without a cpu controller refuses the cell: it cannot be placed alike."""
    if machine.over_ssh or ctx.cell["labels"].get(ISOLATION_LABEL) == NO_ISOLATION:
        return None, None
    found = ctx.facts.get("cpu_cgroup")
    if not found:
        raise PlacementError(
            f"{ctx.where}: a {ctx.platform.label} cell runs in a cgroup of its own, as a container does, and this "
            "host's facts (platbench.lab.host_facts: cpu_cgroup) found no cgroup cpu controller: mount it (cgroup v2 "
            "with cpu in /sys/fs/cgroup/cgroup.controllers, or v1's cpu mount), or set `isolation: none` in the "
            "experiment, which the report marks"
        )
    return _cell_place(ctx, found, cpu_quota.UNLIMITED)


def plan(ctx, plan, machine=None):
    """plan["process"]: argv, chdir, env, and where it runs (host, become); with an injected overhead, the cgroup
    it runs in (``cgroup``)."""
    machine = machine or runner_machine(ctx)
    fraction = ctx.injected_quota
    capped = fraction is not None
    place, applied = quota_cgroup(ctx, machine, fraction) if capped else own_cgroup(ctx, machine)
    if ctx.platform.launcher == "apptainer":
        if not machine.sif:
            fix = apptainer.GUEST_FIX if machine.over_ssh else apptainer.INSTALL_FIX
            raise PlacementError(f"{ctx.where}: no SIF of the workload image: {fix}")
        plan["env"] = ctx.env()
        plan["process"] = {
            "argv": apptainer_plan.exec_argv(
                machine.sif,
                ctx.argv,
                binds=machine.binds,
                scratch=machine.scratch,
                gpu=ctx.gpu_count > 0,
                cpu_quota=None if capped else ctx.quota,
                cpuset=machine.apptainer_cpuset,
            ),
            "chdir": "/",
            "env": apptainer_plan.process_env(plan["env"]),
        }
        plan["runtime"].update(
            launcher="apptainer",
            cpu_quota_requested=None if capped else ctx.quota,
            sif=machine.sif,
            sif_image_id=machine.sif_image_id,
            apptainer_version=machine.apptainer_version,
        )
        if machine.over_ssh:
            plan["runtime"]["in_guest_cpuset"] = machine.apptainer_cpuset or None
        else:
            plan["runtime"]["image"] = (ctx.opts["sif"] or {}).get("image")
    else:
        plan["env"] = ctx.env({"PYTHONPATH": machine.prefix})
        taskset = ["taskset", "--cpu-list", machine.taskset] if machine.taskset else []
        plan["process"] = {
            "argv": taskset + [f"{machine.prefix}/venv/bin/python"] + ctx.argv,
            "chdir": machine.prefix,
            "env": plan["env"],
        }
        if machine.over_ssh:
            plan["runtime"]["launcher"] = "taskset over ssh" if taskset else "ssh"
        else:
            plan["runtime"]["launcher"] = "taskset" if taskset else "process"
    plan["process"].update(host=machine.host, become=machine.become)
    if place:
        plan["process"].update(place)
        plan["runtime"]["inject" if capped else "uncapped_cgroup"] = applied
    if ctx.cell["labels"].get(ISOLATION_LABEL) == NO_ISOLATION:
        plan["runtime"]["isolation"] = NO_ISOLATION
    if not machine.over_ssh:
        # A harness kept on spare CPUs passes its affinity down: an unpinned cell gets every CPU back (Apptainer's
        # too: its vnl quota limits time, not where the workload runs).
        plan["process"].update(normal_policy=True, clean_env=True)
        if not machine.taskset and ctx.facts.get("cpus_allowed"):
            plan["process"]["argv"] = ["taskset", "--cpu-list", _cpu_list(ctx.facts.get("cpus_allowed"))] + plan[
                "process"
            ]["argv"]
    plan["process"]["command"] = shell_command(plan["process"], deadline=plan["timeout"])
    plan["process"]["task_timeout"] = cell_timeout.task_timeout(plan["timeout"])


def shell_command(process, deadline=None):
    """The process as one POSIX shell line: its directory, its environment and its argv, each quoted.

    tasks/place.yml hands it to ansible.builtin.raw, which runs it through the connection's shell without a Python
    module on the other side: the half second a module's start costs is no longer part of every cell.
    ``deadline``: the cell's timeout, which coreutils' timeout enforces there on the workload and every process it
    started (plugin_utils/cells/cell_timeout.py); None where a supervisor stops it (a guest's instances). With a
    ``cgroup`` (the cell's own, an injected CPU quota's) the shell makes the cgroup and moves itself into it first,
    so that what it starts, and every process that starts, runs in it; after the workload it removes the cgroup and
    exits with the workload's status (module_utils/cpu_quota.py: shell_enter, shell_leave). A cgroup it cannot make
    or enter stops the line before the workload, saying so. With a ``scope`` it execs systemd-run first, which does
    the same through systemd (a scope that cannot be made fails the line with systemd-run's message)."""
    assignments = [f"{name}={value}" for name, value in sorted(process["env"].items())]
    stop = cell_timeout.deadline_argv(deadline) if deadline is not None else []
    # On the runner host: the workload back at the normal policy (the harness that starts it runs at SCHED_IDLE,
    # which a child inherits) and nice 0, with the plan's variables on a fixed base instead of the controller's
    # environment (env -i), as a container gets its image's.
    policy = quiet.NORMAL_POLICY_ARGV if process.get("normal_policy") else []
    base = ["-i", *BASE_ENV] if process.get("clean_env") else []
    scope = scope_argv(process["scope"]) if process.get("scope") else []
    command = shlex.join([*scope, *policy, *stop, "env", *base, *assignments, *process["argv"]])
    nice = "renice -n 0 -p $$ >/dev/null && " if process.get("normal_policy") else ""
    chdir = shlex.quote(process["chdir"])
    cgroup = process.get("cgroup")
    if not cgroup:
        return f"cd {chdir} && {nice}exec {command}"
    # The shell stays the workload's parent, asleep in wait(), so that it can remove the cgroup afterwards.
    leave = cpu_quota.shell_leave(cgroup)
    unplaced = shlex.quote(
        f"platbench: the workload did not start: cannot enter {process['chdir']} or make the cell's cgroup "
        f"{cgroup['path']} (the line above says which); check the host's cgroup cpu controller"
    )
    return (
        f"{{ cd {chdir} && {cpu_quota.shell_enter(cgroup)}; }} || {{ status=$?; echo {unplaced} >&2; {leave}; "
        f"exit $status; }}; {nice}{command}; status=$?; {leave}; exit $status"
    )


def affinity_argv(ctx):
    """``taskset`` in front of a line on the runner host: the pinned cell's CPUs, or, unpinned, every CPU the host
    allows (the harness kept on spare CPUs would otherwise pass its own affinity down); [] where neither is known."""
    allowed = ctx.facts.get("cpus_allowed")
    cpus = ctx.cpuset if ctx.pinned else (_cpu_list(allowed) if allowed else "")
    return ["taskset", "--cpu-list", cpus] if cpus else []


def _cpu_list(cpus):
    return cpu_fence.format_cpus(int(cpu) for cpu in cpus)


def observed(plan, results):
    """The command's output and exit code."""
    return command_observed(results.get("process"))


KIND = Kind(
    name="process",
    network="host",
    summary="a process on a machine: the runner host (taskset, a quota cgroup), a guest or an instance",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"process": "platform_run_process"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
    takes_quota=True,
    duet=True,
    instances="supervised",
    started_by="launcher",
)
