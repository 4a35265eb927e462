# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The container kind: the workload image run to completion by a container engine (the registry's
``engine``: Docker or Podman), on the runner host or in a guest, with the engine's default OCI runtime or the one the
registry's ``runtime`` names (gVisor's ``runsc``, which the engine must have registered: platbench.lab.docker).

``pin`` = ``--cpuset-cpus``, ``vnl`` = a ``--cpus`` quota; no network (``none``: the instances of a cell with
several, micro_net's peer among them, join the cell's network path, placements/instances.py); never privileged.
GPUs: Docker's ``device_requests`` for the NVIDIA runtime, Podman's CDI devices (``nvidia.com/gpu=INDEX``).
An injected overhead (``inject: {cpu_quota: Q}``, plugin_utils/experiment/inject.py) is the engine's own ``--cpus``
quota of Q x the cell's CPUs: beside ``pin``'s ``--cpuset-cpus``, or in place of ``vnl``'s quota of its CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.platbench.lab.plugins.module_utils import engines, quiet
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    Observed,
    PlacementError,
    kind_file,
)

# The CDI device kind nvidia-ctk generates for each GPU (platbench.lab.podman writes the spec).
CDI_GPU = "nvidia.com/gpu"


@dataclass
class EngineHost:
    """Where the engine runs and what it holds, as the kind holding the container describes it."""

    host: str  # the inventory host (or guest) whose engine runs the container
    image: str | None
    image_id: str | None
    cpuset: str = ""  # --cpuset-cpus there, "" for none
    mounts: list = field(default_factory=list)  # host directories mounted into the container
    device_ids: list = field(default_factory=list)  # the engine's GPU indexes
    engine_version: str | None = None
    in_guest: bool = False
    runtimes: dict = field(default_factory=dict)  # the OCI runtimes the engine registered: name -> their arguments


def runner_engine(ctx):
    """The runner host's own engine (cn, pd): the workload image the host's engine holds."""
    engine = (ctx.opts["engines"] or {}).get(ctx.platform.engine) or {}
    return EngineHost(
        host=ctx.opts["host"],
        image=ctx.opts["image"],
        image_id=engine.get("image_id"),
        cpuset=ctx.cpuset,
        mounts=ctx.mounts,
        # nvidia-smi's index on the host: PCI order among the GPUs the driver sees.
        device_ids=gpu_pools.cuda_indexes(ctx.gpus, ctx.facts.get("gpus")),
        engine_version=engine.get("version"),
        runtimes=engine.get("runtimes") or {},
    )


def _gpus(engine, device_ids):
    if engine == "podman":
        return {"devices": [f"{CDI_GPU}={index}" for index in device_ids]}
    requests = [{"driver": "nvidia", "device_ids": [str(index) for index in device_ids], "capabilities": [["gpu"]]}]
    return {"device_requests": requests if device_ids else []}


def plan(ctx, plan, where=None):
    """plan["container"]: arguments of the engine's container module."""
    where = where or runner_engine(ctx)
    engine = ctx.platform.engine
    cpus, applied = ctx.quota, None
    fraction = ctx.injected_quota
    if fraction is not None:
        if where.in_guest:
            raise PlacementError(
                f"{ctx.where}: inject: the engine's CPU quota is injected into the runner host's containers only, not "
                f"into those of {where.host}: inject into cn or pd"
            )
        cpus = ctx.injected_cpus(fraction)
        with_cpuset = f" with --cpuset-cpus {where.cpuset}" if where.cpuset else ""
        applied = {"cpu_quota": fraction, "quota_cpus": cpus, "applied_by": f"{engine} --cpus {cpus:g}{with_cpuset}"}
    runtime = _runtime(ctx, where)
    if any(mount.get("overlay") for mount in where.mounts) and (engine != "docker" or where.in_guest):
        raise PlacementError(
            f"{ctx.where}: data_path: overlay is a volume of Docker's local driver on the runner host; "
            f"{ctx.platform.label}'s {engine} engine reads its data through a bind mount only: limit the dimension "
            "to Docker's platforms (only_on: {data_path: [cn]})"
        )
    plan["env"] = ctx.env()
    plan["container"] = {
        "engine": engine,
        "engine_task_file": kind_file(__file__, f"{engine}.yml"),  # tasks/place.yml includes the engine's
        "engine_host": where.host,
        "engine_version": where.engine_version,
        "name": ctx.name,
        "image": where.image,
        "image_id": where.image_id,
        "command": ["python"] + ctx.argv,
        "env": plan["env"],
        "cpuset_cpus": where.cpuset or None,
        "cpus": cpus,
        "volumes": [f"{m['source']}:{m['target']}:{m['mode']}" for m in where.mounts if not m.get("overlay")],
        # A data directory read through overlayfs (data_path: overlay): a volume the engine's local driver mounts as a
        # read-only overlay of the directory and an empty lower layer when the container starts.
        "mounts": [_overlay_mount(m, ctx) for m in where.mounts if m.get("overlay")],
        "network_mode": "none",
        "runtime": runtime,
        **_gpus(engine, where.device_ids),
        "labels": {
            "org.platbench.cell": ctx.cell["id"],
            "org.platbench.campaign": str(ctx.opts["campaign"]),
            "org.platbench.host": str(ctx.opts["host"]),
        },
    }
    if engine == "podman" and not where.in_guest:
        plan["container"]["executable"] = quiet.PODMAN_LAUNCHER
    plan["runtime"].update(launcher=engine, cpu_quota_requested=ctx.quota, container_name=ctx.name, image=where.image)
    # A Docker container on the runner host stays, exited, until its host's cells are done, and then goes with the
    # others of the campaign in one prune (tasks/main.yml): a removal per cell costs a second module run per cell.
    # A failed run's container and a guest's are removed with their cell.
    plan["container"]["removal"] = "campaign" if engine == "docker" and not where.in_guest else "cell"
    if applied:
        plan["runtime"]["inject"] = applied
    if plan["container"]["mounts"]:
        plan["runtime"]["data_through"] = "a read-only overlayfs (Docker's local volume driver) over " + ", ".join(
            mount["volume_options"]["o"] for mount in plan["container"]["mounts"]
        )
    if runtime:
        args = where.runtimes[runtime]
        plan["runtime"].update(oci_runtime=runtime, oci_runtime_args=list(args))
        if runtime == "runsc":
            # How gVisor intercepts the sandbox's system calls (ptrace, systrap, kvm): what its overhead depends on.
            plan["runtime"]["gvisor_platform"] = engines.runtime_option(args, "platform", "default")
    if where.in_guest:
        plan["runtime"]["in_guest_cpuset"] = where.cpuset or None


