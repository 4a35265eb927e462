"""The report's statistics, on plain lists of a metric's values over the repeats: mean, sample standard
deviation (ddof=1), coefficient of variation, ratios, and Welch's t confidence interval of a difference of
means (and of a ratio to bm's mean) that marks a ratio as within noise; for ``platbench compare``, the
two-sided p-values of Mann-Whitney's U and Welch's t tests, the rank interval of a ratio and geometric means.
No pandas, no campaign: numbers in, numbers out."""

import collections
import math
import operator
import statistics

import numpy

from platbench import distributions

CONFIDENCE = 0.95


def mean(values):
    return statistics.fmean(values) if values else None


def sample_std(values):
    """Standard deviation with ddof=1 (the repeats are a sample); None below two values. Two passes over floats with
    exact sums (math.fsum): as accurate as the figures are printed, where statistics.stdev's exact fractions cost a
    10,000-cell report a second."""
    if len(values) < 2:
        return None
    center = math.fsum(values) / len(values)
    deviations = [value - center for value in values]
    return math.sqrt(math.fsum(map(operator.mul, deviations, deviations)) / (len(values) - 1))


def coefficient_of_variation(values, spread=None, center=None):
    """std / mean over the repeats; None below two values or with a zero mean. ``spread`` and ``center``: their
    sample_std and mean, where the caller has them already."""
    spread = sample_std(values) if spread is None else spread
    center = mean(values) if center is None else center
    return None if spread is None or not center else spread / abs(center)


def difference_interval(values, baseline_values, confidence=CONFIDENCE):
    """(low, high): the confidence interval of mean(values) - mean(baseline_values) by Welch's t
    test (unequal variances); None with fewer than two values on either side or no spread at all."""
    if len(values) < 2 or len(baseline_values) < 2:
        return None
    if sample_std(values) == 0 and sample_std(baseline_values) == 0:
        return None
    difference, error, df = distributions.welch(values, baseline_values)
    half = distributions.t_quantile((1.0 + confidence) / 2.0, df) * error
    return difference - half, difference + half


def within_noise(values, baseline_values):
    """True when the interval of the difference holds 0, None when it cannot be computed."""
    interval = difference_interval(values, baseline_values)
    return None if interval is None else interval[0] <= 0.0 <= interval[1]


def ratio_interval(values, baseline_values):
    """(low, high) of mean(values) / mean(baseline_values): the interval of the difference
    (``difference_interval``) over the baseline's mean, held fixed; None where that interval is None or the
    baseline's mean is 0. It holds 1 exactly when ``within_noise`` is true."""
    interval, center = difference_interval(values, baseline_values), mean(baseline_values)
    if interval is None or not center:
        return None
    return 1.0 + interval[0] / center, 1.0 + interval[1] / center


def blocks_on_sides(sides):
    """Whether a duet comparison with these CPU sets (one per pair; None: not known) is blocked on them: two sets,
    each holding two pairs or more (``_log_ratio_fit``)."""
    counts = collections.Counter(sides or [])
    return len(counts) == 2 and min(counts.values()) >= 2


def _log_ratio_fit(pairs, sides=None):
    """``(center, spread, df, count)`` of the pairs' log-ratios, or None with fewer than two pairs or a value <= 0.

    Without ``sides``: their mean and standard deviation (df n - 1). With ``sides`` (a duet campaign: the CPU set
    each pair's platform side ran on, which the schedule swaps every pair) and at least two pairs on each side: the
    blocked estimate, log(value / baseline) = center + core * (+1 | -1) fitted by least squares, so a core faster
    than the other one (a busier vCPU, the interrupts) leaves the comparison instead of widening it; ``center`` is
    the mean of the two sides' means, ``spread`` the residuals' standard deviation (df n - 2), and ``count`` the
    number of pairs that, balanced, gives the same standard error (spread / sqrt(count))."""
    logs = [math.log(value / baseline) for value, baseline in pairs if value > 0 and baseline > 0]
    if len(logs) < 2 or len(logs) != len(pairs):
        return None
    if sides is None or len(sides) != len(logs) or not blocks_on_sides(sides):
        return statistics.fmean(logs), sample_std(logs), len(logs) - 1, len(logs)
    first = sides[0]
    signs = [1.0 if side == first else -1.0 for side in sides]
    intercept, slope, intercept_error = distributions.line_fit(signs, logs)
    residuals = [log - intercept - slope * sign for log, sign in zip(logs, signs, strict=True)]
    spread = math.sqrt(sum(value * value for value in residuals) / (len(logs) - 2))
    count = (spread / intercept_error) ** 2 if intercept_error else len(logs)
    return intercept, spread, len(logs) - 2, count


