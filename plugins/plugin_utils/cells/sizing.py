# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""How big a cell is on its runner host: relative scale-ups, the container-to-host ratio (CHR) and the NUMA
nodes its pinned CPUs span (Samani 2022's sizing knobs).

- ``scaleup`` may be a number of cores or relative to the host: ``all``, ``half`` or ``all-but-N``. The
  experiment checks the syntax (``scaleup_problem``); each runner resolves it against its *usable* cores, the
  CPUs it lets cells have (``cpus_allowed`` minus ``platbench_reserved_cpus``), shared among the instances of
  a cell that each get cores of their own. The cell then carries the number it became as ``scaleup`` and the
  form asked for as ``scaleup_requested``; its id and scenario keep the form asked for, so that a campaign
  resumes on the same host and reads the same on every host.
- ``chr``: instance cores / host usable cores, rounded to ``CHR_DIGITS`` decimals. The cells of platforms that
  run on instances a cloud provisions (``remote``) get none: their cores are not the runner's.
- ``numa_nodes``: how many of the host's NUMA nodes a pinned cell's CPUs lie in (choose_cpus fills a
  node, then spills to the next); null for cells the host scheduler places (``vnl``).
- An experiment with ``numa: spill`` means its biggest pinned scale-up to cross a node. Where none does (a
  one-node host, or every scale-up fits in a node) the runner warns and runs the cells as they fit.

Pure Python: called by runplan (prechecks, the cells a host runs) and cellplan.
"""

from __future__ import annotations

import re

from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence, platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import several
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import cell_labels
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import is_pinned

ALL, HALF = "all", "half"
_ALL_BUT = re.compile(r"^all-but-([1-9][0-9]*)$")
REQUESTED_LABEL = cell_labels.SCALEUP_REQUESTED
CHR_LABEL = cell_labels.CHR
NUMA_LABEL = cell_labels.NUMA_NODES
CHR_DIGITS = 3
NUMA_INTENTS = ("spill",)
FORMS = "a positive integer, all, half or all-but-N (N >= 1)"


class SizingError(ValueError):
    """A relative scale-up cannot be resolved on a host; the message says why and what to change."""


def cpu_numbers(values, what):
    """The CPU numbers of ``values`` as a set; SizingError naming ``what`` where one is no number."""
    try:
        return {int(value) for value in values}
    except (TypeError, ValueError):
        raise SizingError(f"{what} must list CPU numbers, got {values!r}") from None


def choose_cpus(allowed, count, reserved=(), numa_nodes=None):
    """``count`` CPUs of ``allowed`` minus ``reserved``, and the NUMA node they lie in (or None).

    Where the host has several NUMA nodes and the count fits in one, the CPUs come from one
    node: the one holding the highest-numbered free CPU. Where it fits in none, they fill a node,
    then spill over to the next (the biggest first, so that they span as few nodes as they can;
    sizing.nodes_spanned says which). Within a node (or across the host, when it names no nodes)
    the highest-numbered CPUs go first, so CPU 0, which takes most interrupts and housekeeping,
    goes last. Returned in ascending order.
    """
    reserved = cpu_numbers(reserved, "reserved CPUs")
    available = cpu_numbers(allowed, "the host's allowed CPUs") - reserved
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise SizingError(f"the scale-up must be a positive integer, got {count!r}")
    if count > len(available):
        raise SizingError(
            f"scale-up {count} needs {count} CPUs but only {len(available)} are free "
            f"({sorted(available)}; {len(reserved)} reserved by platbench_reserved_cpus)"
        )
    nodes = {str(name): cpu_numbers(cpus, f"NUMA node {name}") & available for name, cpus in (numa_nodes or {}).items()}
    fitting = [(max(cpus), name) for name, cpus in nodes.items() if len(cpus) >= count]
    if len(nodes) > 1 and fitting:
        chosen = sorted(sorted(nodes[max(fitting)[1]], reverse=True)[:count])
    elif len(nodes) > 1:
        # Node by node, the biggest (then the highest-reaching) first; CPUs no node names last.
        order = sorted((cpus for cpus in nodes.values() if cpus), key=lambda cpus: (len(cpus), max(cpus)), reverse=True)
        named = set().union(*nodes.values())
        order.append(available - named)
        filled = [cpu for cpus in order for cpu in sorted(cpus, reverse=True)]
        chosen = sorted(filled[:count])
    else:
        chosen = sorted(sorted(available, reverse=True)[:count])
    node = next((name for name, cpus in sorted(nodes.items()) if set(chosen) <= cpus), None)
    return chosen, node


def is_number(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_relative(value):
    return isinstance(value, str) and (value in (ALL, HALF) or bool(_ALL_BUT.match(value)))


def scaleup_problem(value):
    """Why ``value`` is no valid scale-up (None when it is one)."""
    if is_number(value):
        return None if value > 0 else f"{value!r} is not positive"
    if is_relative(value):
        return None
    if isinstance(value, str) and value.startswith("all-but"):
        return f"{value!r} must be all-but-N with N a whole number >= 1 (e.g. all-but-2)"
    return f"{value!r} is not {FORMS}"


def usable_cpus(facts, reserved=()):
    """The CPUs the host lets cells have: its allowed CPUs minus those reserved (platbench_reserved_cpus)."""
    return sorted({int(cpu) for cpu in (facts or {}).get("cpus_allowed", [])} - {int(cpu) for cpu in reserved or ()})


def instance_share(spec):
    """How many instances of a cell each take cores of their own on its home host (1 for a single instance, or
    instances that share their CPUs)."""
    if not spec or spec.get("cpus") == "shared":
        return 1
    return several.home_share(spec["count"], spec.get("hosts", 1))


def resolve(requested, usable, share=1, host="the host"):
    """``(cores, note)``: the scale-up ``requested`` on a host with ``usable`` cores whose cell holds ``share``
    instances with cores of their own; ``note`` says how a relative form was resolved or capped (None for a
    number: the prechecks say when it does not fit). Raises SizingError where nothing is left."""
    if is_number(requested):
        return requested, None
    per = f" for each of {share} instances with cores of their own" if share > 1 else ""
    match = _ALL_BUT.match(str(requested))
    if match:
        spared = int(match.group(1))
        if spared >= usable:
            raise SizingError(
                f"scale-up {requested} leaves no core on {host}, which offers {usable} usable cores (its allowed "
                f"CPUs minus platbench_reserved_cpus): use all-but-N with N below {usable}, or a number"
            )
        cores = (usable - spared) // share
        if cores < 1:
            raise SizingError(
                f"scale-up {requested} leaves {usable - spared} of {host}'s {usable} usable cores, fewer than the "
                f"{share} instances of the cell that each need one: lower N or the instances' count"
            )
        return cores, f"{requested} = {cores} of {usable} usable cores{per}"
    if requested == ALL:
        cores = usable // share
    elif requested == HALF:
        cores = usable // 2 // share
    else:
        raise SizingError(f"scale-up {requested!r} is not {FORMS}")
    if cores < 1:
        return 1, f"{requested} of {usable} usable cores{per} is below one core: capped to 1"
    return cores, f"{requested} = {cores} of {usable} usable cores{per}"


def container_to_host_ratio(cores, usable):
    """CHR: an instance's cores over the host's usable cores, rounded to CHR_DIGITS decimals (None without any)."""
    return round(cores / usable, CHR_DIGITS) if usable else None


def nodes_spanned(cpus, numa_nodes):
    """The names of the NUMA nodes (of ``numa_nodes``, name -> CPUs) that ``cpus`` lie in, in the order of the
    CPUs; a CPU no node names counts as one node of its own ("?")."""
    node_of = {int(cpu): str(name) for name, members in (numa_nodes or {}).items() for cpu in members}
    return list(dict.fromkeys(node_of.get(int(cpu), "?") for cpu in cpus))


def guest_numa(pins, numa_nodes, memory_mb):
    """The guest's NUMA layout for vCPUs pinned one to one to ``pins`` (host CPUs, in vCPU order), or None where
    it is not pinned or the host has fewer than two NUMA nodes (its memory has nowhere else to be, and the domain
    stays as libvirt builds without NUMA support accept it).

    ``nodeset``: the host nodes spanned (``<numatune><memory mode='strict'>``). ``cells``: one guest cell per
    host node spanned, holding the vCPUs pinned to that node's CPUs, and a share of ``memory_mb`` in proportion
    to them (the shares add up to it). ``topology``: one socket per cell where the vCPUs split evenly, else one.
    """
    if not pins or len(numa_nodes or {}) < 2:
        return None
    node_of = {int(cpu): str(name) for name, members in numa_nodes.items() for cpu in members}
    unknown = [cpu for cpu in pins if int(cpu) not in node_of]
    if unknown:
        raise SizingError(f"pinned CPUs {unknown} lie in none of the host's NUMA nodes {sorted(numa_nodes)}")
    spanned = nodes_spanned(pins, numa_nodes)
    vcpus = {node: [index for index, cpu in enumerate(pins) if node_of[int(cpu)] == node] for node in spanned}
    memory = int(memory_mb)
    shares = [memory * len(vcpus[node]) // len(pins) for node in spanned]
    shares[-1] += memory - sum(shares)
    cells = [
        {"id": index, "cpus": cpu_fence.format_cpus(vcpus[node]), "memory_mib": share, "host_node": node}
        for index, (node, share) in enumerate(zip(spanned, shares, strict=True))
    ]
    even = len({len(members) for members in vcpus.values()}) == 1
    sockets = len(spanned) if even else 1
    return {
        "nodeset": ",".join(spanned),
        "cells": cells,
        "topology": {"sockets": sockets, "cores": len(pins) // sockets},
    }


def cell_sizing(cell, facts, reserved=(), host="the host", cpus=None):
    """The sizing labels of ``cell`` on a host with ``facts``: ``scaleup`` resolved, ``scaleup_requested`` (for a
    relative form only), ``chr`` and ``numa_nodes``; and the note saying how a relative form was resolved.

    ``cpus``: the pinned CPUs the cell gets, where known (cellplan); else chosen here as cellplan chooses them
    (choose_cpus)."""
    labels = cell["labels"]
    requested = labels.get(REQUESTED_LABEL, labels["scaleup"])
    usable = usable_cpus(facts, reserved)
    share = instance_share(cell.get("instances"))
    cores, note = resolve(requested, len(usable), share, host)
    sizing = {"scaleup": cores}
    if is_relative(requested):
        sizing[REQUESTED_LABEL] = requested
    platform = platforms.BY_LABEL.get(labels.get("platform"))
    remote = platform is not None and platform.remote
    sizing[CHR_LABEL] = None if remote else container_to_host_ratio(cores, len(usable))
    pinned = is_pinned(labels) and not remote
    if pinned and platform is not None and platform.pinning == "cpu_manager":
        pinned = False  # kubelet's CPU manager picks the cores: which nodes is not the plan's
    if pinned and cpus is None:
        try:
            cpus, _node = choose_cpus(usable, cores * share, numa_nodes=(facts or {}).get("numa_nodes") or None)
        except SizingError:
            cpus = None  # too big for the host: the prechecks say so
    sizing[NUMA_LABEL] = len(nodes_spanned(cpus, (facts or {}).get("numa_nodes"))) if pinned and cpus else None
    return sizing, note


def is_sized(cell):
    """Whether ``cell`` carries its sizing labels for a host (``sized``)."""
    return CHR_LABEL in cell["labels"]


def sized(cell, facts, reserved=(), host="the host"):
    """``cell`` with its sizing labels (``cell_sizing``); a cell already sized is returned as it is."""
    if is_sized(cell):
        return cell
    sizing, _note = cell_sizing(cell, facts, reserved, host)
    return {**cell, "labels": {**cell["labels"], **sizing}}


def plan_sizing(name, cells, facts, reserved, host, numa_intent=None):
    """``(problems, notes, sized cells)`` of the plan's sizing on ``host``: relative scale-ups that cannot be
    resolved (problems), how the others resolve, and a ``numa: spill`` experiment whose pinned cells span no more
    than one node here (notes: warnings, the cells still run); the cells that resolve, each sized once here
    (``sized``) for the plan's other checks."""
    problems, notes, widest, kept = [], {}, 0, []
    for cell in cells:
        try:
            sizing, note = (cell["labels"], None) if is_sized(cell) else cell_sizing(cell, facts, reserved, host)
        except SizingError as exc:
            problems.append(f"Experiment '{name}': {exc}.")
            continue
        kept.append(cell if is_sized(cell) else {**cell, "labels": {**cell["labels"], **sizing}})
        if note:
            notes.setdefault(f"Experiment '{name}' on {host}: scale-up {note}.", None)
        widest = max(widest, sizing[NUMA_LABEL] or 0)
    problems = list(dict.fromkeys(problems))
    numa = (facts or {}).get("numa_nodes") or {}
    pinned = [cell for cell in cells if is_pinned(cell["labels"])]
    if numa_intent == "spill" and not problems and widest <= 1:
        if len(numa) <= 1:
            why = f"{host} has one NUMA node, so nothing spills: its pinned cells run in one node (numa_nodes: 1)"
        elif not pinned:
            why = "the experiment has no pinned cell (cpu_config: pin), whose CPUs are the ones placed on nodes"
        else:
            biggest = max(len(cpus) for cpus in numa.values())
            why = (
                f"every pinned cell fits in one of {host}'s {len(numa)} NUMA nodes (up to {biggest} CPUs each): "
                f"a scale-up above {biggest} (e.g. all) spans two"
            )
        notes.setdefault(f"Experiment '{name}' asks for numa: spill, but {why}.", None)
    return problems, list(notes), kept
