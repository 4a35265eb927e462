"""The toy kind, declared in the tests alone: the workload as a plain process pinned by ``taskset``, with a scratch
directory of the cell's own that its placement makes and removes, and that its teardown removes where a stopped run
left it. A folder as the collection's kinds are: this declaration, tasks/place.yml and tasks/teardown.yml. The tests
register it (placements.register) and give its platform ``ty`` to the registry; tests/unit/test_kinds.py plans a
cell of it, runs the cell through its place.yml in a real ansible-playbook run and tears a stopped one down through
its teardown.yml, with no file of the collection edited."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import Kind, command_observed, kind_file

REPO = Path(__file__).resolve().parents[3]
# Where a cell's scratch directory goes; its teardown looks there (toy_scratch_root).
SCRATCH_ROOT = "/tmp/platbench-toy"


def plan(ctx, plan):
    """plan["toy"]: the workload's argv under taskset, its environment, and the cell's scratch directory."""
    plan["env"] = ctx.env({"PYTHONPATH": str(REPO / "collections" / "ansible_collections" / "platbench" / "lab")})
    taskset = ["taskset", "--cpu-list", ctx.cpuset] if ctx.pinned else []
    plan["toy"] = {
        "argv": [*taskset, sys.executable, *ctx.argv],
        "env": plan["env"],
        "chdir": str(REPO),
        "scratch": f"{SCRATCH_ROOT}/{ctx.name}",
    }
    plan["runtime"].update(launcher="toy")


def observed(plan, results):
    """The command's output and exit code."""
    return command_observed(results.get("toy"))


KIND = Kind(
    name="toy",
    summary="the workload as a plain process pinned by taskset, with a scratch directory of the cell's own",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"toy": "toy_result"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence"),
    fenced=True,
    network="host",  # a plain process of the host
)
