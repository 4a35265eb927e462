"""Diff% (Xu 2017) on tests/unit/data/handmade_diff_samples.jsonl, a hand-written campaign with known answers.

bm and cn at 2/pin/cpu, three repeats each, plus an emulated (tcg) vm:
- throughput (higher is better): bm 100, 110, 120 (mean 110, best 120); cn 90, 96, 108 (mean 98, best 108,
  std sqrt(84)): Diff% mean = (110 - 98) / 110 x 100 = 10.909..., best = (120 - 108) / 120 x 100 = 10.0,
  within noise (Welch's t, n = 3).
- elapsed (lower is better): bm 10.0, 10.2, 10.4; cn 11.0, 11.2, 11.4: Diff% mean = (11.2 - 10.2) / 10.2 x 100
  = 9.8039..., best = (11.0 - 10.0) / 10.0 x 100 = 10.0, not within noise.
- user_time (lower, component cpu): bm 4.0, 4.2, 4.4; cn 3.0, 3.1, 3.2: cn is better, Diff% negative:
  mean (3.1 - 4.2) / 4.2 x 100 = -26.190..., best (3.0 - 4.0) / 4.0 x 100 = -25.0.
- loss_last: descriptive (no direction): no Diff%.
- vm (tcg) throughput 5, 6 and elapsed 200, 220: left out unless include_emulated.
"""

import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from platbench import cli, report
from platbench.report.context import ReportContext

DATA = Path(__file__).resolve().parent / "data" / "handmade_diff_samples.jsonl"


@pytest.fixture
def campaign(tmp_path):
    shutil.copy(DATA, tmp_path / "samples.jsonl")
    return tmp_path


def by_metric(tables):
    return {(row["metric"], row["platform"]): row for rows, _ in tables.values() for row in rows}


def test_diff_percent_signs():
    assert report.diff_percent(110.0, 98.0, "higher") == pytest.approx(12 / 110 * 100)
    assert report.diff_percent(10.0, 11.0, "lower") == pytest.approx(10.0)
    assert report.diff_percent(4.0, 3.0, "lower") == pytest.approx(-25.0)  # platform faster: negative
    assert report.diff_percent(100.0, 120.0, "higher") == pytest.approx(-20.0)
    assert report.diff_percent(100.0, 90.0, None) is None  # descriptive: no Diff%
    assert report.diff_percent(0.0, 1.0, "lower") is None
    assert report.diff_percent(None, 1.0, "higher") is None


def test_known_answers_of_the_sample_file(campaign):
    tables, missing = report.diff_tables(ReportContext(report.load_samples(campaign)))
    assert missing == []
    assert list(tables) == ["training", "cpu"]  # the metric table's component order
    rows = by_metric(tables)
    assert set(rows) == {("throughput", "cn"), ("elapsed", "cn"), ("user_time", "cn")}  # no bm, tcg, loss_last

    throughput = rows["throughput", "cn"]
    assert (throughput["better"], throughput["unit"], throughput["n"]) == ("higher", "samples/sec", 3)
    assert (throughput["bm mean"], throughput["bm best"]) == (110.0, 120.0)
    assert (throughput["best"], throughput["mean"]) == (108.0, 98.0)
    assert throughput["std"] == pytest.approx(math.sqrt(84))
    assert throughput["Diff% mean"] == pytest.approx(10.909090909)
    assert throughput["Diff% best"] == pytest.approx(10.0)
    assert throughput["within noise"] is True

    elapsed = rows["elapsed", "cn"]
    assert elapsed["better"] == "lower"
    assert (elapsed["bm mean"], elapsed["bm best"], elapsed["best"]) == (pytest.approx(10.2), 10.0, 11.0)
    assert elapsed["mean"] == pytest.approx(11.2) and elapsed["std"] == pytest.approx(0.2)
    assert elapsed["Diff% mean"] == pytest.approx(9.803921569)
    assert elapsed["Diff% best"] == pytest.approx(10.0)
    assert elapsed["within noise"] is False

    user_time = rows["user_time", "cn"]
    assert user_time["Diff% mean"] == pytest.approx(-26.190476190)
    assert user_time["Diff% best"] == pytest.approx(-25.0)
    assert user_time["std"] == pytest.approx(0.1)


