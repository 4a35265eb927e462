# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What one runner host does with an expanded experiment: the prechecks, and the cells it runs.

Pure Python, called through the ``platbench.lab.plan_problems`` and ``platbench.lab.cells_to_run``
filters by ``roles/platform_run/tasks/precheck.yml``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cell_timeout, several, sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, duet_cpus
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import idle_cores, schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import emulated_subset
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_hosts, instances_k8s


def _wanted(plan):
    return list(dict.fromkeys(cell["labels"]["platform"] for cell in plan.get("cells", [])))


def _not_ready(plan, status):
    return [label for label in _wanted(plan) if not status.get(label, {}).get("ready")]


def plan_problems(
    plan,
    status,
    facts,
    host,
    reserved_cpus=(),
    skip_unavailable=False,
    gpu_assignment=None,
    guest_image=None,
    gpus_per_cell=1,
    runners=None,
    cell_timeout_seconds=3600,
):
    """Everything that stops ``plan`` on ``host`` before a cell runs, each a message naming the
    setting to change (all at once, so one fix-and-rerun is enough), and the platforms skipped.

    ``status``: the ``platforms`` result of platbench.lab.platform_status; ``facts``:
    ``ansible_facts.platbench``; ``gpu_assignment``: ``platbench_gpu_assignment``;
    ``guest_image``: the guest image description (its ``nvidia_driver``); ``gpus_per_cell``: the GPUs
    of a gpu cell, or of each of its instances (``platform_run_gpus_per_cell``); ``runners``: the runner hosts
    (``platform_run_runners``) a distributed cell's ranks may spread over (``instances.hosts``). Returns
    ``{"problems": [...], "skipped": {label: reason}, "gpu_summary": "...", "sizing": [...]}``, the summary
    saying which GPUs the plan's gpu scenarios use on this host ("" when it has none), ``sizing`` how its
    relative scale-ups resolve here and the NUMA warnings (sizing.plan_sizing). ``cell_timeout_seconds``:
    ``platform_run_cell_timeout``, which must be a whole number of seconds above 0.
    """
    name = plan.get("name", "?")
    cells = plan.get("cells") or []
    facts = facts or {}
    if not cells:
        return {
            "problems": [
                "platform_run_plan holds no cells. Run experiments through playbooks/experiment.yml "
                "(-e experiment=NAME), which loads and expands experiments/NAME.yml."
            ],
            "skipped": {},
            "gpu_summary": "",
            "sizing": [],
        }
    problems, skipped = cell_timeout.problems(cell_timeout_seconds), {}
    wanted = _wanted(plan)
    # The runner's own platforms read its data files where they are, its guests from a read-only disk made of them
    # (platforms.Platform.data_view); the instances a campaign provisions hold no copy of them.
    reads_files = plan.get("dataset") is not None or "data_dir" in (plan.get("params") or {})
    blind = [label for label in wanted if label in platforms.BY_LABEL and platforms.get(label).data_view is None]
    if reads_files and blind:
        problems.append(
            f"Experiment '{name}' reads data from files (its dataset: or params.data_dir), which the instances of "
            f"{platforms.in_words(blind)} cannot reach: they hold no copy of the runner host's data, as its guests do "
            f"(a read-only disk). Drop {platforms.in_words(blind)} from its platforms or use data: synthetic."
        )
    for label in _not_ready(plan, status):
        entry = status.get(label) or {"reason": "platbench.lab.platform_status did not report it"}
        if entry.get("skip") or skip_unavailable:
            skipped[label] = entry["reason"]
            continue
        problems.append(
            f"Experiment '{name}' asks for platform {label}, which {host} cannot run: {entry['reason']}. "
            f'Drop {label} from the experiment (-e \'{{"experiment_overrides": {{"platforms": [...]}}}}\') '
            "or set platform_run_skip_unavailable=true to skip its cells."
        )
    allowed = [int(cpu) for cpu in facts.get("cpus_allowed", [])]
    reserved = {int(cpu) for cpu in reserved_cpus or ()}
    offered = len(set(allowed) - reserved)
    # Relative scale-ups (all, half, all-but-N) become this host's numbers; one that cannot stops the plan.
    # The checks below see numbers; the cells that have none, no more.
    sizing_problems, sizing_notes, cells = sizing.plan_sizing(name, cells, facts, reserved, host, plan.get("numa"))
    problems.extend(sizing_problems)
    # The cells of OpenStack platforms run on the campaign's instances: their flavors give CPUs and GPUs.
    local = [cell for cell in cells if cell["labels"]["platform"] not in platforms.REMOTE]
    most = max((int(cell["labels"]["scaleup"]) for cell in local), default=0)
    if most > offered:
        problems.append(
            f"Experiment '{name}' asks for scale-up {most}, but {host} offers {offered} CPUs "
            f"({len(allowed)} allowed, {len(reserved)} reserved by platbench_reserved_cpus). "
            f"Lower 'scaleup' in experiments/{name}.yml or run on a bigger host."
        )
    # Pinned instances with cores of their own (plugins/plugin_utils/cells/several.py) need the scale-up each.
    pinned = [cell for cell in local if is_pinned(cell["labels"]) and cell.get("instances")]
    widest = max(pinned, key=several.cpus_needed, default=None)
    if widest is not None and most <= offered < several.cpus_needed(widest):
        problems.append(
            f"Experiment '{name}' pins {widest['instances']['count']} instances x scale-up "
            f"{widest['labels']['scaleup']} = {several.cpus_needed(widest)} CPUs in a cell, but {host} offers "
            f"{offered} CPUs: lower 'scaleup' in experiments/{name}.yml, or let the instances share their CPUs "
            "(instances: {cpus: shared})."
        )
    # schedule: duet runs each pair's sides at once, on CPUs of their own (plugins/plugin_utils/experiment/schedule.py).
    problems.extend(duet_problems(name, local, facts, reserved_cpus, host))
    # idle_cores: none: every core to the instance, none kept back (plugins/plugin_utils/experiment/idle_cores.py).
    problems.extend(idle_cores.plan_problems(name, local, facts, reserved_cpus, host))
    # A Kubernetes platform's pods only talk over the cluster's CNI (placements/instances_k8s.py).
    problems.extend(instances_k8s.network_problems(name, cells, placements.instance_platforms("pods")))
    # Ranks spread over several runner hosts (placements/instances_hosts.py).
    problems.extend(instances_hosts.plan_problems(name, cells, runners, host))
    problems.extend(_node_problems(name, cells, status, skipped))
    gpu_problems, summary = _gpu_problems(name, local, status, facts, host, gpu_assignment, guest_image)
    problems.extend(gpu_problems)
    if not gpu_problems:
        problems.extend(_instance_gpu_problems(name, local, facts, host, gpu_assignment, gpus_per_cell))
    return {"problems": problems, "skipped": skipped, "gpu_summary": summary, "sizing": sizing_notes}


