# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What a workload needs from a cell, in one table: the plan and the prechecks read it, nothing else guesses.

- ``processor``: the only processor the workload measures anything on (``"gpu"``: a GPU benchmark), None: any.
- ``peer``: the workload measures between two instances of its platform (a network peer); the lab gives a
  cell its peer only on the platforms whose registry entry has a ``peer`` (``peer_platforms()``).
- ``tools``: the programs the workload runs, which the lab installs (the tool precheck asks for them).

A workload missing from the table needs nothing beyond what every cell has. Stdlib only.
"""

from __future__ import annotations

from typing import NamedTuple

from ansible_collections.platbench.lab.plugins.module_utils import platforms


class Needs(NamedTuple):
    processor: str | None = None
    peer: bool = False
    tools: tuple = ()

    @property
    def peer_platforms(self):
        """The platforms that give a cell of this workload its peer (None: no peer needed)."""
        return peer_platforms() if self.peer else None


def peer_platforms():
    """The built platforms that can host a network peer (the registry's ``peer``), in registry order."""
    return tuple(platform.label for platform in platforms.PLATFORMS if platform.peer and platform.placement)


NEEDS = {
    "micro_cpu": Needs(tools=("hpcc",)),
    "micro_mem": Needs(tools=("hpcc",)),
    "micro_disk": Needs(tools=("dd", "ioping", "fio")),
    "micro_net": Needs(peer=True, tools=("iperf3",)),
    "micro_gpu": Needs(processor="gpu"),
}

NOTHING = Needs()


def needs_of(workload):
    """The Needs of ``workload``; a workload missing from the table needs nothing."""
    return NEEDS.get(workload, NOTHING)


def tools_for(workloads):
    """The tools the given workloads run, sorted and without repeats."""
    return sorted({tool for workload in workloads for tool in needs_of(workload).tools})


def drop_reason(workload, platform, processor):
    """Why a cell of ``workload`` on ``platform`` with ``processor`` is left out of the plan:
    ``(the cell label it is about, reason)``, or None to keep the cell."""
    needs = needs_of(workload)
    if needs.processor is not None and processor != needs.processor:
        return "processor", f"{workload} is a {needs.processor} benchmark: its {processor} cells are left out"
    if needs.peer_platforms is not None and platform not in needs.peer_platforms:
        return "platform", f"{workload} needs a peer, which the lab gives only on {', '.join(needs.peer_platforms)}"
    return None


def plan_problems(workload, platforms, processors):
    """What stops an experiment running ``workload`` on ``platforms`` x ``processors``: each a field, what is
    wrong and what to do. Empty when at least one cell of the workload can run."""
    needs = needs_of(workload)
    problems = []
    if needs.processor is not None and needs.processor not in processors:
        kind = "a GPU benchmark" if needs.processor == "gpu" else f"a {needs.processor} benchmark"
        where = " (a host with a GPU)" if needs.processor == "gpu" else ""
        offered = ", ".join(map(str, processors))
        problems.append(
            f"workload: {workload} is {kind} and this experiment's processor is only {offered}: "
            f"add processor: [{needs.processor}]{where} or remove {workload}"
        )
    if needs.peer_platforms is not None and not set(needs.peer_platforms) & set(platforms):
        problems.append(
            f"workload: {workload} needs a peer (a second instance of its platform), supported on "
            f"{', '.join(needs.peer_platforms)}; this experiment's platforms are {', '.join(map(str, platforms))}: "
            f"add {' or '.join(needs.peer_platforms)} to platforms or remove {workload}"
        )
    return problems
