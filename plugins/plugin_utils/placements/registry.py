# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The kinds' registry: every kind declared by a folder of this package, and the tables built from them.

Placement kinds are the code each kind of platform runs with, written and declared once per kind.

Every platform of the registry (``plugins/module_utils/platforms.py``) names its kind. A kind is one folder here,
``placements/<kind>/``, whose ``__init__.py`` declares it as ``KIND = Kind(...)`` (common.py): its ``plan`` and
``observed``, the results its task files register, its placement task file (``tasks/place.yml`` beside it), its
teardown (``tasks/teardown.yml``, and the shared files of ``playbooks/tasks/teardown/`` it needs) and its capabilities
(the kinds it holds, fenced, emulator threads, an injected quota, how several instances are placed). This package
finds every folder that declares a kind and builds
each table below from those declarations; nothing else lists kinds. A platform naming an undeclared kind, or an inner
kind its kind does not hold, is refused here, when the registry loads.

- ``plan(ctx, plan)`` adds the kind's sections to a cell plan (``process``, ``container``, ``guest``,
  ``job``/``kubernetes``, ``openstack``) and what was asked of the platform to ``plan["runtime"]``;
- ``observed(plan, results)`` maps what the engine reported after the run (the registered results of the
  kind's task file) into the cell's output, its runtime metadata and, where the engine says the workload
  failed without the task failing, an error.

Kinds that hold another (a guest, a cloud instance) plan and map their inner kind through ``inner``. A cell of
several instances is placed by ``instances*.py``, which the kind's ``instances`` capability chooses.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import (
    instances,
    instances_guest,
    instances_hosts,
    instances_k8s,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    Kind,
    KindError,
    Observed,
    PlacementError,
    Placing,
)

# The placements of a cell of several instances: the results their task files register (result name -> variable)
# and what a stopped one leaves (playbooks/tasks/teardown/instances.yml: rank pid files, network paths).
INSTANCE_PLACEMENTS = (instances, instances_guest, instances_k8s)
INSTANCES_TEARDOWN = ("instances",)


def _declared():
    """Every kind declared by a folder (or module) of this package (``KIND``), by name, in name order."""
    found = {}
    for module_info in pkgutil.iter_modules(sys.modules[__package__].__path__):
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        kind = getattr(module, "KIND", None)
        if isinstance(kind, Kind):
            if kind.name in found:
                raise KindError(f"kind {kind.name}: declared twice (placements/{module_info.name}/ and another)")
            found[kind.name] = kind
    return dict(sorted(found.items()))


KINDS = _declared()


def _tables():
    """The tables every reader of a kind's facts uses, rebuilt from KINDS (register() adds to it)."""
    global RESULTS, INNER_KINDS, FENCED, EMULATOR, TAKES_QUOTA, DUET, TEARDOWN, CELL_ROLES
    RESULTS = {}
    for source in list(KINDS.values()) + list(INSTANCE_PLACEMENTS):
        for name, variable in source.results.items() if isinstance(source, Kind) else source.RESULTS.items():
            if RESULTS.setdefault(name, variable) != variable:
                raise KindError(
                    f"result {name}: registered as {RESULTS[name]} and as {variable}; one name, one variable"
                )
    INNER_KINDS = {name: kind.inner for name, kind in KINDS.items() if kind.inner}
    FENCED = tuple(name for name, kind in KINDS.items() if kind.fenced)
    EMULATOR = tuple(name for name, kind in KINDS.items() if kind.emulator)
    TAKES_QUOTA = tuple(name for name, kind in KINDS.items() if kind.takes_quota)
    DUET = tuple(name for name, kind in KINDS.items() if kind.duet)
    TEARDOWN = {name: tuple(kind.teardown) for name, kind in KINDS.items()}
    CELL_ROLES = tuple(dict.fromkeys(role for kind in KINDS.values() for role in kind.cell_roles))


RESULTS = INNER_KINDS = FENCED = EMULATOR = TAKES_QUOTA = DUET = TEARDOWN = CELL_ROLES = None
_tables()


