"""Run validity, as MLPerf's loadgen marks its runs: a summary row is marked, with the fix, when its figures cannot
be trusted as they stand. The thresholds live here and only here (``Thresholds``; docs/src/reading-a-report.md, "Run
validity"):

- a metric's CV over the repeats is above ``max_cv``: "raise repeats to N", N the repeats that bring the 95%
  confidence interval of the mean within ``ci_half_width`` of it (see repeats_needed);
- a cell's timed part (``metadata.timed_seconds``, recorded by workloads that mark it: cnn_train) is shorter than
  ``min_timed_seconds``: "raise steps to M", M the steps that make it that long (see steps_needed);
- the host stole more than ``max_steal_percent`` of the CPU time while a cell was timed, or throttled its
  frequency at all (``metadata.host_state``, workloads/common/host_state.py): "CPU steal X% on host H",
  "frequency throttled";
- platbench's own processes (the harness) used more than ``max_harness_share`` of the cell's CPUs during its timed
  part (``metadata.harness_cpu_share``): their time is counted as the platform's.
- the workload itself ran below the normal scheduling priority (``metadata.sched_policy`` other than SCHED_OTHER, or
  ``metadata.nice`` above 0, as the workload's process saw them): any other process on its CPUs then runs first. A
  cell's launcher resets both, but a platform's engine gives its containers its own: a dockerd started by a process at
  SCHED_IDLE runs every container at SCHED_IDLE.

The samples also say how the harness was placed (``harness_isolated``, ``harness_isolation``) and what isolation
the experiment asked for (``isolation``): no mark of a row, but the answer names them (platbench/answer.py,
``harness_of`` here). A record without these keys (an older campaign) marks nothing.

A host that does not offer a source (no cpufreq or thermal_throttle in most VMs) marks nothing for it: its
samples record the source as unavailable. No pandas in the rules: numbers in, reasons out.
"""

import math
from dataclasses import dataclass

from platbench import distributions
from platbench.report.stats import CONFIDENCE

# The frame's columns (platbench/report/load.py) that carry what a sample's metadata say of its cell.
TIMED_SECONDS = "timed_seconds"
TIMED_STEPS = "timed_steps"
STEAL_PERCENT = "steal_percent"
THROTTLE_EVENTS = "throttle_events"
# How the harness was placed (the sample's metadata, top level): whether it ran off the cell's CPUs, how or why not,
# the CPU seconds it used on the cell's CPUs during the timed part and their share of the timed seconds; and the
# isolation the experiment asked for ("none": none, the experiment's choice).
HARNESS_ISOLATED = "harness_isolated"
HARNESS_ISOLATION = "harness_isolation"
HARNESS_CPU_SECONDS = "harness_cpu_seconds"
HARNESS_CPU_SHARE = "harness_cpu_share"
ISOLATION = "isolation"
NO_ISOLATION = "none"
HARNESS_COLUMNS = (HARNESS_ISOLATED, HARNESS_ISOLATION, HARNESS_CPU_SECONDS, HARNESS_CPU_SHARE, ISOLATION)
# The workload's own scheduling policy and nice value (workloads/common/harness.py, placement_metadata), as columns
# named apart from the labels.
WORKLOAD_POLICY = "workload_sched_policy"
WORKLOAD_NICE = "workload_nice"
NORMAL_POLICY = "SCHED_OTHER"
COLUMNS = (TIMED_SECONDS, TIMED_STEPS, STEAL_PERCENT, THROTTLE_EVENTS, *HARNESS_COLUMNS, WORKLOAD_POLICY, WORKLOAD_NICE)
# A summary row's own field: how its cells' harness was placed (``harness_of``).
HARNESS = "harness"
VALIDITY = "validity"  # the summary rows' column: the reasons joined by "; ", "" when the row is valid


@dataclass(frozen=True)
class Thresholds:
    """When a summary row is marked invalid (docs/src/reading-a-report.md "Run validity" explains the defaults)."""

    # Benchmarks on a quiet, pinned host repeat within a few percent; 5% is where a ratio to bm of a few
    # percent (the overheads the studies report) stops being readable.
    max_cv: float = 0.05
    # The repeats asked for bring the mean's 95% interval within this fraction of it.
    ci_half_width: float = 0.05
    # Under about 10 s a timed part is dominated by start-up effects (caches, JIT, frequency ramps) and by
    # timer and scheduling granularity; MLPerf asks 600 s of its own runs, far more than a scaled-down cell.
    min_timed_seconds: float = 10.0
    # Steal above a couple of percent means a neighbour on the hypervisor took CPU time the run counted as its own.
    max_steal_percent: float = 2.0
    # The harness's own CPU time on the cell's CPUs, as a share of the timed seconds: above half a percent it is of
    # the size of the smallest overheads the answer resolves, and is counted as the platform's.
    max_harness_share: float = 0.005