def log_ratio_series(pairs, sides=None):
    """The log-ratios of ``pairs`` in their order, as the paired interval takes them to be alike: where it is
    blocked on the duet's CPU sets (``blocks_on_sides``), with the fitted CPU-set term taken out, so that the side a
    pair ran on (which the schedule swaps every pair) does not read as an alternation. None with a value <= 0."""
    logs = [math.log(value / baseline) for value, baseline in pairs if value > 0 and baseline > 0]
    if len(logs) != len(pairs):
        return None
    if sides is None or len(sides) != len(logs) or not blocks_on_sides(sides):
        return logs
    signs = [1.0 if side == sides[0] else -1.0 for side in sides]
    slope = distributions.line_fit(signs, logs)[1]
    return [log - slope * sign for log, sign in zip(logs, signs, strict=True)]


def paired_ratio_interval(pairs, confidence=CONFIDENCE, sides=None):
    """(estimate, low, high) of the ratio of a platform to its baseline measured in pairs (the same round of a
    rounds campaign, the same duet pair of a duet one): Student's t on the logarithms of the pairs' ratios,
    back-transformed, so the estimate is their geometric mean and the interval is the one-sample t interval of
    mean(log(value / baseline)); with ``sides``, blocked on the duet's swapped CPU sets (``_log_ratio_fit``).
    Pairing takes the host's drift out of the comparison. None with fewer than two pairs or a value <= 0; (r, r, r)
    when the ratios do not spread at all."""
    fit = _log_ratio_fit(pairs, sides)
    if fit is None:
        return None
    center, spread, df, count = fit
    if not spread:
        return (math.exp(center),) * 3
    half = distributions.t_quantile((1.0 + confidence) / 2.0, df) * spread / math.sqrt(count)
    return math.exp(center), math.exp(center - half), math.exp(center + half)


def log_ratio_estimate(pairs, sides=None):
    """``(center, standard error, df)`` of mean(log(value / baseline)) over ``pairs``, as ``paired_ratio_interval``
    fits it (blocked on ``sides`` where it can be): what a product of ratios measured apart adds up. None with fewer
    than two pairs or a value <= 0."""
    fit = _log_ratio_fit(pairs, sides)
    if fit is None:
        return None
    center, spread, df, count = fit
    return center, spread / math.sqrt(count), df


def pairs_needed(pairs, half_width, confidence=CONFIDENCE, sides=None):
    """How many pairs in all would bring the paired interval's relative half-width to ``half_width`` (0.03: ±3%),
    from the spread of the log-ratios of ``pairs`` (with ``sides``, the blocked spread, as ``paired_ratio_interval``):
    the fewest n for which t * s / sqrt(n) <= ln(1 + h), t taken at the degrees of freedom n pairs will have. Taken at
    the pairs now, the wide t of a few pairs asked for up to twice too many: a make lab whose 6 pairs read ±2.3% added
    25 at once and ended at ±0.8%. None below two pairs."""
    fit = _log_ratio_fit(pairs, sides)
    if fit is None:
        return None
    _, spread, df, _ = fit
    fitted = len(pairs) - df  # the fit's parameters: the mean, and the CPU-set term where it is blocked
    quantile, target = (1.0 + confidence) / 2.0, math.log1p(half_width)
    # The normal quantile gives a lower bound; t > z, so count up from there (a few steps: t nears z quickly).
    needed = max(len(pairs), fitted + 1, math.ceil((distributions.normal_quantile(quantile) * spread / target) ** 2))
    while distributions.t_quantile(quantile, needed - fitted) * spread / math.sqrt(needed) > target:
        needed += 1
    return needed


def mean_interval(values, confidence=CONFIDENCE):
    """(low, high): the confidence interval of mean(values) by Student's t over the repeats; None below two
    values; (mean, mean) when they do not spread at all."""
    if len(values) < 2:
        return None
    center, spread = mean(values), sample_std(values)
    if not spread:
        return center, center
    half = distributions.t_quantile((1.0 + confidence) / 2.0, len(values) - 1) * spread / math.sqrt(len(values))
    return center - half, center + half


