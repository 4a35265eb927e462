"""The few distributions the report's answer and tables need, from scipy.special.

scipy.stats takes about half a second to import (it builds its distributions' documentation on import), which a text
report paid on every call before it printed a line; scipy.special's functions are the same numbers (scipy.stats'
t and normal distributions are computed by them) at a fraction of that. What the report needs rarely (Mann-Whitney,
Kendall's tau with ties) still comes from scipy.stats, imported where it is used.
"""

from __future__ import annotations

import functools
import math

import numpy


def t_quantile(probability, df):
    """Student's t quantile: scipy.stats.t.ppf(probability, df)."""
    return _t_quantile(float(probability), float(df))


# A report asks for the same few quantiles (95%, a handful of pair counts) hundreds of times: a 10,000-cell one
# called scipy about a thousand times, a third of a millisecond each.
@functools.lru_cache(maxsize=4096)
def _t_quantile(probability, df):
    from scipy import special

    return float(special.stdtrit(df, probability))


def normal_quantile(probability):
    """The standard normal quantile: scipy.stats.norm.ppf(probability)."""
    from scipy import special

    return float(special.ndtri(probability))


def t_two_sided_p(statistic, df):
    """P(|T| >= |statistic|) for Student's t with ``df`` degrees of freedom."""
    from scipy import special

    return float(min(1.0, 2.0 * special.stdtr(df, -abs(statistic))))


def welch(values, baseline_values):
    """``(difference, standard error, df)`` of Welch's t test of mean(values) - mean(baseline_values) (unequal
    variances, Welch-Satterthwaite degrees of freedom); the standard error is 0 where neither side spreads."""
    first, second = numpy.asarray(values, dtype=float), numpy.asarray(baseline_values, dtype=float)
    share_first, share_second = first.var(ddof=1) / first.size, second.var(ddof=1) / second.size
    error = math.sqrt(share_first + share_second)
    if not error:
        return float(first.mean() - second.mean()), 0.0, float(first.size + second.size - 2)
    df = (share_first + share_second) ** 2 / (share_first**2 / (first.size - 1) + share_second**2 / (second.size - 1))
    return float(first.mean() - second.mean()), error, float(df)


def line_fit(x, y):
    """``(intercept, slope, intercept's standard error)`` of y = intercept + slope * x by least squares, as
    scipy.stats.linregress gives them (at least three points, x not all alike)."""
    x, y = numpy.asarray(x, dtype=float), numpy.asarray(y, dtype=float)
    count = x.size
    x_mean, y_mean = x.mean(), y.mean()
    spread_x = float(((x - x_mean) ** 2).mean())
    slope = float(((x - x_mean) * (y - y_mean)).mean()) / spread_x
    intercept = float(y_mean - slope * x_mean)
    residuals = y - intercept - slope * x
    slope_error = math.sqrt(float((residuals**2).sum()) / (count - 2) / (count * spread_x))
    return intercept, slope, slope_error * math.sqrt(spread_x + x_mean**2)


# Up to this many values (and for any series whose order leaves at most one pair out of place) Kendall's p is exact,
# as scipy's kendalltau does by default.
_EXACT_KENDALL = 33


def kendall_trend(values):
    """``(p, tau)``: Kendall's tau of ``values`` against their order and its two-sided p-value, as
    scipy.stats.kendalltau gives them by default: exact (the distribution of the discordant pairs among the n!
    orders) for a series of up to 33 values without ties, the normal approximation beyond; a series with ties goes to
    scipy.stats itself. ``None`` where tau is undefined (fewer than two values, or all alike)."""
    values = [float(value) for value in values]
    count = len(values)
    if count < 2 or len(set(values)) == 1:
        return None
    if len(set(values)) < count:
        from scipy import stats

        found = stats.kendalltau(numpy.arange(count), values)
        return float(found.pvalue), float(found.statistic)
    total = count * (count - 1) // 2
    discordant = _discordant(numpy.asarray(values))
    tau = (total - 2 * discordant) / total
    fewest = min(discordant, total - discordant)
    if count <= _EXACT_KENDALL or fewest <= 1:
        counts = _inversion_counts(count)
        p = 2.0 * float(counts[: fewest + 1].sum() / counts.sum())
    else:
        z = (total - 2 * discordant) / math.sqrt(count * (count - 1) * (2 * count + 5) / 18)
        p = math.erfc(abs(z) / math.sqrt(2.0))
    return min(1.0, p), tau


def _discordant(values, rows=1024):
    """The pairs i < j with values[i] > values[j], counted with numpy a block of rows at a time (a series of 800
    pairs is 320,000 comparisons, which a Python loop took a quarter of a second over; the blocks bound memory)."""
    count, found = len(values), 0
    for start in range(0, count, rows):
        block = values[start : start + rows, None] > values[None, :]
        # Only the pairs after each row's own index: j > i.
        found += int(numpy.triu(block, k=start + 1).sum())
    return found


def _inversion_counts(count):
    """How many of the orders of ``count`` distinct values have 0, 1, ... discordant pairs (the Mahonian numbers):
    the coefficients of the product over i = 1..count of (1 + q + ... + q^(i-1))."""
    counts = numpy.ones(1)
    for size in range(2, count + 1):
        counts = numpy.convolve(counts, numpy.ones(size))
    return counts