DEFAULTS = Thresholds()


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def sample_fields(metadata):
    """The frame's validity columns of one sample, from its record's metadata; None where not recorded (an older
    record, a workload that marks no timed part) or where the host does not offer the source (a string there), and
    where a harness key holds a value of another type than its own."""
    host = metadata.get("host_state") if isinstance(metadata.get("host_state"), dict) else {}
    numbers = {
        TIMED_SECONDS: metadata.get(TIMED_SECONDS),
        TIMED_STEPS: metadata.get(TIMED_STEPS),
        STEAL_PERCENT: host.get(STEAL_PERCENT),
        THROTTLE_EVENTS: host.get(THROTTLE_EVENTS),
        HARNESS_CPU_SECONDS: metadata.get(HARNESS_CPU_SECONDS),
        HARNESS_CPU_SHARE: metadata.get(HARNESS_CPU_SHARE),
    }
    isolated = metadata.get(HARNESS_ISOLATED)
    texts = {name: metadata.get(name) for name in (HARNESS_ISOLATION, ISOLATION)}
    policy = metadata.get("sched_policy")
    return {
        **{name: _number(value) for name, value in numbers.items()},
        HARNESS_ISOLATED: isolated if isinstance(isolated, bool) else None,
        **{name: value if isinstance(value, str) else None for name, value in texts.items()},
        WORKLOAD_POLICY: policy if isinstance(policy, str) else None,
        WORKLOAD_NICE: _number(metadata.get("nice")),
    }


def repeats_needed(cv, ci_half_width, confidence=CONFIDENCE):
    """The fewest repeats n (at least 2) whose mean's confidence interval is within ``ci_half_width`` of it at
    coefficient of variation ``cv``: the interval's half-width is t(n-1) * s / sqrt(n), so relative to the mean
    t(n-1) * cv / sqrt(n) <= ci_half_width, that is n >= (t(n-1) * cv / ci_half_width)^2, with t(n-1) the two-sided
    Student quantile for n-1 degrees of freedom. t shrinks as n grows, so n starts at the normal approximation's
    bound and rises until it holds."""
    if cv <= 0:
        return 2
    quantile = 1 - (1 - confidence) / 2
    repeats = max(2, math.ceil((distributions.normal_quantile(quantile) * cv / ci_half_width) ** 2))
    while distributions.t_quantile(quantile, repeats - 1) * cv / math.sqrt(repeats) > ci_half_width:
        repeats += 1
    return repeats


def steps_needed(steps, timed_seconds, min_timed_seconds):
    """The steps that make a timed part of ``steps`` steps over ``timed_seconds`` last ``min_timed_seconds``,
    at the same time per step: ceil(steps * min_timed_seconds / timed_seconds)."""
    return math.ceil(steps * min_timed_seconds / timed_seconds)


def _percent(fraction):
    return f"{100 * fraction:.1f}%".replace(".0%", "%")


def cv_reasons(n, cvs, thresholds=DEFAULTS):
    """The CV marks of a row of ``n`` repeats; ``cvs``: {metric: its CV, or None below two repeats}."""
    reasons = []
    for metric, cv in cvs.items():
        if cv is None or cv <= thresholds.max_cv:
            continue
        needed = repeats_needed(cv, thresholds.ci_half_width)
        said = f"{metric} CV {_percent(cv)} > {_percent(thresholds.max_cv)}"
        if needed > n:
            reasons.append(f"{said}: raise repeats to {needed}")
        else:
            # The mean is pinned down already: more repeats will not make the cells agree, a quieter host may.
            reasons.append(
                f"{said} though {n} repeats bound its mean within ±{_percent(thresholds.ci_half_width)}: "
                "the cells disagree, look for what disturbed them"
            )
    return reasons


