# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A known overhead injected into a platform's cells: the experiment's ``inject`` field.

Three knobs, each an overhead whose size is known, so that a lab can check it finds an overhead of that size (a
known-answer test of the instrument, issue 38):

- ``inject: {discard: 0.05}``: the workload trains every timed step as usual and leaves 5% of them, spread evenly, out
  of its throughput: the cell's throughput is 95% of what the same steps give, to within one step, whatever the host
  does meanwhile, and the host (a duet partner included) sees the same load as without it. The calibration's known
  answer (platbench calibrate), exact under every schedule. ``discard: 0`` is its placebo.
- ``inject: {spin: 0.05}``: the workload busy-spins on its own CPUs after each step, for 0.05 / 0.95 of the step's
  time, inside the timed part. Exact by construction beside nothing, but not beside a duet partner: on the 2-vCPU VM
  the lab is developed on, B's own steps ran about 5% slower than its partner's, so a 5% spin read 0.90-0.92 in duet
  pairs (the partner gains while B spins). ``spin: 0`` runs the same code path without spinning: a placebo.
- ``inject: {cpu_quota: 0.95}``: a CPU-bandwidth quota of 95% of the cell's CPUs (placements/process/: a cgroup
  platbench creates and removes; containers: the engine's own CPU quota). What a quota costs depends on the kernel
  and the workload's threads: on the same VM a 0.95 quota cost a pinned TensorFlow job 10-13%, not 5% (the CFS
  throttles in bursts), so it is a platform-cost knob to measure, not a known answer.
  Platforms whose cells cannot take a quota are refused at plan time.

``discard`` and ``spin`` travel in the workload's environment (``PLATBENCH_INJECT_DISCARD``, ``PLATBENCH_INJECT_SPIN``),
so every kind takes them; only workloads whose timed part is a loop of steps apply them (STEP_WORKLOADS), the others
are refused at plan time.

``inject_into: [ns]`` beside one injection gives it to those platforms' cells only; the others carry ``none``, and an
injected cell with no twin without injection is compared with its platform's baselines (schedule.py).

``inject: [none, {spin: 0.05}]`` makes it a dimension: the injected cells of a scenario are compared with the same
scenario's cells without injection (so bm can be compared with itself), the others with bm. Each cell carries the
label ``inject``: ``none``, ``discard=0.05``, ``spin=0.05`` or ``cpu_quota=0.95``; ``parse`` turns it back into its
settings.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import cell_labels

LABEL = cell_labels.INJECT
NONE = "none"
KNOBS = ("cpu_quota", "discard", "spin")
# The kinds whose cells take a quota declare `takes_quota` (placements/<kind>/): a process (a cgroup platbench makes
# around it) and a container (the engine's CPU quota). A guest's vCPUs, a micro-VM, a pod and a cloud instance do not.
# The workloads that discard or spin after timed steps (workloads/cnn_train/training.py): their timed part is a loop
# of steps. The micro-benchmarks time one tool's run, loadgen times queries: there is no step to leave out or lengthen.
STEP_WORKLOADS = ("cnn_train",)
# The knobs the workload applies itself, and the variable that carries each one's fraction into its environment.
WORKLOAD_ENV = {"discard": "PLATBENCH_INJECT_DISCARD", "spin": "PLATBENCH_INJECT_SPIN"}
# How the workload applies each, as the cell's plan records it (runtime.inject_<knob>_requested).
APPLIED_BY = {
    "discard": "leaving that share of its timed steps, spread evenly, out of its throughput",
    "spin": "after each step",
}
_SHAPE = (
    "inject: must be {discard: D} (the workload leaves the fraction D of its timed steps out of its throughput: a "
    "known overhead D, 0 <= D < 1), {spin: S} (it spins after each step, for the fraction S of the timed part) or "
    "{cpu_quota: Q} (a CPU-bandwidth quota at the fraction Q of the cell's CPUs, "
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
    for knob, share in (("discard", "of the timed steps"), ("spin", "of the timed part")):
        if knob in entry and not _number_within(entry[knob], 0, 1, high_included=False):
            found.append(
                f"{where}.{knob}: {entry[knob]!r} must be a fraction {share} from 0 up to, not including, 1 "
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
    """``inject: {discard: D}`` or ``{spin: S}`` on a workload whose timed part is not a loop of steps
    (STEP_WORKLOADS)."""
    if workload in STEP_WORKLOADS:
        return []
    used = sorted({knob for label in labels(value) for knob in parse(label) if knob in WORKLOAD_ENV})
    if not used:
        return []
    return [
        f"inject: {' and '.join(used)}: the workload applies it to the steps of a training loop, and workload "
        f"{workload} has none (the workloads with one: {', '.join(STEP_WORKLOADS)}): inject a cpu_quota, or "
        f"{' or '.join(used)} in an experiment of {' or '.join(STEP_WORKLOADS)}"
    ]


def platform_problems(value, takes_quota):
    """``inject: {cpu_quota: Q}`` on platforms that cannot take a quota: ``takes_quota`` maps each platform label of
    the experiment to whether its kind takes one (placements.TAKES_QUOTA). Every kind takes a discard or a spin (the
    workload's own)."""
    if not any("cpu_quota" in parse(label) for label in labels(value)):
        return []
    refused = [label for label, takes in takes_quota.items() if not takes]
    if not refused:
        return []
    return [
        f"inject: {', '.join(refused)} cannot take an injected CPU quota (only the cells of a process or a "
        f"container do: a cgroup around the process, the engine's CPU quota): inject a discard or a spin, which "
        f"every platform takes, drop {', '.join(refused)} from platforms, or inject into a separate experiment of the "
        "process and container platforms"
    ]


def into_problems(into, value, experiment_platforms):
    """What is wrong with an experiment's ``inject_into`` (the platforms whose cells take its one injection): a list of
    its platforms, beside an ``inject`` that is one injection, not a dimension."""
    if into is None:
        return []
    planned = list(experiment_platforms or ())
    if not isinstance(into, list) or not into or not all(isinstance(label, str) for label in into):
        return [f"inject_into: {into!r} must list the platforms whose cells take the injection, e.g. [ns]"]
    found = [
        f"inject_into: {label!r} is not one of the experiment's platforms ({', '.join(planned)})"
        for label in into
        if label not in planned
    ]
    if value is None or value == NONE or isinstance(value, list):
        found.append(
            "inject_into: goes with one injection (inject: {discard: D}), not with none or a dimension: the "
            "platforms it names take it, the others run without it"
        )
    return found


def label_of(entry):
    """The cell label of one injection: ``none``, ``discard=0.05``, ``spin=0.05`` or ``cpu_quota=0.95``."""
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


def workload_env(label):
    """The workload's environment for a cell's ``inject`` label: ``{"PLATBENCH_INJECT_DISCARD": "0.05"}`` with a
    discard (likewise a spin), {} with neither."""
    return {WORKLOAD_ENV[knob]: f"{value:g}" for knob, value in parse(label).items() if knob in WORKLOAD_ENV}
