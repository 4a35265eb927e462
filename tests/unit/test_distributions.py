"""platbench/distributions.py gives scipy.stats' numbers (the report's intervals, p-values and trend test) without
loading scipy.stats: the same figures to rounding, over many random series."""

import numpy
import pytest
from scipy import stats

from platbench import distributions


@pytest.mark.parametrize("count", [*range(2, 40), 50, 80])
def test_kendalls_trend_is_scipys(count):
    generator = numpy.random.default_rng(count)
    for _ in range(10):
        values = generator.normal(size=count) + generator.uniform(-0.2, 0.2) * numpy.arange(count)
        expected = stats.kendalltau(numpy.arange(count), values)
        p, tau = distributions.kendall_trend(values)
        assert p == pytest.approx(expected.pvalue, abs=1e-12) and tau == pytest.approx(expected.statistic, abs=1e-12)
    tied = [1.0, 2.0, 2.0, 3.0, 1.0, 4.0]
    assert distributions.kendall_trend(tied)[0] == pytest.approx(stats.kendalltau(range(6), tied).pvalue)
    assert distributions.kendall_trend([5.0] * count) is None


@pytest.mark.parametrize("count, rows", [(1, 4), (9, 4), (40, 7), (1200, 1024)])
def test_the_discordant_pairs_are_counted_across_blocks_of_rows(count, rows):
    values = numpy.random.default_rng(count).normal(size=count)
    expected = sum(1 for i in range(count) for j in range(i + 1, count) if values[i] > values[j])
    assert distributions._discordant(values, rows) == expected


def test_the_line_fit_and_welch_are_scipys():
    generator = numpy.random.default_rng(7)
    for count in range(3, 30):
        signs = numpy.where(numpy.arange(count) % 2 == 0, 1.0, -1.0)
        logs = generator.normal(size=count)
        expected = stats.linregress(signs, logs)
        assert distributions.line_fit(signs, logs) == pytest.approx(
            (expected.intercept, expected.slope, expected.intercept_stderr), abs=1e-12
        )
        values, baseline = generator.normal(10, 1, size=count), generator.normal(11, 3, size=count + 2)
        difference, error, df = distributions.welch(values, baseline)
        test = stats.ttest_ind(values, baseline, equal_var=False)
        interval = test.confidence_interval(0.95)
        half = distributions.t_quantile(0.975, df) * error
        assert (difference - half, difference + half) == pytest.approx((interval.low, interval.high), abs=1e-9)
        assert distributions.t_two_sided_p(difference / error, df) == pytest.approx(test.pvalue, abs=1e-12)
    assert distributions.normal_quantile(0.975) == pytest.approx(stats.norm.ppf(0.975), abs=1e-14)