def duet_problems(name, cells, facts, reserved_cpus, host):
    """The duet pairs (schedule.duet) that do not fit twice on ``host``, one message per scenario naming it, its
    CPUs and what to change."""
    problems = {}
    for cell in cells:
        labels = cell["labels"]
        if labels.get(schedule.DUET_ROLE) != "lead" or labels["scenario"] in problems:
            continue
        try:
            allowed, numa = facts.get("cpus_allowed", []), facts.get("numa_nodes")
            duet_cpus(allowed, int(labels["scaleup"]), reserved_cpus or [], numa)
        except CellPlanError as exc:
            problems[labels["scenario"]] = (
                f"Experiment '{name}' runs scenario {labels['scenario']} as a duet (schedule: duet) on {host}, where "
                f"it does not fit twice: {exc}. Use schedule: rounds, or a lower scale-up, in experiments/{name}.yml."
            )
    return list(problems.values())


def _node_problems(name, cells, status, skipped):
    """What the runner's Kubernetes node cannot give the plan's cells of the platforms placed on it (those
    whose status carries the ``node``: k8s): GPUs (the NVIDIA device plugin advertises them as
    ``nvidia.com/gpu``) and, for ``pin``, whole CPUs out of its allocatable ones."""
    problems = []
    for label in dict.fromkeys(cell["labels"]["platform"] for cell in cells):
        node = (status.get(label) or {}).get("node")
        if not node or label in skipped:
            continue
        own = [cell["labels"] for cell in cells if cell["labels"]["platform"] == label]
        if any(labels["processor"] == "gpu" for labels in own) and node.get("allocatable_gpus", 0) < 1:
            problems.append(
                f"Experiment '{name}': a GPU scenario on {label} needs the NVIDIA device plugin: node {node['name']} "
                "advertises no nvidia.com/gpu; run platbench.lab.kubernetes on a GPU node (it deploys the device "
                f"plugin), or drop the {label} gpu scenarios."
            )
        pinned = [int(labels["scaleup"]) for labels in own if is_pinned(labels)]
        if pinned and max(pinned) > node.get("allocatable_cpus", 0):
            problems.append(
                f"Experiment '{name}' pins scale-up {max(pinned)} on {label}, but node {node['name']} has "
                f"{node.get('allocatable_cpus', 0)} allocatable CPUs (its CPUs minus kubelet's reservedSystemCPUs): "
                f"lower 'scaleup' in experiments/{name}.yml, or reserve fewer CPUs in platbench.lab.kubernetes."
            )
        # A cell's several pods on that node at once (placements/instances_k8s.py).
        problems.extend(
            instances_k8s.node_problems(name, label, [c for c in cells if c["labels"]["platform"] == label], node)
        )
    return problems


