# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The oci_bundle kind: the workload image's root run by ``runc`` as an OCI bundle, with no engine (platforms ``ns``
and ``sc``; module_utils/oci_bundle.py makes the bundles). The rungs of ``platbench explain``'s ladder between
``cr`` (the same root, chrooted, no namespace) and ``cn`` (the same image through dockerd and containerd-shim):

- ``ns`` (confinement ``none``): Docker's namespaces (pid, network, ipc, uts, mount), mounts and masked paths, with
  no seccomp filter, every capability and no AppArmor profile;
- ``sc`` (confinement ``engine``): the same bundle with Docker's seccomp profile, capability set and AppArmor profile.

A cell is placed as cn's is: ``pin`` = the cell's CPUs as the container's cpuset, ``vnl`` = a CFS quota of the
scale-up's CPUs (an injected ``cpu_quota`` takes its place), the workload's argv and environment cn's over the image's
working directory and variables, the data and cache directories bound in, no network but a loopback; its cgroup is
runc's, beside Docker's containers (module_utils/oci_bundle.py ``cgroup_path``). The cell's line makes the bundle,
runs ``runc run`` in the foreground (its output is the workload's) and deletes the container and the bundle after;
``tasks/place.yml`` deletes what a killed line left, ``tasks/teardown.yml`` what a stopped run left. The cell is a
process of the runner host to everything else: its plan's ``process`` section is the line, so it pairs in a duet as
a process side does.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import oci_bundle
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    PlacementError,
    command_observed,
    kind_file,
)


def plan(ctx, plan):
    """plan["process"]: the line that makes the cell's bundle and runs it with runc, as the process kind's plan is run
    (tasks/place.yml includes the process kind's task file; a duet runs the line as a process side);
    plan["oci_bundle"]: the container, its bundle and base, which place.yml deletes where the line could not."""
    if not ctx.opts.get("image"):
        raise PlacementError(f"{ctx.where}: an OCI bundle cell runs the workload image's root, and no image is named")
    confinement = ctx.platform.confinement
    systemd = bool(ctx.facts.get("systemd_pid1"))
    fraction = ctx.injected_quota
    quota = ctx.injected_cpus(fraction) if fraction is not None else ctx.quota
    base = oci_bundle.BASES[confinement]
    bundle = f"{oci_bundle.BUNDLES}/{ctx.name}"
    cgroup = oci_bundle.cgroup_path(ctx.name, systemd)
    plan["env"] = ctx.env()
    patch = oci_bundle.cell_patch(
        ["python", *ctx.argv],
        plan["env"],
        ctx.mounts,
        cpus=ctx.cpuset if ctx.pinned else "",
        quota=quota,
        cgroup=cgroup,
    )
    # runc's children inherit its affinity, which the harness's spare CPUs would otherwise pass down: every CPU the
    # host allows, or the pinned ones (a cpuset then holds them to the same).
    taskset = process.affinity_argv(ctx)
    run = {
        "argv": [*taskset, *oci_bundle.runc_argv("run", "--bundle", bundle, ctx.name, systemd=systemd)],
        "chdir": "/",
        "env": {},  # the workload's are in the bundle; runc gets the line's fixed base
        "host": ctx.opts["host"],
        "become": True,  # runc makes namespaces and cgroups
        "normal_policy": True,
        "clean_env": True,
    }
    run["command"] = oci_bundle.line(
        ctx.name, bundle, base, patch, process.shell_command(run, deadline=plan["timeout"]), systemd=systemd
    )
    run["task_timeout"] = cell_timeout.task_timeout(plan["timeout"])
    plan["process"] = run
    plan["oci_bundle"] = {
        "name": ctx.name,
        "bundle": bundle,
        "base": base,
        "confinement": confinement,
        "down": oci_bundle.bundle_down(ctx.name, bundle, systemd),
        "run_task_file": process.KIND.task_file,
    }
    engine = confinement == "engine"
    plan["runtime"].update(
        launcher="runc",
        oci_confinement=confinement,
        # The rung's mechanisms, as the bases hold them (module_utils/oci_bundle.py base_config).
        oci_namespaces=list(oci_bundle.NAMESPACES),
        oci_seccomp="Docker's default profile" if engine else None,
        oci_capabilities="Docker's set" if engine else "every one of the host root's bounding set",
        oci_apparmor="Docker's profile, where the host has AppArmor" if engine else None,
        oci_base=base,
        oci_cgroup=cgroup,
        oci_root=oci_bundle.ROOT,
        cpu_quota_requested=quota,
        container_name=ctx.name,
        image=ctx.opts["image"],
        image_id=((ctx.opts.get("engines") or {}).get("docker") or {}).get("image_id"),
    )
    if fraction is not None:
        plan["runtime"]["inject"] = {
            "cpu_quota": fraction,
            "quota_cpus": quota,
            "applied_by": f"runc linux.resources.cpu quota {int(round(quota * 100000))} us every 100000 us",
        }


def observed(plan, results):
    """The line's output and exit code: the workload's, timeout's 124, or BUNDLE_FAILED where no bundle was made."""
    return command_observed(results.get("process"))


KIND = Kind(
    name="oci_bundle",
    summary="the workload image's root run by runc as Docker's OCI bundle, with or without its seccomp and caps",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"process": "platform_run_process"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
    takes_quota=True,
    duet=True,
    confined=True,
)
