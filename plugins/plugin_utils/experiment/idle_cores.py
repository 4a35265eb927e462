# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""``idle_cores: none`` (Samani 2022): the instance gets every core of the host, and no core is left idle beside it.

- On the runner host's processes and containers (bm, sg, cn, pd), the host's other work is fenced onto the same cores
  (``plugins/module_utils/cpu_fence.py``, put up and always taken down around the cell by ``tasks/cell.yml``).
- In guests (vm, vmcn, vmsg), QEMU's emulator threads share the guest's cores (``<emulatorpin>`` = the cores its
  vCPUs run on: the pinned ones, or every host core for ``vnl``), as a hypervisor with no spare core has to.

Every core means the host's allowed CPUs: a cell whose scale-up is not their number stops before any cell, and so
does ``pin`` on a host that keeps cores from pinned cells (``platbench_reserved_cpus``).
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned

NONE = "none"
# The kinds whose placement runs on the runner host itself, so that the fence confines their neighbours, declare
# `fenced` (a Firecracker micro-VM is one: its VMM and vCPU threads are processes of the runner in the jailer's
# cgroup); those that run the workload in a guest of the runner, whose emulator threads share its cores, `emulator`
# (placements/<kind>/).


class IdleCoresError(ValueError):
    """A cell cannot run with no idle core as asked; the message says why and what to change."""


def wanted(cell):
    """Whether ``cell`` leaves no core idle."""
    return cell["labels"].get("idle_cores") == NONE


def _host_cores(facts):
    return sorted({int(cpu) for cpu in (facts or {}).get("cpus_allowed", [])})


def _scaleup(value, cores):
    """The scale-up as a number of cores: itself, or every core for ``all``; None for anything else."""
    if value == "all":
        return cores
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cell_problems(cell, facts, reserved_cpus, where):
    """Why ``cell`` cannot leave no core idle on the host of ``facts``, each naming what to change."""
    problems = []
    labels = cell["labels"]
    cores = _host_cores(facts)
    platform = platforms.get(labels["platform"], where)
    fenced_or_emulated = placements.FENCED + placements.EMULATOR
    if platform.remote or platform.kind not in fenced_or_emulated:
        supported = [p.label for p in platforms.PLATFORMS if not p.remote and p.kind in fenced_or_emulated]
        problems.append(
            f"{where}: idle_cores: none is not available on {platform.label} (its {platform.kind} kind does not run "
            f"on the runner's own cores); it applies to {', '.join(supported)}: drop {platform.label} or idle_cores"
        )
    if cell.get("instances"):
        problems.append(f"{where}: idle_cores: none is for cells of one instance (mode single), not {labels['mode']}")
    scaleup = _scaleup(labels["scaleup"], len(cores))
    if scaleup != len(cores):
        problems.append(
            f"{where}: idle_cores: none gives the instance every core of the host ({len(cores)}), but its scale-up is "
            f"{labels['scaleup']}: set scaleup: {len(cores)} (or all) for this host"
        )
    reserved = sorted({int(cpu) for cpu in reserved_cpus or ()})
    if is_pinned(labels) and reserved:
        problems.append(
            f"{where}: idle_cores: none with pin needs every core, but platbench_reserved_cpus keeps {reserved} from "
            "pinned cells on this host: set platbench_reserved_cpus: [] for it, or use cpu_config: vnl with "
            "idle_cores: none"
        )
    return problems


def plan_problems(name, cells, facts, reserved_cpus, host):
    """What stops the plan's ``idle_cores: none`` cells on ``host``, each problem said once for all its cells."""
    problems = []
    for cell in cells:
        if wanted(cell):
            problems += cell_problems(cell, facts, reserved_cpus, f"Experiment '{name}' on {host}")
    return list(dict.fromkeys(problems))


def plan(platform, cell, facts, reserved_cpus, where):
    """For a cell that leaves no core idle: ``(fence, emulator_cpus, runtime)`` - the fence to put up around it
    (``{"cpus": "0-15"}``) or None, the guest's emulator CPUs or None, and what its record says. ``(None, None,
    {})`` for any other cell."""
    if not wanted(cell):
        return None, None, {}
    problems = cell_problems(cell, facts, reserved_cpus, where)
    if problems:
        raise IdleCoresError(" ".join(problems))
    cores = _host_cores(facts)
    if platform.kind in placements.EMULATOR:
        return None, cores, {"idle_cores": NONE}
    return {"cpus": ",".join(map(str, cores))}, None, {"idle_cores": NONE}
