# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What one runner host does with an expanded experiment: the prechecks, and the cells it runs.

Pure Python, called through the ``platbench.lab.plan_problems`` and ``platbench.lab.cells_to_run``
filters by ``roles/platform_run/tasks/precheck.yml``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.matrix import emulated_subset


def _wanted(plan):
    return list(dict.fromkeys(cell["labels"]["platform"] for cell in plan.get("cells", [])))


def _not_ready(plan, status):
    return [label for label in _wanted(plan) if not status.get(label, {}).get("ready")]


def plan_problems(plan, status, facts, host, reserved_cpus=(), skip_unavailable=False):
    """Everything that stops ``plan`` on ``host`` before a cell runs, each a message naming the
    setting to change (all at once, so one fix-and-rerun is enough), and the platforms skipped.

    ``status``: the ``platforms`` result of platbench.lab.platform_status; ``facts``:
    ``ansible_facts.platbench``. Returns ``{"problems": [...], "skipped": {label: reason}}``.
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
        }
    problems, skipped = [], {}
    wanted = _wanted(plan)
    guests = platforms.BUILT_GUESTS
    reads_files = plan.get("dataset") is not None or "data_dir" in (plan.get("params") or {})
    if reads_files and set(wanted) & set(guests):
        problems.append(
            f"Experiment '{name}' reads data from files, which {platforms.in_words(guests)} guests cannot reach "
            f"in this release. Drop {platforms.in_words(guests, '/')} from its platforms or use data: synthetic."
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
    most = max(int(cell["labels"]["scaleup"]) for cell in cells)
    if most > offered:
        problems.append(
            f"Experiment '{name}' asks for scale-up {most}, but {host} offers {offered} CPUs "
            f"({len(allowed)} allowed, {len(reserved)} reserved by platbench_reserved_cpus). "
            f"Lower 'scaleup' in experiments/{name}.yml or run on a bigger host."
        )
    gpu_cells = [cell for cell in cells if cell["labels"]["processor"] == "gpu"]
    gpu_reasons = []
    if gpu_cells and not int(facts.get("gpu_count") or 0):
        gpu_reasons.append(f"{host} has no NVIDIA GPU on its PCI bus: use processor [cpu] here")
    if any(cell["labels"]["platform"] in guests for cell in gpu_cells):
        gpu_reasons.append(
            f"on {platforms.in_words(guests, '/')} the KVM host and the domain can pass GPUs through "
            "(platbench.lab.kvm_host, vm_hostdevs), but the guest image of this release has no NVIDIA driver, "
            "so the workload would silently use the CPU: run GPU scenarios on bm/cn, or processor [cpu] in guests"
        )
    if gpu_reasons:
        problems.append(f"Experiment '{name}' has processor 'gpu' scenarios, but " + "; and ".join(gpu_reasons) + ".")
    return {"problems": problems, "skipped": skipped}


def cells_to_run(plan, status, host, done=()):
    """The cells ``host`` runs, in the plan's order, each labelled with ``host``.

    Kept: cells of the platforms ready here; where guests are emulated (``emulated`` in
    ``status``), the experiment's ``emulated`` subset of their cells; minus the cells this
    host already measured (``done``: their ids, from ``records.done_cells(path, host)``).
    Returns ``{"cells": [...], "done": how many cells of the plan this host already measured}``.
    """
    ready = [label for label, entry in status.items() if entry.get("ready")]
    emulated = [label for label, entry in status.items() if entry.get("emulated")]
    cells = [cell for cell in plan.get("cells", []) if cell["labels"]["platform"] in ready]
    cells = emulated_subset(cells, plan.get("emulated"), emulated)
    done = set(done)
    kept = [{**cell, "labels": {**cell["labels"], "host": host}} for cell in cells if cell["id"] not in done]
    return {"cells": kept, "done": sum(1 for cell in cells if cell["id"] in done)}
