"""The report's inference tables on tests/unit/data/handmade_inference_samples.jsonl, a hand-written
inference_e2e campaign with known answers (no GPU here; 8 requests per cell, scenario x/2/pin/PROC).

App ic, timing e2e, seconds (pre, inference, post; e2e their sum):
- bm cpu: (2.0, 6.0, 2.0), (2.1, 6.4, 2.5), (2.5, 6.8, 2.7): means 2.2, 6.4, 2.4, e2e 11.0; scaled-down as the
  workload records it now (metadata.loadgen.mlperf_minimums unmet: 0 ms and 8 samples);
- cn cpu: (3.0, 6.1, 2.0), (3.2, 6.5, 2.4), (3.4, 6.9, 2.8): means 3.2, 6.5, 2.4, e2e 12.1; its third cell
  is INVALID in loadgen's verdict (min duration not satisfied);
- bm gpu: (2.1, 0.6, 2.3), (2.2, 0.7, 2.4), (2.3, 0.8, 2.5): e2e 5.0, 5.3, 5.6 (mean 5.3);
- vm cpu, emulated (tcg): (40, 120, 40), e2e 200.
App ic, timing inference_only (inference alone): bm cpu 6.0, 6.4; bm gpu 0.5, 0.7, both cells INVALID.
App nlp, timing e2e, bm cpu only: (1.0, 8.0, 1.0), 10,833 requests: VALID (MLPerf's BERT minimums met).
The other ic cells that loadgen called VALID are records of an older platbench (no mlperf_minimums, a
loadgen_valid metric): they read scaled-down.
"""

import csv
import math
import shutil
from pathlib import Path

import pytest
from scipy import stats

from platbench import cli, report
from platbench.report import inference as inference_report
from platbench.report import load as report_load
from platbench.report.context import ReportContext

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "handmade_inference_samples.jsonl"


@pytest.fixture
def campaign(tmp_path):
    shutil.copy(SAMPLES, tmp_path / "samples.jsonl")
    return tmp_path


def phase_rows(results_dir, include_emulated=False):
    rows, keys, units, metrics = inference_report.phase_rows(
        ReportContext(report.load_samples(results_dir), include_emulated)
    )
    return {(row["platform"], row["processor"], row["app"], row["timing"]): row for row in rows}, keys, metrics