def _instance_gpu_problems(name, cells, facts, host, assignment, per_instance):
    """The gpu cells with instances of their own GPUs (instances.gpus: disjoint) that need more of the host's
    GPUs than its pool holds (bm, cn, pd; k8s pods get theirs from the device plugin)."""
    gpus = facts.get("gpus") or []
    wide = [
        cell
        for cell in cells
        if cell.get("instances")
        and cell["labels"]["processor"] == "gpu"
        and platforms.BY_LABEL[cell["labels"]["platform"]].gpu_pool == "host"
        # k8s: the device plugin gives each pod its GPUs; the node's capacity is instances_k8s.node_problems'.
        and platforms.BY_LABEL[cell["labels"]["platform"]].gpu_view != "scheduled"
    ]
    widest = max(wide, key=lambda cell: several.gpus_needed(cell, per_instance), default=None)
    if widest is None or not gpus:
        return []
    needed, pool = several.gpus_needed(widest, per_instance), gpu_pools.host_pool(assignment, gpus, host)
    if needed <= len(pool):
        return []
    count = widest["instances"]["count"]
    return [
        f"Experiment '{name}' gives each of {count} instances of a gpu cell {needed // count} GPU(s) of its own "
        f"(platform_run_gpus_per_cell), {needed} GPUs in a cell, but {host} leaves {len(pool)} to bm/cn/pd cells "
        f"({gpu_pools.describe(pool, gpus)}; {gpu_pools.SETTING} says which): lower platform_run_gpus_per_cell, "
        "assign more GPUs to the host, or let the instances share their GPUs (instances: {gpus: shared})."
    ]


