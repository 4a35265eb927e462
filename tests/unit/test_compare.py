"""platbench compare: two campaigns written here with known answers (a 1.2x change with little spread, one lost in
the spread, scenarios on one side only, environments that differ), checked against scipy's own tests on the same
numbers; globs pooling campaigns, Welch's method, the formats and the HTML page, and bad input (exit 2)."""

import csv
import io
import json
import math
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from scipy import stats

from platbench import cli, compare
from platbench.report import stats as report_stats

REPO = Path(__file__).resolve().parents[2]
# bm: B = 1.2 x A exactly, little spread; cn: B within A's spread.
BM_A = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.7, 99.3, 100.1]
BM_B = [1.2 * value for value in BM_A]
CN_A = [90.0, 92.0, 94.0, 96.0, 98.0, 100.0, 102.0, 104.0, 106.0, 108.0]
CN_B = [91.0, 93.0, 95.0, 97.0, 99.0, 101.0, 103.0, 105.0, 107.0, 109.0]
ENV_A = {"kernel": "6.1.0-18-amd64", "cpu_model": "Xeon Gold 6338", "docker_version": "26.1.5", "image_id": "aaa"}
ENV_B = {"kernel": "6.8.0-45-generic", "cpu_model": "Xeon Gold 6338", "docker_version": "27.3.1", "image_id": "bbb"}


def sample(platform, metric, value, repeat, metadata, experiment="smoke"):
    scenario = f"{platform}/2/pin/cpu"
    labels = {
        "experiment": experiment,
        "workload": "cnn_train",
        "platform": platform,
        "scaleup": 2,
        "cpu_config": "pin",
        "processor": "cpu",
        "repeat": repeat,
        "scenario": scenario,
        "cell": f"{scenario}|r{repeat}",
    }
    unit = {"throughput": "images/sec", "elapsed": "s"}[metric]
    return {"metric": metric, "value": value, "unit": unit, "timestamp": 1.0, "labels": labels, "metadata": metadata}


