# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A known overhead injected into a platform's cells: the experiment's ``inject`` field.

``inject: {cpu_quota: 0.95}`` runs every cell under a CPU-bandwidth quota of 95% of its CPUs (a 5% overhead whose
size is known), so a lab can check that it finds an overhead of that size: a known-answer test of the instrument
(issue 38). ``inject: [none, {cpu_quota: 0.95}]`` makes it a dimension: the injected cells of a scenario are
compared with the same scenario's cells without injection (so bm can be compared with itself), the others with bm.

Each cell carries the label ``inject``: ``none`` or ``cpu_quota=0.95``; ``parse`` turns it back into its settings
for the placement that applies it (placements/process.py: a cgroup platbench creates and removes; containers: the
engine's own CPU quota). Platforms whose cells cannot take a quota are refused at plan time.
"""

from __future__ import annotations

LABEL = "inject"
NONE = "none"
KNOBS = ("cpu_quota",)
# The kinds whose cells take a quota: a process (a cgroup platbench makes around it) and a container (the engine's
# CPU quota). A guest's vCPUs, a micro-VM, a pod and a cloud instance are refused: none of them is built yet.
KINDS = ("process", "container")
_SHAPE = (
    "inject: must be {cpu_quota: Q} (a CPU-bandwidth quota at the fraction Q of the cell's CPUs, 0 < Q <= 1), "
    "or a list of none and such mappings (a dimension: each injected scenario is compared with the same one "
    "without injection)"
)


def _entry_problems(entry, where):
    if entry == NONE:
        return []
    if not isinstance(entry, dict) or not entry or set(entry) - set(KNOBS):
        return [f"{where}: {entry!r}: {_SHAPE}; knobs: {', '.join(KNOBS)}"]
    quota = entry["cpu_quota"]
    if isinstance(quota, bool) or not isinstance(quota, (int, float)) or not 0 < quota <= 1:
        return [
            f"{where}.cpu_quota: {quota!r} must be a fraction of the cell's CPUs above 0 and at most 1 "
            "(0.95: the cell gets 95% of its CPUs' time, a 5% overhead)"
        ]
    return []


def problems(value):
    """What is wrong with an experiment's ``inject`` field, each naming it; [] for a good one or none."""
    if value is None:
        return []
    if isinstance(value, list):
        if not value:
            return [f"inject: [] lists nothing; {_SHAPE}"]
        found = [problem for index, entry in enumerate(value) for problem in _entry_problems(entry, f"inject[{index}]")]
        if not found and len(set(map(label_of, value))) != len(value):
            found.append(f"inject: {value!r} lists an injection twice")
        return found
    if value == NONE:
        return []
    return _entry_problems(value, "inject")


def platform_problems(value, kinds):
    """``inject`` on platforms that cannot take it: ``kinds`` maps each platform label of the experiment to its
    kind (module_utils/platforms.py)."""
    if not any(map(is_injected, labels(value))):
        return []
    refused = [label for label, kind in kinds.items() if kind not in KINDS]
    if not refused:
        return []
    return [
        f"inject: {', '.join(refused)} cannot take an injected overhead (only the cells of a process or a "
        f"container do: a cgroup around the process, the engine's CPU quota): drop {', '.join(refused)} from "
        "platforms, or inject into a separate experiment of the process and container platforms"
    ]


def label_of(entry):
    """The cell label of one injection: ``none`` or ``cpu_quota=0.95``."""
    if entry in (None, NONE):
        return NONE
    return ",".join(f"{knob}={entry[knob]:g}" for knob in KNOBS if knob in entry)


def labels(value):
    """The ``inject`` labels an experiment's cells take, one per value of the dimension; [] without the field
    (the cells then carry no inject label and keep their ids)."""
    if value is None:
        return []
    return [label_of(entry) for entry in (value if isinstance(value, list) else [value])]


def parse(label):
    """The settings of a cell's ``inject`` label ({} for none or no label): ``{"cpu_quota": 0.95}``."""
    if label in (None, "", NONE):
        return {}
    settings = {}
    for part in str(label).split(","):
        knob, _, number = part.partition("=")
        if knob not in KNOBS:
            raise ValueError(f"unknown injection {part!r} in the inject label {label!r}; knobs: {', '.join(KNOBS)}")
        settings[knob] = float(number)
    return settings


def is_injected(label):
    return label not in (None, "", NONE) and not (isinstance(label, float) and label != label)