def welch_ratio_interval(values, baseline):
    """The 95% interval of mean(values) / mean(baseline) worked out by hand: Welch's t interval of the
    difference of the means (Welch-Satterthwaite degrees of freedom) over the baseline's mean."""
    va, vb = stats.tvar(values) / len(values), stats.tvar(baseline) / len(baseline)
    df = (va + vb) ** 2 / (va**2 / (len(values) - 1) + vb**2 / (len(baseline) - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    gap, center = stats.tmean(values) - stats.tmean(baseline), stats.tmean(baseline)
    return 1 + (gap - half) / center, 1 + (gap + half) / center


def test_phase_means_and_shares_that_add_up_to_e2e(campaign):
    rows, keys, metrics = phase_rows(campaign)
    # app, timing and requests are always keys (the times are sums over the requests); framework varies with app.
    assert keys == [
        *("platform", "accelerator", "scaleup", "cpu_config", "processor", "app", "timing", "requests", "framework")
    ]
    bm = rows["bm", "cpu", "ic", "e2e"]
    assert [bm[f"{phase}_time mean"] for phase in ("pre", "inference", "post", "e2e")] == pytest.approx(
        [2.2, 6.4, 2.4, 11.0]
    )
    # Each cell's share, averaged (as the host-to-device split does).
    assert bm["pre share of e2e mean"] == pytest.approx((2.0 / 10 + 2.1 / 11 + 2.5 / 12) / 3)
    for row in rows.values():
        shares = [row[f"{phase} share of e2e mean"] for phase in ("pre", "inference", "post")]
        if row["timing"] == "inference_only":
            assert shares == [None, None, None] and row["e2e_time mean"] is None
        else:
            assert sum(shares) == pytest.approx(1.0, abs=1e-12)
    # Printed, rounded to 0.1%, they add up to 100% within the rounding.
    header, lines = inference_report.phases_display(list(rows.values()), keys, metrics)
    columns = [index for index, name in enumerate(header) if name == "%"]
    assert len(columns) == 3
    printed = [[line[index] for index in columns] for line in lines if line[columns[0]] != "n/a"]
    assert len(printed) == 5  # the e2e rows: bm cpu and gpu, cn and vm for ic; bm for nlp
    for shares in printed:
        assert sum(float(share.rstrip("%")) for share in shares) == pytest.approx(100.0, abs=0.15)


def test_ratios_to_the_matching_bm_with_their_interval_and_the_noise_mark(campaign):
    rows, _, _ = phase_rows(campaign)
    cn = rows["cn", "cpu", "ic", "e2e"]
    assert cn["pre_time ratio to bm"] == pytest.approx(3.2 / 2.2)
    assert cn["pre_time ratio interval"] == pytest.approx(welch_ratio_interval([3.0, 3.2, 3.4], [2.0, 2.1, 2.5]))
    assert cn["pre_time within noise"] is False
    assert cn["e2e_time ratio to bm"] == pytest.approx(12.1 / 11.0)
    assert cn["e2e_time ratio interval"] == pytest.approx(welch_ratio_interval([11.1, 12.1, 13.1], [10.0, 11.0, 12.0]))
    assert cn["inference_time within noise"] is True  # 6.5 against 6.4
    # bm is its own baseline; the GPU row is compared with bm's GPU row, not with its CPU row.
    assert rows["bm", "gpu", "ic", "e2e"]["e2e_time ratio to bm"] == 1.0
    assert rows["bm", "gpu", "ic", "e2e"]["e2e_time ratio interval"] is None
    _, lines = inference_report.phases_display([cn], ["platform"], inference_report.TIMES.values())
    low, high = cn["e2e_time ratio interval"]
    assert lines[0][-1] == f"1.100 [{low:.3f}, {high:.3f}] ~"
    assert lines[0][-4] == f"1.455 [{cn['pre_time ratio interval'][0]:.3f}, {cn['pre_time ratio interval'][1]:.3f}]"


def test_emulated_rows_get_no_ratio_unless_asked(campaign):
    rows, _, _ = phase_rows(campaign)
    vm = rows["vm", "cpu", "ic", "e2e"]
    assert vm["accelerator"] == "tcg" and vm["e2e_time mean"] == 200.0
    assert vm["e2e_time ratio to bm"] is None and vm["e2e_time ratio interval"] is None
    assert vm["pre share of e2e mean"] == pytest.approx(0.2)  # its own shares are still shown
    rows, _, _ = phase_rows(campaign, include_emulated=True)
    assert rows["vm", "cpu", "ic", "e2e"]["e2e_time ratio to bm"] == pytest.approx(200.0 / 11.0)


def test_the_speedup_only_where_both_processors_exist(campaign):
    rows, keys, _ = phase_rows(campaign)
    speedups, speedup_keys = inference_report.speedup_rows(
        ReportContext(report.load_samples(campaign)), list(rows.values()), keys
    )
    assert "processor" not in speedup_keys
    # nlp, cn and vm have CPU cells only: no row of theirs.
    assert [(row["platform"], row["app"], row["timing"], row["measure"]) for row in speedups] == [
        ("bm", "ic", "e2e", "e2e_time"),
        ("bm", "ic", "inference_only", "inference_time"),
    ]
    e2e, inference_only = speedups
    assert e2e["speedup"] == pytest.approx(11.0 / 5.3)
    assert e2e["interval"] == pytest.approx(welch_ratio_interval([10.0, 11.0, 12.0], [5.0, 5.3, 5.6]))
    assert inference_only["speedup"] == pytest.approx(6.2 / 0.6)
    assert (e2e["n cpu"], e2e["n gpu"], e2e["INVALID"], inference_only["INVALID"]) == (3, 3, 0, 2)


def test_a_campaign_with_one_processor_has_no_speedup_table(campaign, capsys):
    lines = [line for line in SAMPLES.read_text().splitlines() if '"processor":"gpu"' not in line]
    (campaign / "samples.jsonl").write_text("\n".join(lines) + "\n")
    assert cli.main(["report", str(campaign)]) == 0
    out, err = capsys.readouterr()
    assert "Phase breakdown of end-to-end inference (inference_e2e), app ic:" in out
    assert "GPU-vs-CPU speedup" not in out and inference_report.SPEEDUP_NOTE not in out
    assert not (campaign / "gpu_speedup.csv").exists() and "gpu_speedup.csv" not in err


def test_the_cli_prints_the_tables_and_writes_phases_csv_and_report_md(campaign, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    out, err = capsys.readouterr()
    assert "wrote report.csv, report.md, phases.csv, gpu_speedup.csv, diff_training.csv" in err
    assert "report.png, report.html in" in err
    main, ic, nlp, speedup = (
        out.index("throughput / bm"),
        out.index("Phase breakdown of end-to-end inference (inference_e2e), app ic:"),
        out.index("Phase breakdown of end-to-end inference (inference_e2e), app nlp:"),
        out.index(inference_report.SPEEDUP_TITLE),
    )
    assert main < ic < nlp < speedup < out.index(inference_report.PHASES_NOTE) < out.index("Diff% against bm")
    ic_table = out[ic:nlp].splitlines()
    assert ic_table[1].split()[:9] == [
        *("platform", "accelerator", "scaleup", "cpu_config", "processor", "timing", "requests", "n", "failed")
    ]
    assert "framework" not in ic_table[1]  # it follows the app: no column in the app's own table
    assert ic_table[1].split()[9:11] == ["INVALID", "scaled-down"]  # no ic cell is VALID: no VALID column
    assert ic_table[3].split()[:17] == [
        *("bm", "-", "2", "pin", "cpu", "e2e", "8", "3", "0", "0", "3"),
        *("2.20", "20.0%", "6.40", "58.3%", "2.40", "21.7%"),
    ]
    speedup_table = out[speedup:].splitlines()
    assert speedup_table[3].split()[-5:] == ["11.0", "5.30", "2.075", "[1.651,", "2.500]"]

    with open(campaign / "phases.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert [(row["platform"], row["processor"], row["app"], row["timing"]) for row in table][:2] == [
        ("bm", "cpu", "ic", "e2e"),
        ("bm", "cpu", "ic", "inference_only"),
    ]
    cn = next(row for row in table if row["platform"] == "cn")
    assert float(cn["pre_time ratio to bm"]) == pytest.approx(3.2 / 2.2)
    assert float(cn["e2e_time ratio to bm low (95% CI)"]) < 1.0 < float(cn["e2e_time ratio to bm high (95% CI)"])
    assert cn["e2e_time within noise of bm (95% CI)"] == "True" and cn["INVALID"] == "1"
    with open(campaign / "gpu_speedup.csv", newline="", encoding="utf-8") as handle:
        assert [float(row["speedup (cpu / gpu)"]) for row in csv.DictReader(handle)] == pytest.approx(
            [11.0 / 5.3, 6.2 / 0.6]
        )
    markdown = (campaign / "report.md").read_text(encoding="utf-8")
    assert "Phase breakdown of end-to-end inference (inference_e2e), app ic:\n\n| platform |" in markdown
    assert inference_report.SPEEDUP_TITLE in markdown and inference_report.PHASES_NOTE in markdown
    assert cli.main(["report", str(campaign), "--format", "markdown"]) == 0
    assert f"{inference_report.SPEEDUP_TITLE}\n\n| platform |" in capsys.readouterr().out


def by_row(header, lines):
    """{(platform, processor, app, timing): {column: cell}} of a table whose rows those keys tell apart."""
    rows = [dict(zip(header, line, strict=True)) for line in lines]
    return {(row["platform"], row["processor"], row.get("app"), row["timing"]): row for row in rows}


def test_the_three_states_are_counted_in_every_table_and_marked_on_loadgen_s_figure(campaign, capsys):
    frame = report.load_samples(campaign)
    rows, keys, units = report.summarize(frame, ["throughput", report.LOADGEN_SPEED])
    header, lines = report.display_table(rows, keys, ["throughput", report.LOADGEN_SPEED], units)
    # The main table: a column per state that some cell is in, counting each row's cells in it.
    assert header[header.index("failed") + 1 :][:3] == ["VALID", "INVALID", "scaled-down"]
    table = by_row(header, lines)
    counts = {key: tuple(row[state] for state in ("VALID", "INVALID", "scaled-down")) for key, row in table.items()}
    assert counts == {
        ("bm", "cpu", "ic", "e2e"): ("0", "0", "3"),  # scaled-down as recorded
        ("bm", "cpu", "ic", "inference_only"): ("0", "0", "2"),  # an older record's VALID
        ("bm", "cpu", "nlp", "e2e"): ("1", "0", "0"),  # MLPerf's minimums met: VALID
        ("bm", "gpu", "ic", "e2e"): ("0", "0", "3"),
        ("bm", "gpu", "ic", "inference_only"): ("0", "2", "0"),
        ("cn", "cpu", "ic", "e2e"): ("0", "1", "2"),
        ("vm", "cpu", "ic", "e2e"): ("0", "0", "1"),
    }
    # Loadgen's own figure reads its row's state: VALID only where every cell is.
    speed = {key: row["loadgen_samples_per_sec (samples/sec)"] for key, row in table.items()}
    assert speed["bm", "cpu", "nlp", "e2e"].endswith(" (VALID)")
    assert speed["bm", "cpu", "ic", "e2e"].endswith(" (scaled-down)")
    assert speed["bm", "gpu", "ic", "inference_only"].endswith(" (INVALID)")
    assert speed["cn", "cpu", "ic", "e2e"].endswith(" (INVALID, scaled-down)")
    assert not any(cell.endswith(")") for cell in (row["throughput (samples/sec)"] for row in table.values()))
    # The notes: loadgen's reasons for INVALID, what fell short for scaled-down (an older VALID says why).
    note = report.invalid_note(frame)
    assert note.splitlines() == [
        report.INVALID_TITLE.format(cells=3),
        "- inference_e2e on cn/2/pin/cpu, bm/2/pin/gpu (3 cell(s)): min duration not satisfied",
    ]
    scaled = report.scaled_down_note(frame)
    assert scaled.splitlines() == [
        report.SCALED_DOWN_TITLE.format(cells=11),
        "- inference_e2e on bm/2/pin/cpu (3 cell(s)): min duration 0 ms, MLPerf's resnet50 asks for 600000; "
        "8 samples, MLPerf's resnet50 asks for 24576",
        "- inference_e2e on cn/2/pin/cpu, bm/2/pin/gpu, bm/2/pin/cpu, vm/2/pin/cpu (8 cell(s)): "
        + report_load.UNCHECKED_VALID_REASON,
    ]
    # The phase and speedup tables.
    phases, phase_keys, _, metrics = inference_report.phase_rows(ReportContext(frame))
    table = by_row(*inference_report.phases_display(phases, phase_keys, metrics))
    assert table["cn", "cpu", "ic", "e2e"]["INVALID"] == "1" and table["cn", "cpu", "ic", "e2e"]["scaled-down"] == "2"
    assert table["bm", "gpu", "ic", "inference_only"]["INVALID"] == "2"
    assert table["bm", "cpu", "nlp", "e2e"]["VALID"] == "1"
    # Printed: under the main table and again under the inference section; the Diff% files mark loadgen's figure.
    assert cli.main(["report", str(campaign)]) == 0
    out = capsys.readouterr().out
    assert out.count(note) == 2 and out.count(scaled) == 2
    assert out.index(note) < out.index("Phase breakdown") < out.rindex(note) < out.index("Diff% against bm")
    diff = (campaign / "diff_inference.md").read_text(encoding="utf-8")
    assert "| loadgen_samples_per_sec | samples/sec | higher | cn |" in diff and " (INVALID, scaled-down) |" in diff
    assert diff.rstrip().endswith(scaled.splitlines()[-1])
    with open(campaign / "diff_inference.csv", newline="", encoding="utf-8") as handle:
        cn = [row for row in csv.DictReader(handle) if row["platform"] == "cn"]
    # No row of the Diff% tables is VALID (bm, the only VALID row, is their baseline): no VALID column there.
    assert {(row["INVALID"], row["scaled-down"]) for row in cn} == {("1", "2")} and "VALID" not in cn[0]


def test_an_older_record_s_valid_reads_scaled_down_and_a_new_one_as_recorded():
    older = {"loadgen": {"result": "VALID", "reasons": []}}
    assert report_load.loadgen_verdict(older) == {
        report_load.LOADGEN_RESULT: "scaled-down",
        report_load.LOADGEN_REASONS: report_load.UNCHECKED_VALID_REASON,
    }
    minimums = {"benchmark": "bert", "met": True}
    for state, reasons in (("VALID", []), ("INVALID", ["min duration not satisfied"]), ("scaled-down", ["8 samples"])):
        verdict = report_load.loadgen_verdict(
            {"loadgen": {"result": state, "reasons": reasons, "mlperf_minimums": minimums}}
        )
        assert verdict == {report_load.LOADGEN_RESULT: state, report_load.LOADGEN_REASONS: "; ".join(reasons) or None}
    # An older INVALID is loadgen's INVALID still; a sample of another workload has no state.
    assert (
        report_load.loadgen_verdict({"loadgen": {"result": "INVALID", "reasons": []}})[report_load.LOADGEN_RESULT]
        == "INVALID"
    )
    assert report_load.loadgen_verdict({"host": "x"}) == {
        report_load.LOADGEN_RESULT: None,
        report_load.LOADGEN_REASONS: None,
    }


def test_a_campaign_without_inference_samples_gets_no_phase_table(tmp_path, capsys):
    shutil.copy(DATA / "handmade_diff_samples.jsonl", tmp_path / "samples.jsonl")
    frame = report.load_samples(tmp_path)
    assert inference_report.phase_rows(ReportContext(frame)) is None
    assert report.invalid_note(frame) is None
    assert inference_report.write_inference_tables(tmp_path, ReportContext(frame)) == ([], "", "")
    assert cli.main(["report", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Phase breakdown" not in out and "phases.csv" not in err
    assert not any(state in out for state in ("VALID", "INVALID", "scaled-down"))
    assert not (tmp_path / "phases.csv").exists()
    assert report.scaled_down_note(frame) is None
    assert "INVALID" not in (tmp_path / "report.csv").read_text(encoding="utf-8")
