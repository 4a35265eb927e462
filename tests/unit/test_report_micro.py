"""The report of a campaign of several workloads whose metrics carry labels of their own, with a skipped cell.

tests/unit/data/handmade_micro_samples.jsonl, written by hand: bm and cn at 2/pin/cpu, workloads micro_cpu and
micro_disk, 3 repeats; cn's micro_disk repeat 2 was skipped (one ``skipped`` sample, reason in metadata). Known answers:
- hpl_gflops (higher, labels hpl_n): n=1000 bm 50, 52, 54, cn 45, 47, 49: Diff% mean (52 - 47) / 52 = +9.615%,
  best (54 - 49) / 54 = +9.259%; n=2000 bm 80, 84, 88, cn 84, 88, 92: cn faster, mean (84 - 88) / 84 = -4.762%,
  best (88 - 92) / 88 = -4.545%. dgemm_gflops (no label): bm 100 x3, cn 90 x3: +10%.
- dd_write (higher, size_mb): 1 MB bm 200, 210, 220, cn 180, 190: mean (210 - 185) / 210 = +11.905%,
  best (220 - 190) / 220 = +13.636%; 100 MB bm 400, 420, 440, cn 420, 440: mean -2.381%, best 0%.
- ioping_latency (lower, ioping_mode): cached bm 10, 12, 14, cn 15, 17: mean (16 - 12) / 12 = +33.333%,
  best (15 - 10) / 10 = +50%; direct bm 100, 110, 120, cn 99, 101: mean (100 - 110) / 110 = -9.091%.
- elapsed (lower, every record): micro_cpu bm 10, 11, 12, cn 11, 12, 13; micro_disk bm 5, 6, 7, cn 6, 7.
"""

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest

from platbench import cli, report
from platbench.report.context import ReportContext

DATA = Path(__file__).resolve().parent / "data" / "handmade_micro_samples.jsonl"
REASON = "the write directory /tmp is a tmpfs: no disk to measure there"


@pytest.fixture
def campaign(tmp_path):
    shutil.copy(DATA, tmp_path / "samples.jsonl")
    return tmp_path


@pytest.fixture
def frame(campaign):
    return report.load_samples(campaign)


def keyed(rows, *keys):
    return {tuple(row[key] for key in keys): row for row in rows}


def test_skipped_is_no_metric(frame):
    assert "skipped" not in report.choose_metrics(frame, None)
    # A micro campaign's main table: one headline figure per component it measured.
    assert report.choose_metrics(frame, None) == ["hpl_gflops", "dd_write"]
    tables, missing = report.diff_tables(ReportContext(frame))
    assert missing == []  # skipped is not a metric the metric table lacks
    assert all(row["metric"] != "skipped" for rows, _ in tables.values() for row in rows)


def test_the_main_table_has_a_row_per_workload_and_counts_the_skipped_cell(frame):
    rows, keys, _ = report.summarize(frame, ["elapsed"])
    assert keys == ["platform", "scaleup", "cpu_config", "processor", "workload"]
    rows = keyed(rows, "platform", "workload")
    assert list(rows) == [("bm", "micro_cpu"), ("bm", "micro_disk"), ("cn", "micro_cpu"), ("cn", "micro_disk")]
    disk = rows["cn", "micro_disk"]
    assert (disk["n"], disk["failed"], disk["skipped"], disk["elapsed count"]) == (2, 0, 1, 2)
    assert disk["elapsed mean"] == pytest.approx(6.5) and disk["elapsed ratio to bm"] == pytest.approx(6.5 / 6)
    assert rows["cn", "micro_cpu"]["elapsed ratio to bm"] == pytest.approx(12 / 11)


def test_metric_labels_are_row_keys_and_rows_without_them_stay(frame):
    rows, keys, _ = report.summarize(frame, ["dd_write", "ioping_latency"])
    assert keys[-3:] == ["workload", "size_mb", "ioping_mode"]
    rows = keyed(rows, "platform", "size_mb", "ioping_mode")
    assert rows["bm", 1, None]["dd_write mean"] == pytest.approx(210)
    assert rows["cn", 100, None]["dd_write mean"] == pytest.approx(430)
    assert rows["cn", None, "cached"]["ioping_latency mean"] == pytest.approx(16)
    assert rows["cn", None, "direct"]["ioping_latency ratio to bm"] == pytest.approx(100 / 110)
    assert rows["cn", None, None]["skipped"] == 1 and rows["cn", None, None]["n"] == 0  # the skipped cell's row
    assert len(rows) == 4 + 5


