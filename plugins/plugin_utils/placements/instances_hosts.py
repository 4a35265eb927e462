# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A distributed cell over the runner hosts' own network (``network: host``), its ranks spread over
``instances.hosts`` of them.

The runner hosts are the inventory's group ``platbench_runners``, in inventory order (``runner_hosts`` reads each
one's name, address, SSH port and facts; the role passes them as the plan option ``runners``). A cell with
``instances.hosts: H`` places rank i on runner i % H. Its *home* is the first runner, which holds rank 0 (the
chief, torch's TCP store): the home runs the cell, and every other runner leaves it out of its own cells
(``runplan.cells_to_run``), so that it is neither run twice nor counted missing there.

On the home host, the cell is the same instances placement as on one host (placements/instances.py): one argv per
rank under ``platbench.lab.run_instances``. A rank on the home host is a process or container there, as ever; a
rank on another runner is that same command run over SSH (module_utils/remote_instance.py), with a stop line that
ends it there. Each rank's CPUs are chosen from the facts of the host it runs on (``platbench.lab.host_facts``,
gathered there by the role's capabilities step; its ``platbench_reserved_cpus`` left out), as that host chooses
for its own cells. Every rank meets the others at the addresses of their hosts:

- torch: ``MASTER_ADDR`` is the home host's address; ``GLOO_SOCKET_IFNAME`` (and NCCL's) the interface holding
  the rank's host address where the facts show it, else left to gloo;
- TensorFlow: ``TF_CONFIG`` lists each rank at its host's address and a port of its own.