def _gpu_problems(name, cells, status, facts, host, assignment, guest_image):
    """The problems of the plan's GPU scenarios on this host, and one line saying which GPUs
    each kind of platform's gpu scenarios use here ("" without gpu scenarios)."""
    gpus = facts.get("gpus") or []
    problems = gpu_pools.assignment_problems(assignment, gpus, host)
    # Only platforms drawing on this host's GPUs: an instance's are its flavor's.
    gpu_platforms = [
        label
        for label in dict.fromkeys(c["labels"]["platform"] for c in cells if c["labels"]["processor"] == "gpu")
        if platforms.BY_LABEL[label].gpu_pool
    ]
    if not gpu_platforms:
        return problems, ""
    if not gpus:
        reason = f"{host} has no NVIDIA GPU on its PCI bus: use processor [cpu] here"
        return problems + [f"Experiment '{name}' has processor 'gpu' scenarios, but {reason}."], ""
    if problems:  # the pools cannot be worked out from an assignment that does not hold
        return problems, ""
    on_host = [label for label in gpu_platforms if platforms.BY_LABEL[label].gpu_pool == "host"]
    in_guests = [label for label in gpu_platforms if platforms.BY_LABEL[label].gpu_pool == "guests"]
    bound = gpu_pools.drivers(gpus)
    reasons, uses = [], []
    if on_host:
        kinds = platforms.in_words(on_host, "/")
        assigned = gpu_pools.gpus_assigned_to(assignment, "host", gpus, host)
        on_vfio = [address for address in assigned if bound[address] == gpu_pools.VFIO_DRIVER]
        if not assigned:
            reasons.append(
                f"{kinds} gpu scenarios use the GPUs left with the host, and {gpu_pools.SETTING} assigns every GPU "
                f"of {host} to guests ({gpu_pools.describe(gpu_pools.guest_pool(assignment, gpus), gpus)}): "
                f"assign one to host, or drop {kinds} gpu scenarios"
            )
        elif on_vfio:
            it, verb = ("it", "is") if len(on_vfio) == 1 else ("them", "are")
            reasons.append(
                f"{gpu_pools.describe(on_vfio, gpus)} {verb} assigned to the host but bound to vfio-pci, so {kinds} "
                f"gpu scenarios cannot use {it}: run site.yml again (platbench.lab.kvm_host then binds only the GPUs "
                f"assigned to guests) and reboot {host}, or assign {it} to guests in {gpu_pools.SETTING}"
            )
        uses.append(f"{kinds} gpu scenarios use {gpu_pools.describe(gpu_pools.host_pool(assignment, gpus), gpus)}")
    if in_guests:
        kinds = platforms.in_words(in_guests, "/")
        pool = gpu_pools.guest_pool(assignment, gpus)
        if not pool:
            # None goes to guests, so every GPU is the host's: suggest the last one.
            example = gpu_pools.gpus_assigned_to(assignment, "host", gpus)[-1]
            reasons.append(
                f"{kinds} gpu scenarios pass through the GPUs {gpu_pools.SETTING} assigns to guests, and it assigns "
                f"none of {host}'s ({gpu_pools.describe_all(assignment, gpus, host)}): set "
                f"{gpu_pools.SETTING} (e.g. {{'{example}': guests}}) and run site.yml, which binds it "
                f"to vfio-pci and puts the NVIDIA driver in the guest image, or drop {kinds} gpu scenarios"
            )
        elif any(status.get(label, {}).get("emulated") for label in in_guests):
            reasons.append(
                f"{kinds} gpu scenarios pass a GPU through, which needs KVM, and {host} runs its guests under "
                "QEMU's emulator (TCG: no usable /dev/kvm or no VT-x/AMD-V): enable virtualization in its "
                f"BIOS/UEFI, or drop {kinds} gpu scenarios"
            )
        elif not (guest_image or {}).get("nvidia_driver"):
            reasons.append(
                f"the guest image {kinds} gpu scenarios boot has no NVIDIA driver, so the workload could not use "
                f"the GPU passed through: build it again (run site.yml) now that {gpu_pools.SETTING} assigns "
                f"{', '.join(pool)} to guests"
            )
        uses.append(f"{kinds} gpu scenarios use {gpu_pools.describe(pool, gpus)}")
    if reasons:
        problems.append(f"Experiment '{name}' has processor 'gpu' scenarios, but " + "; and ".join(reasons) + ".")
    return problems, f"GPUs on {host}: " + "; ".join(uses) + "."


