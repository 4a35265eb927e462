import csv
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples

from platbench import cli, report
from platbench.report.context import ReportContext
from tests import skips

REPO = Path(__file__).resolve().parents[2]


def after_answer(text):
    """The report's output after its answer block (the first lines, up to a blank line; platbench/answer.py)."""
    if text.startswith(("Answer:", "**Answer:")):
        return text.split("\n\n", 2)[-1] if text.startswith("**") else text.split("\n\n", 1)[1]
    return text


def sample(platform, metric, value, repeat, scaleup=2, cpu_config="pin", unit=None, **params):
    scenario = f"{platform}/{scaleup}/{cpu_config}/cpu"
    variant = ",".join(f"{key}={value}" for key, value in params.items())
    labels = {
        "experiment": "smoke",
        "workload": "cnn_train",
        "framework": "tensorflow",
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": cpu_config,
        "processor": "cpu",
        "mode": "single",
        "repeat": repeat,
        "scenario": scenario,
        "campaign": "smoke-1",
        "cell": "|".join(part for part in (scenario, variant, f"r{repeat}") if part),
        **params,
    }
    units = {"throughput": "images/sec", "elapsed": "sec", "failed": "cell"}
    return {
        "metric": metric,
        "value": value,
        "unit": unit or units[metric],
        "timestamp": 1.0 + repeat,
        "labels": labels,
        "metadata": {"error": "boom"} if metric == "failed" else {},
    }


def cell(platform, repeat, throughput, elapsed, **labels):
    return [
        sample(platform, "throughput", throughput, repeat, **labels),
        sample(platform, "elapsed", elapsed, repeat, **labels),
    ]


@pytest.fixture
def campaign(tmp_path):
    samples = [
        *cell("cn", 0, 39.0, 11.0),
        *cell("bm", 0, 40.0, 10.0),
        *cell("bm", 1, 42.0, 11.0),
        *cell("bm", 2, 44.0, 12.0),
        *cell("cn", 1, 42.0, 13.0),
        sample("cn", "failed", 1, 2),
        *cell("vm", 0, 21.0, 20.0, scaleup=4),  # no bm at scale-up 4
        *cell("vmcn", 0, 20.0, 22.0),
    ]
    append_samples(tmp_path / "samples.jsonl", samples)
    return tmp_path


def summary(results_dir, metrics=("throughput", "elapsed")):
    frame = report.load_samples(results_dir)
    rows, keys, units = report.summarize(frame, list(metrics))
    return {(row["platform"], row["scaleup"]): row for row in rows}, rows, keys, units


def test_mean_sample_std_and_ratio():
    assert report.mean([40.0, 42.0, 44.0]) == 42.0
    assert report.sample_std([40.0, 42.0, 44.0]) == 2.0  # ddof=1, not 1.633 (ddof=0)
    assert report.sample_std([42.0]) is None
    assert report.mean([]) is None
    assert report.ratio(40.5, 42.0) == pytest.approx(0.9642857)
    assert report.ratio(1.0, None) is None
    assert report.ratio(1.0, 0.0) is None
    assert report.ratio(None, 2.0) is None
    assert report.ratio(1.0, float("nan")) is None


def test_rows_have_exact_statistics_and_ratios_to_bm(campaign):
    by_scenario, rows, keys, units = summary(campaign)
    assert keys == ["platform", "scaleup", "cpu_config", "processor"]
    assert units == {"throughput": "images/sec", "elapsed": "sec"}
    bm, cn = by_scenario[("bm", 2)], by_scenario[("cn", 2)]
    assert (bm["n"], bm["failed"], bm["throughput mean"], bm["throughput std"]) == (3, 0, 42.0, 2.0)
    assert (bm["elapsed mean"], bm["elapsed std"], bm["throughput ratio to bm"]) == (11.0, 1.0, 1.0)
    assert (cn["n"], cn["failed"], cn["throughput mean"]) == (2, 1, 40.5)
    assert cn["throughput std"] == pytest.approx(math.sqrt(4.5))
    assert cn["throughput ratio to bm"] == pytest.approx(40.5 / 42.0)
    assert cn["elapsed ratio to bm"] == pytest.approx(12.0 / 11.0)


