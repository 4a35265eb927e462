# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Write the documentation site's page of the kinds, from their declarations (placements/<kind>/) and the
platform registry: `python docs/kinds_page.py OUT.md` (`make docs` runs it into the build directory)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "collections"))

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements

REPO = Path(__file__).resolve().parent.parent
CAPABILITIES = ("fenced", "emulator", "takes_quota", "duet", "through_api")


def _cell(values):
    return ", ".join(f"`{value}`" for value in values) if values else "-"


def _where(name):
    """A task file as the reader finds it: a kind's own folder's by its path in the repository, a shared one by name."""
    path = Path(name)
    return str(path.resolve().relative_to(REPO)) if path.is_absolute() else name


def page():
    """The page's Markdown."""
    lines = [
        "# The kinds",
        "",
        "Each kind of placement, as its folder declares it (`KIND = Kind(...)` in",
        "`plugins/plugin_utils/placements/<kind>/__init__.py`, beside its task files and its plan's spec); this page",
        "is generated from those declarations and the",
        "platform registry when the site is built. [Adding a platform or a kind](adding-a-platform.md) says what each",
        "part means.",
        "",
        "| kind | what a cell of it is | platforms | task file | results | teardown | holds | started by | "
        "capabilities | several instances | cell roles |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, kind in placements.KINDS.items():
        labels = [p.label for p in platforms.PLATFORMS if p.kind == name]
        capabilities = [capability for capability in CAPABILITIES if getattr(kind, capability)]
        results = [f"{result}: {variable}" for result, variable in kind.results.items()]
        lines.append(
            f"| `{name}` | {kind.summary} | {_cell(labels)} | `{_where(kind.task_file)}` | {_cell(results)} | "
            f"{_cell([_where(entry) for entry in kind.teardown])} | {_cell(kind.inner)} | {kind.started_by or '-'} | "
            f"{_cell(capabilities)} | "
            f"{kind.instances or '-'} | "
            f"{_cell(kind.cell_roles)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as stream:
        stream.write(page())
