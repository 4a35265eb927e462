# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The chroot kind: the workload image's root run by ``chroot``, with ``taskset`` for ``pin``: the same bytes as a
container of the image (its Debian, its Python, its venv), on the host's own kernel view, with no namespace, no
seccomp filter, no dropped capability and no engine. The first rung above bm of ``platbench explain``'s ladder.

The kind is one folder, this one: its declaration and plan here, its placement (``tasks/place.yml``) and its teardown
(``tasks/teardown.yml``) beside them. Nothing outside it names the kind but its platform's registry entry (``cr``).

The root is the one platbench.lab.lxc exports from Docker once per image id (module_utils/lxc.py ``ROOTFS``; the
platform requires ``lxc``, which checks its image id against the current image's). Each cell gets a view of its own,
``VIEWS/<cell name>``: a bind mount of the root with /proc, /sys, /dev, a /tmp of its own and the cell's data and
cache directories mounted into it, so that two cells (an A/A duet pair) never share a mount. The cell's shell line
makes the view, runs the workload in it as the process kind's line would (its own cgroup, the normal policy, a clean
environment, the deadline), then takes the view down; ``tasks/place.yml`` takes down a view a killed line left, and
``tasks/teardown.yml`` those a stopped run left. The cell is a process of the runner host to everything else: its
plan's ``process`` section is the line, so it pairs in a duet as a process side does and takes an injected quota.
"""

from __future__ import annotations

import os
import shlex

from ansible_collections.platbench.lab.plugins.module_utils import lxc
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    PlacementError,
    command_observed,
    kind_file,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = lxc.ROOTFS
PREFIX = lxc.PREFIX  # the image's: its venv and its code
# Where the cells' views are made: under /run, so that a reboot leaves none.
VIEWS = "/run/platbench/chroot"
# What the view mounts besides the cell's own directories: the kernel's views and a private /tmp. /sys and /dev are
# bound recursively (the cgroup files the workload reads of itself, /dev/shm) and kept from propagating back.
SYSTEM_MOUNTS = (
    ("proc", ["mount", "-t", "proc", "proc"]),
    ("sys", ["mount", "--rbind", "/sys"]),
    ("dev", ["mount", "--rbind", "/dev"]),
    ("tmp", ["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs"]),
)
# The exit status of a line whose view could not be made: the workload never started.
VIEW_FAILED = 125


def view_setup(view, mounts, root=ROOT):
    """Shell commands that make the cell's view: ``root`` bound at ``view`` (private, so that nothing mounted in it
    reaches the root's other mounts), the system mounts, then each of ``mounts`` (source, target, mode) at its target,
    read-only where its mode says so."""
    steps = [["mkdir", "-p", view], ["mount", "--bind", root, view], ["mount", "--make-private", view]]
    for target, argv in SYSTEM_MOUNTS:
        steps.append([*argv, f"{view}/{target}"])
        if "--rbind" in argv:
            steps.append(["mount", "--make-rslave", f"{view}/{target}"])
    for mount in mounts:
        inside = f"{view}/{mount['target'].lstrip('/')}"
        steps += [["mkdir", "-p", inside], ["mount", "--bind", mount["source"], inside]]
        if mount["mode"] == "ro":
            steps.append(["mount", "-o", "remount,bind,ro", inside])
    return " && ".join(shlex.join(step) for step in steps)


def view_teardown(view):
    """Shell commands that take ``view`` down (lazily where something still holds it) and remove its directory."""
    quoted = shlex.quote(view)
    return f"{{ umount --recursive {quoted} 2>/dev/null || umount --recursive --lazy {quoted}; }}; rmdir {quoted}"


def line(view, mounts, workload, root=ROOT):
    """The cell's whole shell line: make the view (a failure takes it down and exits VIEW_FAILED), run ``workload``
    (the process kind's line, in a shell of its own, whose pid is the one it writes into the cell's cgroup), take the
    view down and exit with the workload's status."""
    down = view_teardown(view)
    return (
        f"{{ {view_setup(view, mounts, root)}; }} || {{ status=$?; {down} 2>/dev/null; exit {VIEW_FAILED}; }}; "
        f"sh -c {shlex.quote(workload)}; status=$?; {down}; exit $status"
    )


def plan(ctx, plan):
    """plan["process"]: the line that runs the workload chrooted into its view, as the process kind's plan is run
    (tasks/place.yml includes the process kind's task file; a duet runs the line as a process side); plan["chroot"]:
    the root and the view, which place.yml takes down where the line could not."""
    if not ctx.opts.get("image"):
        raise PlacementError(f"{ctx.where}: a chroot cell runs the workload image's root, and no image is named")
    machine = process.Machine(host=ctx.opts["host"], prefix=PREFIX)
    fraction = ctx.injected_quota
    capped = fraction is not None
    place, applied = process.quota_cgroup(ctx, machine, fraction) if capped else process.own_cgroup(ctx, machine)
    view = f"{VIEWS}/{ctx.name}"
    # Unpinned, it gets every CPU the harness's own affinity (spare CPUs) would otherwise pass down, as bm does.
    taskset = process.affinity_argv(ctx)
    plan["env"] = ctx.env({"PYTHONPATH": PREFIX})
    run = {
        "argv": [*taskset, "chroot", view, f"{PREFIX}/venv/bin/python", *ctx.argv],
        "chdir": "/",
        "env": plan["env"],
        "host": machine.host,
        "become": True,  # mount and chroot need root
        "normal_policy": True,
        "clean_env": True,
        **(place or {}),
    }
    run["command"] = line(view, ctx.mounts, process.shell_command(run, deadline=plan["timeout"]))
    run["task_timeout"] = cell_timeout.task_timeout(plan["timeout"])
    plan["process"] = run
    plan["chroot"] = {"root": ROOT, "view": view, "down": view_teardown(view), "run_task_file": process.KIND.task_file}
    launcher = "taskset chroot" if ctx.pinned else "chroot"
    plan["runtime"].update(launcher=launcher, chroot_root=ROOT, image=ctx.opts["image"])
    if place:
        plan["runtime"]["inject" if capped else "uncapped_cgroup"] = applied


def observed(plan, results):
    """The line's output and exit code: the workload's, timeout's 124, or VIEW_FAILED where the view was not made."""
    return command_observed(results.get("process"))


KIND = Kind(
    name="chroot",
    network="host",
    summary="the workload image's root run by chroot (taskset for pin): no namespaces, no seccomp, no engine",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"process": "platform_run_process"},
    # The process kind's teardown stops a leftover workload first (its argv is the same), then the views go.
    teardown=(kind_file(process.__file__, "teardown.yml"), kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
    takes_quota=True,
    duet=True,
)
