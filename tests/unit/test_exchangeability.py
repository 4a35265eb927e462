"""Exchangeability of a paired comparison's pairs in time order (platbench/exchangeability.py): two regimes, a drift
and an alternation are flagged, each said as what it is; exchangeable series are not (the overall level holds over
many seeded series); the exact runs distribution and the seeded permutation test are what they claim to be."""

import itertools
import math

import numpy
import pytest

from platbench import exchangeability
from platbench.report import stats as report_stats


def noise(seed, count, spread=0.01):
    return numpy.random.default_rng(seed).normal(0.0, spread, count)


def test_two_regimes_are_flagged_with_the_place_and_levels_of_the_change():
    series = numpy.r_[numpy.full(20, 0.12), numpy.full(20, -0.05)] + noise(1, 40)
    result = exchangeability.check(series)
    assert result.flagged and result.rejected()[0] == "change"
    assert result.change_after == 20 and result.change_p < 0.001
    assert math.exp(result.before) == pytest.approx(math.exp(0.12), abs=0.01)
    assert math.exp(result.after) == pytest.approx(math.exp(-0.05), abs=0.01)
    words = result.words()
    assert words.startswith("a change of level after pair 20 of 40 (1.12")
    assert "0.95" in words and "two-segment fit p<0.001" in words
    assert words.endswith(": the ratio averages two regimes")


def test_a_drift_is_flagged_as_a_trend():
    series = numpy.linspace(0.0, 0.1, 40) + noise(2, 40, 0.02)
    result = exchangeability.check(series)
    assert result.flagged and result.rejected()[0] == "trend" and result.tau > 0.4
    assert result.words().startswith("a trend over the pairs (Kendall's tau +0.")
    assert result.words().endswith(": the ratio averages a drift")


def test_an_alternation_is_flagged_by_its_runs():
    series = numpy.array([0.04, -0.04] * 15) + noise(3, 30)
    result = exchangeability.check(series)
    assert result.rejected() == ["runs"] and result.runs == 30 and result.expected_runs == pytest.approx(16.0)
    assert result.words().startswith("an alternation about the median (30 runs where 16 are expected, p<0.001)")


def test_an_exchangeable_series_is_not_flagged_and_rarely_among_many():
    result = exchangeability.check(noise(4, 40, 0.02))
    assert not result.flagged and result.words() == ""
    assert all(p is not None and p > result.threshold for p in (result.change_p, result.trend_p, result.runs_p))
    # At an overall level of 1%, 100 exchangeable series flag about one; these seeded ones flag none.
    generator = numpy.random.default_rng(2024)
    flagged = sum(exchangeability.check(generator.normal(0.0, 0.02, 30)).flagged for _ in range(100))
    assert flagged <= 2


def test_short_and_constant_series_are_not_tested():
    assert exchangeability.check([0.1, -0.1, 0.1, -0.1, 0.1, -0.1, 0.1]) == exchangeability.Result(7, False)
    assert not exchangeability.check([math.log(0.97)] * 12).flagged  # equal ratios, to rounding: nothing to order
    assert not exchangeability.check([0.0] * 5 + [float("nan")] * 5).flagged


def test_the_runs_distribution_is_exact():
    # Against every arrangement of 5 signs above and 4 below: each count of runs as often as the formula says.
    above, below = 5, 4
    counts = {}
    for places in itertools.combinations(range(above + below), above):
        signs = [index in places for index in range(above + below)]
        runs = 1 + sum(first != second for first, second in itertools.pairwise(signs))
        counts[runs] = counts.get(runs, 0) + 1
    total = math.comb(above + below, above)
    expected = {runs: count / total for runs, count in counts.items()}
    assert exchangeability._runs_distribution(above, below) == pytest.approx(expected)
    assert sum(exchangeability._runs_distribution(40, 37).values()) == pytest.approx(1.0)
    # A long series counts in logarithms: the same probabilities.
    exact = exchangeability._runs_distribution(150, 160)
    in_logs = exchangeability._runs_distribution_in_logs(150, 160)
    assert set(in_logs) == set(exact) and all(in_logs[runs] == pytest.approx(exact[runs], abs=1e-12) for runs in exact)


def test_the_two_segment_test_stops_once_its_p_value_is_above_the_level_and_keeps_its_verdict():
    level = exchangeability.ALPHA / len(exchangeability.TESTS)
    exchangeable, stepped = noise(11, 400), numpy.concatenate([noise(12, 200), noise(13, 200) + 0.2])
    whole = exchangeability.change_of_level(exchangeable)
    early = exchangeability.change_of_level(exchangeable, decided_above=level)
    assert whole[0] > level and early[0] > level  # the same verdict, from fewer shuffles
    assert early[1:] == whole[1:] and early[0] != whole[0]
    # A change of level is held to every permutation: its p is the whole test's, the same with or without the level.
    assert exchangeability.change_of_level(stepped, decided_above=level) == exchangeability.change_of_level(stepped)
    assert exchangeability.change_of_level(stepped)[0] <= level


def test_the_two_segment_p_value_is_seeded_and_bounded_by_its_permutations():
    series = noise(5, 24)
    first = exchangeability.change_of_level(series)
    assert exchangeability.change_of_level(series) == first  # the same pairs, the same p
    p, after, before_mean, after_mean = first
    assert 1 / (1 + exchangeability.PERMUTATIONS) <= p <= 1.0
    assert exchangeability.MIN_SEGMENT <= after <= 24 - exchangeability.MIN_SEGMENT
    assert before_mean == pytest.approx(series[:after].mean()) and after_mean == pytest.approx(series[after:].mean())

    # The split chosen is the one that explains the most: no other split separates the means more, weighted.
    def explained(k):
        return k * (24 - k) / 24 * (series[:k].mean() - series[k:].mean()) ** 2

    splits = range(exchangeability.MIN_SEGMENT, 24 - exchangeability.MIN_SEGMENT + 1)
    assert max(splits, key=explained) == after


def test_a_blocked_duet_series_is_tested_without_its_cpu_set_term():
    # cn 3% slower; the platform's CPU set 1 is 8% faster than set 0, and the sets swap every pair.
    pairs, sides = [], []
    for index, jitter in enumerate(noise(6, 20, 0.003)):
        side = index % 2
        pairs.append((970.0 * (1.08 if side else 1.0) * math.exp(jitter), 1000.0 * (1.0 if side else 1.08)))
        sides.append(side)
    raw = report_stats.log_ratio_series(pairs)
    assert exchangeability.check(raw).rejected() == ["runs"]  # the sets' swap alternates the raw ratios
    adjusted = report_stats.log_ratio_series(pairs, sides)
    assert not exchangeability.check(adjusted).flagged
    assert math.exp(numpy.mean(adjusted)) == pytest.approx(report_stats.paired_ratio_interval(pairs, sides=sides)[0])
