"""The report's statistics, on plain lists of a metric's values over the repeats: mean, sample standard
deviation (ddof=1), coefficient of variation, ratios, and Welch's t confidence interval of a difference of
means (and of a ratio to bm's mean) that marks a ratio as within noise. No pandas, no campaign: numbers in,
numbers out."""

import math
import statistics

CONFIDENCE = 0.95


def mean(values):
    return statistics.fmean(values) if values else None


def sample_std(values):
    """Standard deviation with ddof=1 (the repeats are a sample); None below two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def coefficient_of_variation(values):
    """std / mean over the repeats; None below two values or with a zero mean."""
    spread, center = sample_std(values), mean(values)
    return None if spread is None or not center else spread / abs(center)


def difference_interval(values, baseline_values, confidence=CONFIDENCE):
    """(low, high): the confidence interval of mean(values) - mean(baseline_values) by Welch's t
    test (unequal variances); None with fewer than two values on either side or no spread at all."""
    if len(values) < 2 or len(baseline_values) < 2:
        return None
    if sample_std(values) == 0 and sample_std(baseline_values) == 0:
        return None
    from scipy import stats

    interval = stats.ttest_ind(values, baseline_values, equal_var=False).confidence_interval(confidence)
    return float(interval.low), float(interval.high)


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


def ratio(value, baseline):
    """``value / baseline``, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0 or math.isnan(value) or math.isnan(baseline):
        return None
    return value / baseline
