"""The calibration's figures (``platbench calibrate``, platbench/calibrate.py): the host's noise, the A/A and A/B pairs'
paired intervals, the minimum detectable effect and the time to detect a given one; the harness check (cn/bm duet
pairs through platbench beside the same pairs launched directly, platbench/direct_duet.py); and their lines, which the
command prints and ``platbench report`` shows from run.json. Samples in, numbers out."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject

from platbench import distributions
from platbench.campaign import human
from platbench.direct_duet import BASELINE, PLATFORM, log_spread, summary
from platbench.report.context import ReportContext
from platbench.report.load import SAMPLE_TIME, load_samples, measured
from platbench.report.stats import CONFIDENCE, paired_ratio_interval
from platbench.report.tables import DUET_PAIRED, DUET_PAIRED_UNBLOCKED, comparison

METRIC = "throughput"
POWER = 0.80
RUN_KEY = "calibration"  # the run.json key the result is kept under
SEED, SEEDS = "seed", (1, 2)  # the A/A pair: the same cell with two seeds, nothing injected
# How the A/B pair's known overhead is made (plugin_utils/experiment/inject.py). discard is exact under every schedule;
# spin is exact beside nothing, not beside a duet partner; cpu_quota is what a CFS quota costs this host's job, which
# may be more than its share (inject.py).
KNOBS = ("discard", "spin", "cpu_quota")
DEFAULT_KNOB = "discard"
# The harness check: how much wider than the direct pairs' spread the pairs through platbench may spread before the
# check warns (the quiet harness's target, benchmarks/harness_noise.py).
HARNESS_SPREAD_LIMIT = 1.5
HARNESS_KEY = "harness"  # the calibration's entry the check is kept under
HARNESS_SECTION = 'docs/src/calibrating.md, "Checking the harness against a direct duet"'


def injected_entry(knob, effect):
    """The ``inject`` entry of the A/B pair's B for an overhead ``effect`` made with ``knob``: ``{"discard": 0.05}``,
    ``{"spin": 0.05}`` or ``{"cpu_quota": 0.95}``."""
    if knob not in KNOBS:
        raise ValueError(f"--inject {knob}: one of {', '.join(KNOBS)}")
    return {"cpu_quota": round(1.0 - effect, 6)} if knob == "cpu_quota" else {knob: effect}


def injected_label(knob, effect):
    """The ``inject`` label of the A/B pair's B (inject.label_of of its entry)."""
    return inject.label_of(injected_entry(knob, effect))


def inject_setting(*entries):
    """The experiment's ``inject`` dimension, ``none`` and ``entries``, as a ``--set`` value:
    ``[none, {spin: 0.05}]``."""
    flows = [", ".join(f"{knob}: {value:g}" for knob, value in entry.items()) for entry in entries]
    return "[" + ", ".join([inject.NONE, *(f"{{{flow}}}" for flow in flows)]) + "]"


def injected_setting(knob, effect):
    """The ``inject`` dimension of a calibration: none and B's entry."""
    return inject_setting(injected_entry(knob, effect))


def _by_round(frame, label, seed):
    picked = frame[
        (frame["metric"] == METRIC)
        & (frame[inject.LABEL].astype(str) == label)
        & (frame[SEED].astype(str) == str(seed))
    ]
    return {int(row["repeat"]): float(row["value"]) for _, row in picked.iterrows()}


def _paired(mine, theirs):
    return [(mine[number], theirs[number]) for number in sorted(mine) if number in theirs]


def pooled_spread(*pair_lists):
    """The pooled standard deviation of the log-ratios of every pair list, each around its own mean: the A/B pair's
    spread is as much the host's noise as the A/A pair's (a known overhead shifts its ratios, it does not narrow
    them), and a host whose noise changes within minutes shows it in one pair and not the other. None below two
    pairs in every list."""
    squares, freedom = 0.0, 0
    for pairs in pair_lists:
        spread = log_spread(pairs)
        if spread is not None:
            squares += (len(pairs) - 1) * spread * spread
            freedom += len(pairs) - 1
    return math.sqrt(squares / freedom) if freedom else None


def detectable_effect(spread, pairs):
    """The smallest ratio difference a paired campaign of ``pairs`` rounds detects at 95% confidence (two-sided)
    with 80% power, from the spread of the log-ratios: exp((t_.975 + t_.80) * s / sqrt(n)) - 1."""
    if spread is None or pairs < 2:
        return None
    factor = distributions.t_quantile((1 + CONFIDENCE) / 2, pairs - 1) + distributions.t_quantile(POWER, pairs - 1)
    return math.expm1(factor * spread / math.sqrt(pairs))


def rounds_to_detect(spread, effect, most=100_000):
    """The rounds a paired campaign needs to detect ``effect`` (as ``detectable_effect`` counts them)."""
    if spread is None:
        return None
    if spread == 0:
        return 2
    for pairs in range(2, most):
        found = detectable_effect(spread, pairs)
        if found is not None and found <= effect:
            return pairs
    return None