def registry_problems(entries=None):
    """What is wrong between the registry's platforms (``entries``, the registry's unless given) and the declared
    kinds: a kind no folder declares, an inner kind the kind does not hold or that is not declared itself."""
    problems = []
    for platform in platforms.PLATFORMS if entries is None else entries:
        kind = KINDS.get(platform.kind)
        if kind is None:
            problems.append(
                f"platform {platform.label}: kind {platform.kind!r} is declared by no folder of "
                f"plugins/plugin_utils/placements/ (declared: {', '.join(KINDS)}): declare it in the __init__.py of "
                f"its folder there as KIND = Kind(...)"
            )
            continue
        for fact in ("machine", "network"):
            if getattr(platform, fact) != getattr(kind, fact):
                problems.append(
                    f"platform {platform.label}: its {fact} is {getattr(platform, fact)!r}, but its kind {kind.name} "
                    f"declares {getattr(kind, fact)!r}: write {fact}={getattr(kind, fact)!r} in its registry entry"
                )
        if (platform.confinement is not None) != kind.confined:
            problems.append(
                f"platform {platform.label}: {'names' if platform.confinement else 'names no'} confinement, but its "
                f"kind {kind.name} {'does not declare' if platform.confinement else 'declares'} confined"
            )
        if kind.inner and platform.inner not in kind.inner:
            problems.append(
                f"platform {platform.label}: a {kind.name} holds {' or '.join(kind.inner)}, not {platform.inner!r}"
            )
        elif not kind.inner and platform.inner is not None:
            problems.append(f"platform {platform.label}: a {kind.name} holds no other kind, not {platform.inner!r}")
        elif platform.inner is not None and platform.inner not in KINDS:
            problems.append(f"platform {platform.label}: inner kind {platform.inner!r} is declared by no folder")
        else:
            problems.extend(_starter_problems(platform, KINDS[platform.workload_kind]))
    return problems


def _starter_problems(platform, workload):
    """A platform names a launcher exactly when its workload's kind is started by one, and an engine likewise."""
    problems = []
    for field, starter in (("launcher", "launcher"), ("engine", "engine")):
        named = getattr(platform, field) is not None
        if named != (workload.started_by == starter):
            problems.append(
                f"platform {platform.label}: {'names' if named else 'names no'} {field}, but its workload's kind "
                f"{workload.name} is {'not ' if named else ''}started by one (its declaration's started_by: "
                f"{workload.started_by!r})"
            )
    return problems


def check_registry(entries=None):
    """KindError naming every problem of registry_problems (the registry is refused when it loads)."""
    problems = registry_problems(entries)
    if problems:
        raise KindError("; ".join(problems))


def register(kind):
    """Add a kind declared outside this package (a site's own kind, a test's fixture kind) to every table."""
    if not isinstance(kind, Kind):
        raise KindError(f"register: a kind is declared as a Kind(...), got {kind!r}")
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise KindError(f"kind {kind.name}: declared twice (already in plugins/plugin_utils/placements/)")
    KINDS[kind.name] = kind
    _tables()
    return kind


def unregister(name):
    """Remove a kind register() added (the tests' fixture kinds)."""
    KINDS.pop(name, None)
    _tables()


def declaration(platform):
    """The declared kind of ``platform`` (a registry entry)."""
    if platform.kind not in KINDS:
        raise KindError(f"platform {platform.label}: kind {platform.kind!r} is declared by no folder")
    return KINDS[platform.kind]


def own_teardown(groups):
    """The teardown task files kept in kinds' own folders (a ``teardown`` entry that is a path, not a name of
    playbooks/tasks/teardown/) for a host in the inventory ``groups``: those of the kinds whose platforms are built on
    one of them (their ``host_group``), in the kinds' order, each once. playbooks/teardown.yml's last play includes
    them, so that a kind's teardown needs no line of that playbook."""
    groups = set(groups or ())
    found = []
    for name, kind in KINDS.items():
        if any(p.kind == name and p.host_group in groups for p in platforms.PLATFORMS):
            found += [entry for entry in kind.teardown if os.path.isabs(entry) and entry not in found]
    return found


