# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What a cell's record says of the harness beside it: whether platbench kept itself out of the cell's way, and the
CPU time its own processes used on the cell's CPUs during the cell's timed part (module_utils/quiet.py).

``platbench run`` hands the playbook ``platbench_harness`` (platbench/quiet.py): ``isolated``, ``how`` (or why not),
``series`` (its CPU time read once a second) and ``accounting`` (the counter, read once more here: the series' last
reading may be older than the window's end). The report flags a cell whose harness share is above 0.5% and says
"harness not isolated" on every answer line of a campaign where it was not.
"""

from __future__ import annotations

import time

from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence, quiet

NOT_THROUGH_PLATBENCH = (
    "the playbook was not started by `platbench run`: nothing kept ansible-playbook off the cells' CPUs; run the "
    "experiment with `platbench run EXPERIMENT`"
)
REMOTE = "counted on the controller only: this cell ran on another machine, whose module processes wait at SCHED_IDLE"


def _cpus(cpuset):
    try:
        return cpu_fence.parse_cpus(cpuset) if cpuset else None
    except cpu_fence.FenceError:
        return None


def marks(harness, metadata, cpuset=None, local=True, now=None):
    """The metadata fields of one ok cell: ``harness_isolated``, ``harness_isolation`` and, where the cell ran on this
    controller and timed a part, ``harness_cpu_seconds`` and ``harness_cpu_share`` (of the cell's CPUs over its
    timed part), or ``harness_cpu_error`` saying why they are not there."""
    if not harness:
        return {"harness_isolated": False, "harness_isolation": NOT_THROUGH_PLATBENCH}
    found = {"harness_isolated": bool(harness.get("isolated")), "harness_isolation": harness.get("how")}
    window = metadata.get("timed_window")
    if not local:
        return {**found, "harness_cpu_error": REMOTE}
    if not (isinstance(window, list) and len(window) == 2) or not harness.get("series"):
        why = "no timed part" if not window else "the harness's CPU time is not counted on this host"
        return {**found, "harness_cpu_error": why}
    series = quiet.read_series(harness["series"])
    latest = quiet.reading(harness.get("accounting"))
    if latest is not None:
        series.append((time.time() if now is None else now, latest))
    cpus = _cpus(cpuset)
    seconds = quiet.cpu_between(series, float(window[0]), float(window[1]), cpus)
    if seconds is None:
        return {**found, "harness_cpu_error": "the harness's CPU series does not cover the timed part"}
    span = max(float(window[1]) - float(window[0]), 1e-9)
    width = len(cpus) if cpus else len(series[-1][1]) if series else 1
    return {
        **found,
        "harness_cpu_seconds": round(seconds, 4),
        "harness_cpu_share": round(seconds / (span * max(width, 1)), 6),
    }


def with_marks(samples, harness, cpuset=None, local=True):
    """``samples`` with the marks in each ok sample's metadata (one reading for them all: they share the cell)."""
    if not samples:
        return samples
    first = next((sample for sample in samples if sample.get("metadata", {}).get("timed_window")), samples[0])
    found = marks(harness, first.get("metadata") or {}, cpuset, local)
    for sample in samples:
        sample.setdefault("metadata", {}).update(found)
    return samples
