# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A known overhead injected into a platform's cells: the experiment's ``inject`` field.

Two knobs, each an overhead whose size is known, so that a lab can check it finds an overhead of that size (a
known-answer test of the instrument, issue 38):

- ``inject: {spin: 0.05}``: the workload itself busy-spins on its own CPUs after each step, for 0.05 / 0.95 of the
  step's time, inside the timed part: the cell's throughput is exactly 95% of what it would be, whatever the host
  does meanwhile. The calibration's known answer (platbench calibrate). Every kind takes it (it travels in the
  workload's environment, ``PLATBENCH_INJECT_SPIN``); only workloads whose timed part is a loop of steps apply it
  (SPIN_WORKLOADS), the others are refused at plan time. ``spin: 0`` runs the same code path without spinning: a
  placebo.
- ``inject: {cpu_quota: 0.95}``: a CPU-bandwidth quota of 95% of the cell's CPUs (placements/process.py: a cgroup
  platbench creates and removes; containers: the engine's own CPU quota). What a quota costs depends on the kernel
  and the workload's threads: on the 2-vCPU VM the lab is developed on, a 0.95 quota cost a pinned TensorFlow job
  10-13%, not 5% (the CFS throttles in bursts), so it is a platform-cost knob to measure, not a known answer.
  Platforms whose cells cannot take a quota are refused at plan time.

``inject: [none, {spin: 0.05}]`` makes it a dimension: the injected cells of a scenario are compared with the same
scenario's cells without injection (so bm can be compared with itself), the others with bm. Each cell carries the
label ``inject``: ``none``, ``spin=0.05`` or ``cpu_quota=0.95``; ``parse`` turns it back into its settings.
"""

from __future__ import annotations

LABEL = "inject"
NONE = "none"
KNOBS = ("cpu_quota", "spin")
# The kinds whose cells take a quota: a process (a cgroup platbench makes around it) and a container (the engine's
# CPU quota). A guest's vCPUs, a micro-VM, a pod and a cloud instance are refused: none of them is built yet.
KINDS = ("process", "container")
# The workloads that spin after each timed step (workloads/cnn_train/training.py): their timed part is a loop of
# steps. The micro-benchmarks time one tool's run, loadgen times queries: there is no step to lengthen.
SPIN_WORKLOADS = ("cnn_train",)
SPIN_ENV = "PLATBENCH_INJECT_SPIN"  # the fraction, in the workload's environment
_SHAPE = (
    "inject: must be {spin: S} (the workload spins after each step, for the fraction S of the timed part: a known "
    "overhead S, 0 <= S < 1) or {cpu_quota: Q} (a CPU-bandwidth quota at the fraction Q of the cell's CPUs, "
    "0 < Q <= 1), or a list of none and such mappings (a dimension: each injected scenario is compared with the "
    "same one without injection)"
)


def _entry_problems(entry, where):
    if entry == NONE:
        return []
    if not isinstance(entry, dict) or not entry or set(entry) - set(KNOBS):
        return [f"{where}: {entry!r}: {_SHAPE}; knobs: {', '.join(KNOBS)}"]
    found = []
    if "cpu_quota" in entry and not _number_within(entry["cpu_quota"], 0, 1, low_included=False):
        found.append(
            f"{where}.cpu_quota: {entry['cpu_quota']!r} must be a fraction of the cell's CPUs above 0 and at most 1 "
            "(0.95: the cell gets 95% of its CPUs' time)"
        )
    if "spin" in entry and not _number_within(entry["spin"], 0, 1, high_included=False):
        found.append(
            f"{where}.spin: {entry['spin']!r} must be a fraction of the timed part from 0 up to, not including, 1 "
            "(0.05: a 5% overhead, the throughput 0.95 of the same cell without it; 0: a placebo)"
        )
    return found


def _number_within(value, low, high, low_included=True, high_included=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (low <= value if low_included else low < value) and (value <= high if high_included else value < high)


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


def workload_problems(value, workload):
    """``inject: {spin: S}`` on a workload whose timed part is not a loop of steps (SPIN_WORKLOADS)."""
    if workload in SPIN_WORKLOADS or not any("spin" in parse(label) for label in labels(value)):
        return []
    return [
        f"inject: spin lengthens each step of a training loop, and workload {workload} has none (the workloads "
        f"that spin: {', '.join(SPIN_WORKLOADS)}): inject a cpu_quota, or spin in an experiment of "
        f"{' or '.join(SPIN_WORKLOADS)}"
    ]


def platform_problems(value, kinds):
    """``inject: {cpu_quota: Q}`` on platforms that cannot take a quota: ``kinds`` maps each platform label of the
    experiment to its kind (module_utils/platforms.py). Every kind takes a spin (the workload spins)."""
    if not any("cpu_quota" in parse(label) for label in labels(value)):
        return []
    refused = [label for label, kind in kinds.items() if kind not in KINDS]
    if not refused:
        return []
    return [
        f"inject: {', '.join(refused)} cannot take an injected CPU quota (only the cells of a process or a "
        f"container do: a cgroup around the process, the engine's CPU quota): inject a spin, which every platform "
        f"takes, drop {', '.join(refused)} from platforms, or inject into a separate experiment of the process and "
        "container platforms"
    ]


def label_of(entry):
    """The cell label of one injection: ``none``, ``spin=0.05`` or ``cpu_quota=0.95``."""
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


def spin_env(label):
    """The workload's environment for a cell's ``inject`` label: {SPIN_ENV: "0.05"} with a spin, {} otherwise."""
    spin = parse(label).get("spin")
    return {} if spin is None else {SPIN_ENV: f"{spin:g}"}
