"""Per-request phase times and the record's phase metrics (stdlib only).

Every request has a pre-processing, an inference and a post-processing time. Inference runs per batch:
each request of a batch is attributed an equal share of its batch's time, so that the requests' times
add up to the phases' totals (the batch's whole time is each request's latency, but not its cost).
"""

from ..common.record import metric
from ..common.stats import percentile
from .settings import PHASES


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