def cells_to_run(plan, status, host, done=(), runners=None, facts=None, reserved_cpus=()):
    """The cells ``host`` runs, in the plan's order, each labelled with ``host``.

    Kept: cells of the platforms ready here; where guests are emulated (``emulated`` in
    ``status``), the experiment's ``emulated`` subset of their cells, after all the others; minus the cells this
    host already measured (``done``: their ids, from ``records.done_cells(path, host)``). A cell whose ranks spread
    over several runner hosts (``instances.hosts``) is its home host's, the first of ``runners``: the other runners
    leave it out (neither run nor counted done here).
    ``facts`` and ``reserved_cpus``: the host's, which each kept cell's sizing labels are worked out from
    (sizing.sized: a relative scale-up resolved, ``chr``, ``numa_nodes``).
    Returns ``{"cells": [...], "done": how many cells of the plan this host already measured}``.
    """
    ready = [label for label, entry in status.items() if entry.get("ready")]
    emulated = [label for label, entry in status.items() if entry.get("emulated")]
    home = instances_hosts.home_of(list(runners or []), host)
    cells = [
        cell
        for cell in plan.get("cells", [])
        if cell["labels"]["platform"] in ready and (home == host or instances_hosts.spread(cell.get("instances")) == 1)
    ]
    cells = emulated_subset(cells, plan.get("emulated"), emulated)
    # Emulated guests' cells go last: each takes minutes under TCG and has no ratio to bare metal, so the
    # comparable cells (and the table of them) are done first. The other cells keep their interleaved order.
    cells = [cell for cell in cells if not cell["labels"].get("emulated")] + [
        cell for cell in cells if cell["labels"].get("emulated")
    ]
    done = set(done)
    planned = {cell["id"] for cell in cells}
    # Each cell's sizing on this host (scale-up resolved, chr, numa_nodes) is part of its labels, so of its record.
    # A duet pair runs whole while either side is left to measure; the side already measured is not recorded again.
    kept = [
        sizing.sized({**cell, "labels": {**cell["labels"], "host": host}}, facts, reserved_cpus, host)
        for cell in cells
        if cell["id"] not in done or _partner_left(cell, planned, done)
    ]
    return {"cells": kept, "done": sum(1 for cell in cells if cell["id"] in done), "units": run_units(kept, done)}


def _partner_left(cell, planned, done):
    partner = cell["labels"].get(schedule.DUET_PARTNER)
    return partner in planned and partner not in done


def run_units(cells, done=()):
    """What the role's loop runs, in order (tasks/main.yml): ``{"tasks", "cell", "partner", "record"}``, a lone
    cell through ``cell.yml``, a duet pair (schedule.duet) through ``duet.yml`` with its partner; ``record``: the
    ids to record (a side measured before a stop is not recorded twice). A duet side whose partner is not run here
    (its platform is not ready) runs alone."""
    by_id = {cell["id"]: cell for cell in cells}
    units, taken = [], set()
    for cell in cells:
        if cell["id"] in taken:
            continue
        labels = cell["labels"]
        partner = by_id.get(labels.get(schedule.DUET_PARTNER))
        if partner is not None and labels.get(schedule.DUET_ROLE) == "partner":
            continue  # its lead runs it
        if partner is not None:
            taken.update((cell["id"], partner["id"]))
            record = [side["id"] for side in (cell, partner) if side["id"] not in done]
            units.append({"tasks": "duet.yml", "cell": cell, "partner": partner, "record": record})
        else:
            units.append({"tasks": "cell.yml", "cell": cell, "partner": None, "record": [cell["id"]]})
    return units
