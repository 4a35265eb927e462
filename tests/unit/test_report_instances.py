"""The report's tables of cells with several instances, on hand-made samples with known answers:

- shared, scenario x/1/pin/cpu, background alexnet 32, two repeats each: bm alone 10, 12 s and shared 12, 15 s
  (degradation 20 %, 25 %); cn alone 10, 12 and shared 11, 13.8 (10 %, 15 %);
- distributed, torch, two repeats each: bm bridge 100, 110 img/s (path 9 Gbit/s, 0.2 ms, MTU 1500), bm overlay
  80, 90 (8 Gbit/s, 0.3 ms, 1450); cn bridge 95, 105; cn overlay 70, 72. The path's figures differ by 0.1 a
  repeat (its MTU does not).
"""

import csv
import json

import pytest

from platbench import cli, report
from platbench.report import instances as instances_report
from platbench.report.context import ReportContext


def sample(metric, value, unit, **labels):
    return {"metric": metric, "value": value, "unit": unit, "labels": labels, "metadata": {}}


def cell_labels(platform, mode, repeat, **extra):
    scenario = f"{platform}/1/pin/cpu"
    return {
        "experiment": "x",
        "workload": "cnn_train",
        "platform": platform,
        "scaleup": 1,
        "cpu_config": "pin",
        "processor": "cpu",
        "mode": mode,
        "repeat": repeat,
        "scenario": scenario,
        "cell": f"{scenario}|{','.join(f'{k}={v}' for k, v in extra.items())}|r{repeat}",
        "campaign": "c",
        **extra,
    }


SHARED = {"bm": [(10.0, 12.0), (12.0, 15.0)], "cn": [(10.0, 11.0), (12.0, 13.8)]}
DISTRIBUTED = {
    ("bm", "bridge"): ([100.0, 110.0], 9.0, 0.2, 1500),
    ("bm", "overlay"): ([80.0, 90.0], 8.0, 0.3, 1450),
    ("cn", "bridge"): ([95.0, 105.0], 9.0, 0.2, 1500),
    ("cn", "overlay"): ([70.0, 72.0], 8.0, 0.3, 1450),
}


@pytest.fixture
def campaign(tmp_path):
    samples = []
    for platform, runs in SHARED.items():
        for repeat, (alone, shared) in enumerate(runs):
            labels = cell_labels(platform, "shared", repeat, background="cnn_train:model=alexnet,batch_size=32")
            role = {"instance_role": "foreground", "instance_index": 0}
            samples.append(sample("elapsed", alone, "s", **labels, **role, share="alone"))
            samples.append(sample("elapsed", shared, "s", **labels, **role, share="shared"))
            samples.append(sample("degradation", (shared - alone) / alone * 100, "%", **labels, **role))
    for (platform, path), (throughputs, gbps, rtt, mtu) in DISTRIBUTED.items():
        for repeat, value in enumerate(throughputs):
            labels = cell_labels(platform, "distributed", repeat, network=path)
            samples.append(sample("throughput", value, "images/sec", **labels, instance_role="chief", instance_index=0))
            samples += [
                sample("path_throughput", gbps + repeat / 10, "Gbit/s", **labels),
                sample("path_rtt", rtt + repeat / 10, "ms", **labels),
                sample("path_mtu", mtu, "bytes", **labels),
            ]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return tmp_path


def test_the_degradation_table_has_each_platforms_alone_shared_and_degradation(campaign):
    rows, keys = instances_report.degradation_rows(ReportContext(report.load_samples(campaign)))
    by_platform = {row["platform"]: row for row in rows}
    assert by_platform["bm"]["elapsed_alone mean"] == pytest.approx(11.0)
    assert by_platform["bm"]["elapsed_shared mean"] == pytest.approx(13.5)
    assert by_platform["bm"]["degradation mean"] == pytest.approx(22.5)
    assert by_platform["cn"]["degradation mean"] == pytest.approx(12.5) and by_platform["cn"]["n"] == 2
    assert "share" not in keys and "instance_role" not in keys


def test_distributed_throughput_is_normalised_to_bm_on_the_same_path_with_the_paths_figures(campaign):
    rows, keys = instances_report.distributed_rows(ReportContext(report.load_samples(campaign)))
    by_key = {(row["platform"], row["network"]): row for row in rows}
    assert by_key["cn", "bridge"]["throughput ratio to bm"] == pytest.approx(100 / 105)
    assert by_key["cn", "overlay"]["throughput ratio to bm"] == pytest.approx(71 / 85)
    assert by_key["bm", "overlay"]["overlay / bridge"] == pytest.approx(85 / 105)
    assert by_key["cn", "overlay"]["overlay / bridge"] == pytest.approx(71 / 100)
    assert by_key["bm", "bridge"]["overlay / bridge"] is None
    assert by_key["bm", "overlay"]["path_throughput mean"] == pytest.approx(8.05)
    assert by_key["bm", "overlay"]["path_mtu mean"] == 1450


def test_platbench_report_writes_and_prints_both_tables(campaign, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    printed = capsys.readouterr().out
    assert instances_report.DEGRADATION_TITLE in printed and instances_report.DISTRIBUTED_TITLE in printed
    with open(campaign / "distributed.csv", newline="") as stream:
        table = list(csv.DictReader(stream))
    overlay = next(row for row in table if (row["platform"], row["network"]) == ("cn", "overlay"))
    assert float(overlay["overlay / bridge"]) == pytest.approx(0.71) and overlay["path_mtu mean"] == "1450.0"
    with open(campaign / "degradation.csv", newline="") as stream:
        assert {row["platform"]: float(row["degradation mean"]) for row in csv.DictReader(stream)} == {
            "bm": pytest.approx(22.5),
            "cn": pytest.approx(12.5),
        }
    assert instances_report.DEGRADATION_TITLE in (campaign / "report.md").read_text()
