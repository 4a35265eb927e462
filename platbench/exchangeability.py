"""Whether a paired comparison's pairs are alike in the order they ran: exchangeable, as the paired t interval on
their log-ratios takes them to be (report_stats.paired_ratio_interval). A host that changed half-way (another
tenant arrived, a frequency governor switched, a cache filled), or a drift over the campaign, makes the geometric
mean of the ratios an average of regimes that no single run of either platform shows.

Three tests on the log-ratios in time order, each blind to a different departure:

- runs about the median (Wald and Wolfowitz's, exact): streaks above and below it (regimes, a drift) give too few
  runs, an alternation (something that swaps every pair) too many;
- a trend (Kendall's tau of the log-ratio against its place in the order, scipy's test);
- a single change of level (the two-segment fit: the split of the series into a head and a tail, each of at least
  ``MIN_SEGMENT`` pairs, that explains the most of its variance), its p-value by a permutation test: the same
  statistic over ``PERMUTATIONS`` shuffles of the series, drawn from a fixed seed, so the same pairs always give the
  same answer.

The series is flagged when one of them rejects at ``ALPHA / 3`` (Bonferroni: an exchangeable series is flagged with
probability at most ``ALPHA`` overall). Numbers in, a ``Result`` out: no pandas, no campaign."""

import itertools
import math
import statistics
from typing import NamedTuple

import numpy

from platbench import distributions

ALPHA = 0.01
TESTS = ("change", "trend", "runs")
# Fewer pairs cannot show a change of level against the noise: no test is run, nothing is flagged.
MIN_PAIRS = 8
MIN_SEGMENT = 3
PERMUTATIONS = 4999
SEED = 20200205  # fixed: the p-value of the two-segment fit is a property of the pairs, not of the run
_CHUNK = 500  # permutations drawn at a time, so a long series needs no large array


class Result(NamedTuple):
    """The tests of one series: ``pairs`` in it; ``flagged``: not exchangeable (False when too short to test);
    each test's two-sided p-value (None: not run); the change of level's place (``change_after``: the pairs before
    it) and each segment's mean log-ratio; Kendall's ``tau``; the ``runs`` about the median and how many an
    exchangeable series of that length would have on average (``expected_runs``); ``threshold``: the level each
    p-value is held to."""

    pairs: int
    flagged: bool
    change_p: float | None = None
    change_after: int | None = None
    before: float | None = None
    after: float | None = None
    trend_p: float | None = None
    tau: float | None = None
    runs_p: float | None = None
    runs: int | None = None
    expected_runs: float | None = None
    threshold: float = ALPHA / len(TESTS)
    # Whether a straight line through the series explains more of its variance than the two segments: a drift
    # rejects both tests, and so does a step; the better fit says which of them the series shows.
    drifts: bool = False

    def rejected(self):
        """The tests that reject, the one that describes the series best first: the change of level (it gives the
        two regimes' levels), or the trend where a line fits better than two segments, then the runs."""
        found = {"change": self.change_p, "trend": self.trend_p, "runs": self.runs_p}
        order = ("trend", "change", "runs") if self.drifts else TESTS
        return [test for test in order if found[test] is not None and found[test] <= self.threshold]

    def _runs_shape(self):
        return "streaks" if self.runs < self.expected_runs else "an alternation"

    def words(self):
        """What the flagged series shows, on ratios (exp of the log-ratios), for the report's line; "" when not
        flagged."""
        rejected = self.rejected()
        if not rejected:
            return ""
        said = {
            "change": lambda: (
                f"a change of level after pair {self.change_after} of {self.pairs} ({math.exp(self.before):.3f} "
                f"before, {math.exp(self.after):.3f} after; two-segment fit {_p_text(self.change_p)})"
            ),
            "trend": lambda: f"a trend over the pairs (Kendall's tau {self.tau:+.2f}, {_p_text(self.trend_p)})",
            "runs": lambda: (
                f"{self._runs_shape()} about the median "
                f"({self.runs} runs where {self.expected_runs:.0f} are expected, {_p_text(self.runs_p)})"
            ),
        }
        short = {
            "change": f"a change of level ({_p_text(self.change_p)})",
            "trend": f"a trend ({_p_text(self.trend_p)})",
            "runs": f"{self._runs_shape()} about the median ({_p_text(self.runs_p)})",
        }
        first, *others = rejected
        also = f"; also {', '.join(short[test] for test in others)}" if others else ""
        meaning = {
            "change": "the ratio averages two regimes",
            "trend": "the ratio averages a drift",
            "runs": "the ratio averages pairs that are not alike",
        }
        return f"{said[first]()}{also}: {meaning[first]}"