def test_missing_bm_gives_no_ratio_and_single_repeat_no_std(campaign):
    by_scenario, *_ = summary(campaign)
    vm = by_scenario[("vm", 4)]
    assert vm["throughput ratio to bm"] is None and vm["elapsed ratio to bm"] is None
    assert vm["n"] == 1 and vm["throughput std"] is None


def test_bm_rows_come_first_then_known_platform_order(campaign):
    _, rows, *_ = summary(campaign)
    assert [(row["platform"], row["scaleup"]) for row in rows] == [("bm", 2), ("cn", 2), ("vm", 4), ("vmcn", 2)]


def test_scaleup_sorts_by_number():
    rows, _, _ = report.summarize(
        pd.DataFrame(
            [
                {
                    "metric": "throughput",
                    "value": 1.0,
                    "unit": "images/sec",
                    "platform": "bm",
                    "scaleup": scaleup,
                    "cpu_config": "pin",
                    "processor": "cpu",
                    "cell": f"bm/{scaleup}/pin/cpu|r0",
                }
                for scaleup in (16, 2, 4)
            ]
        ),
        ["throughput"],
    )
    assert [row["scaleup"] for row in rows] == [2, 4, 16]


def test_varying_params_split_rows_and_match_their_own_bm(tmp_path):
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *cell("bm", 0, 100.0, 5.0, batch_size=32),
            *cell("bm", 0, 200.0, 4.0, batch_size=512),
            *cell("cn", 0, 90.0, 5.5, batch_size=32),
            *cell("cn", 0, 100.0, 8.0, batch_size=512),
        ],
    )
    frame = report.load_samples(tmp_path)
    rows, keys, _ = report.summarize(frame, ["throughput"])
    assert keys == ["platform", "scaleup", "cpu_config", "processor", "batch_size"]
    assert [(row["platform"], row["batch_size"], row["throughput ratio to bm"]) for row in rows] == [
        ("bm", 32, 1.0),
        ("bm", 512, 1.0),
        ("cn", 32, 0.9),
        ("cn", 512, 0.5),
    ]


def test_a_param_only_some_cells_carry_splits_their_rows_instead_of_pooling_two_set_ups(tmp_path):
    # A campaign resumed with params.auto_seconds set where its first rounds left it to the workload's default: one
    # row of both would mix two set-ups (a 10 s and a 20 s timed part) under one mean.
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *cell("bm", 0, 100.0, 15.0),
            *cell("cn", 0, 105.0, 15.0),
            *cell("bm", 1, 120.0, 25.0, auto_seconds=20),
            *cell("cn", 1, 132.0, 25.0, auto_seconds=20),
        ],
    )
    rows, keys, _ = report.summarize(report.load_samples(tmp_path), ["throughput"])
    assert keys[-1] == "auto_seconds"
    assert [(row["platform"], row["auto_seconds"], row["n"], row["throughput ratio to bm"]) for row in rows] == [
        ("bm", 20, 1, 1.0),
        ("bm", None, 1, 1.0),
        ("cn", 20, 1, pytest.approx(1.1)),
        ("cn", None, 1, pytest.approx(1.05)),
    ]


