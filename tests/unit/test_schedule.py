"""Schedules and the paired analysis (issue 38): rounds shuffled per round with a recorded seed that a resumed
campaign keeps, the refusals of bad fields, the paired ratio interval against scipy on fixed data, the table's
choice of paired or unpaired statistics, and the answer the report prints first."""

import math
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample
from scipy import stats

from platbench import answer, budgets, cli
from platbench.report import stats as report_stats
from platbench.report.context import ReportContext
from platbench.report.load import load_samples
from platbench.report.tables import PAIRED, UNPAIRED, baseline_rows, comparison, summarize

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"

EXPERIMENT = {
    "name": "sched",
    "workload": "cnn_train",
    "platforms": ["bm", "cn", "pd"],
    "scaleup": [1, 2],
    "cpu_config": ["pin"],
    "processor": ["cpu"],
    "repeats": 6,
}


def cells_of(**fields):
    return expand(validate_experiment({**EXPERIMENT, **fields}))


def rounds_of(cells):
    found = {}
    for cell in cells:
        found.setdefault(cell["labels"]["repeat"], []).append(cell["id"])
    return found


def test_every_round_is_a_permutation_of_the_scenarios_and_the_rounds_differ():
    sequential = cells_of(schedule="sequential")
    shuffled = cells_of(schedule_seed=7)
    assert [cell["labels"]["repeat"] for cell in shuffled] == sorted(cell["labels"]["repeat"] for cell in shuffled)
    plain, mixed = rounds_of(sequential), rounds_of(shuffled)
    assert list(mixed) == list(range(6))
    for number, ids in mixed.items():
        assert sorted(ids) == sorted(plain[number])  # the round's cells, each once
    # Shuffled: not the fixed order, and not one order repeated every round.
    orders = {tuple(cell.split("|")[0] for cell in ids) for ids in mixed.values()}
    assert len(orders) > 1 and list(mixed.values()) != list(plain.values())
    assert {cell["labels"]["schedule"] for cell in shuffled} == {"rounds"}


def test_sequential_keeps_the_plan_order_bm_first_in_every_round():
    cells = cells_of(schedule="sequential", schedule_seed=7)
    assert [cell["labels"]["platform"] for cell in cells[:3]] == ["bm", "cn", "pd"]
    assert {cell["labels"]["schedule"] for cell in cells} == {"sequential"}


def test_the_seed_comes_from_the_campaign_is_recorded_and_a_resumed_campaign_keeps_its_order():
    overrides = {"platforms": ["bm", "cn"], "repeats": 4, "emulated": None}
    first, _ = plan_experiment(str(EXPERIMENTS), "smoke", overrides, campaign="smoke-a")
    again, _ = plan_experiment(str(EXPERIMENTS), "smoke", overrides, campaign="smoke-a")
    other, _ = plan_experiment(str(EXPERIMENTS), "smoke", overrides, campaign="smoke-b")
    assert first["schedule"] == "rounds"
    assert first["schedule_seed"] == schedule.seed_for("smoke-a") != other["schedule_seed"]
    assert [cell["id"] for cell in first["cells"]] == [cell["id"] for cell in again["cells"]]
    # A seed given in the experiment wins over the campaign's.
    given, _ = plan_experiment(str(EXPERIMENTS), "smoke", {**overrides, "schedule_seed": 11}, campaign="smoke-a")
    assert given["schedule_seed"] == 11
    assert [c["id"] for c in given["cells"]] == [c["id"] for c in cells_of_plan(given, 11)]


def cells_of_plan(plan, seed):
    fields = {key: value for key, value in plan.items() if key not in ("cells", "dropped", "tools", "as_run")}
    return expand({**fields, "schedule_seed": seed})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"schedule": "duel"}, r"schedule: unknown value 'duel'; allowed: rounds .*, sequential .* or duet"),
        ({"schedule_seed": -1}, r"schedule_seed: -1 must be a whole number from 0 to"),
        ({"schedule_seed": "abc"}, r"schedule_seed: 'abc' must be a whole number"),
        ({"schedule_seed": True}, r"schedule_seed: True must be a whole number"),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(fields, message):
    with pytest.raises(ExperimentError, match=message):
        validate_experiment({**EXPERIMENT, **fields})


# -- paired statistics ------------------------------------------------------------------------------------------------

PAIRS = [(95.0, 100.0), (90.5, 96.0), (99.0, 103.0), (93.0, 99.5), (97.5, 101.0)]


def test_the_paired_interval_is_scipys_one_sample_t_on_the_log_ratios():
    logs = [math.log(value / baseline) for value, baseline in PAIRS]
    expected = stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    estimate, low, high = report_stats.paired_ratio_interval(PAIRS)
    assert estimate == pytest.approx(math.exp(sum(logs) / len(logs)))
    assert (low, high) == pytest.approx((math.exp(expected.low), math.exp(expected.high)))
    assert high < 1.0  # every pair says the platform is slower: decided


def test_the_paired_interval_needs_two_positive_pairs_and_is_exact_without_spread():
    assert report_stats.paired_ratio_interval(PAIRS[:1]) is None
    assert report_stats.paired_ratio_interval([(1.0, 2.0), (0.0, 2.0)]) is None
    assert report_stats.paired_ratio_interval([(1.0, 2.0), (2.0, 4.0)]) == (0.5, 0.5, 0.5)


