"""The attribution of a platform's cost to the steps of its ladder, with intervals, and the check of their product
against the direct ratio.

Each step's ratio (the rung over the rung below it, on one metric) is the report's paired comparison of their rows
(report_tables.comparison: by duet pair, blocked on the swapped CPU sets; by round under ``rounds``), kept on the log
scale as an estimate with its standard error and degrees of freedom. The steps were measured in pairs of their own,
so their logs add up and their variances too: the product's interval takes Welch-Satterthwaite's degrees of freedom.
The direct ratio (the platform beside bm in pairs of their own) should equal the product within both intervals; where
their quotient's interval excludes 1, the mechanisms interact (or a rung measures something else than it names), and
the attribution says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ansible_collections.platbench.lab.plugins.module_utils import platforms

from platbench import distributions
from platbench.report.stats import CONFIDENCE, log_ratio_estimate
from platbench.report.tables import PAIRED, PAIRED_METHODS, comparison


@dataclass(frozen=True)
class Estimate:
    """A ratio on the log scale: ``center`` = mean log-ratio, ``error`` its standard error, ``df`` its degrees of
    freedom, ``pairs`` how many pairs (or rounds) measured it."""

    center: float
    error: float
    df: float
    pairs: int = 0
    method: str = ""  # the report's comparison method (report_tables: by duet pair, by round, unpaired)

    @property
    def ratio(self):
        return math.exp(self.center)

    def interval(self, confidence=CONFIDENCE):
        """(low, high) of the ratio."""
        if not self.error:
            return self.ratio, self.ratio
        half = distributions.t_quantile((1.0 + confidence) / 2.0, max(self.df, 1.0)) * self.error
        return math.exp(self.center - half), math.exp(self.center + half)

    def half_width(self, confidence=CONFIDENCE):
        """The interval's relative half-width: 0.01 is ±1%."""
        low, high = self.interval(confidence)
        return (high / low) ** 0.5 - 1.0

    def excludes(self, value=1.0, confidence=CONFIDENCE):
        low, high = self.interval(confidence)
        return not low <= value <= high


def of_rows(row, baseline, metric):
    """The Estimate of ``row`` over ``baseline`` on ``metric`` (their paired comparison; unpaired, from Welch's
    interval with the smaller side's degrees of freedom), or None where it cannot be computed yet."""
    if not row or not baseline:
        return None
    compared = comparison(row, baseline, metric)
    if compared["method"] in PAIRED_METHODS:
        fitted = log_ratio_estimate(compared["pairs"], compared.get("sides"))
        if fitted is None:
            return None
        return Estimate(fitted[0], fitted[1], fitted[2], len(compared["pairs"]), compared["method"])
    if compared["interval"] is None or not compared["estimate"]:
        return None
    low, high = compared["interval"]
    if low <= 0:
        return None
    count = min(len(row.get(f"{metric} values") or []), len(baseline.get(f"{metric} values") or []))
    df = max(count - 1, 1)
    error = (math.log(high) - math.log(low)) / (2.0 * distributions.t_quantile((1.0 + CONFIDENCE) / 2.0, df))
    return Estimate(math.log(compared["estimate"]), error, df, count, compared["method"])


def product(estimates):
    """The Estimate of the product of independent ratios: logs and variances add, Welch-Satterthwaite's df."""
    variance = sum(item.error**2 for item in estimates)
    denominator = sum(item.error**4 / item.df for item in estimates if item.df > 0)
    df = variance**2 / denominator if denominator else math.inf
    return Estimate(
        sum(item.center for item in estimates), math.sqrt(variance), df, min(item.pairs for item in estimates)
    )


def quotient(top, bottom):
    """The Estimate of ``top`` / ``bottom``, two independent ratios."""
    inverse = Estimate(-bottom.center, bottom.error, bottom.df, bottom.pairs)
    return product([top, inverse])


@dataclass
class Attribution:
    """The steps of a ladder with their estimates (None: not measured yet), the direct ratio, and what they say."""

    platform: str
    metric: str
    steps: list  # [(ladder.Step, Estimate | None)]
    direct: Estimate | None

    @property
    def measured(self):
        return all(estimate is not None for _, estimate in self.steps)

    @property
    def telescoping(self):
        """Whether every step and the direct ratio were paired by round (a rounds campaign): each round's steps then
        multiply to its direct ratio exactly, so the product is the direct ratio and nothing checks it."""
        named = [estimate for _, estimate in self.steps] + [self.direct]
        return bool(self.steps) and all(estimate is not None and estimate.method == PAIRED for estimate in named)

    @property
    def product(self):
        if not self.measured or not self.steps:
            return None
        if self.telescoping:
            return self.direct  # the steps share their rounds' cells: their variances do not add up
        return product([estimate for _, estimate in self.steps])

    @property
    def interaction(self):
        """The direct ratio over the product of the steps (1 when they agree), or None until both are measured or
        where the steps telescope (nothing to check)."""
        made = self.product
        if made is None or self.direct is None or self.telescoping:
            return None
        return quotient(self.direct, made)

    def agrees(self):
        """Whether the product of the steps agrees with the direct ratio (their quotient's interval holds 1); None
        until both are measured, or where the steps telescope."""
        found = self.interaction
        return None if found is None else not found.excludes(1.0)

    def open_steps(self, precision):
        """The names of the ratios (steps, and ``direct``) not yet within ±``precision``."""
        named = [(step.mechanism, estimate) for step, estimate in self.steps] + [("direct", self.direct)]
        return [name for name, estimate in named if estimate is None or estimate.half_width() > precision]

    def largest(self):
        """The step with the largest effect (|log ratio|), and its share of the steps' summed |log ratios|; None
        until every step is measured."""
        if not self.measured or not self.steps:
            return None
        sizes = [(abs(estimate.center), step) for step, estimate in self.steps]
        total = sum(size for size, _ in sizes)
        size, step = max(sizes, key=lambda item: item[0])
        return step, (size / total if total else None)


def ratio_text(estimate):
    if estimate is None:
        return "not measured yet"
    low, high = estimate.interval()
    return f"{estimate.ratio:.3f} [{low:.3f}, {high:.3f}]"


def line(attribution, baseline=platforms.BASELINE):
    """``cn/bm 1.003 [0.995, 1.011] = image root 0.998 [...] x namespaces 1.001 [...] x ...``: the direct ratio (or
    the product, where no direct pair ran) and each step's."""
    head = attribution.direct if attribution.direct is not None else attribution.product
    steps = " x ".join(f"{step.mechanism} {ratio_text(estimate)}" for step, estimate in attribution.steps)
    return f"{attribution.platform}/{baseline} {ratio_text(head)} = {steps}"


def check_line(attribution):
    """What the product of the steps says against the direct ratio."""
    made, found = attribution.product, attribution.interaction
    if attribution.telescoping:
        return (
            "the steps were compared round by round in the same rounds: their product is the direct ratio "
            f"{ratio_text(attribution.direct)} by construction, and no interaction can be told (duet pairs can)"
        )
    if made is None or attribution.direct is None:
        return "the product of the steps and the direct ratio: not both measured yet"
    text = (
        f"product of the steps {ratio_text(made)} against the direct ratio {ratio_text(attribution.direct)}: "
        f"quotient {ratio_text(found)}"
    )
    if attribution.agrees():
        return text + ": they agree within their intervals"
    return (
        text + ": they disagree: the mechanisms interact (one costs more or less beside another than alone), or a "
        "rung measures more than the mechanism it names (docs/src/explaining.md, reading an interaction)"
    )
