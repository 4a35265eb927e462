# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Placement kinds: one module per kind (``KIND = Kind(...)``, common.py), the placements of a cell of several
instances (``instances*.py``), and the registry that finds the declarations and builds every table of them
(registry.py).

The package only re-exports the registry, lazily (PEP 562): ``placements.KINDS`` and the other tables are the
registry's current ones (``register`` rebuilds them), and importing a kind's module (``placements.process``) runs
nothing here that imports it back.
"""

import importlib

_REGISTRY = f"{__name__}.registry"
# What the registry gives the rest of the collection (registry.__all__); any other name is a submodule or nothing.
EXPORTS = (
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
)


def __getattr__(name):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_REGISTRY), name)


def __dir__():
    return sorted({*globals(), *EXPORTS})
