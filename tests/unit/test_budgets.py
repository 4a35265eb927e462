"""Overhead budgets (platbench/budgets.py): the file's format and its refusals, each naming its key; the verdicts
pass, fail and inconclusive of rows with known answers, for a higher-is-better and a lower-is-better metric;
``platbench report --budgets --check/--strict`` and its exit codes; the shipped smoke budgets."""

import argparse
import csv
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import load_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples

from platbench import budgets, cli, report, run
from platbench.report.context import ReportContext

# Acts on the host where a live lab would see it or suffer from it: the harness cgroup that `platbench run` makes for
# itself (quiet.isolate), which the quiet tests assert absent. `make test` runs it first, before the lab is up (marker
# `host`, docs/src/tests.md).
pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[2]
SMOKE_BUDGETS = REPO / "experiments" / "budgets" / "smoke.yml"


def sample(platform, metric, value, repeat, scaleup=2):
    scenario = f"{platform}/{scaleup}/pin/cpu"
    labels = {
        "experiment": "smoke",
        "workload": "cnn_train",
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": "pin",
        "processor": "cpu",
        "mode": "single",
        "repeat": repeat,
        "scenario": scenario,
        "cell": f"{scenario}|r{repeat}",
    }
    unit = {"throughput": "images/sec", "elapsed": "s"}[metric]
    return {"metric": metric, "value": value, "unit": unit, "timestamp": 1.0 + repeat, "labels": labels}


def scenario(platform, throughputs, elapsed, scaleup=2):
    return [
        sample(platform, metric, value, repeat, scaleup)
        for metric, values in (("throughput", throughputs), ("elapsed", elapsed))
        for repeat, value in enumerate(values)
    ]


# Known answers, bounds: throughput >= 0.95 x bm, elapsed <= 1.05 x bm. Each interval is Welch's (df 4 here,
# t = 2.776) of the difference over bm's mean: +-2.27% where both sides have std 1% of bm, +-22.7% where 10%.
#   cn/2: ratio 0.99 [0.967, 1.013] and 1.00 [0.977, 1.023]: pass, pass
#   pd/2: ratio 0.80 [0.777, 0.823] and 1.25 [1.227, 1.273]: fail, fail
#   cn/1: ratio 0.95 [0.723, 1.177] and 1.05 [0.823, 1.277]: inconclusive (straddles the bound), twice
SAMPLES = [
    *scenario("bm", [100.0, 101.0, 99.0], [10.0, 10.1, 9.9]),
    *scenario("cn", [99.0, 100.0, 98.0], [10.0, 10.1, 9.9]),
    *scenario("pd", [80.0, 81.0, 79.0], [12.5, 12.6, 12.4]),
    *scenario("bm", [100.0, 110.0, 90.0], [10.0, 11.0, 9.0], scaleup=1),
    *scenario("cn", [95.0, 105.0, 85.0], [10.5, 11.5, 9.5], scaleup=1),
]
CONTAINERS = {
    "budgets": {
        "cn": {"throughput": [1.0, -0.05, None], "elapsed": [1.0, None, 0.05]},
        "pd": {"throughput": [1.0, -0.05, None], "elapsed": [1.0, None, 0.05]},
    }
}


@pytest.fixture
def campaign(tmp_path):
    append_samples(tmp_path / "campaign" / "samples.jsonl", SAMPLES)
    return tmp_path / "campaign"


