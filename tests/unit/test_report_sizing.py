"""The report's CHR and NUMA columns and chr.png (platbench/report/sizing_columns.py), over a campaign whose cells carry
the sizing labels cells_to_run gives them (plugins/plugin_utils/cells/sizing.py)."""

from __future__ import annotations

import csv

from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from test_report import sample as report_sample

from platbench import report
from platbench.report import figures as report_figures
from platbench.report import sizing_columns as report_sizing
from platbench.report.context import ReportContext

USABLE = 16


def sample(platform, value, repeat, scaleup, cpu_config="pin", requested=None, numa_nodes=1):
    """A throughput sample (test_report.py's) with the sizing labels cells_to_run gives a cell on a 16-core host."""
    sizing = {
        "host": "h1",
        "chr": round(scaleup / USABLE, 3),
        "numa_nodes": numa_nodes if cpu_config == "pin" else None,
    }
    if requested:
        sizing["scaleup_requested"] = requested
    return report_sample(platform, "throughput", value, repeat, scaleup=scaleup, cpu_config=cpu_config, **sizing)


def campaign(tmp_path, scaleups=((4, None, 1), (8, "half", 1), (16, "all", 2))):
    samples = []
    for scaleup, requested, nodes in scaleups:
        for repeat in range(2):
            samples.append(sample("bm", 10.0 * scaleup, repeat, scaleup, requested=requested, numa_nodes=nodes))
            # cn loses more the more of the host it takes
            samples.append(sample("cn", 10.0 * scaleup * (1 - scaleup / 40), repeat, scaleup, "pin", requested, nodes))
    append_samples(tmp_path / "samples.jsonl", samples)
    return tmp_path


def test_several_chrs_and_nodes_are_columns_of_the_main_table(tmp_path):
    frame = report.load_samples(campaign(tmp_path))
    assert report_sizing.sizing_keys(frame) == ["scaleup_requested", "chr", "numa_nodes"]
    rows, keys, _ = report.summarize(frame, ["throughput"], always=report_sizing.sizing_keys(frame))
    assert {"chr", "numa_nodes", "scaleup_requested"} <= set(keys)
    cn = {row["chr"]: row for row in rows if row["platform"] == "cn"}
    assert sorted(cn) == [0.25, 0.5, 1.0]
    assert cn[1.0]["numa_nodes"] == 2 and cn[1.0]["scaleup_requested"] == "all"
    assert cn[0.25]["throughput ratio to bm"] == 1 - 4 / 40


def test_several_chrs_within_one_node_show_the_one_node_beside_them(tmp_path):
    frame = report.load_samples(campaign(tmp_path, scaleups=((4, None, 1), (16, "all", 1))))
    assert report_sizing.sizing_keys(frame) == ["scaleup_requested", "chr", "numa_nodes"]
    rows, _, _ = report.summarize(frame, ["throughput"], always=report_sizing.sizing_keys(frame))
    assert {(row["chr"], row["numa_nodes"]) for row in rows} == {(0.25, 1), (1.0, 1)}


def test_several_node_counts_show_without_several_chrs(tmp_path):
    frame = report.load_samples(campaign(tmp_path, scaleups=((8, None, 1), (8, "half", 2))))
    assert report_sizing.sizing_keys(frame) == ["scaleup_requested", "numa_nodes"]


def test_one_chr_adds_no_column(tmp_path):
    frame = report.load_samples(campaign(tmp_path, scaleups=((4, None, 1),)))
    assert report_sizing.sizing_keys(frame) == []


def test_chr_series_are_per_platform_and_cpu_config_without_bm(tmp_path):
    frame = report.load_samples(campaign(tmp_path))
    rows, _, _ = report.summarize(frame, ["throughput"], always=report_sizing.sizing_keys(frame))
    series = report_sizing.chr_series(ReportContext(frame), rows, "throughput")
    assert list(series) == ["cn pin"]
    assert [chr_ for chr_, _, _ in series["cn pin"]] == [0.25, 0.5, 1.0]
    assert [round(ratio, 3) for _, ratio, _ in series["cn pin"]] == [0.9, 0.8, 0.6]


def test_a_varying_knob_splits_the_chr_lines_so_that_none_joins_unlike_cells(tmp_path):
    samples = []
    for scaleup, idle, cn_share in ((8, "any", 0.95), (16, "any", 0.9), (16, "none", 0.7)):
        for repeat in range(2):
            for platform, value in (("bm", 10.0 * scaleup), ("cn", 10.0 * scaleup * cn_share)):
                sampled = sample(platform, value + repeat, repeat, scaleup)
                sampled["labels"]["idle_cores"] = idle
                samples.append(sampled)
    append_samples(tmp_path / "samples.jsonl", samples)
    frame = report.load_samples(tmp_path)
    rows, keys, _ = report.summarize(frame, ["throughput"], always=[*report_sizing.sizing_keys(frame), "idle_cores"])
    series = report_sizing.chr_series(ReportContext(frame), rows, "throughput", keys=keys)
    assert {name: [chr_ for chr_, _, _ in points] for name, points in series.items()} == {
        "cn pin, idle_cores=any": [0.5, 1.0],
        "cn pin, idle_cores=none": [1.0],
    }
    assert round(series["cn pin, idle_cores=none"][0][1], 2) == 0.7


def test_the_report_writes_chr_png_and_a_chr_column_where_a_campaign_has_several(tmp_path):
    results = campaign(tmp_path)
    assert report.main([str(results)]) == 0
    with open(results / "report.csv", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    assert "chr" in header and "numa_nodes" in header
    assert (results / "chr.png").stat().st_size > 0
    page = (results / "report.html").read_text(encoding="utf-8")
    assert "throughput normalised to bm against CHR" in page and "<th>chr</th>" in page


def test_no_chr_png_for_a_campaign_of_one_chr(tmp_path):
    results = campaign(tmp_path, scaleups=((4, None, 1),))
    assert report.main([str(results)]) == 0
    assert not (results / "chr.png").exists()
    assert report_sizing.write_chr_chart(ReportContext(None), results / "chr.png", *_rows(results)) == ([], None)
    assert "against CHR" not in (results / "report.html").read_text(encoding="utf-8")


def _rows(results):
    frame = report.load_samples(results)
    rows, keys, _ = report.summarize(frame, ["throughput"], always=report_sizing.sizing_keys(frame))
    return rows, keys, ["throughput"]


def test_the_scale_up_figure_draws_one_line_per_platform_across_the_chrs(tmp_path):
    frame = report.load_samples(campaign(tmp_path))
    rows, keys, units = report.summarize(frame, ["throughput"], always=report_sizing.sizing_keys(frame))
    figure = report_figures.scaleup_figure(ReportContext(frame), rows, keys, "throughput", units["throughput"])
    _, labels = figure.axes[0].get_legend_handles_labels()
    assert labels == ["bm/pin/cpu", "cn/pin/cpu"]
    assert [len(line.get_xdata()) for line in figure.axes[0].get_lines()[:2]] == [3, 3]
