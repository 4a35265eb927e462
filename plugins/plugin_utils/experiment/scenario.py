# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A scenario: where and how a cell runs, as one value. The seed studies name it ``PLATFORM/SCALEUP/CPUCFG/PROC``
(``cn/2/pin/cpu``); an experiment that varies more (a workload parameter, a dimension such as ``storage``, several
workloads) adds what it varies, ``cn/2/pin/cpu|batch_size=16``. The matrix makes each cell's scenario once
(matrix.py); the cell's id is its scenario and its round (``cn/2/pin/cpu|batch_size=16|r0``); budgets, history and
the report read the name back with ``Scenario.parse``, the one parser of the one form that ``str`` writes.

The cells, records and stores keep the string (``labels.scenario``: the seed studies' name, ``Scenario.name``), as
JSON and the results store can; ``Scenario.of(labels)`` makes the value again from a cell's or a sample's labels.
Whether a cell's CPUs are pinned is ``Scenario.pinned``, asked of the value, never compared at each use.

A leaf module: it imports nothing of platbench.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PIN, VANILLA = "pin", "vnl"  # pinned to cores of its own; or a share of the host's cores (a CPU quota)
CPU_CONFIGS = (PIN, VANILLA)
PROCESSORS = ("cpu", "gpu")
_PART = r"[^/|]+"
_FORM = re.compile(
    rf"^(?P<platform>{_PART})/(?P<scaleup>{_PART})/(?P<cpu_config>{_PART})/(?P<processor>{_PART})"
    r"(?:\|(?P<varies>[^|]+))?$"
)


class ScenarioError(ValueError):
    """A scenario's name that is not of the form PLATFORM/SCALEUP/CPUCFG/PROC[|KEY=VALUE,...]."""


@dataclass(frozen=True)
class Scenario:
    """One scenario: ``platform`` (a registry label), ``scaleup`` (cores: a number, or a relative scale-up such as
    ``half`` before a host sizes it), ``cpu_config`` (CPU_CONFIGS), ``processor`` (PROCESSORS), and ``varies``:
    what else the experiment varies, ``(key, value)`` pairs in the matrix's order."""

    platform: str
    scaleup: int | str
    cpu_config: str
    processor: str
    varies: tuple = ()

    @property
    def pinned(self):
        """Whether the cell's CPUs are pinned (cpu_config pin), not a share of the host's."""
        return self.cpu_config == PIN

    @property
    def name(self):
        """The seed studies' name, without what the experiment varies: ``cn/2/pin/cpu`` (``labels.scenario``)."""
        return f"{self.platform}/{self.scaleup}/{self.cpu_config}/{self.processor}"

    @property
    def variant(self):
        """What the experiment varies, as the name writes it: ``batch_size=16,storage=ssd`` ("" when nothing)."""
        return ",".join(f"{key}={value}" for key, value in self.varies)

    def __str__(self):
        return f"{self.name}|{self.variant}" if self.varies else self.name

    def cell_id(self, repeat):
        """The id of this scenario's cell of round ``repeat``."""
        return f"{self}|r{repeat}"

    @classmethod
    def of(cls, labels, varies=()):
        """The scenario of a cell's (or a sample's) labels."""
        return cls(labels["platform"], labels["scaleup"], labels["cpu_config"], labels["processor"], tuple(varies))

    @classmethod
    def parse(cls, text):
        """The scenario ``str`` wrote; ScenarioError saying what is wrong. A scale-up of digits is a number."""
        match = _FORM.match(text) if isinstance(text, str) else None
        if match is None:
            raise ScenarioError(
                f"{text!r} is not a scenario: write PLATFORM/SCALEUP/CPUCFG/PROC, e.g. cn/2/pin/cpu, optionally "
                "followed by |KEY=VALUE,... for what the experiment varies"
            )
        varies = []
        for part in (match["varies"] or "").split(",") if match["varies"] else ():
            key, equals, value = part.partition("=")
            if not equals or not key:
                raise ScenarioError(f"{text!r}: {part!r} of what the scenario varies is not KEY=VALUE")
            varies.append((key, value))
        scaleup = match["scaleup"]
        return cls(
            match["platform"],
            int(scaleup) if scaleup.isdigit() else scaleup,
            match["cpu_config"],
            match["processor"],
            tuple(varies),
        )


def is_pinned(labels):
    """Whether the cell of ``labels`` is pinned: ``Scenario.pinned`` of its labels, which need only cpu_config."""
    return labels.get("cpu_config") == PIN