def budgets_file(tmp_path, data, name="budgets.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def verdicts_of(campaign, data):
    judgement = budgets.evaluate(ReportContext(report.load_samples(campaign)), budgets.parse(data))
    return {
        (verdict.row["platform"], verdict.row["scaleup"], verdict.budget.metric): verdict
        for verdict in judgement.verdicts
    }


def test_verdicts_of_a_higher_and_a_lower_is_better_metric(campaign):
    verdicts = verdicts_of(campaign, CONTAINERS)
    assert {key: verdict.verdict for key, verdict in verdicts.items()} == {
        ("cn", 1, "throughput"): "inconclusive",
        ("cn", 1, "elapsed"): "inconclusive",
        ("cn", 2, "throughput"): "pass",
        ("cn", 2, "elapsed"): "pass",
        ("pd", 2, "throughput"): "fail",
        ("pd", 2, "elapsed"): "fail",
    }
    failing = verdicts["pd", 2, "throughput"]
    assert failing.ratio == pytest.approx(0.80)
    assert failing.interval == pytest.approx((0.7773, 0.8227), abs=1e-4)
    assert failing.budget.bound_text() == ">= 0.950"
    assert verdicts["pd", 2, "elapsed"].interval == pytest.approx((1.2273, 1.2727), abs=1e-4)
    assert verdicts["pd", 2, "elapsed"].budget.bound_text() == "<= 1.050"
    straddling = verdicts["cn", 1, "throughput"]
    assert straddling.interval == pytest.approx((0.7233, 1.1767), abs=1e-4)
    assert straddling.reason == "interval straddles a bound"
    assert verdicts["cn", 2, "throughput"].interval == pytest.approx((0.9673, 1.0127), abs=1e-4)


def test_the_same_tolerance_means_the_worse_side_of_each_metric(campaign):
    """pd is 20% slower: its throughput falls below 0.95 and its elapsed rises above 1.05; each bound sits
    on the side the metric table calls worse, so both fail, and a faster platform would pass both."""
    fast = [
        *scenario("bm", [100.0, 101.0, 99.0], [10.0, 10.1, 9.9]),
        *scenario("pd", [120.0, 121.0, 119.0], [8.0, 8.1, 7.9]),
    ]
    append_samples(campaign.parent / "fast" / "samples.jsonl", fast)
    verdicts = verdicts_of(campaign.parent / "fast", CONTAINERS)
    assert [verdict.verdict for verdict in verdicts.values()] == ["pass", "pass"]


def test_judge_on_the_bounds():
    budget = budgets.parse({"budgets": {"cn": {"elapsed": [1.0, -0.1, 0.05]}}})[0]
    assert (budget.low, budget.high) == pytest.approx((0.9, 1.05))
    assert budget.bound_text() == "0.900..1.050"
    assert budgets.judge((0.95, 1.05), budget) == "pass"  # a bound itself is within
    assert budgets.judge((1.06, 1.2), budget) == "fail"
    assert budgets.judge((0.5, 0.89), budget) == "fail"
    assert budgets.judge((1.0, 1.06), budget) == "inconclusive"
    assert budgets.judge((0.8, 1.2), budget) == "inconclusive"


def test_a_scenario_budget_overrides_its_platforms_reference(campaign):
    data = {
        "budgets": {"cn": {"throughput": {"ref": [1.0, -0.01, None], "scenarios": {"cn/1/pin/cpu": [1.0, -0.5, None]}}}}
    }
    verdicts = verdicts_of(campaign, data)
    assert verdicts["cn", 1, "throughput"].verdict == "pass"
    assert verdicts["cn", 1, "throughput"].budget.key == "budgets.cn.throughput.scenarios.cn/1/pin/cpu"
    assert verdicts["cn", 2, "throughput"].verdict == "inconclusive"  # [0.967, 1.013] straddles 0.99
    assert verdicts["cn", 2, "throughput"].budget.key == "budgets.cn.throughput.ref"
    only = {"budgets": {"cn": {"throughput": {"scenarios": {"cn/2/pin/cpu": [1.0, -0.05, None]}}}}}
    assert list(verdicts_of(campaign, only)) == [("cn", 2, "throughput")]


def test_rows_without_a_ratio_or_an_interval_are_inconclusive(tmp_path):
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *scenario("bm", [100.0, 101.0, 99.0], [10.0, 10.1, 9.9]),
            *scenario("cn", [100.0], [10.0]),  # one repeat: no interval
            *scenario("pd", [100.0, 100.0], [10.0, 10.0], scaleup=4),  # no bm at scale-up 4
        ],
    )
    verdicts = verdicts_of(tmp_path, CONTAINERS)
    assert verdicts["cn", 2, "throughput"].verdict == "inconclusive"
    assert verdicts["cn", 2, "throughput"].reason == "no interval: fewer than 2 repeats on a side"
    assert verdicts["pd", 4, "elapsed"].verdict == "inconclusive"
    assert verdicts["pd", 4, "elapsed"].reason == "no ratio to bm"


