"""Per-request phase times and the record's phase metrics (stdlib only).

Every request has a pre-processing, an inference and a post-processing time. Inference runs per batch:
each request of a batch is attributed an equal share of its batch's time, so that the requests' times
add up to the phases' totals (the batch's whole time is each request's latency, but not its cost).
"""

import math

from ..common.record import metric
from ..common.stats import percentile
from .settings import PHASES

# The phases' total falls short of the span that holds them by the SUT's own bookkeeping between its timers
# (slicing a batch, completing its samples): at most 1% of the span, or 5 ms a batch where a tiny run makes that
# more. The bookkeeping itself takes well under a millisecond, but on a busy 2-core host the scheduler can take the
# CPU between two timers for a few (CI saw 2.07 ms over 2 batches of a 0.16 s run). A phase lost falls short by its
# whole time; a phase counted twice goes over the span.
SPAN_SLACK = 0.01
SPAN_SLACK_PER_BATCH_S = 0.005


class PhaseTimes:
    """Seconds per request and phase, indexed like the requests; None where a phase was not timed."""

    def __init__(self, count, timed_phases=PHASES):
        self.count = count
        self.timed = tuple(phase for phase in PHASES if phase in timed_phases)
        self.seconds = {phase: [0.0] * count for phase in self.timed}

    def add(self, phase, index, seconds):
        self.seconds[phase][index] += seconds

    def add_batch(self, phase, indices, seconds):
        """A batch's time, shared equally by its requests."""
        share = seconds / len(indices)
        for index in indices:
            self.seconds[phase][index] += share

    def per_request_e2e(self):
        return [sum(times) for times in zip(*(self.seconds[phase] for phase in self.timed), strict=True)]

    def metrics(self):
        """``<phase>_time`` (total), ``<phase>_p50`` and ``<phase>_p90`` (per request) for each timed phase,
        then the same for ``e2e`` when all three phases were timed (their sum)."""
        series = {phase: self.seconds[phase] for phase in self.timed}
        if self.timed == PHASES:
            series["e2e"] = self.per_request_e2e()
        metrics = []
        for name, times in series.items():
            metrics += [
                metric(f"{name}_time", sum(times), "s"),
                metric(f"{name}_p50", percentile(times, 0.5), "s"),
                metric(f"{name}_p90", percentile(times, 0.9), "s"),
            ]
        return metrics


def batches_of(requests, batch_size):
    return math.ceil(requests / batch_size)


def span_problem(phase_total, span_seconds, batches):
    """None when ``phase_total`` (the timed phases' seconds, summed over the requests) accounts for
    ``span_seconds``, a wall-clock span measured outside the phase timers (loadgen's own run time, the record's
    metadata.loadgen.span), up to the SUT's bookkeeping over ``batches`` batches; else what is wrong, in words."""
    if not isinstance(span_seconds, (int, float)) or span_seconds <= 0:
        return f"no span to compare the phases with (got {span_seconds!r})"
    gap = span_seconds - phase_total
    allowed = max(SPAN_SLACK * span_seconds, SPAN_SLACK_PER_BATCH_S * batches)
    if gap < -1e-6:
        return (
            f"the phases add up to {phase_total:.6f} s, {-gap:.6f} s more than the {span_seconds:.6f} s span that "
            "holds them: some time is counted twice"
        )
    if gap > allowed:
        return (
            f"the phases add up to {phase_total:.6f} s, {gap:.6f} s short of the {span_seconds:.6f} s span (at most "
            f"{allowed:.6f} s is bookkeeping over {batches} batch(es)): some time is in no phase"
        )
    return None