def _p_text(p):
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def check(log_ratios, alpha=ALPHA, permutations=PERMUTATIONS, seed=SEED):
    """The ``Result`` of the series ``log_ratios`` (the pairs' log-ratios in the order the pairs ran)."""
    values = numpy.asarray(log_ratios, dtype=float)
    count = len(values)
    threshold = alpha / len(TESTS)
    if count < MIN_PAIRS or not numpy.isfinite(values).all():
        return Result(count, False, threshold=threshold)
    # Ratios that do not spread (beyond rounding) hold no order to test.
    if float(numpy.ptp(values)) <= 1e-9 * max(1.0, float(numpy.abs(values).max())):
        return Result(count, False, threshold=threshold)
    change_p, change_after, before, after = change_of_level(values, permutations, seed, decided_above=threshold)
    trend_p, tau = trend(values)
    runs_p, runs, expected = runs_about_median(values)
    centered = values - values.mean()
    order = numpy.arange(count) - (count - 1) / 2.0
    along_line = float(centered @ order) ** 2 / float(order @ order)
    result = Result(
        count,
        False,
        change_p,
        change_after,
        before,
        after,
        trend_p,
        tau,
        runs_p,
        runs,
        expected,
        threshold,
        drifts=along_line > float(_split_statistics(centered).max()),
    )
    return result._replace(flagged=bool(result.rejected()))


def _split_statistics(centered):
    """For each split of the series (rows: series) after k = MIN_SEGMENT .. n - MIN_SEGMENT values, the variance it
    explains: k (n - k) / n (mean of the head - mean of the tail)^2, from the centered series' running sums."""
    count = centered.shape[-1]
    sums = numpy.cumsum(centered, axis=-1)[..., MIN_SEGMENT - 1 : count - MIN_SEGMENT]
    heads = numpy.arange(MIN_SEGMENT, count - MIN_SEGMENT + 1)
    return sums**2 * count / (heads * (count - heads))


def change_of_level(values, permutations=PERMUTATIONS, seed=SEED, decided_above=None):
    """(p, pairs before the change, mean of the head, mean of the tail) of the best single change of level in the
    mean of ``values``; p by ``permutations`` shuffles drawn from ``seed`` (the statistic's share of the variance is
    the same for every order, so the largest explained variance is compared as it is). (None, None, None, None)
    below two segments' worth of values.

    ``decided_above``: the level the p-value is held to. Once so many shuffles did as well as the observed order
    that p exceeds it whatever the others draw, the test stops, and p is estimated from the shuffles drawn so far
    (still above the level): an exchangeable series of 800 pairs needs one chunk instead of ten."""
    values = numpy.asarray(values, dtype=float)
    count = len(values)
    if count < 2 * MIN_SEGMENT:
        return None, None, None, None
    centered = values - values.mean()
    explained = _split_statistics(centered)
    best = int(numpy.argmax(explained))
    observed = float(explained[best])
    split = best + MIN_SEGMENT
    generator = numpy.random.default_rng(seed)
    as_large = shuffles = 0
    for start in range(0, permutations, _CHUNK):
        drawn = min(_CHUNK, permutations - start)
        shuffled = generator.permuted(numpy.tile(centered, (drawn, 1)), axis=1)
        # A shuffle as good as the observed order, to rounding, counts against it.
        as_large += int((_split_statistics(shuffled).max(axis=1) >= observed * (1 - 1e-12)).sum())
        shuffles = start + drawn
        if decided_above is not None and (1 + as_large) / (1 + permutations) > decided_above:
            break  # p is above the level whatever the other shuffles draw: estimated from those drawn
    p = (1 + as_large) / (1 + shuffles)
    return p, split, float(values[:split].mean()), float(values[split:].mean())