def write_campaign(path, cells, metadata, platbench_version, experiment="smoke", repeats=None):
    """A campaign directory: ``cells`` {platform: throughputs}, elapsed = 1000 / throughput, and its run.json."""
    samples = []
    for platform, values in cells.items():
        for repeat, value in enumerate(values):
            if repeats is None or repeat in repeats:
                samples.append(sample(platform, "throughput", value, repeat, metadata, experiment))
                samples.append(sample(platform, "elapsed", 1000.0 / value, repeat, metadata, experiment))
    path.mkdir(parents=True)
    append_samples(path / "samples.jsonl", samples)
    run = {"campaign": path.name, "platbench_version": platbench_version, "hosts": {"lab1": metadata}}
    (path / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return path


@pytest.fixture
def campaigns(tmp_path):
    old = write_campaign(tmp_path / "old", {"bm": BM_A, "cn": CN_A, "vm": [50.0, 51.0], "vmcn": [40.0]}, ENV_A, "0.8.0")
    new = write_campaign(
        tmp_path / "new", {"bm": BM_B, "cn": CN_B, "pd": [80.0, 81.0], "vmcn": [41.0]}, ENV_B, "0.9.0", "smoke-b"
    )
    return old, new


def compared(a, b, *options):
    comparison = compare.compare(compare.load_side(str(a), "A"), compare.load_side(str(b), "B"), *options)
    return comparison, {
        (section.metric, row["platform"]): row for section in comparison.metrics for row in section.rows
    }


def printed(capsys, *argv):
    code = cli.main(["compare", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_medians_their_ratio_and_scipys_u_test_p_value(campaigns):
    comparison, rows = compared(*campaigns)
    bm, cn = rows["throughput", "bm"], rows["throughput", "cn"]
    assert comparison.method.centre == "median"
    assert bm["A centre"] == pytest.approx(100.05) and bm["B centre"] == pytest.approx(120.06)
    assert bm["ratio"] == pytest.approx(1.2)
    assert (bm["A n"], bm["B n"]) == (10, 10)
    assert bm["p"] == stats.mannwhitneyu(BM_B, BM_A, alternative="two-sided").pvalue
    assert cn["p"] == stats.mannwhitneyu(CN_B, CN_A, alternative="two-sided").pvalue
    assert bm["p"] < 0.001 and cn["p"] > 0.5
    assert cn["ratio"] == pytest.approx(100.0 / 99.0)


def test_the_noise_mark_only_where_the_change_is_not_significant_and_words_from_the_metric_table(campaigns):
    _, rows = compared(*campaigns)
    assert rows["throughput", "bm"]["verdict"] == "better"  # higher is better, B 1.2x
    assert rows["elapsed", "bm"]["verdict"] == "better"  # lower is better, B 1/1.2x
    assert rows["elapsed", "bm"]["ratio"] == pytest.approx(1 / 1.2)
    assert rows["throughput", "cn"]["verdict"] == rows["elapsed", "cn"]["verdict"] == "~"
    assert rows["throughput", "vmcn"]["verdict"] == "no test: n<2"
    assert rows["throughput", "vmcn"]["p"] is None


def test_a_slower_b_is_worse(tmp_path):
    old = write_campaign(tmp_path / "old", {"bm": BM_B}, ENV_A, "0.9.0")
    new = write_campaign(tmp_path / "new", {"bm": BM_A}, ENV_A, "0.9.0")
    _, rows = compared(old, new)
    assert (rows["throughput", "bm"]["verdict"], rows["elapsed", "bm"]["verdict"]) == ("worse", "worse")


def test_the_rank_interval_of_the_ratio_is_the_u_tests_own(campaigns):
    _, rows = compared(*campaigns)
    bm, cn = rows["throughput", "bm"], rows["throughput", "cn"]
    assert 1.0 < bm["low"] < 1.2 < bm["high"]
    assert cn["low"] < 1.0 < cn["high"]
    # 10 against 10: P(U <= 23) <= 0.025 < P(U <= 24) (the tables' critical value 23), so the 24th pairwise
    # ratio from each end.
    assert report_stats._u_critical(10, 10, 0.025) == 24
    assert report_stats._u_critical(5, 5, 0.025) == 3
    ratios = sorted(b / a for a in CN_A for b in CN_B)
    assert cn["low"] == pytest.approx(ratios[23]) and cn["high"] == pytest.approx(ratios[-24])
    ratios = sorted(b / a for a in BM_A for b in BM_B)
    assert bm["low"] == pytest.approx(ratios[23]) and bm["high"] == pytest.approx(ratios[-24])
    # Two against two: the smallest two-sided p is 1/3, no 95% interval.
    assert report_stats.rank_ratio_interval([2.0, 3.0], [1.0, 1.5]) is None


@pytest.mark.parametrize("shift", [1.0, 1.02, 1.05, 1.08, 1.12])
def test_the_rank_interval_holds_1_where_the_exact_u_test_does_not_reject(shift):
    a = [math.exp(0.1 * math.sin(7 * i)) for i in range(8)]
    b = [shift * math.exp(0.1 * math.cos(5 * i + 1)) for i in range(9)]
    low, high = report_stats.rank_ratio_interval(b, a)
    p = stats.mannwhitneyu(b, a, alternative="two-sided", method="exact").pvalue
    assert (low <= 1.0 <= high) == (p >= 0.05)


def test_geomean_of_the_ratios_per_platform_and_over_all(campaigns):
    comparison, _ = compared(*campaigns, ["throughput"])
    means = {name: (count, value, word) for name, count, value, word in comparison.metrics[0].geomeans}
    assert means["bm"] == (1, pytest.approx(1.2), "better")  # its one scenario changed significantly
    assert means["cn"] == (1, pytest.approx(100.0 / 99.0), None)
    assert means["all"] == (3, pytest.approx((1.2 * 100.0 / 99.0 * 41.0 / 40.0) ** (1 / 3)), None)  # bm, cn, vmcn
    line = "geomean B/A: bm 1.200 (+20.0%, better), cn 1.010 (+1.0%), vmcn 1.025 (+2.5%), all 1.075 (+7.5%)"
    assert line in compare.render(comparison).splitlines()


def test_the_environment_that_differs_and_what_is_the_same(campaigns):
    comparison, _ = compared(*campaigns)
    differ = {field: (a, b) for field, a, b in comparison.differ}
    assert differ == {
        "experiment": (["smoke"], ["smoke-b"]),
        "kernel": (["6.1.0-18-amd64"], ["6.8.0-45-generic"]),
        "image_id": (["aaa"], ["bbb"]),
        "docker_version": (["26.1.5"], ["27.3.1"]),
        "platbench_version": (["0.8.0"], ["0.9.0"]),
    }
    assert comparison.same == ["cpu_model"]


def test_scenarios_on_one_side_only_are_listed(campaigns):
    comparison, rows = compared(*campaigns)
    assert ("throughput", "vm") not in rows and ("throughput", "pd") not in rows
    assert comparison.only == [
        ("A", "vm/2/pin/cpu", ["throughput", "elapsed"]),
        ("B", "pd/2/pin/cpu", ["throughput", "elapsed"]),
    ]


def test_the_text_output(campaigns, capsys):
    code, out, _ = printed(capsys, *campaigns, "--metric", "throughput")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"A: {campaigns[0]} (1 campaign(s): old; 46 samples)"
    assert lines[2].startswith("method: medians, Mann-Whitney U test (two-sided)")
    assert "throughput (images/sec, higher is better):" in lines
    header = next(line for line in lines if line.startswith("platform"))
    columns = "A median (images/sec)", "A n", "B median (images/sec)", "B n", "B/A", "95% CI", "p", "verdict"
    assert [cell.strip() for cell in header.split("  ") if cell.strip()] == ["platform", "scaleup", "cpu_config"] + [
        "processor",
        *columns,
    ]
    bm = next(line for line in lines if line.startswith("bm "))
    assert bm.split() == ["bm", "2", "pin", "cpu", "100", "10", "120", "10", "1.200", "(+20.0%)"] + [
        "[1.192,",
        "1.208]",
        "<0.001",
        "better",
    ]
    cn = next(line for line in lines if line.startswith("cn "))
    assert cn.endswith(" ~") and "better" not in cn
    vmcn = next(line for line in lines if line.startswith("vmcn "))
    assert vmcn.split()[-5:] == ["n/a", "n/a", "no", "test:", "n<2"]
    assert "  only in A: vm/2/pin/cpu (throughput)" in lines
    assert "  kernel: A 6.1.0-18-amd64 | B 6.8.0-45-generic" in lines
    assert "  the same on both sides: cpu_model" in lines


def test_markdown_and_csv(campaigns, capsys):
    code, out, _ = printed(capsys, *campaigns, "--format", "markdown")
    assert code == 0
    assert "### throughput (images/sec, higher is better)" in out
    assert "| bm | 2 | pin | cpu | 100 | 10 | 120 | 10 | 1.200 (+20.0%) | [1.192, 1.208] | <0.001 | better |" in out
    code, out, _ = printed(capsys, *campaigns, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["metric"], row["platform"], row["verdict"]) for row in rows] == [
        ("throughput", "bm", "better"),
        ("throughput", "cn", "~"),
        ("throughput", "vmcn", "no test: n<2"),
        ("elapsed", "bm", "better"),
        ("elapsed", "cn", "~"),
        ("elapsed", "vmcn", "no test: n<2"),
    ]
    assert float(rows[0]["B/A"]) == pytest.approx(1.2)
    assert float(rows[1]["p"]) == pytest.approx(stats.mannwhitneyu(CN_B, CN_A, alternative="two-sided").pvalue)
    assert rows[0]["better"] == "higher" and rows[0]["significant"] == "True"


def test_a_glob_pools_the_campaigns_it_matches(tmp_path, campaigns, capsys):
    old, _ = campaigns
    cells = {"bm": BM_B, "cn": CN_B}
    write_campaign(tmp_path / "split" / "new-1", cells, ENV_B, "0.9.0", repeats=range(5))
    write_campaign(tmp_path / "split" / "new-2", cells, ENV_B, "0.9.0", repeats=range(5, 10))
    (tmp_path / "split" / "new-3").mkdir()  # no samples: not a campaign, passed over
    comparison, rows = compared(old, tmp_path / "split" / "new-*")
    assert [side.name for side in comparison.sides[1].dirs] == ["new-1", "new-2"]
    bm = rows["throughput", "bm"]
    assert (bm["B n"], bm["ratio"]) == (10, pytest.approx(1.2))
    assert bm["p"] == stats.mannwhitneyu(BM_B, BM_A, alternative="two-sided").pvalue
    code, out, _ = printed(capsys, old, tmp_path / "split" / "new-*")
    assert code == 0 and f"B: {tmp_path / 'split' / 'new-*'} (2 campaign(s): new-1, new-2; 40 samples)" in out


def test_welch_compares_means_with_welchs_t_and_the_reports_interval(campaigns, capsys):
    comparison, rows = compared(*campaigns, ["throughput"], "welch")
    bm, cn = rows["throughput", "bm"], rows["throughput", "cn"]
    assert bm["A centre"] == pytest.approx(sum(BM_A) / 10) and bm["ratio"] == pytest.approx(1.2)
    assert bm["p"] == stats.ttest_ind(BM_B, BM_A, equal_var=False).pvalue
    assert cn["p"] == stats.ttest_ind(CN_B, CN_A, equal_var=False).pvalue
    # The interval by scipy's own Welch interval of the difference, over A's mean (not the report's code again).
    welch = stats.ttest_ind(CN_B, CN_A, equal_var=False).confidence_interval(0.95)
    assert (cn["low"], cn["high"]) == pytest.approx((1 + welch.low / 99.0, 1 + welch.high / 99.0))
    assert (bm["verdict"], cn["verdict"]) == ("better", "~")
    code, out, _ = printed(capsys, *campaigns, "--test", "welch")
    assert code == 0 and "method: means, Welch's t test" in out and "A mean (images/sec)" in out


class Cells(HTMLParser):
    """The text of each table row's cells, and every link or source the page would load."""

    def __init__(self):
        super().__init__()
        self.rows, self.loads, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        self.loads += [value for name, value in attrs if name in ("href", "src")]
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append(self._cell)
            self._cell = None


def test_the_html_page_holds_the_tables_and_loads_nothing(campaigns, tmp_path, capsys):
    page = tmp_path / "compare.html"
    code, _, err = printed(capsys, *campaigns, "--html", page)
    assert code == 0 and f"wrote {page}" in err
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "<style>" in text
    parser = Cells()
    parser.feed(text)
    assert parser.loads == []
    assert [
        "bm",
        "2",
        "pin",
        "cpu",
        "100",
        "10",
        "120",
        "10",
        "1.200 (+20.0%)",
        "[1.192, 1.208]",
        "<0.001",
        "better",
    ] in (parser.rows)
    assert [row[-1] for row in parser.rows if row[0] == "cn"] == ["~", "~"]
    assert ["kernel", "6.1.0-18-amd64", "6.8.0-45-generic"] in parser.rows
    assert '<tr class="better">' in text and '<tr class="noise">' in text


def test_the_html_escapes_what_the_campaigns_hold(tmp_path, capsys):
    old = write_campaign(tmp_path / "old", {"bm": BM_A}, {"kernel": "<b>6.1</b>"}, "0.9.0")
    new = write_campaign(tmp_path / "new", {"bm": BM_B}, {"kernel": "6.8"}, "0.9.0")
    page = tmp_path / "page.html"
    assert printed(capsys, old, new, "--html", page)[0] == 0
    assert "&lt;b&gt;6.1&lt;/b&gt;" in page.read_text(encoding="utf-8")


def test_no_scenario_in_common_exits_2(tmp_path, capsys):
    old = write_campaign(tmp_path / "old", {"bm": BM_A}, ENV_A, "0.9.0")
    new = write_campaign(tmp_path / "new", {"cn": CN_B}, ENV_B, "0.9.0")
    code, out, err = printed(capsys, old, new)
    assert code == 2 and out == ""
    assert "no scenario of throughput, elapsed is in both A and B" in err
    assert "only in A: bm/2/pin/cpu (throughput, elapsed); only in B: cn/2/pin/cpu (throughput, elapsed)" in err


def test_missing_and_empty_sides_exit_2_saying_what_was_expected(tmp_path, campaigns, capsys):
    old, _ = campaigns
    code, _, err = printed(capsys, old, tmp_path / "nope")
    assert code == 2
    assert f"B: {tmp_path / 'nope'} does not exist: expected a campaign directory (holding samples.jsonl)" in err
    code, _, err = printed(capsys, tmp_path / "nothing-*", old)
    assert code == 2 and f"A: {tmp_path / 'nothing-*'} matches nothing: expected a campaign directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = printed(capsys, old, tmp_path / "empty")
    assert code == 2 and "B: no samples:" in err
    code, _, err = printed(capsys, old, tmp_path / "emp*")
    assert code == 2 and "matches 1 directories, none holding samples.jsonl" in err
    code, _, err = printed(capsys, old, campaigns[1], "--metric", "nope")
    assert code == 2 and "metric(s) nope not in the samples" in err


def test_runs_as_a_module(campaigns):
    argv = [sys.executable, "-m", "platbench", "compare", *map(str, campaigns), "--format", "csv"]
    out = subprocess.check_output(argv, cwd=REPO, text=True)
    assert out.startswith("metric,unit,better,platform,scaleup,cpu_config,processor,A median,A n,")