def test_report_shows_the_verdicts_after_an_unchanged_table_and_check_exits_1_on_a_failure(campaign, tmp_path, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    plain = capsys.readouterr().out.rsplit("\n\nreport: ", 1)[0]  # the page's path closes the output
    path = budgets_file(tmp_path, CONTAINERS)
    assert cli.main(["report", str(campaign), "--budgets", path]) == 0  # shown, not gating
    out = capsys.readouterr().out
    assert out.startswith(plain.rstrip("\n") + "\n\nBudgets\n")
    section = out.split("\n\nBudgets\n", 1)[1].splitlines()
    assert section[0].split() == ["platform", "scaleup", "cpu_config", "processor", "metric", "ratio", "to", "bm"] + [
        "95%",
        "CI",
        "bound",
        "verdict",
    ]
    assert (
        "pd        2        pin         cpu        throughput  0.800        [0.777, 0.823]  >= 0.950  fail" in section
    )
    assert f"budgets ({path}): 2 pass, 2 fail, 2 inconclusive of 6 budgeted row(s)" in section
    assert (
        "FAIL pd/2/pin/cpu throughput: ratio 0.800, 95% CI [0.777, 0.823], bound >= 0.950 (budgets.pd.throughput)"
        in section
    )
    assert (
        "FAIL pd/2/pin/cpu elapsed: ratio 1.250, 95% CI [1.227, 1.273], bound <= 1.050 (budgets.pd.elapsed)" in section
    )
    assert not any(line.startswith("INCONCLUSIVE") for line in section)  # listed with --strict only

    assert cli.main(["report", str(campaign), "--budgets", path, "--check"]) == 1
    assert cli.main(["report", str(campaign), "--budgets", path, "--check", "--strict"]) == 1
    with open(campaign / "budgets.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert {(row["platform"], row["scaleup"], row["metric"], row["verdict"]) for row in rows[-2:]} == {
        ("pd", "2", "throughput", "fail"),
        ("pd", "2", "elapsed", "fail"),
    }
    elapsed = next(row for row in rows if row["metric"] == "elapsed")
    assert float(elapsed["bound high"]) == pytest.approx(1.05) and elapsed["bound low"] == ""
    assert "\n\nBudgets\n\n| platform |" in (campaign / "report.md").read_text()


def test_check_exits_0_with_inconclusive_rows_and_strict_makes_them_fail(campaign, tmp_path, capsys):
    path = budgets_file(tmp_path, {"budgets": {"cn": CONTAINERS["budgets"]["cn"]}})  # pass and inconclusive
    assert cli.main(["report", str(campaign), "--budgets", path, "--check"]) == 0
    assert "2 pass, 0 fail, 2 inconclusive" in capsys.readouterr().out
    assert cli.main(["report", str(campaign), "--budgets", path, "--strict"]) == 1
    out = capsys.readouterr().out
    assert (
        "INCONCLUSIVE cn/1/pin/cpu throughput: ratio 0.950, 95% CI [0.723, 1.177], bound >= 0.950 "
        "(budgets.cn.throughput): interval straddles a bound"
    ) in out
    passing = budgets_file(tmp_path, {"budgets": {"cn": {"throughput": [1.0, -0.5, None]}}}, "loose.yml")
    assert cli.main(["report", str(campaign), "--budgets", passing, "--strict"]) == 0


def test_csv_format_keeps_stdout_one_csv_and_says_the_verdicts_on_stderr(campaign, tmp_path, capsys):
    path = budgets_file(tmp_path, CONTAINERS)
    assert cli.main(["report", str(campaign), "--format", "csv", "--budgets", path, "--check"]) == 1
    out, err = capsys.readouterr()
    assert "Budgets" not in out and "2 pass, 2 fail, 2 inconclusive" in err


def test_check_needs_budgets_and_unused_budgets_are_listed(campaign, tmp_path, capsys):
    assert cli.main(["report", str(campaign), "--check"]) == 2
    assert "--check and --strict need --budgets FILE" in capsys.readouterr().err
    path = budgets_file(
        tmp_path, {"budgets": {"vm": {"throughput": [1.0, -0.1, None]}, "cn": {"startup": [1.0, None, 0.1]}}}
    )
    assert cli.main(["report", str(campaign), "--budgets", path, "--check"]) == 0
    out = capsys.readouterr().out
    assert "unused: budgets.vm.throughput: no vm rows in this campaign" in out
    assert "unused: budgets.cn.startup: no startup samples in this campaign" in out


@pytest.mark.parametrize(
    "data, message",
    [
        ({"vmm": {"throughput": [1.0, -0.05, None]}}, "budgets.vmm: unknown platform 'vmm'; known: bm, "),
        ({"bm": {"throughput": [1.0, -0.05, None]}}, "budgets.bm: bm is the baseline"),
        (
            {"cn": {"thruput": [1.0, -0.05, None]}},
            "budgets.cn.thruput: unknown metric 'thruput': not in the metric table "
            "(workloads/common/metric_table.py); did you mean throughput",
        ),
        ({"cn": {"path_mtu": [1.0, -0.05, None]}}, "budgets.cn.path_mtu: metric 'path_mtu' has no direction"),
        ({"cn": {"throughput": [1.0, -0.05]}}, "budgets.cn.throughput: must be [REF, LOWER, UPPER]"),
        ({"cn": {"throughput": "5%"}}, "budgets.cn.throughput: must be [REF, LOWER, UPPER]"),
        ({"cn": {"throughput": [0, -0.05, None]}}, "budgets.cn.throughput: REF 0 must be a positive number"),
        (
            {"cn": {"throughput": [1.0, 0.05, None]}},
            "budgets.cn.throughput: LOWER 0.05 must be null or a number from -1 to 0",
        ),
        ({"cn": {"elapsed": [1.0, None, -0.05]}}, "budgets.cn.elapsed: UPPER -0.05 must be null or a number >= 0"),
        ({"cn": {"throughput": [1.0, None, None]}}, "budgets.cn.throughput: bounds nothing"),
        (
            {"cn": {"elapsed": [1.0, -0.05, None]}},
            "budgets.cn.elapsed: [1.0, -0.05, None] bounds only the better side: lower is better, so a budget "
            "gives UPPER (e.g. [1.0, null, 0.05])",
        ),
        ({"cn": {"throughput": [1.0, None, 0.05]}}, "budgets.cn.throughput: [1.0, None, 0.05] bounds only the better"),
        ({"cn": {"throughput": {"reference": [1.0, -0.05, None]}}}, "budgets.cn.throughput: a mapping holds ref"),
        (
            {"cn": {"throughput": {"scenarios": {"cn/2/pinned/cpu": [1.0, -0.05, None]}}}},
            "budgets.cn.throughput.scenarios.cn/2/pinned/cpu: unknown scenario 'cn/2/pinned/cpu': a scenario is "
            "PLATFORM/SCALEUP/CPUCFG/PROC",
        ),
        (
            {"cn": {"throughput": {"scenarios": {"vm/2/pin/cpu": [1.0, -0.05, None]}}}},
            "budgets.cn.throughput.scenarios.vm/2/pin/cpu: unknown scenario 'vm/2/pin/cpu' for cn",
        ),
        (
            {"cn": {"throughput": {"scenarios": {"cn/2/pin/cpu": [1.0, None]}}}},
            "budgets.cn.throughput.scenarios.cn/2/pin/cpu: must be [REF, LOWER, UPPER]",
        ),
        ({"cn": []}, "budgets.cn: must map metrics to [REF, LOWER, UPPER]"),
    ],
)
def test_bad_budgets_are_refused_naming_the_key(campaign, tmp_path, capsys, data, message):
    path = budgets_file(tmp_path, {"budgets": data})
    assert cli.main(["report", str(campaign), "--budgets", path]) == 2
    out, err = capsys.readouterr()
    assert not out
    assert f"platbench report: {path}: invalid budgets:" in err and message in err, err


def test_every_problem_is_listed_at_once_and_the_file_itself_is_checked(tmp_path):
    with pytest.raises(budgets.BudgetError) as raised:
        budgets.parse({"budget": {}, "budgets": {"xx": {}, "cn": {"thruput": [1, -1, None], "elapsed": [1, None]}}})
    message = str(raised.value)
    assert "unknown field(s) budget; allowed: description, budgets" in message
    assert "budgets.xx: unknown platform" in message and "budgets.cn.thruput" in message
    assert "budgets.cn.elapsed: must be [REF, LOWER, UPPER]" in message
    with pytest.raises(budgets.BudgetError, match="not valid YAML"):
        budgets.load(_bad_yaml(tmp_path))
    with pytest.raises(budgets.BudgetError, match="cannot read the budgets file"):
        budgets.load(tmp_path / "missing.yml")


def _bad_yaml(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("budgets: {cn: [", encoding="utf-8")
    return path


def test_a_scenario_the_campaign_lacks_is_refused(campaign, tmp_path, capsys):
    data = {"budgets": {"cn": {"throughput": {"scenarios": {"cn/8/pin/cpu": [1.0, -0.05, None]}}}}}
    assert cli.main(["report", str(campaign), "--budgets", budgets_file(tmp_path, data)]) == 2
    assert (
        "budgets.cn.throughput.scenarios.cn/8/pin/cpu: unknown scenario 'cn/8/pin/cpu': not a scenario of this "
        "campaign (its cn scenarios: cn/1/pin/cpu, cn/2/pin/cpu)"
    ) in capsys.readouterr().err


def test_the_smoke_budgets_load_and_fit_the_smoke_experiment():
    stated = budgets.load(SMOKE_BUDGETS)
    assert {(budget.platform, budget.metric, budget.bound_text()) for budget in stated} == {
        ("cn", "throughput", ">= 0.950"),
        ("pd", "throughput", ">= 0.950"),
    }
    smoke = load_experiment(REPO / "experiments", "smoke")
    budgets.check_experiment(stated, smoke)
    wrong = budgets.parse({"budgets": {"cn": {"throughput": {"scenarios": {"cn/4/pin/cpu": [1.0, -0.05, None]}}}}})
    with pytest.raises(budgets.BudgetError, match=r"cn/4/pin/cpu': not a scenario of experiment smoke \(its cn"):
        budgets.check_experiment(wrong, smoke)


def test_platbench_run_refuses_bad_budgets_before_any_cell(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(run, "drive", lambda *args, **kwargs: pytest.fail("a playbook ran"))
    bad = budgets_file(
        tmp_path, {"budgets": {"cn": {"throughput": {"scenarios": {"cn/4/pin/cpu": [1.0, -0.05, None]}}}}}
    )
    assert cli.main(["run", "smoke", "--results-dir", str(tmp_path), "--budgets", bad]) == 2
    out, err = capsys.readouterr()
    assert not out and err.startswith(f"{bad}: invalid budgets:\n  - budgets.cn.throughput.scenarios.cn/4/pin/cpu:")
    assert cli.main(["run", "smoke", "--results-dir", str(tmp_path), "--budgets", budgets_file(tmp_path, {})]) == 2
    assert "budgets: must map platforms" in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    plan, _, _ = run.prepare(parser.parse_args(["smoke", "--budgets", str(SMOKE_BUDGETS)]))
    assert plan["name"] == "smoke"


def test_make_lab_checks_the_smoke_budgets_and_shows_their_verdicts_without_gating_on_them():
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert recipe.count("--budgets $(BUDGETS)") == 2  # platbench run checks them, platbench report judges
    assert "--check" not in recipe and "--strict" not in recipe
    assert "BUDGETS ?= $(wildcard experiments/budgets/$(EXPERIMENT).yml)" in makefile


def duet_samples(pairs=4):
    """cn beside bm's copy in duet pairs on one core each: cn 3% slower, and each pair's two cells timing the same
    10 s window (elapsed)."""
    samples = []
    for repeat in range(pairs):
        lead = f"cn/2/pin/cpu|r{repeat}"
        for platform, factor in (("cn", 0.97 + 0.002 * repeat), ("bm", 1.0 - 0.001 * repeat)):
            for metric, value in (("throughput", 100.0 * factor), ("elapsed", 10.0)):
                found = sample(platform, metric, value, repeat)
                found["labels"].update(schedule="duet", duet_pair=lead, duet_side=(repeat + (platform == "bm")) % 2)
                if platform == "bm":
                    found["labels"]["cell"] = f"bm/2/pin/cpu|r{repeat}|partner=cn/2/pin/cpu"
                samples.append(found)
    return samples


def test_an_elapsed_budget_is_refused_in_a_duet_campaign_naming_the_file_and_what_to_do(tmp_path, capsys):
    append_samples(tmp_path / "duet" / "samples.jsonl", duet_samples())
    path = budgets_file(tmp_path, CONTAINERS)
    assert cli.main(["report", str(tmp_path / "duet"), "--budgets", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"platbench report: {path}: invalid budgets:\n  - budgets.cn.elapsed: elapsed cannot be ")
    assert (
        "budgets.cn.elapsed: elapsed cannot be budgeted in this campaign: cn/2/pin/cpu run(s) in duet pairs "
        "(schedule: duet), and both sides of a duet pair time the same window, so elapsed is the same on both "
        "whatever the platforms do. Budget throughput instead, or run the experiment with schedule: rounds"
    ) in err
    assert "pd.elapsed" not in err  # no pd cell runs here: nothing of it is judged
    throughput_only = budgets_file(tmp_path, {"budgets": {"cn": {"throughput": [1.0, -0.05, None]}}}, "tp.yml")
    assert cli.main(["report", str(tmp_path / "duet"), "--budgets", throughput_only]) == 0
    assert "budgets (" in capsys.readouterr().out
    # The same budgets on a campaign whose cells ran alone judge elapsed as any metric.
    assert {verdict.budget.metric for verdict in verdicts_of_samples(tmp_path, SAMPLES)} == {"throughput", "elapsed"}


def verdicts_of_samples(tmp_path, samples):
    append_samples(tmp_path / "alone" / "samples.jsonl", samples)
    return budgets.evaluate(ReportContext(report.load_samples(tmp_path / "alone")), budgets.parse(CONTAINERS)).verdicts


def test_platbench_run_refuses_an_elapsed_budget_on_a_duet_plan_before_any_cell():
    stated = budgets.parse(CONTAINERS)
    answer_size = load_experiment(REPO / "experiments", "smoke", size="answer")  # `make lab`'s duet of cn and bm
    assert answer_size["schedule"] == "duet"
    with pytest.raises(budgets.BudgetError) as refused:
        budgets.check_experiment(stated, answer_size, "mine.yml")
    message = str(refused.value)
    assert message.startswith("mine.yml: invalid budgets:\n  - budgets.cn.elapsed: elapsed cannot be budgeted in ")
    assert "experiment smoke: cn/1/pin/cpu run(s) in duet pairs" in message and "schedule: rounds" in message
    budgets.check_experiment(budgets.parse({"budgets": {"cn": {"throughput": [1.0, -0.05, None]}}}), answer_size)
    budgets.check_experiment(stated, load_experiment(REPO / "experiments", "smoke"))  # its rounds: judged
