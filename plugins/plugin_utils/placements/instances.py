# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The instances placement: a cell with several instances of its platform's kind, run side by side by
``platbench.lab.run_instances`` (``roles/platform_run/tasks/instances.yml``).

The cell's kind plans its one instance first (``process`` or ``container``); each instance is that
command again with its own CPUs, name and record labels:

- process (bm): ``taskset`` over the instance's CPUs in front of the venv's python, on the runner host;
- container (cn, pd): the engine's own ``run --rm`` command line with the instance's name, CPUs and labels
  (the supervisor runs the client in the foreground; ``rm -f NAME`` is its stop command, since killing the
  client leaves the container running).

A shared cell runs two rounds: the foreground alone, then a background job (confirmed running for
``settle`` seconds first) and the foreground again. Its two foreground records carry ``share: alone`` and
``share: shared``, and record_cell adds their degradation (outcome.py).
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.plugin_utils import instances
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import Observed, PlacementError

RESULT = "instances"  # the registered result record_cell reads (placements.RESULTS)
STOP_GRACE_SECONDS = 5


def plan(ctx, plan, spec):
    """Turn ``plan`` (its kind's single instance planned) into the instances placement of ``spec``
    (``cell["instances"]``): plan["instances"] with the rounds run_instances runs."""
    kind = ctx.platform.kind
    if kind not in instances.SUPERVISED_KINDS or ctx.platform.remote:
        raise PlacementError(
            f"{ctx.where}: a cell with several instances (mode {ctx.cell['labels'].get('mode')}) runs on the runner "
            f"host's processes and containers in this release (bm, cn, pd), not on {ctx.platform.label}: "
            f"leave {ctx.platform.label} out of this experiment"
        )
    if kind == "process" and ctx.platform.launcher != "venv":
        raise PlacementError(f"{ctx.where}: several instances of {ctx.platform.label} are not placed in this release")
    if kind == "container" and plan.get("peer"):
        raise PlacementError(f"{ctx.where}: micro_net's peer is a cell of its own; it has no background or ranks")
    count, sharing = spec["count"], spec["cpus"]
    cpus = instances.split_cpus(ctx.cpus, count, ctx.threads, sharing) if ctx.pinned else [[]] * count
    names = [f"{ctx.name}-{index}" for index in range(count)]
    build = _process_instance if kind == "process" else _container_instance
    roles = spec["roles"]
    members = [
        {
            "name": names[index],
            "role": roles[index],
            "index": index,
            "cpus": cpus[index],
            "cpuset": ",".join(str(cpu) for cpu in cpus[index]),
        }
        for index in range(count)
    ]
    if ctx.cell["labels"].get("mode") == "shared":
        foreground, background = members
        job = spec["background"]
        alone = build(ctx, plan, foreground, ctx.argv, {instances.SHARE_LABEL: instances.ALONE})
        beside = build(ctx, plan, foreground, ctx.argv, {instances.SHARE_LABEL: instances.SHARED})
        noise = build(ctx, plan, background, instances.background_argv(job, ctx.threads), {}, background=True)
        rounds, settle = [[alone], [noise, beside]], float(job["settle"])
    else:
        rounds, settle = [[build(ctx, plan, member, ctx.argv, {}) for member in members]], 0.0
    plan["instances"] = {
        "count": count,
        "cpus": sharing,
        "members": [{key: member[key] for key in ("name", "role", "index", "cpuset")} for member in members],
        "rounds": rounds,
        "settle": settle,
        "grace": STOP_GRACE_SECONDS,
    }
    plan["placement"] = "instances"
    plan.pop(kind, None)
    plan["runtime"].update(
        instances=count,
        instance_cpus=sharing,
        instance_cpusets=[member["cpuset"] or None for member in members],
        instance_rounds=instances.describe_rounds(rounds),
    )
    if "background" in spec:
        plan["runtime"]["background"] = {"workload": spec["background"]["workload"], **spec["background"]["params"]}


def _labels(member, extra):
    return {instances.ROLE_LABEL: member["role"], instances.INDEX_LABEL: member["index"], **extra}


def _process_instance(ctx, plan, member, argv, extra, background=False):
    process = plan["process"]
    taskset = ["taskset", "--cpu-list", member["cpuset"]] if member["cpuset"] else []
    python = f"{ctx.opts['prefix']}/venv/bin/python"
    return {
        "name": member["name"],
        "role": member["role"],
        "index": member["index"],
        "argv": taskset + [python] + argv + instances.labels_argv(_labels(member, extra)),
        "env": process["env"],
        "chdir": process["chdir"],
        "background": background,
        "stop": None,
    }


def _container_instance(ctx, plan, member, argv, extra, background=False):
    container = plan["container"]
    engine = container["engine"]
    run = [engine, "run", "--rm", "--name", member["name"], "--network", container["network_mode"]]
    if member["cpuset"]:
        run += ["--cpuset-cpus", member["cpuset"]]
    elif container.get("cpus"):
        run += ["--cpus", str(container["cpus"])]
    for name, value in sorted(container["env"].items()):
        run += ["--env", f"{name}={value}"]
    for volume in container["volumes"]:
        run += ["--volume", volume]
    labels = {**container["labels"], "org.platbench.instance": member["name"], "org.platbench.role": member["role"]}
    for name, value in sorted(labels.items()):
        run += ["--label", f"{name}={value}"]
    run += _gpu_options(container)
    command = ["python"] + argv + instances.labels_argv(_labels(member, extra))
    return {
        "name": member["name"],
        "role": member["role"],
        "index": member["index"],
        "argv": run + [container["image"]] + command,
        "env": {},
        "chdir": None,
        "background": background,
        "stop": [engine, "rm", "--force", member["name"]],
    }


def _gpu_options(container):
    options = []
    for device in container.get("devices") or []:
        options += ["--device", device]
    for request in container.get("device_requests") or []:
        options += ["--gpus", "device=" + ",".join(request["device_ids"])]
    return options


def observed(plan, results):
    """The records of the instances that report (not a background, which is stopped mid-run), and each instance's
    end: its role, index, round, exit status and seconds."""
    result = results.get(RESULT) or {}
    ran = result.get("instances") or []
    output = "\n".join(
        f"{entry.get('stdout', '')}\n{entry.get('stderr', '')}" for entry in ran if not entry.get("background")
    )
    runtime = {
        "instances_ran": [
            {key: entry.get(key) for key in ("name", "role", "index", "round", "rc", "stopped", "seconds")}
            for entry in ran
        ]
    }
    return Observed(output=output, runtime=runtime if result else {})