def analyse(results_dir, effect, campaign_seconds, knob=DEFAULT_KNOB):
    """The calibration's figures from the campaign in ``results_dir`` (its samples), as a JSON-ready mapping."""
    frame = measured(load_samples(results_dir))
    quota = injected_label(knob, effect)
    if SEED not in frame.columns or inject.LABEL not in frame.columns:
        raise ValueError(f"{results_dir}: not a calibration campaign (no {SEED} and {inject.LABEL} labels)")
    first, second = SEEDS
    a, a_prime = _by_round(frame, inject.NONE, first), _by_round(frame, inject.NONE, second)
    b, b_prime = _by_round(frame, quota, first), _by_round(frame, quota, second)
    aa, ab = _paired(a_prime, a), _paired(b, a)
    if len(aa) < 2 or len(ab) < 2:
        raise ValueError(f"{results_dir}: fewer than 2 rounds with all its cells measured: nothing to calibrate")
    stamps = frame.loc[frame["metric"] == METRIC, SAMPLE_TIME].dropna().astype(float)
    cells = len(a) + len(a_prime) + len(b) + len(b_prime)
    cell_seconds = (stamps.max() - stamps.min()) / max(cells - 1, 1)
    comparison_round = 2 * cell_seconds  # a platform's cell and its baseline's
    spread = pooled_spread(aa, ab)
    pairs_in_time = max(2, math.floor(campaign_seconds / comparison_round)) if comparison_round > 0 else None
    needed = rounds_to_detect(spread, effect)
    aa_estimate, aa_low, aa_high = paired_ratio_interval(aa)
    ab_estimate, ab_low, ab_high = paired_ratio_interval(ab)
    a_values = list(a.values())
    return {
        "campaign": Path(results_dir).name,
        "effect": effect,
        "inject": quota,
        "rounds": min(len(aa), len(ab)),
        "cell_seconds": round(cell_seconds, 3),
        "noise": {
            "between_cells_cv": statistics.stdev(a_values) / statistics.fmean(a_values),
            "paired_cv": spread,
            "paired_cv_aa": log_spread(aa),
            "paired_cv_ab": log_spread(ab),
        },
        "aa": {"estimate": aa_estimate, "interval": [aa_low, aa_high], "difference_seen": not aa_low <= 1 <= aa_high},
        "ab": {
            "expected": 1.0 - effect,
            "estimate": ab_estimate,
            "interval": [ab_low, ab_high],
            "found": ab_high < 1.0 and ab_low <= 1.0 - effect <= ab_high,
            "excludes_1": ab_high < 1.0,
        },
        "campaign_seconds": campaign_seconds,
        "detectable_effect": detectable_effect(spread, pairs_in_time) if pairs_in_time else None,
        "seconds_to_detect_effect": needed * comparison_round if needed else None,
    }


def describe(result):
    """The calibration's lines, as printed and as the report shows them."""
    noise, aa, ab = result["noise"], result["aa"], result["ab"]
    found = "found" if ab["found"] else ("seen, not at its size" if ab["excludes_1"] else "NOT found")
    lines = [
        f"calibration of this host ({result['rounds']} rounds of one pinned core, {result['cell_seconds']:.0f} s "
        "a cell):",
        f"  noise between cells: CV {noise['between_cells_cv']:.1%} (unpaired, as a sequential campaign sees it); "
        f"between the cells of a round: {noise['paired_cv']:.1%} (paired by round{_pair_spreads(noise)})",
        f"  A/A (two seeds, nothing injected): {aa['estimate']:.3f} [{aa['interval'][0]:.3f}, {aa['interval'][1]:.3f}]"
        + (": a difference where there is none" if aa["difference_seen"] else ": no difference, as it should"),
        f"  A/B (a {result['effect']:.0%} overhead injected{_how(result)}, expected {ab['expected']:.3f}): "
        f"{ab['estimate']:.3f} "
        f"[{ab['interval'][0]:.3f}, {ab['interval'][1]:.3f}]: {found}",
    ]
    mde, needed = result["detectable_effect"], result["seconds_to_detect_effect"]
    if mde is not None:
        lines.append(
            f"  minimum detectable effect in {human(result['campaign_seconds'])} of campaign (two platforms, rounds, "
            f"95% confidence, 80% power): {mde:.1%}"
        )
    if needed is not None:
        lines.append(f"  time to detect a {result['effect']:.0%} overhead: about {human(needed)}")
    if result.get(HARNESS_KEY):
        lines += [f"  {line}" for line in harness_lines(result[HARNESS_KEY])]
    return lines


def _pair_spreads(noise):
    """Each pair's own spread, which the paired CV pools; nothing for calibrations recorded before it was pooled."""
    aa, ab = noise.get("paired_cv_aa"), noise.get("paired_cv_ab")
    return f"; pooled from A/A {aa:.1%} and A/B {ab:.1%}" if aa is not None and ab is not None else ""