def trend(values):
    """(p, tau): Kendall's tau of ``values`` against their order, with its two-sided p-value (exact for a short
    series without ties: distributions.kendall_trend); (1.0, 0.0) where it is undefined."""
    found = distributions.kendall_trend(values)
    return (1.0, 0.0) if found is None else found


def runs_about_median(values):
    """(p, runs, expected runs) of Wald and Wolfowitz's runs test on the signs of ``values`` about their median
    (values equal to it left out), two-sided and exact: the distribution of the number of runs of n1 signs above
    and n2 below in a random order. (1.0, runs, runs) where every value lies on one side."""
    values = [float(value) for value in values]
    center = statistics.median(values)
    signs = [value > center for value in values if value != center]
    above = sum(signs)
    below = len(signs) - above
    runs = 1 + sum(1 for first, second in itertools.pairwise(signs) if first != second) if signs else 0
    if not above or not below:
        return 1.0, runs, float(runs)
    probabilities = _runs_distribution(above, below)
    low = sum(probability for count, probability in probabilities.items() if count <= runs)
    high = sum(probability for count, probability in probabilities.items() if count >= runs)
    expected = 1.0 + 2.0 * above * below / (above + below)
    return min(1.0, 2 * min(low, high)), runs, expected


def _runs_distribution(above, below):
    """{runs: probability} of the runs of ``above`` and ``below`` signs in a random order: 2k runs split each kind
    into k groups (2 C(n1-1, k-1) C(n2-1, k-1) ways), 2k + 1 runs one kind into k + 1 groups and the other into k;
    over the C(n1+n2, n1) orders. Exact integers, divided once; past ``_EXACT_SIGNS`` signs, the same counts in
    logarithms (the integers grow to hundreds of digits)."""
    if above + below > _EXACT_SIGNS:
        return _runs_distribution_in_logs(above, below)
    orders = math.comb(above + below, above)
    ways = {}
    for groups in range(1, min(above, below) + 1):
        ways[2 * groups] = 2 * math.comb(above - 1, groups - 1) * math.comb(below - 1, groups - 1)
        odd = math.comb(above - 1, groups) * math.comb(below - 1, groups - 1)
        odd += math.comb(above - 1, groups - 1) * math.comb(below - 1, groups)
        if odd:
            ways[2 * groups + 1] = odd
    return {runs: count / orders for runs, count in ways.items()}


_EXACT_SIGNS = 400


def _log_comb(total, chosen):
    if chosen < 0 or chosen > total:
        return -math.inf
    return math.lgamma(total + 1) - math.lgamma(chosen + 1) - math.lgamma(total - chosen + 1)


def _runs_distribution_in_logs(above, below):
    orders = _log_comb(above + below, above)
    found = {}
    for groups in range(1, min(above, below) + 1):
        even = math.log(2) + _log_comb(above - 1, groups - 1) + _log_comb(below - 1, groups - 1) - orders
        found[2 * groups] = math.exp(even)
        odd = math.exp(_log_comb(above - 1, groups) + _log_comb(below - 1, groups - 1) - orders)
        odd += math.exp(_log_comb(above - 1, groups - 1) + _log_comb(below - 1, groups) - orders)
        if odd:
            found[2 * groups + 1] = odd
    return found
