# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The guest instances placement: a cell with several instances of a guest platform (vm, vmcn) is a guest per
instance, run side by side by ``platbench.lab.run_instances`` (``roles/platform_run/tasks/guest_instances.yml``).

The guest kind plans its one guest first (placements/guest/: vCPUs, memory, data disk, the inner kind's command
in the guest); each instance is that guest again, named ``<cell name>-<i>``, its vCPUs pinned to its slice of the
cell's CPUs (``several.split_cpus``: its own for ``disjoint``, the cell's for ``shared``), and its command run in
it over SSH from the controller (``ssh -F`` the config platbench.lab.vm writes beside the guest's known_hosts):

- vm: the guest venv's python, its environment and argv as one quoted shell line; stopped with ``pkill`` there;
- vmcn: the guest's engine, ``run --rm`` with the guest's vCPUs (``pin``) or quota (``vnl``), ``--network host`` for
  a distributed cell so that the ranks use the guest's NIC on the path (``none`` otherwise); stopped with ``rm -f``.

A distributed cell's guests talk over the cell's path: ``bridge`` or ``overlay`` (``loopback`` is refused: each
guest has its own). Besides its restricted user-net NIC for SSH, each guest has a second virtio NIC, a tap on the
cell's bridge (``<interface type='bridge'>``; the tap ``pb<8 hex>t<i>``, the MAC derived from the cell's key and
index: module_utils/network_path.py). Before the ranks start, each guest configures its end (the NIC found by its
MAC, named and addressed, a VXLAN device over it for ``overlay``: module_utils/guest_path.py), and the path is
measured from the chief's guest to the first worker's (iperf3 and ping of the guest image). The ranks meet on the
chief's path address (MASTER_ADDR, TF_CONFIG), their sockets on the guest's path device (GLOO_SOCKET_IFNAME).

A shared cell's foreground and background each get a guest, on CPUs of their own or the same CPUs as the
experiment says; the background's guest idles through the first round, in which the foreground runs alone.
"""

from __future__ import annotations

import posixpath
import shlex

from ansible_collections.platbench.lab.plugins.module_utils import guest_path, network_path, path_measure, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import guest as guest_kind
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances as placed
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import GUEST_PREFIX, PlacementError

PLACEMENT = "guest_instances"
TASK_FILE = f"{PLACEMENT}.yml"  # roles/platform_run/tasks/guest_instances.yml
RESULT = "guests"  # the registered result record_cell reads (placements.RESULTS): each guest's vm_guest, by name
RESULTS = {RESULT: "platform_run_guests"}
SSH_CONFIG = "ssh_config-{name}"  # beside the guest image's key on the controller (platbench.lab.vm writes it)
MEASURE_SECONDS = 1.0  # network_path_measure's default test length
WORKLOAD_PATTERN = platforms.workload_process_pattern(GUEST_PREFIX)


def ssh_argv(config, name):
    """The controller's ssh into guest ``name`` with its config; the remote command follows as one shell line."""
    return ["ssh", "-F", config, "-o", "BatchMode=yes", name, "--"]


def plan(ctx, plan, spec):
    """Turn ``plan`` (the guest kind's one guest planned) into the guest instances placement of ``spec``:
    plan["guests"] (each guest's arguments of platbench.lab.vm and its end of the path) and plan["instances"]."""
    if ctx.platform.launcher == "apptainer":
        raise PlacementError(
            f"{ctx.where}: several guests of {ctx.platform.label} are not placed in this release (Apptainer in a "
            "guest): leave it out of this experiment, or run it with mode single"
        )
    if ctx.gpu_count:
        raise PlacementError(
            f"{ctx.where}: GPUs for each of several guests are not planned in this release; run this experiment's "
            "gpu scenarios with mode single"
        )
    key = (ctx.opts["guest_image"] or {}).get("ssh_key")
    if not key:
        raise PlacementError(
            f"{ctx.where}: the guest image description names no ssh_key, which the ranks reach their guests with: "
            "run site.yml (platbench.lab.guest_image) on this host"
        )
    count, sharing = spec["count"], spec["cpus"]
    cpus = several.split_cpus(ctx.cpus, count, ctx.threads, sharing) if ctx.pinned else [[]] * count
    members = [
        {
            "name": f"{ctx.name}-{index}",
            "role": spec["roles"][index],
            "index": index,
            "cpus": cpus[index],
            "cpuset": ",".join(str(cpu) for cpu in cpus[index]),
            "gpus": [],  # a GPU apiece passed through is not planned (refused above)
            "gpu_env": {},
        }
        for index in range(count)
    ]
    for member in members:
        config = posixpath.join(posixpath.dirname(key), SSH_CONFIG.format(name=member["name"]))
        member["ssh"] = ssh_argv(config, member["name"])
    path = _path(ctx, spec, members) if "network" in spec else None
    network = _network(ctx, path, members) if path else None
    guests = [
        _guest(plan["guest"], member, path, guest_kind.numa_layout(ctx, member["cpus"], plan["guest"]["memory_mb"]))
        for member in members
    ]
    build = _container_instance if guest_kind.INNER[ctx.platform.inner].KIND.engine_run else _process_instance
    if ctx.cell["labels"].get("mode") == "shared":
        rounds, settle = several.shared_rounds(ctx, plan, build, members, spec["background"])
    else:
        ranks = [
            build(ctx, plan, member, ctx.argv, {}, env=placed.rank_env(ctx, member["index"], network))
            for member in members
        ]
        rounds, settle = [ranks], 0.0
    none = {"path": None, "key": ctx.key, "bridge": None, "measure": None}
    plan["instances"] = several.plan_section(spec, members, rounds, settle, placed.STOP_GRACE_SECONDS, network or none)
    plan["guests"] = guests
    plan["placement"] = PLACEMENT
    plan.pop("guest")
    plan["runtime"].pop("guest_domain", None)
    plan["runtime"]["guest_domains"] = [member["name"] for member in members]
    several.record_runtime(plan, spec, members, rounds, network)