def test_emulated_rows_only_when_asked(campaign):
    frame = report.load_samples(campaign)
    rows = by_metric(report.diff_tables(ReportContext(frame, include_emulated=True))[0])
    vm = rows["throughput", "vm"]
    assert vm["accelerator"] == "tcg"
    assert vm["Diff% mean"] == pytest.approx((110 - 5.5) / 110 * 100)
    assert vm["Diff% best"] == pytest.approx((120 - 6) / 120 * 100)
    assert rows["elapsed", "vm"]["Diff% mean"] == pytest.approx((210 - 10.2) / 10.2 * 100)


def test_a_platform_without_bm_gets_no_diff(tmp_path):
    lines = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    cn_only = [line for line in lines if line["labels"]["platform"] == "cn"]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in cn_only), encoding="utf-8")
    rows = by_metric(report.diff_tables(ReportContext(report.load_samples(tmp_path)))[0])
    assert rows["throughput", "cn"]["mean"] == 98.0
    assert rows["throughput", "cn"]["Diff% mean"] is None and rows["throughput", "cn"]["bm mean"] is None


def test_the_cli_writes_and_prints_one_table_per_component(campaign, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    out, err = capsys.readouterr()
    for name in ("diff_training.csv", "diff_training.md", "diff_cpu.csv", "diff_cpu.md"):
        assert (campaign / name).is_file(), name
        assert name in err
    assert not (campaign / "diff_profile.csv").exists()
    assert out.index("Diff% against bm, component training:") > out.index("throughput / bm")
    assert "+10.91% ~" in out and "+9.80%" in out
    assert report.DIFF_NOTE in out
    # Printed: the main table's metrics only; user_time's Diff% is in diff_cpu.md (below) or asked for.
    assert "component cpu" not in out and "-26.19%" not in out
    assert cli.main(["report", str(campaign), "--metric", "user_time"]) == 0
    asked = capsys.readouterr().out
    assert "Diff% against bm, component cpu:" in asked and "-26.19%" in asked and "component training" not in asked

    with open(campaign / "diff_training.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert [(row["metric"], row["platform"]) for row in table] == [("throughput", "cn"), ("elapsed", "cn")]
    assert float(table[0]["Diff% mean"]) == pytest.approx(10.909090909)
    assert float(table[1]["Diff% best"]) == pytest.approx(10.0)
    assert table[0]["Diff% mean within noise of bm (95% CI)"] == "True"
    markdown = (campaign / "diff_training.md").read_text(encoding="utf-8")
    assert markdown.startswith("Diff% against bm, component training:")
    assert "| throughput | samples/sec | higher | cn |" in markdown
    assert report.DIFF_NOTE in markdown and report.NOISE_NOTE in markdown
    assert "user_time" in (campaign / "diff_cpu.md").read_text(encoding="utf-8")


def test_the_markdown_format_prints_the_diff_tables(campaign, capsys):
    assert cli.main(["report", str(campaign), "--format", "markdown"]) == 0
    assert "| elapsed | s | lower | cn |" in capsys.readouterr().out


def test_a_metric_without_an_entry_gets_no_diff_and_one_line(campaign, capsys):
    lines = DATA.read_text(encoding="utf-8").splitlines()
    mystery = [json.loads(line) for line in lines if '"metric":"elapsed"' in line]
    for line in mystery:
        line["metric"] = "mystery_time"
    with open(campaign / "samples.jsonl", "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in mystery))
    tables, missing = report.diff_tables(ReportContext(report.load_samples(campaign)))
    assert missing == ["mystery_time"]
    assert "mystery_time" not in {row["metric"] for rows, _ in tables.values() for row in rows}

    assert cli.main(["report", str(campaign)]) == 0
    err = capsys.readouterr().err
    named = [line for line in err.splitlines() if "mystery_time" in line]
    assert named == [
        "note: no Diff% for metric(s) without an entry in the metric table (workloads/common/metric_table.py): "
        "mystery_time"
    ]
    assert "mystery_time" in (campaign / "diff_training.md").read_text(encoding="utf-8")


def test_only_unknown_metrics_write_no_diff_table(tmp_path, capsys):
    lines = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line["metric"] = "mystery_" + line["metric"]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert cli.main(["report", str(tmp_path), "--metric", "mystery_throughput"]) == 0
    assert not list(tmp_path.glob("diff_*"))
    assert "mystery_throughput" in capsys.readouterr().err
