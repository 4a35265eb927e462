"""platbench calibrate's figures (platbench/calibration.py) on a campaign of known answers: the noise unpaired and
paired, the A/A pair that must see nothing and the A/B pair that must find its injected overhead, the minimum
detectable effect and the time to detect one against their formulas; its refusals; the report showing it."""

import json
import math

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample
from scipy import stats

from platbench import calibration, cli

DRIFT = [1.0, 0.88, 1.07, 0.94, 1.12, 0.9]
AA_NOISE = [1.004, 0.997, 1.002, 0.995, 1.006, 0.998]
AB_NOISE = [0.951, 0.946, 0.953, 0.949, 0.955, 0.947]


def sample(label, seed, value, repeat, stamp):
    variant = f"seed={seed},inject={label}"
    return throughput_sample(
        "bm", value, repeat, stamp, "calibrate", variant, schedule="rounds", inject=label, seed=seed
    )


def write_campaign(directory, injected):
    directory.mkdir()
    samples, stamp = [], 0.0
    for repeat, (drift, aa, ab) in enumerate(zip(DRIFT, AA_NOISE, AB_NOISE, strict=True)):
        cells = (("none", 1, 1.0), ("none", 2, aa), (injected, 1, ab), (injected, 2, ab * aa))
        for label, seed, factor in cells:
            samples.append(sample(label, seed, 1500.0 * drift * factor, repeat, stamp))
            stamp += 10.0  # a cell every 10 s
    append_samples(directory / "samples.jsonl", samples)
    (directory / "run.json").write_text(json.dumps({"campaign": directory.name}))
    return directory


@pytest.fixture
def campaign(tmp_path):
    return write_campaign(tmp_path / "calibrate-1", "discard=0.05")


def test_a_quota_calibration_reads_its_capped_cells(tmp_path):
    # --inject cpu_quota: B is capped at 1 - effect of its core, labelled so.
    directory = write_campaign(tmp_path / "calibrate-2", "cpu_quota=0.95")
    assert calibration.injected_label("cpu_quota", 0.05) == "cpu_quota=0.95"
    assert calibration.injected_setting("cpu_quota", 0.05) == "[none, {cpu_quota: 0.95}]"
    result = calibration.analyse(directory, 0.05, 600, "cpu_quota")
    assert result["inject"] == "cpu_quota=0.95" and result["ab"]["found"]
    assert "(a 5% overhead injected as cpu_quota=0.95, expected 0.950)" in calibration.describe(result)[3]
    with pytest.raises(ValueError, match="fewer than 2 rounds"):  # its B cells are not discard cells
        calibration.analyse(directory, 0.05, 600)


def test_the_known_answers_are_found(campaign):
    result = calibration.analyse(campaign, 0.05, 600)
    assert result["rounds"] == 6 and result["cell_seconds"] == pytest.approx(230.0 / 23)
    logs_aa = [math.log(value) for value in AA_NOISE]
    logs_ab = [math.log(value) for value in AB_NOISE]
    assert result["noise"]["paired_cv_aa"] == pytest.approx(stats.tstd(logs_aa))
    assert result["noise"]["paired_cv_ab"] == pytest.approx(stats.tstd(logs_ab))
    # the noise of both pairs, pooled: equal rounds, so the mean of their variances
    pooled = math.sqrt((stats.tvar(logs_aa) + stats.tvar(logs_ab)) / 2)
    assert result["noise"]["paired_cv"] == pytest.approx(pooled)
    assert "pooled from A/A 0.4% and A/B 0.4%" in calibration.describe(result)[1]
    assert result["noise"]["between_cells_cv"] == pytest.approx(stats.tstd(DRIFT) / (sum(DRIFT) / 6))
    assert result["noise"]["paired_cv"] < result["noise"]["between_cells_cv"] / 5  # pairing takes the drift out
    assert not result["aa"]["difference_seen"]
    assert result["ab"]["found"] and result["ab"]["interval"][1] < 1.0
    assert result["ab"]["estimate"] == pytest.approx(math.exp(sum(map(math.log, AB_NOISE)) / 6))


def test_the_detectable_effect_and_the_time_to_detect_follow_their_formulas(campaign):
    result = calibration.analyse(campaign, 0.05, 600)
    spread = result["noise"]["paired_cv"]
    pairs = math.floor(600 / 20.0)  # two cells of 10 s a round
    factor = stats.t.ppf(0.975, pairs - 1) + stats.t.ppf(0.8, pairs - 1)
    assert result["detectable_effect"] == pytest.approx(math.expm1(factor * spread / math.sqrt(pairs)))
    assert result["seconds_to_detect_effect"] == pytest.approx(calibration.rounds_to_detect(spread, 0.05) * 20.0)
    needed = calibration.rounds_to_detect(spread, 0.004)  # an effect the size of the noise: several rounds
    assert needed > 2
    assert calibration.detectable_effect(spread, needed) <= 0.004 < calibration.detectable_effect(spread, needed - 1)


def test_an_overhead_that_is_not_there_is_not_found(campaign, tmp_path):
    # The same campaign asked about a 20% overhead: its B cells are the 5% ones, so no discard=0.2 cells exist.
    with pytest.raises(ValueError, match="fewer than 2 rounds with all its cells measured"):
        calibration.analyse(campaign, 0.2, 600)


def test_the_lines_and_the_report_show_it(campaign, capsys):
    result = calibration.analyse(campaign, 0.05, 600)
    lines = calibration.describe(result)
    assert lines[0].startswith("calibration of this host (6 rounds of one pinned core, 10 s a cell)")
    assert "no difference, as it should" in lines[2]
    assert lines[3].startswith("  A/B (a 5% overhead injected as discard=0.05, expected 0.950): ")
    assert lines[3].endswith(": found")
    assert (
        result["inject"] == "discard=0.05"
        and calibration.injected_setting("discard", 0.05) == "[none, {discard: 0.05}]"
    )
    assert calibration.injected_setting("spin", 0.05) == "[none, {spin: 0.05}]"
    assert lines[4].startswith("  minimum detectable effect in 10 min of campaign")
    document = json.loads((campaign / "run.json").read_text())
    document[calibration.RUN_KEY] = result
    (campaign / "run.json").write_text(json.dumps(document))
    assert cli.main(["report", str(campaign)]) == 0
    assert "\n".join(lines) in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--effect", "0"], "--effect 0.0: give the overhead as a fraction above 0 and below 1"),
        (["--time", "soon"], "--time soon: give a duration such as 90s, 30m or 1h30m"),
        (["--rounds", "1"], "--rounds 1: a paired interval needs at least 2 rounds"),
        (["--inject", "memory"], "--inject memory: make the overhead with one of discard, spin, cpu_quota"),
    ],
)
def test_bad_options_are_refused(capsys, argv, message):
    assert cli.main(["calibrate", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("knob", ["discard", "spin", "cpu_quota"])
def test_the_calibration_run_sets_its_injection_dimension_through_run_set(knob):
    import argparse

    from platbench import calibrate, run

    parser = argparse.ArgumentParser()
    calibrate.add_arguments(parser)
    args = parser.parse_args(["--inject", knob, "--effect", "0.3", "--campaign", "c", "--cell-seconds", "3"])
    overrides = run.build_overrides(calibrate._run_args(args))
    assert overrides["inject"][0] == "none" and len(overrides["inject"]) == 2, overrides
    assert overrides["params"] == {"auto_seconds": 3}