def test_pairs_needed_brings_the_half_width_to_the_resolution():
    needed = report_stats.pairs_needed(PAIRS, 0.01)
    logs = [math.log(value / baseline) for value, baseline in PAIRS]
    spread = stats.tstd(logs)

    def half_width(count):  # the interval's log half-width with ``count`` pairs of this spread
        return stats.t.ppf(0.975, count - 1) * spread / math.sqrt(count)

    # The fewest pairs whose interval, at their own degrees of freedom, is within ±1%.
    assert needed > len(PAIRS) and half_width(needed) <= math.log1p(0.01) < half_width(needed - 1)
    # t at the pairs there are now would ask for more than that.
    assert needed < math.ceil((stats.t.ppf(0.975, len(PAIRS) - 1) * spread / math.log1p(0.01)) ** 2)
    assert report_stats.pairs_needed(PAIRS, 0.5) == len(PAIRS)  # already resolved: nothing more


# -- the table, the budgets and the answer on a rounds campaign -------------------------------------------------------


def sample(platform, value, repeat, schedule_label="rounds"):
    return throughput_sample(platform, value, repeat, 60.0 * repeat, campaign="smoke-1", schedule=schedule_label)


# The host's capacity drifts by round (±10%) and cn is 5% slower in every round: unpaired, the drift hides it;
# paired by round, it is decided.
DRIFT = [1.00, 0.90, 1.08, 0.95, 1.10, 0.92]
CN_SHARE = [0.950, 0.948, 0.953, 0.951, 0.949, 0.952]


def campaign(tmp_path, schedule_label):
    samples = [sample("bm", 1000.0 * drift, repeat, schedule_label) for repeat, drift in enumerate(DRIFT)]
    samples += [
        sample("cn", 1000.0 * drift * share, repeat, schedule_label)
        for repeat, (drift, share) in enumerate(zip(DRIFT, CN_SHARE, strict=True))
    ]
    directory = tmp_path / f"campaign-{schedule_label}"
    directory.mkdir()
    append_samples(directory / "samples.jsonl", samples)
    return directory


def compared_row(directory):
    rows, keys, _ = summarize(load_samples(directory), ["throughput"])
    baseline = baseline_rows(rows, keys)
    (index,) = [i for i, row in enumerate(rows) if row["platform"] == "cn"]
    return rows, keys, rows[index], baseline[index]


def test_a_rounds_campaign_is_compared_by_round_and_resolves_what_welch_cannot(tmp_path):
    _, _, row, baseline = compared_row(campaign(tmp_path, "rounds"))
    paired = comparison(row, baseline, "throughput")
    assert paired["method"] == PAIRED and len(paired["pairs"]) == 6
    low, high = paired["interval"]
    assert low <= 0.95 <= high < 1.0
    assert row["throughput within noise"] is False
    assert row["throughput ratio to bm"] == pytest.approx(paired["estimate"])

    _, _, old_row, old_baseline = compared_row(campaign(tmp_path, None))  # no schedule label: an older campaign
    unpaired = comparison(old_row, old_baseline, "throughput")
    assert unpaired["method"] == UNPAIRED and unpaired["interval"][1] > 1.0
    assert old_row["throughput within noise"] is True


def test_budgets_judge_the_paired_interval(tmp_path):
    directory = campaign(tmp_path, "rounds")
    stated = budgets.parse({"budgets": {"cn": {"throughput": [1.0, -0.02, None]}}})
    (verdict,) = budgets.evaluate(ReportContext(load_samples(directory)), stated).verdicts
    assert verdict.verdict == budgets.FAIL  # 5% slower, decided, against a 2% budget


def test_the_answer_words():
    assert answer.verdict(0.87, (0.85, 0.89), "throughput") == "13% slower"
    assert answer.verdict(1.13, (1.11, 1.15), "elapsed") == "13% slower"
    assert answer.verdict(0.991, (0.982, 1.0), "throughput") == "within 2% of bm"
    assert answer.verdict(1.01, (0.95, 1.07), "throughput") == "undecided: ±6%"
    assert answer.verdict(None, None, "throughput").startswith("undecided: no interval")


def test_the_report_prints_the_answer_first(tmp_path, capsys):
    directory = campaign(tmp_path, "rounds")
    assert cli.main(["report", str(directory)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert (
        printed[0] == "Answer: throughput, each platform against bm (95% interval, paired by round (t on log-ratios))"
    )
    assert printed[1].startswith("cn/bm throughput 0.950 [0.9") and printed[1].endswith(": 5% slower")
    assert printed[2] == "" and printed[3].startswith("platform")
    assert (directory / "report.md").read_text().startswith("**Answer: throughput")


def test_an_undecided_answer_says_how_many_more_rounds_and_minutes(tmp_path):
    rows, keys, row, baseline = compared_row(campaign(tmp_path, None))
    (title, line) = answer.lines(rows, keys, baseline_rows(rows, keys), "throughput", seconds_per_round=60.0)
    assert "unpaired" in title
    assert line.startswith("cn/bm throughput 0.9")
    more = int(line.split("about ")[1].split(" more")[0])
    assert more > 0 and f"about {more} more round(s) ({more} min) to resolve 3%" in line
