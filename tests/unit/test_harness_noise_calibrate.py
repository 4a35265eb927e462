"""``platbench calibrate``'s harness check (platbench/calibration.py): cn/bm duet pairs through platbench against the
same pairs launched directly. Pair lists in, the line and the warnings out: an agreeing harness passes quietly, one
that widens the pairs' spread or moves their ratio is warned about; a duet campaign's pairs are read as the report
compares them; run.json keeps the check and the report shows it."""

from __future__ import annotations

import json
import math

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample
from test_calibration import write_campaign

from platbench import calibration, cli

DRIFT = [1.00, 0.90, 1.08, 0.95, 1.04, 0.93]  # the host's capacity, pair by pair: both sides see it
DIRECT = [1.012, 1.006, 1.015, 1.009, 1.013, 1.007]  # cn/bm of the direct pairs: 1.010, spread 0.4%
SIDES = ["0", "1", "0", "1", "0", "1"]


def pairs_of(ratios, drift=DRIFT):
    return [(1000.0 * d * r, 1000.0 * d) for d, r in zip(drift, ratios, strict=True)]


def widened(ratios, factor):
    """``ratios`` spread ``factor`` times as wide around their geometric mean."""
    center = sum(math.log(r) for r in ratios) / len(ratios)
    return [math.exp(center + factor * (math.log(r) - center)) for r in ratios]


def test_a_harness_that_agrees_with_the_direct_pairs_is_not_warned_about():
    through = pairs_of([1.013, 1.005, 1.016, 1.008, 1.012, 1.008])
    result = calibration.harness_check(through, pairs_of(DIRECT), SIDES, SIDES)
    assert result["warnings"] == [] and result["ratio_inside_direct"]
    assert 0.67 < result["spread_ratio"] < 1.5
    lines = calibration.harness_lines(result)
    assert len(lines) == 1
    assert lines[0].startswith("harness: through platbench cn/bm 1.010 [")
    assert "; direct 1.010 [" in lines[0] and lines[0].endswith("ratio inside the direct interval")


def test_a_harness_that_widens_the_spread_is_warned_about():
    through = pairs_of(widened(DIRECT, 3.0))
    result = calibration.harness_check(through, pairs_of(DIRECT), SIDES, SIDES)
    assert result["spread_ratio"] == pytest.approx(3.0)
    assert len(result["warnings"]) == 1 and "widens the pairs' log spread x3.0" in result["warnings"][0]
    lines = calibration.harness_lines(result)
    assert "spread x3.0" in lines[0] and lines[1].startswith("warning: the harness widens the pairs' log spread x3.0")


def test_a_harness_that_moves_the_ratio_is_warned_about():
    through = pairs_of([ratio * 1.08 for ratio in DIRECT])  # 1.09, as the loud harness read
    result = calibration.harness_check(through, pairs_of(DIRECT), SIDES, SIDES)
    assert result["ratio_inside_direct"] is False and result["spread_ratio"] == pytest.approx(1.0)
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith("cn/bm through platbench 1.091 lies outside the direct pairs' interval [")
    assert "ratio outside the direct interval" in calibration.harness_lines(result)[0]


def duet_campaign(directory, ratios):
    samples = []
    for repeat, (drift, ratio) in enumerate(zip(DRIFT, ratios, strict=True)):
        lead = f"cn/1/pin/cpu|r{repeat}"
        pair = {"schedule": "duet", "duet_pair": lead}
        side = repeat % 2
        samples.append(throughput_sample("cn", 1000.0 * drift * ratio, repeat, repeat, **pair, duet_side=side))
        partner = throughput_sample("bm", 1000.0 * drift, repeat, repeat, **pair, duet_side=1 - side)
        partner["labels"]["cell"] = f"bm/1/pin/cpu|r{repeat}|partner=cn/1/pin/cpu"
        samples.append(partner)
    directory.mkdir()
    append_samples(directory / "samples.jsonl", samples)
    return directory


def test_a_duet_campaigns_pairs_are_read_as_the_report_compares_them(tmp_path):
    directory = duet_campaign(tmp_path / "harness", DIRECT)
    pairs, sides = calibration.campaign_pairs(directory)
    assert [cn / bm for cn, bm in pairs] == pytest.approx(DIRECT)
    assert sides == [0, 1, 0, 1, 0, 1]
    rounds = tmp_path / "rounds"
    rounds.mkdir()
    append_samples(
        rounds / "samples.jsonl",
        [throughput_sample(p, 1000.0, r, r, schedule="rounds") for r in range(3) for p in ("bm", "cn")],
    )
    with pytest.raises(ValueError, match="not by duet pair: run the smoke experiment's size answer"):
        calibration.campaign_pairs(rounds)


def test_run_json_keeps_the_check_and_the_report_shows_it(tmp_path, capsys):
    campaign = write_campaign(tmp_path / "calibrate-1", "discard=0.05")
    result = calibration.analyse(campaign, 0.05, 600)
    result[calibration.HARNESS_KEY] = calibration.harness_check(
        pairs_of(widened(DIRECT, 3.0)), pairs_of(DIRECT), SIDES, SIDES
    )
    document = json.loads((campaign / "run.json").read_text())
    document[calibration.RUN_KEY] = result
    (campaign / "run.json").write_text(json.dumps(document, allow_nan=False))
    lines = calibration.describe(json.loads((campaign / "run.json").read_text())[calibration.RUN_KEY])
    assert lines[-2].startswith("  harness: through platbench cn/bm ") and lines[-1].startswith("  warning: ")
    assert cli.main(["report", str(campaign)]) == 0
    assert "\n".join(lines) in capsys.readouterr().out


def test_a_check_that_could_not_be_made_says_why():
    entry = calibration.harness_not_checked("Docker holds no image platbench/workload:latest: build the lab")
    assert calibration.harness_lines(entry) == [
        "harness: not checked: Docker holds no image platbench/workload:latest: build the lab"
    ]


def test_a_single_harness_pair_is_refused(capsys):
    assert cli.main(["calibrate", "--harness-pairs", "1"]) == 2
    assert "--harness-pairs 1: give 0 to skip the check, or 2 or more pairs" in capsys.readouterr().err
