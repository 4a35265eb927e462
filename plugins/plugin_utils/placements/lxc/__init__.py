# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The lxc kind: an LXC system container per cell, started by ``lxc-execute`` from the workload image's root
(module_utils/lxc.py; platbench.lab.lxc exports it), the workload its only process tree.

``pin`` = the cell's CPUs as the container's ``cpuset.cpus``; ``vnl`` = a CFS quota of the scale-up's CPUs; the memory
limit a guest gets (``vm_memory_mb``) as its memory cgroup's; LXC applies them when the container starts, or does not
start it. No network (``lxc.net.0.type = empty``: a loopback only); the data directories and the GEMM peak cache bound
in as a container bind-mounts them. No GPU is passed in. The command stops itself at the cell's timeout (coreutils'
``timeout`` around ``lxc-execute``), and its tasks/place.yml stops a container still running after it.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import lxc
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    command_observed,
    kind_file,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.process import shell_command


def plan(ctx, plan):
    """plan["lxc"]: the container's name, its cgroup keys and mounts, and the shell line that runs it."""
    version = (ctx.facts.get("cpu_cgroup") or {}).get("version") or "v2"
    memory_mb = int(ctx.opts["vm_memory_mb"])
    settings = lxc.cgroup_settings(ctx.cpuset, ctx.quota, memory_mb, cgroup_version=version)
    settings += [lxc.mount_entry(m["source"], m["target"], m["mode"]) for m in ctx.mounts]
    plan["env"] = ctx.env({"PYTHONPATH": lxc.PREFIX})
    inside = ["env", *[f"{name}={value}" for name, value in sorted(plan["env"].items())]]
    inside += [f"{lxc.PREFIX}/venv/bin/python", *ctx.argv]
    argv = lxc.execute_argv(ctx.name, settings, inside)
    # The shell line of the process kind: cd, the deadline around lxc-execute, exec (env is inside the container).
    # lxc-execute's container inherits its policy: the harness's SCHED_IDLE unless the line resets it.
    command = shell_command({"chdir": "/", "env": {}, "argv": argv, "normal_policy": True}, deadline=plan["timeout"])
    plan["lxc"] = {
        "name": ctx.name,
        "lxcpath": lxc.DIR,
        "settings": settings,
        "argv": argv,
        "command": command,
        "task_timeout": cell_timeout.task_timeout(plan["timeout"]),
    }
    plan["runtime"].update(
        launcher="lxc-execute",
        lxc_name=ctx.name,
        lxc_cgroup=[s for s in settings if s.startswith("lxc.cgroup")],
        lxc_memory_limit_mb=memory_mb,
        cpu_quota_requested=ctx.quota,
        image=ctx.opts["image"],
    )


def observed(plan, results):
    """lxc-execute's output and exit code (the workload's, or timeout's 124 when the deadline stopped it)."""
    return command_observed(results.get("lxc"))


KIND = Kind(
    name="lxc",
    summary="an LXC system container per cell, lxc-execute of the workload image's root, pinned by its cgroup keys",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"lxc": "platform_run_lxc"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
)