def ratio(value, baseline):
    """``value / baseline``, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0 or math.isnan(value) or math.isnan(baseline):
        return None
    return value / baseline


def median(values):
    return statistics.median(values) if values else None


def geometric_mean(values):
    """exp(mean(log v)) of the positive ``values``; None when there are none."""
    positive = [value for value in values if value is not None and value > 0]
    return math.exp(statistics.fmean(math.log(value) for value in positive)) if positive else None


def mann_whitney_p(values, baseline_values):
    """Two-sided p-value of Mann-Whitney's U test (scipy's ``mannwhitneyu``, its default exact or asymptotic
    method); None with fewer than two values on either side."""
    if len(values) < 2 or len(baseline_values) < 2:
        return None
    from scipy import stats

    return _p_value(stats.mannwhitneyu(values, baseline_values, alternative="two-sided").pvalue)


def welch_p(values, baseline_values):
    """Two-sided p-value of Welch's t test (unequal variances); None with fewer than two values on either side,
    or no spread on both (t is then undefined)."""
    if len(values) < 2 or len(baseline_values) < 2 or (sample_std(values) == 0 and sample_std(baseline_values) == 0):
        return None
    difference, error, df = distributions.welch(values, baseline_values)
    return _p_value(distributions.t_two_sided_p(difference / error, df))


def _p_value(p):
    return None if p is None or math.isnan(p) else float(p)


def rank_ratio_interval(values, baseline_values, confidence=CONFIDENCE):
    """(low, high): the distribution-free confidence interval of the ratio values / baseline_values that belongs
    to Mann-Whitney's U test, on the logarithms (Moses' interval of a shift, whose centre is the Hodges-Lehmann
    estimate: the median of the m x n pairwise ratios).

    The m x n ratios v / b, sorted: the interval runs from the k-th smallest to the k-th largest, where k - 1 is
    the largest U with P(U <= k - 1) <= (1 - confidence) / 2 under the null distribution of U. For samples without
    ties it is exact and holds 1 exactly when the exact U test at that level does not reject; it needs no
    resampling (so no seed). None with a value <= 0 (no logarithm) or too few values for that level (2 against 2: the
    smallest two-sided p is 1/3)."""
    if not values or not baseline_values or min(*values, *baseline_values) <= 0:
        return None
    k = _u_critical(len(values), len(baseline_values), (1.0 - confidence) / 2.0)
    if k < 1:
        return None
    ratios = numpy.sort(numpy.subtract.outer(numpy.log(values), numpy.log(baseline_values)).ravel())
    return float(numpy.exp(ratios[k - 1])), float(numpy.exp(ratios[-k]))


# Up to this many pairs the null distribution of U is counted exactly; beyond, the normal approximation is as good.
_EXACT_PAIRS = 10_000


def _u_critical(m, n, tail):
    """The number k of pairwise differences cut off at each end: P(U <= k - 1) <= tail < P(U <= k)."""
    if m * n > _EXACT_PAIRS:
        spread = math.sqrt(m * n * (m + n + 1) / 12.0)
        return max(0, math.floor(m * n / 2.0 + distributions.normal_quantile(tail) * spread + 0.5))
    cumulative = numpy.cumsum(_u_counts(m, n))
    cumulative /= cumulative[-1]
    return int(numpy.searchsorted(cumulative, tail, side="right"))


def _u_counts(m, n):
    """How many of the C(m+n, m) orderings give U = 0, 1, ..., m*n: the coefficients of the Gaussian binomial
    [m+n choose m] in q, built as the product over i = 1..m of (1 - q^(n+i)) / (1 - q^i); each partial product
    [n+i choose i] has non-negative coefficients, so floats keep them accurate."""
    counts = numpy.zeros(m * n + 1)
    counts[0] = 1.0
    for i in range(1, m + 1):
        counts[n + i :] -= counts[: -(n + i)].copy()  # times (1 - q^(n+i))
        for start in range(i):  # divided by (1 - q^i): a running sum along each residue class mod i
            counts[start::i] = numpy.cumsum(counts[start::i])
    return counts