def test_table_shows_units_mean_std_ratio_and_na(campaign):
    by_scenario, rows, keys, units = summary(campaign)
    header, lines = report.display_table(rows, keys, ["throughput", "elapsed"], units)
    assert header == [
        "platform",
        "scaleup",
        "cpu_config",
        "processor",
        "n",
        "failed",
        "throughput (images/sec)",
        "cv",
        "throughput / bm",
        "elapsed (sec)",
        "cv",
        "elapsed / bm",
        "validity",
    ]
    # Decimals follow the mean's size, the spread takes the mean's decimals: no exponents.
    # cv = std / mean; "~": the gap to bm is inside its 95% confidence interval.
    # validity: a CV above 5% asks for the repeats that bring the mean's 95% interval within ±5% (16 at 9.1%).
    assert lines[0] == [
        "bm",
        "2",
        "pin",
        "cpu",
        "3",
        "0",
        "42.0 ± 2.0",
        "4.8%",
        "1.000",
        "11.0 ± 1.0",
        "9.1%",
        "1.000",
        "elapsed CV 9.1% > 5%: raise repeats to 16",
    ]
    assert lines[1] == [
        "cn",
        "2",
        "pin",
        "cpu",
        "2",
        "1",
        "40.5 ± 2.1",
        "5.2%",
        "0.964 ~",
        "12.0 ± 1.4",
        "11.8%",
        "1.091 ~",
        "throughput CV 5.2% > 5%: raise repeats to 7; elapsed CV 11.8% > 5%: raise repeats to 24",
    ]
    assert lines[2] == ["vm", "4", "pin", "cpu", "1", "0", "21.0", "n/a", "n/a", "20.0", "n/a", "n/a", ""]