def timed_reason(cells, thresholds=DEFAULTS):
    """The short-timed-part mark of a row; ``cells``: (timed seconds, timed steps) of each cell, None where not
    recorded. The shortest cell decides; without its steps the fix is said in seconds."""
    timed = [(seconds, steps) for seconds, steps in cells if seconds is not None and seconds > 0]
    if not timed:
        return None
    seconds, steps = min(timed, key=lambda cell: cell[0])
    if seconds >= thresholds.min_timed_seconds:
        return None
    said = f"timed part {seconds:.3g} s < {thresholds.min_timed_seconds:g} s"
    if steps:
        return f"{said}: raise steps to {steps_needed(steps, seconds, thresholds.min_timed_seconds)}"
    return f"{said}: lengthen it to {thresholds.min_timed_seconds:g} s"


def host_reasons(cells, thresholds=DEFAULTS):
    """The steal and throttling marks of a row; ``cells``: (host, steal percent, throttle events) of each cell,
    None where the host does not offer the source. The worst steal is named with its host."""
    reasons = []
    steals = [(steal, host) for host, steal, _ in cells if steal is not None]
    if steals:
        steal, host = max(steals, key=lambda cell: cell[0])
        if steal > thresholds.max_steal_percent:
            reasons.append(f"CPU steal {steal:.1f}% on host {host}")
    throttled = {}
    for host, _, events in cells:
        if events:
            throttled[host] = throttled.get(host, 0) + events
    if throttled:
        where = ", ".join(f"{events:g} event(s) on host {host}" for host, events in throttled.items())
        reasons.append(f"frequency throttled ({where})")
    return reasons


def harness_reason(shares, thresholds=DEFAULTS):
    """The mark of a row whose harness used too much of a cell's CPUs while it was timed; ``shares``: each cell's
    ``harness_cpu_share``, None where not recorded. The largest share decides."""
    recorded = [share for share in shares if share is not None]
    if not recorded or max(recorded) <= thresholds.max_harness_share:
        return None
    return (
        f"the harness used {_percent(max(recorded))} of the cell's CPUs during its timed part "
        f"(> {_percent(thresholds.max_harness_share)})"
    )


def priority_reason(cells):
    """The mark of a row some of whose cells' workloads ran below the normal priority; ``cells``: (scheduling policy,
    nice value) of each, None where not recorded (an older record). Says how many, as what, and where to look."""
    low = [
        (policy, nice)
        for policy, nice in cells
        if (policy is not None and policy != NORMAL_POLICY) or (nice is not None and nice > 0)
    ]
    if not low:
        return None
    seen = sorted({(policy or NORMAL_POLICY) + (f", nice {nice:g}" if nice else "") for policy, nice in low})
    return (
        f"the workload ran at {' / '.join(seen)} in {len(low)} of {len(cells)} cells, not the normal policy at nice 0: "
        "whatever else ran on its CPUs went first. Restart the engine or launcher that starts it (a dockerd started by "
        "a process at idle priority runs its containers so) and run the campaign again"
    )


def harness_of(cells):
    """How the harness of ``cells`` was placed, for the answer: ``{"not isolated": [how, or why not, of each cell
    whose harness_isolated is false, each once], "isolation": [each isolation the experiment asked for]}``;
    ``cells``: dicts of the COLUMNS. A cell that records neither (an older campaign) adds nothing."""
    not_isolated, isolation = {}, {}
    for cell in cells:
        if cell.get(HARNESS_ISOLATED) is False:
            not_isolated[cell.get(HARNESS_ISOLATION) or "no reason recorded"] = None
        if cell.get(ISOLATION):
            isolation[cell[ISOLATION]] = None
    return {"not isolated": list(not_isolated), "isolation": list(isolation)}


def note(rows, thresholds=DEFAULTS):
    """The line after a table with a validity column: what marks a row; None when no row is marked."""
    if not any(row.get(VALIDITY) for row in rows):
        return None
    return (
        f"{VALIDITY}: a row is marked when a metric's CV is above {_percent(thresholds.max_cv)} (the repeats asked "
        f"for bring its mean's 95% interval within ±{_percent(thresholds.ci_half_width)}), when a cell's timed part "
        f"lasted under {thresholds.min_timed_seconds:g} s, or when its host stole over "
        f"{thresholds.max_steal_percent:g}% of the CPU time or throttled the frequency while it was timed, or when "
        f"platbench's own processes used over {_percent(thresholds.max_harness_share)} of a cell's CPUs during its "
        "timed part (--cv-threshold, --min-timed-seconds, --max-steal-percent, --max-harness-percent), or when a "
        "cell's workload ran below the normal scheduling priority."
    )