def _overlay_mount(mount, ctx):
    """The engine's ``--mount`` of a data directory read through a read-only overlayfs (``mount["overlay"]``: its
    empty second lower layer), labelled with the campaign and host: platform_run removes the campaign's volumes by them.

    The volume is anonymous, one per container, and Docker refuses ``read_only`` on an anonymous volume (HTTP 400).
    The overlay is read-only all the same: it has lower layers only, no upperdir, and the kernel mounts such an
    overlay read-only."""
    return {
        "type": "volume",
        "target": mount["target"],
        "volume_driver": "local",
        "volume_options": {
            "type": "overlay",
            "device": "overlay",
            "o": f"lowerdir={mount['source']}:{mount['overlay']}",
        },
        "labels": {"org.platbench.campaign": str(ctx.opts["campaign"]), "org.platbench.host": str(ctx.opts["host"])},
    }


def _runtime(ctx, where):
    """The OCI runtime the platform asks its engine for (None: the engine's default), once the engine has it."""
    runtime = ctx.platform.runtime
    if runtime is None:
        return None
    if where.in_guest:
        raise PlacementError(f"{ctx.where}: runtime {runtime}: a guest's engine runs its containers with its default")
    if runtime not in where.runtimes:
        registered = ", ".join(where.runtimes) or "none"
        raise PlacementError(
            f"{ctx.where}: {ctx.platform.label} runs in the {runtime} runtime, which the {ctx.platform.engine} engine "
            f"of {where.host} has not registered (its runtimes: {registered}): run site.yml with "
            f"{ctx.platform.label} in platbench_platforms (role platbench.lab.docker registers it)"
        )
    return runtime


def observed(plan, results):
    """The container's output and what the engine applied (its inspected HostConfig), by engine."""
    result = results.get("container") or {}
    planned = plan.get("container") or {}
    applied = result.get("container") or {}
    host_config = applied.get("HostConfig") or {}
    runtime = {
        "engine_cpuset_cpus": host_config.get("CpusetCpus"),
        "engine_nano_cpus": host_config.get("NanoCpus"),
        "engine_network_mode": host_config.get("NetworkMode"),
        "engine_runtime": host_config.get("Runtime"),
        "container_id": applied.get("Id"),
        "image_id": engines.image_id(applied.get("Image")) or planned.get("image_id"),
        f"{planned.get('engine', 'docker')}_version": planned.get("engine_version"),
    }
    if planned.get("engine") == "podman":
        output = f"{result.get('stdout', '')}\n{result.get('stderr', '')}" if "stdout" in result else ""
        runtime["rc"] = (applied.get("State") or {}).get("ExitCode")
    else:
        output = applied.get("Output") or ""
        runtime["rc"] = result.get("status")
    return Observed(output=output, runtime=runtime if result else {})


KIND = Kind(
    name="container",
    summary="a container of the workload image run to completion by a container engine (Docker, Podman)",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"container": "platform_run_container"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
    takes_quota=True,
    duet=True,
    instances="supervised",
    started_by="engine",
    data_overlay=True,
)