A host's address is the inventory variable ``platbench_underlay_address`` where set, else its ``ansible_host``,
else the default IPv4 address of its facts. Nothing is built for this path, and nothing measures it (the
``path_*`` metrics are the built paths'). Several runners' GPUs for one cell are not planned in this release:
a gpu cell spread over hosts is refused before any cell.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import network_path, platforms, remote_instance
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances as placing
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import PlacementError

RUNNERS_GROUP = "platbench_runners"
ADDRESS_VARIABLE = "platbench_underlay_address"
RESERVED_VARIABLE = "platbench_reserved_cpus"
SSH_SETTINGS = "platform_run_runner_ssh_user and platform_run_runner_ssh_key"

TASK_FILE = placing.TASK_FILE  # its ranks are run as the supervised instances are (tasks/instances.yml)


def places(spec):
    """Whether ``spec`` (``cell["instances"]``) is this placement's: ranks over the hosts' own network."""
    return bool(spec) and spec.get("network") == network_path.HOST_PATH


def spread(spec):
    """How many runner hosts the cell's instances spread over (``instances.hosts``)."""
    return int((spec or {}).get("hosts") or 1)


def host_of(index, hosts):
    """The runner (its position among the first ``hosts`` of the group) instance ``index`` runs on."""
    return index % hosts


# -- the runner hosts, from the inventory -------------------------------------------------------------------------


def _facts_address(facts):
    return ((facts or {}).get("default_ipv4") or {}).get("address")


def interface_of(facts, address):
    """The interface of ``facts`` (Ansible's) that holds ``address``, or None where they do not show it."""
    facts = facts or {}
    for name in facts.get("interfaces") or []:
        entry = facts.get(str(name).replace("-", "_").replace(".", "_")) or {}
        held = [entry.get("ipv4") or {}, *(entry.get("ipv4_secondaries") or [])]
        if any(isinstance(item, dict) and item.get("address") == address for item in held):
            return entry.get("device") or name
    default = facts.get("default_ipv4") or {}
    return default.get("interface") if default.get("address") == address else None


def runner_hosts(names, hostvars, user=None, key=None):
    """Each runner host of ``names`` (group platbench_runners, in inventory order) as the cell plan takes it:
    name, address (``platbench_underlay_address``, else ``ansible_host``, else the default IPv4 of its facts),
    interface (the one holding it, where the facts show it), SSH user, port (its ``ansible_port``) and key,
    reserved CPUs (``platbench_reserved_cpus``) and the host's platbench facts (None before it gathered them)."""
    runners = []
    for name in names or []:
        variables = hostvars.get(name) or {}
        facts = variables.get("ansible_facts") or {}
        address = variables.get(ADDRESS_VARIABLE) or variables.get("ansible_host") or _facts_address(facts)
        runners.append(
            {
                "name": str(name),
                "address": str(address) if address else None,
                "interface": interface_of(facts, address) if address else None,
                "user": user or None,
                "port": variables.get("ansible_port"),
                "key": key or None,
                "reserved_cpus": list(variables.get(RESERVED_VARIABLE) or []),
                "facts": facts.get("platbench"),
            }
        )
    return runners


def home_of(runners, host):
    """The home host of a cell spread over hosts: the first runner (``host`` itself without runners)."""
    return runners[0]["name"] if runners else host


def _target(runner):
    try:
        return remote_instance.target(
            runner.get("address"), runner.get("user"), runner.get("port"), runner.get("key"), runner["name"]
        )
    except remote_instance.RemoteInstanceError as exc:
        raise PlacementError(f"{exc}: set {ADDRESS_VARIABLE} or ansible_host for it in the inventory") from None


# -- the plan ------------------------------------------------------------------------------------------------------


def _members_hosts(ctx, hosts):
    runners = list(ctx.opts.get("runners") or [])
    if not runners:
        raise PlacementError(
            f"{ctx.where}: network {network_path.HOST_PATH} needs the runner hosts' addresses (plan option runners, "
            f"from group {RUNNERS_GROUP}), and none were given"
        )
    if runners[0]["name"] != ctx.opts["host"]:
        raise PlacementError(
            f"{ctx.where}: the cell's home is {runners[0]['name']}, the first host of {RUNNERS_GROUP}, which runs it; "
            f"{ctx.opts['host']} does not"
        )
    if len(runners) < hosts:
        raise PlacementError(
            f"{ctx.where}: instances.hosts {hosts} asks for {hosts} runner hosts, but {RUNNERS_GROUP} has "
            f"{len(runners)} ({', '.join(r['name'] for r in runners)}): add runners or lower instances.hosts"
        )
    members = runners[:hosts]
    for runner in members[1:]:
        if not runner.get("facts"):
            raise PlacementError(
                f"{ctx.where}: runner host {runner['name']} holds ranks of the cell, but its facts were not gathered "
                "(platbench.lab.host_facts): run playbooks/experiment.yml on every host of "
                f"{RUNNERS_GROUP} (no --limit)"
            )
    return members


def _cpus(ctx, runner, count, sharing, home):
    """Each of ``count`` instances' CPUs on ``runner``: the home's from the cell's own choice, another host's
    chosen from its facts as that host chooses for its cells (sizing.choose_cpus)."""
    if not ctx.pinned:
        return [[]] * count
    if home:
        return several.split_cpus(ctx.cpus, count, ctx.threads, sharing)
    facts = runner["facts"]
    wanted = ctx.threads if sharing == "shared" else ctx.threads * count
    try:
        cpus, _node = sizing.choose_cpus(
            facts.get("cpus_allowed", []), wanted, runner.get("reserved_cpus") or [], facts.get("numa_nodes")
        )
    except sizing.SizingError as exc:
        raise PlacementError(
            f"{ctx.where}: on runner host {runner['name']}, {count} pinned instance(s) x scale-up {ctx.threads}: {exc}"
        ) from None
    return several.split_cpus(cpus, count, ctx.threads, sharing)


def plan(ctx, plan, spec):
    """``plan`` (its kind's single instance planned) as the instances placement of a distributed cell on the
    ``host`` path: plan["instances"] with each rank on its runner host, the remote ones over SSH."""
    placing.check_kind(ctx)
    count, sharing, hosts = spec["count"], spec["cpus"], spread(spec)
    if ctx.cell["labels"].get("mode") != "distributed" or "peer" in spec:
        raise PlacementError(f"{ctx.where}: network {network_path.HOST_PATH} joins the ranks of a distributed cell")
    if hosts > 1 and ctx.gpu_count:
        raise PlacementError(
            f"{ctx.where}: a gpu cell's ranks on {hosts} hosts are not placed in this release (each host's GPUs would "
            "be its own pool): use processor [cpu] with instances.hosts above 1, or instances.hosts 1"
        )
    runners = _members_hosts(ctx, hosts)
    gpu_sharing = spec.get("gpus", "disjoint")
    on_host = [[index for index in range(count) if host_of(index, hosts) == at] for at in range(hosts)]
    cpus, gpus = [None] * count, several.split_gpus(ctx.gpus, count, gpu_sharing)
    for at, indexes in enumerate(on_host):
        for index, chosen in zip(indexes, _cpus(ctx, runners[at], len(indexes), sharing, at == 0), strict=True):
            cpus[index] = chosen
    placing._check_gpu_ranks(ctx, gpus, gpu_sharing)
    members = [
        {
            "name": f"{ctx.name}-{index}",
            "role": spec["roles"][index],
            "index": index,
            "host": runners[host_of(index, hosts)]["name"],
            "cpus": cpus[index],
            "cpuset": ",".join(str(cpu) for cpu in cpus[index]),
            "gpus": gpus[index],
            "gpu_env": placing._gpu_env(ctx, gpus[index], gpu_sharing),
        }
        for index in range(count)
    ]
    network = _network(ctx, runners, members)
    build = placing._process_instance if ctx.declaration.launched else _host_container
    rounds = [[_placed(ctx, placing._rank(ctx, plan, build, member, network), runners, hosts) for member in members]]
    plan["instances"] = {
        "count": count,
        "cpus": sharing,
        "gpus": gpu_sharing,
        "hosts": hosts,
        "members": [
            {key: member[key] for key in ("name", "role", "index", "host", "cpuset", "gpus")} for member in members
        ],
        "rounds": rounds,
        "settle": 0.0,
        "grace": placing.STOP_GRACE_SECONDS,
        "network": network,
    }
    placing.record_placement(plan, ctx.declaration, spec, members, rounds, network)
    plan["runtime"]["instance_hosts"] = [member["host"] for member in members]


def _network(ctx, runners, members):
    """The host path: each rank's host address and the interface holding it (None where unknown); nothing built,
    nothing measured; the ranks' rendezvous port derived from the cell's key, as on the built paths."""
    entries = []
    for member in members:
        runner = next(runner for runner in runners if runner["name"] == member["host"])
        address = runner.get("address")
        if not address:
            raise PlacementError(
                f"{ctx.where}: runner host {runner['name']} has no address: set {ADDRESS_VARIABLE} or ansible_host for "
                "it in the inventory, or gather its facts (their default IPv4 address)"
            )
        entries.append({"address": address, "netns": None, "device": runner.get("interface"), "host": runner["name"]})
    return {
        "path": network_path.HOST_PATH,
        "built": False,
        "key": ctx.key,
        "mtu": None,
        "members": entries,
        "holders": [],
        "engine": None,
        "measure": None,
        "port": placing._port(ctx.key),
    }


def _host_container(ctx, plan, member, argv, extra, background=False, env=None):
    """A rank's container in its host's network namespace (``--network host``)."""
    instance = placing._container_instance(ctx, plan, member, argv, extra, background=background, env=env)
    at = instance["argv"].index("--network") + 1
    instance["argv"][at] = network_path.HOST_PATH
    return instance


def _placed(ctx, instance, runners, hosts):
    """The rank on its runner host: as it is on the home host, over SSH on another."""
    runner = runners[host_of(instance["index"], hosts)]
    if runner["name"] == ctx.opts["host"]:
        return {**instance, "host": runner["name"]}
    where = _target(runner)
    if ctx.declaration.launched:
        return remote_instance.process_instance(instance, where, placing.STOP_GRACE_SECONDS)
    return remote_instance.container_instance(instance, where, placing.STOP_GRACE_SECONDS)


# -- before any cell -------------------------------------------------------------------------------------------------


def spread_cells(cells):
    """The cells of ``cells`` whose instances spread over several hosts."""
    return [cell for cell in cells if spread(cell.get("instances")) > 1]


def plan_problems(name, cells, runners, host):
    """The prechecks' messages for the plan's cells spread over several runner hosts: more hosts than the group has,
    gpu cells, and runners without an address or facts (every runner reports them; the run shows each once)."""
    spread_out = spread_cells(cells)
    if not spread_out:
        return []
    runners = list(runners or [])
    problems = []
    widest = max(spread(cell["instances"]) for cell in spread_out)
    if widest > len(runners):
        listed = ", ".join(runner["name"] for runner in runners) or "none"
        problems.append(
            f"Experiment '{name}' spreads a distributed cell's ranks over {widest} runner hosts (instances.hosts), "
            f"but group {RUNNERS_GROUP} has {len(runners)} ({listed}): add runner hosts to the inventory, or lower "
            f"instances.hosts in experiments/{name}.yml."
        )
    if any(cell["labels"]["processor"] == "gpu" for cell in spread_out):
        problems.append(
            f"Experiment '{name}' has gpu cells whose ranks spread over several runner hosts (instances.hosts), which "
            "this release does not place: use processor [cpu] with instances.hosts above 1, or instances.hosts 1."
        )
    problems.extend(_member_cpu_problems(name, spread_out, runners))
    for runner in runners[1:widest]:
        if not runner.get("address"):
            problems.append(
                f"Experiment '{name}' runs ranks on runner host {runner['name']}, which has no address: set "
                f"{ADDRESS_VARIABLE} (or ansible_host) for it in the inventory."
            )
        if not runner.get("facts"):
            problems.append(
                f"Experiment '{name}' runs ranks on runner host {runner['name']}, whose facts were not gathered: run "
                f"playbooks/experiment.yml on every host of {RUNNERS_GROUP} (no --limit)."
            )
    return problems


def _member_cpu_problems(name, cells, runners):
    """The other runners that cannot pin their ranks of a cell (the home host's are runplan's, as for any cell)."""
    problems = {}
    for cell in cells:
        spec, labels = cell["instances"], cell["labels"]
        if not is_pinned(labels) or labels["platform"] in platforms.REMOTE:
            continue
        hosts, scaleup = spread(spec), int(labels["scaleup"])
        for at, runner in enumerate(runners[1:hosts], start=1):
            if not runner.get("facts"):
                continue  # named below
            held = sum(1 for index in range(spec["count"]) if host_of(index, hosts) == at)
            needed = scaleup if spec["cpus"] == "shared" else scaleup * held
            free = {int(cpu) for cpu in runner["facts"].get("cpus_allowed", [])}
            free -= {int(cpu) for cpu in runner.get("reserved_cpus") or []}
            if needed > len(free) and needed > problems.get(runner["name"], (0,))[0]:
                problems[runner["name"]] = (needed, held, scaleup, len(free))
    return [
        f"Experiment '{name}' pins {held} rank(s) x scale-up {scaleup} = {needed} CPUs of a cell on runner host "
        f"{host}, which offers {free} ({RESERVED_VARIABLE} left out): lower 'scaleup' in experiments/{name}.yml, "
        "or let the instances share their CPUs (instances: {cpus: shared})."
        for host, (needed, held, scaleup, free) in problems.items()
    ]


def ssh_checks(cells, runners, host):
    """What ``host`` checks before the first cell when it is the home of cells spread over hosts: for each other
    runner holding their ranks, ``{host, address, argv}``, the argv an ssh login without a password (exit 0)."""
    spread_out = spread_cells(cells)
    runners = list(runners or [])
    if not spread_out or home_of(runners, host) != host:
        return []
    widest = min(max(spread(cell["instances"]) for cell in spread_out), len(runners))
    checks = []
    for runner in runners[1:widest]:
        try:
            where = _target(runner)
        except PlacementError:
            continue  # plan_problems names it
        checks.append({"host": runner["name"], "address": where["address"], "argv": remote_instance.check_argv(where)})
    return checks


def ssh_problems(results, host):
    """A message per runner host that ``host`` could not log in to (the looped check command's ``results``)."""
    problems = []
    for result in results or []:
        if not isinstance(result, dict) or result.get("skipped") or result.get("rc") == 0:
            continue
        check = result.get("item") or {}
        said = (str(result.get("stderr") or "").strip().splitlines() or [str(result.get("msg") or "no output")])[-1]
        problems.append(
            f"{host} runs cells whose ranks spread over several runner hosts and must log in to {check.get('host')} "
            f"({check.get('address')}) over SSH without a password ({' '.join(check.get('argv') or [])} said: "
            f"{said}): give root on {host} a key that {check.get('host')} accepts (its authorized_keys) and "
            f"{check.get('host')}'s host key in {host}'s known_hosts, or set {SSH_SETTINGS}."
        )
    return problems