def _path(ctx, spec, members):
    try:
        return network_path.plan(ctx.key, spec["network"], len(members), ctx.platform.label)
    except network_path.NetworkPathError as exc:
        raise PlacementError(f"{ctx.where}: {exc}") from None


def _network(ctx, path, members):
    """The cell's path between its guests: the bridge the host makes, each guest's address and device, and the
    measurement from the chief's guest to the first worker's."""
    entries = [
        {
            "guest": member["name"],
            "address": entry["address"],
            "netns": None,
            "device": guest_path.device(path, member["index"]),
        }
        for member, entry in zip(members, path["instances"], strict=True)
    ]
    port = placed._port(ctx.key) + len(members)  # beside the ranks' ports, never one of them
    server_seconds = int(MEASURE_SECONDS + path_measure.SLACK_S + 5)
    measure = {
        "address": entries[1]["address"],
        "port": port,
        "client_host": members[0]["name"],
        "server_host": members[1]["name"],
        # started in the server's guest, answering one client, bounded whatever happens
        "server_argv": path_measure.server_argv(None, entries[1]["address"], port, server_seconds),
        "server_seconds": server_seconds,
    }
    return {
        "path": path["path"],
        "key": ctx.key,
        "bridge": path["bridge"],
        "mtu": path["mtu"],
        "members": entries,
        "measure": measure,
        "port": placed._port(ctx.key),
    }


def _guest(guest, member, path, numa):
    """One instance's guest: the kind's guest with its own name, pins and NUMA layout, and its NIC on the cell's
    bridge."""
    own = dict(
        guest,
        name=member["name"],
        cpu_pins=member["cpus"],
        emulator_cpus=member["cpus"],
        numa=numa,
        ssh=member["ssh"],
        path_nics=[],
        path_script=None,
    )
    if path:
        entry = path["instances"][member["index"]]
        own["path_nics"] = [
            {"bridge": path["bridge"], "mac": entry["nic_mac"], "tap": entry["tap"], "mtu": path["underlay_mtu"]}
        ]
        own["path_script"] = guest_path.guest_script(path, member["index"])
    return own


def _labels(member, extra):
    return {several.ROLE_LABEL: member["role"], several.INDEX_LABEL: member["index"], **extra}


def _process_instance(ctx, plan, member, argv, extra, background=False, env=None):
    """vm: the guest venv's python over SSH, its directory, environment and argv one quoted shell line."""
    inside = plan["process"]
    remote = process.shell_command(
        {
            "chdir": inside["chdir"],
            "env": {**inside["env"], **(env or {})},
            "argv": [f"{GUEST_PREFIX}/venv/bin/python", *argv, *several.labels_argv(_labels(member, extra))],
        }
    )
    return {
        "name": member["name"],
        "role": member["role"],
        "index": member["index"],
        "argv": [*member["ssh"], remote],
        "env": {},
        "chdir": None,
        "background": background,
        # the ssh client's end leaves the workload running in the guest until it writes
        "stop": [*member["ssh"], shlex.join(["pkill", "--signal", "KILL", "--full", WORKLOAD_PATTERN])],
    }


def _container_instance(ctx, plan, member, argv, extra, background=False, env=None):
    """vmcn: the guest's engine over SSH; the container takes the guest's vCPUs (all of them for ``pin``) and, in a
    distributed cell, the guest's network (its NIC on the path)."""
    inside = plan["container"]
    in_guest = dict(member, cpuset=inside["cpuset_cpus"] or "")
    run = placed._container_instance(ctx, plan, in_guest, argv, extra, background=background, env=env)
    distributed = ctx.cell["labels"].get("mode") == "distributed"
    network = run["argv"].index("--network") + 1
    run["argv"][network] = "host" if distributed else inside["network_mode"]
    return dict(
        run,
        argv=[*member["ssh"], shlex.join(run["argv"])],
        stop=[*member["ssh"], shlex.join(run["stop"])],
    )