def test_diff_tables_per_component_with_their_own_row_keys(frame):
    tables, _ = report.diff_tables(ReportContext(frame))
    assert list(tables) == ["training", "cpu", "disk"]

    cpu_rows, cpu_keys = tables["cpu"]
    assert cpu_keys[-2:] == ["workload", "hpl_n"] and "size_mb" not in cpu_keys
    cpu = keyed(cpu_rows, "metric", "hpl_n")
    assert cpu["hpl_gflops", 1000]["Diff% mean"] == pytest.approx(500 / 52)
    assert cpu["hpl_gflops", 1000]["Diff% best"] == pytest.approx(500 / 54)
    assert cpu["hpl_gflops", 2000]["Diff% mean"] == pytest.approx(-400 / 84)  # cn faster: negative
    assert cpu["hpl_gflops", 2000]["Diff% best"] == pytest.approx(-400 / 88)
    assert cpu["dgemm_gflops", None]["Diff% mean"] == pytest.approx(10.0)

    disk_rows, disk_keys = tables["disk"]
    assert disk_keys[-3:] == ["workload", "size_mb", "ioping_mode"] and "hpl_n" not in disk_keys
    disk = keyed(disk_rows, "metric", "size_mb", "ioping_mode")
    assert set(disk) == {
        ("dd_write", 1, None),
        ("dd_write", 100, None),
        ("ioping_latency", None, "cached"),
        ("ioping_latency", None, "direct"),
    }
    assert disk["dd_write", 1, None]["Diff% mean"] == pytest.approx(2500 / 210)
    assert disk["dd_write", 1, None]["Diff% best"] == pytest.approx(3000 / 220)
    assert disk["dd_write", 100, None]["Diff% mean"] == pytest.approx(-1000 / 420)
    assert disk["dd_write", 100, None]["Diff% best"] == pytest.approx(0.0)
    assert disk["ioping_latency", None, "cached"]["Diff% mean"] == pytest.approx(100 * 4 / 12)
    assert disk["ioping_latency", None, "cached"]["Diff% best"] == pytest.approx(50.0)
    assert disk["ioping_latency", None, "direct"]["Diff% mean"] == pytest.approx(-1000 / 110)
    assert disk["dd_write", 1, None]["n"] == 2  # the skipped repeat is no measurement

    training = keyed(tables["training"][0], "workload")
    assert training[("micro_cpu",)]["Diff% mean"] == pytest.approx(100 / 11)
    assert training[("micro_disk",)]["mean"] == pytest.approx(6.5)


def test_the_printed_report_notes_the_skipped_cells_once(campaign, capsys):
    assert cli.main(["report", str(campaign), "--metric", "dd_write", "--metric", "hpl_gflops"]) == 0
    out = capsys.readouterr().out
    note = report.SKIPPED_TITLE.format(cells=1) + f"\n- micro_disk on cn/2/pin/cpu (1 cell(s)): {REASON}"
    assert out.count(note) == 1
    assert "Diff% against bm, component disk:" in out and "Diff% against bm, component cpu:" in out
    assert "+11.90%" in out and "-4.76%" in out and "1000.0" not in out  # integer labels print as integers
    with open(campaign / "report.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert {"workload", "hpl_n", "size_mb", "skipped"} <= set(table[0])
    with open(campaign / "diff_disk.csv", newline="", encoding="utf-8") as handle:
        disk = list(csv.DictReader(handle))
    assert [(row["metric"], row["size_mb"], row["ioping_mode"]) for row in disk] == [
        ("dd_write", "1", ""),
        ("dd_write", "100", ""),
        ("ioping_latency", "", "cached"),
        ("ioping_latency", "", "direct"),
    ]


def test_skipped_notes_group_cells_by_workload_and_reason(frame):
    extra = frame[frame["metric"] == "skipped"].assign(
        platform="bm", scenario="bm/2/pin/cpu", cell="bm/2/pin/cpu|workload=micro_disk|r2"
    )
    note = report.skipped_note(pd.concat([frame, extra, extra], ignore_index=True))
    assert note.splitlines() == [
        report.SKIPPED_TITLE.format(cells=2),
        f"- micro_disk on cn/2/pin/cpu, bm/2/pin/cpu (2 cell(s)): {REASON}",
    ]
    assert report.skipped_note(frame[frame["metric"] != "skipped"]) is None


def test_a_campaign_of_one_workload_has_no_workload_key(frame):
    rows, keys, _ = report.summarize(frame[frame["workload"] == "micro_cpu"], ["elapsed"])
    assert "workload" not in keys and len(rows) == 2