def instance_platforms(placement):
    """The registry's labels whose kind places a cell of several instances as ``placement`` (common.py's
    INSTANCE_PLACEMENTS: supervised, guests, pods)."""
    return tuple(p.label for p in platforms.PLATFORMS if p.kind in KINDS and KINDS[p.kind].instances == placement)


check_registry()

__all__ = [
    "KINDS",
    "RESULTS",
    "INNER_KINDS",
    "FENCED",
    "EMULATOR",
    "TAKES_QUOTA",
    "DUET",
    "TEARDOWN",
    "CELL_ROLES",
    "INSTANCE_PLACEMENTS",
    "INSTANCES_TEARDOWN",
    "Kind",
    "KindError",
    "Observed",
    "PlacementError",
    "Placing",
    "check_registry",
    "declaration",
    "instance_platforms",
    "observed",
    "own_teardown",
    "plan_sections",
    "register",
    "registry_problems",
    "unregister",
]


def plan_sections(ctx, plan):
    """Add the sections of ``ctx.platform``'s kind to ``plan``; a cell with several instances then becomes the
    instances placement of that kind's instance, as the kind declares it (``instances``: pods,
    placements/instances_k8s.py; a guest each, placements/instances_guest.py; the supervised processes and
    containers, placements/instances.py, or ranks over the runner hosts' own network, placements/instances_hosts.py).
    An injected quota is applied by the kinds that declare ``takes_quota``, to cells of one instance: the others are
    refused here too (the experiment's plan refuses their platforms already, inject.platform_problems)."""
    spec = ctx.cell.get("instances")
    ctx.declaration = declaration(ctx.platform)
    if ctx.injected_quota is not None:
        if not ctx.declaration.takes_quota:
            raise PlacementError(
                f"{ctx.where}: inject: {ctx.platform.label} ({ctx.platform.kind}) cannot take an injected overhead; "
                f"only the cells of {' and '.join(TAKES_QUOTA)} platforms do"
            )
        if spec:
            raise PlacementError(
                f"{ctx.where}: inject: an overhead is injected into cells of one instance only, and this one has "
                f"{spec.get('count', 'several')}: inject into a single-instance experiment"
            )
    ctx.declaration.plan(ctx, plan)
    plan["task_file"] = ctx.declaration.task_file  # roles/platform_run/tasks/cell.yml includes what this names
    # A kind that hands no GPU over may say why itself (micro_vm); the others are refused here.
    if ctx.gpu_count and ctx.platform.gpu_view == "none":
        raise PlacementError(
            f"{ctx.where}: {ctx.platform.label} passes no GPU through to its workload ({ctx.platform.gpu_handover}): "
            f"run its gpu cells on a platform that hands GPUs over"
        )
    if spec:
        if ctx.declaration.instances == "pods":
            placing = instances_k8s
        elif ctx.declaration.instances == "guests":
            placing = instances_guest
        else:
            placing = instances_hosts if instances_hosts.places(spec) else instances
        placing.plan(ctx, plan, spec)
        plan["task_file"] = placing.TASK_FILE


def observed(plan, results):
    """What ``plan``'s engine reported (``results``: registered results by RESULTS name), as an Observed."""
    platform = platforms.get(plan.get("platform"), "the cell plan's platform")
    unknown = sorted(set(results or {}) - set(RESULTS))
    if unknown:
        raise PlacementError(f"unknown result(s) {', '.join(unknown)}; known: {', '.join(RESULTS)}")
    results = {name: (results or {}).get(name) or {} for name in RESULTS}
    if plan.get("placement") in ("instances", instances_guest.PLACEMENT):
        return instances.observed(plan, results)
    if plan.get("placement") == instances_k8s.PLACEMENT:
        return instances_k8s.observed(plan, results)
    return declaration(platform).observed(plan, results)