def test_cli_prints_the_table_and_writes_csv_and_markdown(campaign, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("Answer: throughput, each platform against bm (95% interval, unpaired")
    table = after_answer(out.out).splitlines()
    assert table[0].split()[:4] == ["platform", "scaleup", "cpu_config", "processor"]
    assert table[2].startswith("bm ")
    assert "wrote report.csv, report.md" in out.err

    with open(campaign / "report.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["platform"] for row in rows] == ["bm", "cn", "vm", "vmcn"]
    assert float(rows[1]["throughput mean (images/sec)"]) == 40.5
    assert float(rows[1]["throughput ratio to bm"]) == pytest.approx(40.5 / 42.0)
    assert rows[2]["throughput ratio to bm"] == ""
    markdown = after_answer((campaign / "report.md").read_text()).splitlines()
    assert markdown[0].startswith("| platform | scaleup |") and markdown[1].startswith("| --- |")


def test_csv_and_markdown_formats_and_metric_choice(campaign, capsys):
    assert report.main([str(campaign), "--format", "csv", "--metric", "elapsed"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "platform,scaleup,cpu_config,processor,n,failed,"
        "elapsed mean (sec),elapsed std (sec),elapsed cv,elapsed ratio to bm,"
        "elapsed within noise of bm (95% CI),validity"
    )
    assert lines[1].endswith(",elapsed CV 9.1% > 5%: raise repeats to 16")
    assert report.main([str(campaign), "--format", "markdown"]) == 0
    assert after_answer(capsys.readouterr().out).startswith("| platform |")


def test_unknown_metric_lists_the_available_ones(campaign, capsys):
    assert report.main([str(campaign), "--metric", "latency"]) == 2
    assert "metric(s) latency not in the samples; available: throughput, elapsed" in capsys.readouterr().err


def test_missing_dir_and_missing_samples_exit_2_with_a_message(tmp_path, capsys):
    assert report.main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert report.main([str(tmp_path)]) == 2
    assert "it is empty); expected a campaign's directory" in capsys.readouterr().err
    (tmp_path / "samples.jsonl").write_text('{"metric": "thr')  # only a cut-short line
    assert report.main([str(tmp_path)]) == 2
    assert "no samples in" in capsys.readouterr().err


def test_lines_that_are_not_samples_are_named_with_their_numbers_and_skipped(tmp_path, capsys):
    append_samples(tmp_path / "samples.jsonl", [sample("bm", "throughput", 10.0, 1)])
    with (tmp_path / "samples.jsonl").open("a", encoding="utf-8") as stream:
        stream.write('{"metric": "thr\n[1, 2]\n{"value": 3}\n')
    append_samples(tmp_path / "samples.jsonl", [sample("cn", "throughput", 9.0, 1)])
    assert report.main([str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "line 2: not JSON (Unterminated string" in captured.err
    assert "line 3: a JSON list, not an object; skipped" in captured.err
    assert "line 4: an object without metric; skipped" in captured.err
    assert [line.split()[0] for line in after_answer(captured.out).splitlines()[2:4]] == ["bm", "cn"]
    assert (tmp_path / "report.csv").is_file()


def test_all_cells_failed_still_reports_the_failures(tmp_path, capsys):
    append_samples(tmp_path / "samples.jsonl", [sample("bm", "failed", 1, 0), sample("cn", "failed", 1, 0)])
    assert report.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["platform", "scaleup", "cpu_config", "processor", "n", "failed"]
    assert lines[2].split() == ["bm", "2", "pin", "cpu", "0", "1"]


def test_chart_is_a_png_normalized_to_bm(campaign, capsys):
    skips.require(modules=["matplotlib"])
    assert report.main([str(campaign)]) == 0
    assert "report.png" in capsys.readouterr().err
    assert (campaign / "report.png").read_bytes().startswith(b"\x89PNG")


def test_chart_is_skipped_with_a_note_without_matplotlib(campaign, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert report.main([str(campaign)]) == 0
    assert "note: report.png skipped: matplotlib is not installed" in capsys.readouterr().err
    assert not (campaign / "report.png").exists()
    assert (campaign / "report.csv").exists()


def test_chart_is_skipped_without_any_bm_baseline(tmp_path):
    skips.require(modules=["matplotlib"])
    rows = [{"platform": "cn", "scaleup": 1, "throughput mean": 1.0, "throughput ratio to bm": None}]
    note = report.write_chart(
        ReportContext(None), tmp_path / "report.png", rows, ["platform", "scaleup"], "throughput", "images/sec"
    )
    assert note == "report.png skipped: no bm baseline to normalize throughput to"
    assert not (tmp_path / "report.png").exists()


def on(accelerator, samples):
    """``samples`` as measured in a guest with ``accelerator`` (kvm or tcg) in their metadata."""
    return [{**one, "metadata": {**one["metadata"], "accelerator": accelerator}} for one in samples]


@pytest.fixture
def guests(tmp_path):
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *cell("bm", 0, 40.0, 10.0),
            *cell("bm", 1, 44.0, 12.0),
            *cell("cn", 0, 41.0, 11.0),
            *on("kvm", cell("vm", 0, 38.0, 11.5)),
            *on("tcg", cell("vmcn", 0, 2.0, 220.0)),
        ],
    )
    return tmp_path


def test_accelerator_is_a_key_column_and_kvm_rows_get_their_ratio_to_bm(guests):
    frame = report.load_samples(guests)
    assert set(frame["accelerator"].dropna()) == {"kvm", "tcg"}
    assert frame.loc[frame["platform"] == "bm", "accelerator"].isna().all()
    rows, keys, units = report.summarize(frame, ["throughput", "elapsed"])
    assert keys == ["platform", "accelerator", "scaleup", "cpu_config", "processor"]
    by_platform = {row["platform"]: row for row in rows}
    assert by_platform["vm"]["throughput ratio to bm"] == pytest.approx(38.0 / 42.0)
    assert by_platform["vm"]["elapsed ratio to bm"] == pytest.approx(11.5 / 11.0)
    assert by_platform["vmcn"]["throughput ratio to bm"] is None
    assert by_platform["vmcn"]["elapsed ratio to bm"] is None
    header, lines = report.display_table(rows, keys, ["throughput"], units)
    assert header[:3] == ["platform", "accelerator", "scaleup"] and header[-1] == "validity"
    # bm's three repeats (40, 42, 44 images/sec; 10, 11, 12 s) are the only ones: no other row has a CV to mark.
    assert [line[-1] for line in lines][1:] == ["", "", ""] and lines[0][-1].startswith("throughput CV ")
    assert [line[:2] + line[-2:-1] for line in lines] == [
        ["bm", "-", "1.000"],
        ["cn", "-", "0.976"],
        ["vm", "kvm", "0.905"],
        ["vmcn", "tcg", "n/a"],
    ]


def test_tcg_rows_are_left_out_of_the_ratios_with_a_note(guests, capsys):
    assert report.main([str(guests)]) == 0
    out = after_answer(capsys.readouterr().out).splitlines()[:-2]  # without the closing "report: .../report.html"
    assert out[0].split()[:3] == ["platform", "accelerator", "scaleup"]
    assert out[5].split()[:2] == ["vmcn", "tcg"] and out[5].split()[-1] == "n/a"
    assert out[-1] == report.EMULATED_NOTE
    assert out[-1].startswith("tcg: emulated guest (QEMU TCG, no KVM on this host): functional only")
    assert "left out of the ratios to bm (--include-emulated shows them)." in out[-1]
    assert (guests / "report.md").read_text().splitlines()[-1] == report.EMULATED_NOTE
    with open(guests / "report.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [(row["platform"], row["accelerator"]) for row in rows] == [
        ("bm", ""),
        ("cn", ""),
        ("vm", "kvm"),
        ("vmcn", "tcg"),
    ]
    assert rows[3]["throughput ratio to bm"] == ""
    assert float(rows[2]["throughput ratio to bm"]) == pytest.approx(38.0 / 42.0)
    assert report.main([str(guests), "--format", "csv"]) == 0
    assert "emulated" not in capsys.readouterr().out


def test_include_emulated_computes_the_tcg_ratio(guests, capsys):
    frame = report.load_samples(guests)
    rows, _, _ = report.summarize(frame, ["throughput"], include_emulated=True)
    assert {row["platform"]: row["throughput ratio to bm"] for row in rows}["vmcn"] == pytest.approx(2.0 / 42.0)
    assert report.main([str(guests), "--format", "csv", "--include-emulated"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("vmcn,tcg,")
    with open(guests / "report.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert float(rows[3]["throughput ratio to bm"]) == pytest.approx(2.0 / 42.0)
    assert report.main([str(guests), "--include-emulated"]) == 0
    out = after_answer(capsys.readouterr().out).splitlines()[:-2]  # without the closing "report: .../report.html"
    assert out[5].split()[-1] == f"{220.0 / 11.0:.3f}"  # elapsed / bm of the tcg row
    assert out[-1] == report.EMULATED_INCLUDED_NOTE


def test_no_accelerator_column_without_guest_samples(campaign, capsys):
    frame = report.load_samples(campaign)
    assert frame["accelerator"].isna().all()
    _, keys, _ = report.summarize(frame, ["throughput"])
    assert "accelerator" not in keys
    assert report.main([str(campaign)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "accelerator" not in out[0] and not any("tcg" in line for line in out)
    assert report.EMULATED_NOTE not in (campaign / "report.md").read_text()


def test_chart_skips_tcg_rows_unless_included(guests, tmp_path):
    frame = report.load_samples(guests)
    rows, keys, _ = report.summarize(frame, ["throughput"], include_emulated=True)
    # Even with a ratio, the tcg row is only drawn when asked.
    assert [row["platform"] for row in report.chart_rows(ReportContext(frame), rows, "throughput")] == [
        "bm",
        "cn",
        "vm",
    ]
    assert [
        row["platform"] for row in report.chart_rows(ReportContext(frame, include_emulated=True), rows, "throughput")
    ] == [
        "bm",
        "cn",
        "vm",
        "vmcn",
    ]
    skips.require(modules=["matplotlib"])
    only_tcg = [row for row in rows if row["platform"] == "vmcn"]
    chart = tmp_path / "chart.png"
    note = report.write_chart(ReportContext(frame), chart, only_tcg, keys, "throughput", "images/sec")
    assert note == "report.png skipped: no bm baseline to normalize throughput to"
    assert not chart.exists()
    included = ReportContext(frame, include_emulated=True)
    assert report.write_chart(included, chart, only_tcg, keys, "throughput", "images/sec") is None
    assert chart.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("module", [["platbench", "report"], ["platbench.report"]])
def test_runs_as_a_module(campaign, module):
    done = subprocess.run(
        [sys.executable, "-m", *module, str(campaign), "--format", "csv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("platform,scaleup,cpu_config,processor,n,failed,throughput mean")


def test_package_version_is_the_collection_version(capsys):
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"platbench {galaxy['version']}"


def test_coefficient_of_variation_and_the_confidence_interval_of_a_difference():
    assert report.coefficient_of_variation([40.0, 42.0, 44.0]) == pytest.approx(2.0 / 42.0)
    assert report.coefficient_of_variation([42.0]) is None
    # Welch: difference 6, standard error sqrt(4/3 + 4/3), 4 degrees of freedom, t(0.975, 4) = 2.776.
    low, high = report.difference_interval([46.0, 48.0, 50.0], [40.0, 42.0, 44.0])
    half = 2.7764451 * math.sqrt(8.0 / 3.0)
    assert (low, high) == (pytest.approx(6.0 - half), pytest.approx(6.0 + half))
    assert report.within_noise([46.0, 48.0, 50.0], [40.0, 42.0, 44.0]) is False  # 6 > 4.53
    assert report.within_noise([44.0, 46.0, 48.0], [40.0, 42.0, 44.0]) is True  # 4 < 4.53
    assert report.difference_interval([1.0], [1.0, 2.0]) is None
    assert report.difference_interval([1.0, 1.0], [2.0, 2.0]) is None  # no spread: no interval


def test_a_gap_outside_the_noise_is_not_marked(tmp_path):
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *cell("bm", 0, 100.0, 5.0),
            *cell("bm", 1, 101.0, 5.1),
            *cell("bm", 2, 99.0, 4.9),
            *cell("cn", 0, 90.0, 5.0),
            *cell("cn", 1, 91.0, 5.2),
            *cell("cn", 2, 89.0, 4.8),
        ],
    )
    rows, keys, units = report.summarize(report.load_samples(tmp_path), ["throughput", "elapsed"])
    cn = rows[1]
    assert cn["throughput within noise"] is False and cn["elapsed within noise"] is True
    _, lines = report.display_table(rows, keys, ["throughput", "elapsed"], units)
    assert lines[1][-4] == "0.900" and lines[1][-1] == "1.000 ~"
    assert report.noise_note(rows, ["throughput"]) is None
    assert report.noise_note(rows, ["elapsed"]).startswith("~: the ratio to bm's 95% confidence interval holds 1")


def on_host(samples, host):
    return [{**s, "labels": {**s["labels"], "host": host}} for s in samples]


def test_two_runner_hosts_get_rows_of_their_own_each_against_its_own_bm(tmp_path):
    append_samples(
        tmp_path / "samples.jsonl",
        [
            *on_host([*cell("bm", 0, 40.0, 10.0), *cell("bm", 1, 42.0, 10.0), *cell("cn", 0, 20.0, 10.0)], "runner-a"),
            *on_host([*cell("bm", 0, 10.0, 10.0), *cell("cn", 0, 5.0, 10.0)], "runner-b"),
        ],
    )
    frame = report.load_samples(tmp_path)
    rows, keys, _ = report.summarize(frame, ["throughput"])
    assert keys == ["platform", "scaleup", "cpu_config", "processor", "host"]
    assert [(row["platform"], row["host"], row["n"], row["throughput ratio to bm"]) for row in rows] == [
        ("bm", "runner-a", 2, 1.0),
        ("bm", "runner-b", 1, 1.0),
        ("cn", "runner-a", 1, pytest.approx(20.0 / 41.0)),
        ("cn", "runner-b", 1, pytest.approx(0.5)),
    ]


def test_one_runner_host_adds_no_host_column(tmp_path):
    append_samples(tmp_path / "samples.jsonl", on_host([*cell("bm", 0, 40.0, 10.0), *cell("cn", 0, 20.0, 10.0)], "a"))
    _, keys, _ = report.summarize(report.load_samples(tmp_path), ["throughput"])
    assert keys == ["platform", "scaleup", "cpu_config", "processor"]


GPU_SAMPLES = REPO / "tests" / "unit" / "data" / "handmade_gpu_samples.jsonl"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"


@pytest.fixture
def gpu_campaign(tmp_path):
    """A GPU campaign written by hand (no GPU here): small_models cells with roofline metrics on two devices,
    cnn_train cells with h2d_time."""
    (tmp_path / "samples.jsonl").write_bytes(GPU_SAMPLES.read_bytes())
    return tmp_path


def test_roofline_points_are_scenario_means_under_the_median_measured_roofs(gpu_campaign):
    points, roofs = report.roofline_points(report.load_samples(gpu_campaign))
    # Peaks measured by each cell: H100 5.0, 5.2, 5.1e13 FLOP/s and 3.0, 2.9, 3.1e12 B/s; the A100 by one cell.
    assert roofs == {H100: (5.1e13, 3.0e12), A100: (1.9e13, 1.4e12)}
    assert [(point["label"], point["device"]) for point in points] == [
        ("bm/4/pin/gpu/small_models", H100),
        ("cn/4/pin/gpu/small_models", H100),
        ("vm/4/pin/gpu/small_models", A100),
    ]
    assert (points[0]["intensity"], points[0]["achieved"]) == (pytest.approx(5.1), pytest.approx(2.1e12))
    assert (points[2]["intensity"], points[2]["achieved"]) == (8.0, 1.0e12)


def test_a_gpu_campaign_gets_the_roofline_figure_and_the_host_to_device_split(gpu_campaign, capsys):
    skips.require(modules=["matplotlib"])
    assert report.main([str(gpu_campaign)]) == 0
    out = capsys.readouterr()
    assert "wrote report.csv, report.md, h2d_split.csv" in out.err
    assert "report.png, roofline.png, report.html in" in out.err  # the figures and the page, drawn last
    assert (gpu_campaign / "roofline.png").read_bytes().startswith(b"\x89PNG")
    text = after_answer(out.out).split("\n\n")
    # The main table, the validity note (bm's repeats differ by over 5%), then the host-to-device split.
    assert text[1].startswith("validity: a row is marked when")
    assert text[2].splitlines()[0] == report.H2D_TITLE
    # bm: 2.0 s of 40 s and 3.0 s of 60 s (5% each); cn: 4.5 s of 45 s.
    assert [line.split() for line in text[2].splitlines()[1:]] == [
        "platform scaleup cpu_config processor n h2d_time (s) elapsed (s) h2d share of elapsed".split(),
        ["--------", "-------", "----------", "---------", "-", "------------", "-----------", "--------------------"],
        ["bm", "4", "pin", "gpu", "2", "2.50", "±", "0.71", "50.0", "±", "14.1", "5.0%"],
        ["cn", "4", "pin", "gpu", "1", "4.50", "45.0", "10.0%"],
    ]
    with open(gpu_campaign / "h2d_split.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [(row["platform"], float(row["h2d share of elapsed mean (ratio)"])) for row in rows] == [
        ("bm", pytest.approx(0.05)),
        ("cn", pytest.approx(0.10)),
    ]
    assert report.H2D_TITLE in (gpu_campaign / "report.md").read_text()
    # The main table keeps its columns: the split is a table of its own.
    assert text[0].splitlines()[0].split()[:6] == ["platform", "scaleup", "cpu_config", "processor", "workload", "n"]


def test_the_roofline_is_skipped_with_a_note_without_matplotlib(gpu_campaign, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert report.main([str(gpu_campaign)]) == 0
    assert "note: roofline.png skipped: matplotlib is not installed" in capsys.readouterr().err
    assert not (gpu_campaign / "roofline.png").exists() and (gpu_campaign / "h2d_split.csv").exists()


def test_a_cpu_campaign_gets_neither_roofline_nor_split(campaign, capsys):
    frame = report.load_samples(campaign)
    assert report.roofline_points(frame) == ([], {}) and report.h2d_split(ReportContext(frame)) is None
    assert report.main([str(campaign)]) == 0
    out = capsys.readouterr()
    assert report.H2D_TITLE not in out.out and "roofline" not in out.err
    assert not (campaign / "roofline.png").exists() and not (campaign / "h2d_split.csv").exists()


def test_the_gpu_device_comes_from_the_roofline_device_or_the_devices_used():
    assert report.gpu_device({"roofline_device": H100, "devices": [{"name": A100}]}) == H100
    assert report.gpu_device({"devices": [{"name": A100, "index": 0}]}) == A100
    assert report.gpu_device({"devices": []}) is None and report.gpu_device({}) is None