def _how(result):
    """How the A/B pair's overhead was made, for its line; nothing for calibrations recorded before it was said."""
    label = result.get("inject")
    return f" as {label}" if label else ""


# -- the harness check: duet pairs through platbench against the same pairs launched directly ----------------------


def campaign_pairs(results_dir, platform=PLATFORM, metric=METRIC):
    """``(pairs, sides)`` of a duet campaign's ``platform`` row against bm, as the report compares them
    (report_tables.comparison): the (platform, bm) values of each duet pair, and the CPU set the platform's side ran
    on in each (None where the samples do not say). ValueError where the campaign holds no such duet comparison."""
    frame = load_samples(results_dir)
    report = ReportContext(frame)
    rows, keys, _ = report.summarize([metric])
    for row, baseline in zip(rows, report.baselines(rows, keys), strict=True):
        if row.get("platform") != platform or not baseline or baseline is row:
            continue
        compared = comparison(row, baseline, metric)
        if compared["method"] not in (DUET_PAIRED, DUET_PAIRED_UNBLOCKED):
            raise ValueError(
                f"{results_dir}: its {platform} row is compared with {BASELINE} {compared['method']}, not by duet "
                "pair: run the smoke experiment's size answer (schedule: duet)"
            )
        return compared["pairs"], compared["sides"]
    raise ValueError(f"{results_dir}: no {platform} row measured beside {BASELINE} ({metric}): nothing to check")


def harness_check(through, direct, through_sides=None, direct_sides=None):
    """The harness check of two lists of (cn, bm) duet pairs: ``through`` platbench, and ``direct``, launched with no
    orchestration (``*_sides``: the CPU set cn ran on in each pair, which the intervals are blocked on). JSON-ready:
    each list's summary (direct_duet.summary), the spread ratio (through's log spread over direct's), whether
    through's ratio lies inside the direct pairs' interval, and the warnings: a spread widened more than
    HARNESS_SPREAD_LIMIT times, a ratio outside the direct interval."""
    mine, known = summary(through, through_sides), summary(direct, direct_sides)
    spread, known_spread = mine["log_spread"], known["log_spread"]
    spread_ratio = spread / known_spread if spread is not None and known_spread else None
    inside = None
    if known["interval"] is not None:
        low, high = known["interval"]
        inside = low <= mine["estimate"] <= high
    warnings = []
    if spread_ratio is not None and spread_ratio > HARNESS_SPREAD_LIMIT:
        warnings.append(
            f"the harness widens the pairs' log spread x{spread_ratio:.1f} against the direct pairs' (more than "
            f"x{HARNESS_SPREAD_LIMIT:g}): something of platbench runs beside the cells while they are timed; see "
            f"{HARNESS_SECTION}"
        )
    elif spread_ratio is None and spread and known_spread == 0:
        warnings.append(
            f"the direct pairs did not spread at all, and the pairs through platbench did; see {HARNESS_SECTION}"
        )
    if inside is False:
        low, high = known["interval"]
        warnings.append(
            f"{PLATFORM}/{BASELINE} through platbench {mine['estimate']:.3f} lies outside the direct pairs' interval "
            f"[{low:.3f}, {high:.3f}]: the harness moves the ratio it measures; see {HARNESS_SECTION}"
        )
    return {
        "through": {**mine, "values": [list(pair) for pair in through], "sides": _listed(through_sides)},
        "direct": {**known, "values": [list(pair) for pair in direct], "sides": _listed(direct_sides)},
        "spread_ratio": spread_ratio,
        "ratio_inside_direct": inside,
        "warnings": warnings,
    }


def _listed(sides):
    return [str(side) for side in sides] if sides else None


def harness_not_checked(reason):
    """The harness entry of a calibration that could not make the check, and why."""
    return {"not_checked": reason}


def harness_lines(result):
    """The harness check's line, then a ``warning:`` line for each of its warnings."""
    if result.get("not_checked"):
        return [f"harness: not checked: {result['not_checked']}"]
    mine, known = result["through"], result["direct"]
    ratio = result["spread_ratio"]
    verdicts = [f"spread x{ratio:.1f}" if ratio is not None else "spread ratio unknown"]
    inside = result["ratio_inside_direct"]
    verdicts.append(
        "ratio inside the direct interval"
        if inside
        else "ratio outside the direct interval"
        if inside is False
        else "no direct interval to hold the ratio"
    )
    line = (
        f"harness: through platbench {PLATFORM}/{BASELINE} {_estimate(mine)}, log spread {_spread(mine)}; "
        f"direct {_estimate(known)}, spread {_spread(known)}: {', '.join(verdicts)}"
    )
    return [line, *(f"warning: {warning}" for warning in result["warnings"])]


def _estimate(found):
    interval = found["interval"]
    within = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
    return f"{found['estimate']:.3f}{within}"


def _spread(found):
    return "n/a" if found["log_spread"] is None else f"{found['log_spread']:.1%}"
