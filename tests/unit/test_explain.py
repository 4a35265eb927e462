"""platbench explain (platbench/explain/): the ladder planned for each platform, the campaign it runs (each rung beside
the rung below it in duet pairs, the top beside bm too), bad input refused before any cell, the attribution's
arithmetic and intervals on fixed data, the interaction check, and the report's waterfall of a ladder campaign. The
cells run for real in the lab test (tests/integration/test_explain_lab.py)."""

from __future__ import annotations

import argparse
import json
import math
import random
import re

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject, rungs, schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample
from scipy import stats

from platbench import cli
from platbench.explain import attribution, command, hosts, ladder
from platbench.report import ladder as report_ladder
from platbench.report.load import load_samples
from platbench.report.tables import summarize

CN_STEPS = {"cr": 0.99, "ns": 1.0, "sc": 0.98, "cn": 1.01}


def parsed(*argv):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def host_ready(monkeypatch):
    """The runner host as a test says it is: {label: why it cannot run} (every rung ready by default). No campaign
    may start here: refused input must stop before any cell."""
    state = {}
    monkeypatch.setattr(hosts, "unready", lambda labels, inventory: ("runner", dict(state)))

    def no_campaign(*_args, **_keywords):
        raise AssertionError("a unit test started a campaign")

    monkeypatch.setattr(command, "run_campaign", no_campaign)
    return state


# -- the ladder -------------------------------------------------------------------------------------------------------


def test_every_platform_with_a_ladder_climbs_from_bm_one_declared_step_at_a_time():
    for platform in ladder.STEPS:
        steps = ladder.chain(platform)
        assert steps[0].below == platforms.BASELINE and steps[-1].platform == platform
        for lower, upper in zip(steps, steps[1:], strict=False):
            assert upper.below == lower.platform
        assert all(step.mechanism and step.adds for step in steps)
    assert [step.platform for step in ladder.chain("cn")] == ["cr", "ns", "sc", "cn"]
    assert [step.platform for step in ladder.chain("gv")] == ["cr", "ns", "sc", "cn", "gv"]
    assert [step.platform for step in ladder.chain("lx")] == ["cr", "ns", "lx"]
    # Every platform a host builds has one, but the cloud's instances.
    assert set(ladder.STEPS) == set(platforms.BUILT) - {platforms.BASELINE} - set(platforms.REMOTE)


@pytest.mark.parametrize(
    "platform, message",
    [
        ("nova", "platform nova: no ladder \\(a cloud instance"),
        ("bm", "it is the baseline every rung is measured from"),
        ("xx", "platform 'xx': unknown; known: bm, cr"),
    ],
)
def test_a_platform_with_no_ladder_is_refused_naming_why(platform, message):
    with pytest.raises(ladder.LadderError, match=message):
        ladder.chain(platform)


def test_a_rung_the_host_cannot_build_is_left_out_and_the_step_above_adds_its_mechanism():
    steps, left_out = ladder.climb("cn", {"ns": "runc is not installed", "sc": "runc is not installed"})
    assert [(step.below, step.platform) for step in steps] == [("bm", "cr"), ("cr", "cn")]
    assert steps[1].mechanism == "namespaces + seccomp and capabilities + engine"
    assert left_out == [("ns", "runc is not installed"), ("sc", "runc is not installed")]
    with pytest.raises(ladder.LadderError, match="platform cn cannot run on this host: no engine"):
        ladder.climb("cn", {"cn": "no engine"})
    assert ladder.baselines(steps) == {"cr": "bm", "cn": ["cr", "bm"]}
    # A ladder of one step compares its top with bm once.
    assert ladder.baselines(ladder.chain("vm")) == {"vm": "bm"}


# -- the campaign -----------------------------------------------------------------------------------------------------


def test_the_campaign_pairs_each_rung_with_the_one_below_it_and_the_top_with_bm_every_round(host_ready):
    plan = command.prepare(parsed("cn"))
    cells = plan.cells
    assert plan.experiment["platforms"] == ["bm", "cr", "ns", "sc", "cn"] and plan.experiment["schedule"] == "duet"
    for repeat in range(plan.experiment["repeats"]):
        leads = [cell for cell in cells if cell["labels"]["repeat"] == repeat and cell["labels"].get("duet_role")]
        pairs = {}
        for cell in leads:
            pairs.setdefault(cell["labels"]["duet_pair"], []).append(cell["labels"])
        found = sorted(
            tuple(labels["platform"] for labels in sorted(members, key=lambda labels: labels["duet_role"]))
            for members in pairs.values()
        )
        # (lead, partner): each rung over the one below, cn over bm in a pair of its own.
        assert found == sorted([("cr", "bm"), ("ns", "cr"), ("sc", "ns"), ("cn", "sc"), ("cn", "bm")])
        for members in pairs.values():
            assert sorted(labels["duet_side"] for labels in members) == [0, 1]
            assert {labels["duet_side"] for labels in members if labels["duet_role"] == "lead"} == {repeat % 2}
        assert all(cell["labels"]["schedule"] == "duet" for cell in leads) and len(leads) == 10
    assert len({cell["id"] for cell in cells}) == len(cells)


def test_a_known_overhead_goes_into_its_rung_and_every_rung_above_it(host_ready):
    plan = command.prepare(parsed("cn", "--inject", "ns:discard=0.2"))
    assert "inject.discard=0.2" in plan.settings and "inject_into=[ns,sc,cn]" in plan.settings
    by_platform = {}
    for cell in plan.cells:
        by_platform.setdefault(cell["labels"]["platform"], set()).add(cell["labels"][inject.LABEL])
    assert by_platform == {
        "bm": {"none"},
        "cr": {"none"},
        "ns": {"discard=0.2"},
        "sc": {"discard=0.2"},
        "cn": {"discard=0.2"},
    }
    # The pairs stay the ladder's: ns (injected) beside cr, sc beside ns, both injected, cn beside bm.
    leads = [cell["labels"] for cell in plan.cells if cell["labels"].get("duet_role") == "lead"]
    assert len(leads) == 5 * plan.experiment["repeats"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (("magnum",), "platform magnum: no ladder"),
        (("bm",), "it is the baseline"),
        (("cn", "--workload", "bert"), "--workload bert: unknown; the ladder runs cnn_train"),
        (("cn", "--max-time", "soon"), "--max-time soon"),
        (("cn", "--precision", "2"), "--precision 2.0"),
        (("cn", "--inject", "ns:spin=0.2"), "give RUNG:discard=D"),
        (("cn", "--inject", "gv:discard=0.2"), "'gv' is not a rung above bm of this ladder"),
        (("cn", "--inject", "ns:discard=1.5"), "above 0 and below 1"),
        (("cn", "--set", "baselines.cn=bm"), "--set baselines.cn=bm: the ladder sets platforms, baselines"),
        (("cn", "--set", "workload_params.cnn_train.steps=0"), "steps"),
    ],
)
def test_bad_input_is_refused_before_any_cell_naming_what_was_wrong(host_ready, capsys, argv, message):
    assert command.main(parsed(*argv, "--results-dir", "/nonexistent")) == 2
    assert message in capsys.readouterr().err


def test_a_rung_the_host_cannot_build_is_named_and_the_rest_runs(host_ready, capsys):
    host_ready.update(ns="runc is not installed on this host: run site.yml", sc="runc is not installed")
    assert command.main(parsed("cn", "--plan")) == 0
    out = capsys.readouterr().out
    assert "left out: ns: runc is not installed on this host: run site.yml" in out
    assert "cr -> cn: + namespaces + seccomp and capabilities + engine" in out
    assert "--set 'platforms=[bm,cr,cn]'" in out
    host_ready["gv"] = "the docker engine has not registered runsc"
    assert command.main(parsed("gv", "--plan")) == 2
    assert "platform gv cannot run on this host: the docker engine has not registered runsc" in capsys.readouterr().err


# -- the attribution on fixed data ------------------------------------------------------------------------------------


def ladder_campaign(tmp_path, steps=None, direct=None, rounds=12, spread=0.01, seed=3, name="ladder"):
    """A duet campaign of cn's ladder whose steps' true ratios are ``steps`` (rung: ratio over the rung below) and
    whose direct pair reads ``direct`` (default: their product); each pair shares the host's drift of its moment, and
    each side's value has a log-normal noise of ``spread``."""
    steps = steps or CN_STEPS
    direct = math.prod(steps.values()) if direct is None else direct
    noise = random.Random(seed)
    level = {"bm": 1000.0}
    below = {"cr": "bm", "ns": "cr", "sc": "ns", "cn": "sc"}
    for rung in ("cr", "ns", "sc", "cn"):
        level[rung] = level[below[rung]] * steps[rung]
    pairs = [(rung, below[rung], level[rung] / level[below[rung]]) for rung in below] + [("cn", "bm", direct)]
    samples, clock = [], 0.0
    for repeat in range(rounds):
        side = repeat % 2
        for index, (lead, partner, ratio) in enumerate(pairs):
            drift = 1.0 + 0.15 * math.sin(clock / 50.0)  # the host's capacity, shared by both sides of a pair
            lead_id = f"{lead}/1/pin/cpu|r{repeat}" + ("|lead=bm" if index == len(pairs) - 1 else "")
            partner_id = f"{partner}/1/pin/cpu|r{repeat}|partner={lead}/1/pin/cpu"
            base = 1000.0 * drift
            for platform, value, own_side, cell, role in (
                (lead, base * ratio * math.exp(noise.gauss(0, spread)), side, lead_id, "lead"),
                (partner, base * math.exp(noise.gauss(0, spread)), 1 - side, partner_id, "partner"),
            ):
                sample = throughput_sample(
                    platform,
                    value,
                    repeat,
                    clock,
                    experiment="explain",
                    schedule="duet",
                    duet_pair=lead_id,
                    duet_side=own_side,
                    duet_role=role,
                )
                sample["labels"]["cell"] = cell
                samples.append(sample)
            clock += 17.0
    directory = tmp_path / name
    append_samples(directory / "samples.jsonl", samples)
    plan = {"plan": {"name": "explain", "baselines": {"cr": "bm", "ns": "cr", "sc": "ns", "cn": ["sc", "bm"]}}}
    (directory / "plan.json").write_text(json.dumps(plan))
    return directory


def found_in(directory):
    rows, _keys, _units = summarize(load_samples(directory), ["throughput"])
    return report_ladder.attribution_of(rows, report_ladder.plan_baselines(directory), "throughput")


def test_each_step_reads_its_own_ratio_and_the_product_agrees_with_the_direct_one(tmp_path):
    found = found_in(ladder_campaign(tmp_path))
    assert [step.platform for step, _ in found.steps] == ["cr", "ns", "sc", "cn"]
    assert [step.mechanism for step, _ in found.steps] == [
        "image root",
        "namespaces",
        "seccomp and capabilities",
        "engine",
    ]
    for step, estimate in found.steps:
        low, high = estimate.interval()
        # Paired within the pair, the drift (15%) cancels: each interval holds its true ratio and is about ±1%.
        assert low <= CN_STEPS[step.platform] <= high, (step.platform, low, high)
        assert estimate.half_width() < 0.015 and estimate.pairs == 12
    assert found.direct.interval()[0] <= math.prod(CN_STEPS.values()) <= found.direct.interval()[1]
    assert found.agrees() is True
    step, share = found.largest()
    assert step.platform == "sc" and 0.4 < share < 0.9  # 0.98, the largest of the four
    assert re.fullmatch(
        r"cn/bm 0\.97\d \[.*\] = image root 0\.99\d \[.*\] x namespaces 1\.00\d \[.*\] "
        r"x seccomp and capabilities 0\.97\d \[.*\] x engine 1\.01\d \[.*\]",
        attribution.line(found),
    ), attribution.line(found)
    assert "they agree within their intervals" in attribution.check_line(found)


def test_the_product_s_interval_adds_the_steps_variances_with_welch_satterthwaite_s_df():
    steps = [attribution.Estimate(math.log(0.99), 0.004, 11), attribution.Estimate(math.log(1.02), 0.003, 5)]
    made = attribution.product(steps)
    assert made.ratio == pytest.approx(0.99 * 1.02)
    assert made.error == pytest.approx(0.005)
    df = 0.005**4 / (0.004**4 / 11 + 0.003**4 / 5)
    assert made.df == pytest.approx(df)
    low, high = made.interval()
    half = stats.t.ppf(0.975, df) * 0.005
    assert (low, high) == pytest.approx((0.99 * 1.02 * math.exp(-half), 0.99 * 1.02 * math.exp(half)))
    quotient = attribution.quotient(made, made)
    assert quotient.ratio == pytest.approx(1.0) and quotient.error == pytest.approx(0.005 * math.sqrt(2))


def test_a_direct_ratio_the_steps_do_not_add_up_to_is_an_interaction(tmp_path):
    found = found_in(ladder_campaign(tmp_path, direct=0.90))
    assert found.agrees() is False and found.interaction.excludes(1.0)
    assert found.interaction.ratio == pytest.approx(0.90 / math.prod(CN_STEPS.values()), rel=0.02)
    assert "they disagree: the mechanisms interact" in attribution.check_line(found)


def test_a_known_overhead_on_one_rung_is_the_step_blamed(tmp_path):
    found = found_in(ladder_campaign(tmp_path, steps={**CN_STEPS, "ns": 0.8}))
    step, share = found.largest()
    assert step.platform == "ns" and share > 0.8
    ns = {step.platform: estimate for step, estimate in found.steps}["ns"]
    assert ns.interval()[0] <= 0.8 <= ns.interval()[1]


def test_the_judge_runs_until_every_step_and_the_direct_ratio_are_within_the_precision(tmp_path):
    directory = ladder_campaign(tmp_path, rounds=4, spread=0.02)
    loose, line = command.judge_for(0.2)(directory)
    assert loose.precise and loose.more == 0 and "every step within the precision" in line
    tight, line = command.judge_for(0.005)(directory)
    assert not tight.precise and tight.more >= command.MIN_PAIRS_ADDED and tight.rounds == 4
    assert "open: image root, namespaces, seccomp and capabilities, engine, direct" in line


def test_the_report_of_a_ladder_campaign_holds_the_attribution_and_its_waterfall(tmp_path, capsys):
    directory = ladder_campaign(tmp_path)
    assert cli.main(["report", str(directory)]) == 0
    text = capsys.readouterr().out
    assert "Why cn costs what it costs (throughput: each rung against the rung below it, 95% intervals):" in text
    assert "+ seccomp and capabilities" in text and "direct cn/bm" in text and "largest step: seccomp" in text
    assert "waterfall (# a step up, = a step down, | 1.0, * the direct ratio):" in text
    page = (directory / "report.html").read_text(encoding="utf-8")
    assert "Why cn costs what it costs" in page and "<svg" in page
    assert (directory / report_ladder.WATERFALL).is_file()
    # A campaign with no baselines has none of it.
    (directory / "plan.json").write_text(json.dumps({"plan": {"name": "smoke"}}))
    assert cli.main(["report", str(directory), "--no-figures"]) == 0
    assert "Why cn costs" not in capsys.readouterr().out


# -- the schedule's baselines and injections --------------------------------------------------------------------------


def test_baselines_are_checked_naming_the_field():
    planned = ["bm", "cr", "cn"]
    assert schedule.baselines_problems({"cr": "bm", "cn": ["cr", "bm"]}, planned) == []
    assert schedule.baselines_problems({"cn": "ns"}, planned) == [
        "baselines.cn: baseline 'ns' is not one of the experiment's platforms"
    ]
    assert "a rung is not compared with itself" in schedule.baselines_problems({"cn": "cn"}, planned)[0]
    assert "goes round in a circle" in schedule.baselines_problems({"cr": "cn", "cn": "cr"}, planned)[0]
    assert "bm is the baseline of every comparison" in schedule.baselines_problems({"bm": "cr"}, planned)[0]
    assert "must map rungs" in schedule.baselines_problems(["cr"], planned)[0]
    assert inject.into_problems(["cn"], {"discard": 0.1}, planned) == []
    assert "not one of the experiment's platforms" in inject.into_problems(["ns"], {"discard": 0.1}, planned)[0]
    assert "goes with one injection" in inject.into_problems(["cn"], [inject.NONE, {"discard": 0.1}], planned)[0]


# -- the paths: a rung of the data directory read through overlayfs ---------------------------------------------------


def test_a_rung_is_a_platform_or_a_platform_with_label_values():
    assert rungs.parse("cn") == ("cn", {})
    assert rungs.parse("cn[data_path:overlay,network:bridge]") == ("cn", {"data_path": "overlay", "network": "bridge"})
    assert rungs.text("cn", {"network": "bridge", "data_path": "overlay"}) == "cn[data_path:overlay,network:bridge]"
    assert rungs.matches({"platform": "cn", "data_path": "overlay"}, "cn", {"data_path": "overlay"})
    assert not rungs.matches({"platform": "cn", "data_path": "bind"}, "cn", {"data_path": "overlay"})
    assert rungs.matches({"platform": "cn", "data_path": "bind"}, "cn", {})
    with pytest.raises(rungs.RungError, match="not a rung"):
        rungs.parse("cn[data_path=overlay]")
    # The most particular key a cell matches says what it is compared with.
    baselines = {"cn": "sc", "cn[data_path:overlay]": ["cn[data_path:bind]", "bm"]}
    assert schedule.compared_with({"platform": "cn", "data_path": "overlay"}, baselines) == (
        ("cn", {"data_path": "bind"}),
        ("bm", {}),
    )
    assert schedule.compared_with({"platform": "cn", "data_path": "bind"}, baselines) == (("sc", {}),)
    assert schedule.compared_with({"platform": "bm", "data_path": "bind"}, baselines) == ()
    assert schedule.baselines_problems(baselines, ["bm", "sc", "cn"]) == []
    assert (
        "goes round in a circle"
        in schedule.baselines_problems(
            {"cn[data_path:bind]": "cn[data_path:overlay]", "cn[data_path:overlay]": "cn[data_path:bind]"}, ["bm", "cn"]
        )[0]
    )


def test_a_workload_that_reads_files_gets_the_data_path_rung_on_docker_s_platform_only(host_ready):
    plan = command.prepare(parsed("cn", "--workload", "inference_e2e"))
    assert plan.paths == ["data_path"]
    assert [step.rung for step in plan.steps] == [
        "cr",
        "ns",
        "sc",
        "cn[data_path:bind]",
        "cn[data_path:overlay]",
    ]
    assert plan.steps[-1].mechanism == "overlay data" and plan.steps[-1].below_rung == "cn[data_path:bind]"
    assert "data_path=[bind,overlay]" in plan.settings and "only_on.data_path=[cn]" in plan.settings
    assert plan.experiment["schedule"] == "rounds" and plan.experiment["workload"] == "inference_e2e"
    variants = {}
    for cell in plan.cells:
        variants.setdefault(cell["labels"]["platform"], set()).add(cell["labels"]["data_path"])
    assert variants == {"bm": {"bind"}, "cr": {"bind"}, "ns": {"bind"}, "sc": {"bind"}, "cn": {"bind", "overlay"}}
    # gVisor is a Docker platform too; Podman's engine reads its data through a bind mount only: no path rung.
    assert command.prepare(parsed("gv", "--workload", "inference_e2e")).paths == ["data_path"]
    assert command.prepare(parsed("pd", "--workload", "inference_e2e")).paths == []
    assert command.prepare(parsed("cn")).paths == []  # the tiny CNN's data is synthetic


def test_a_cell_reading_its_data_through_overlayfs_is_a_docker_volume_of_the_local_driver():
    from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cellplan
    from plan_options import assert_plan_matches_its_specs, cell_plan
    from test_kinds import OPTIONS, make_cell

    facts = {"cpus_allowed": [0, 1], "numa_nodes": {"0": [0, 1]}, "gpu_count": 0, "gpus": []}
    options = {**OPTIONS, "dataset": {"generator": "imagenet", "args": {"images": 8}}}

    def planned(platform, path):
        cell = make_cell(platform, data="real")
        cell["labels"]["data_path"] = path
        return cell_plan(cell, facts, options)

    overlay = planned("cn", "overlay")
    assert_plan_matches_its_specs(overlay)
    (mount,) = overlay["container"]["mounts"]
    data = overlay["data_dir"]
    lower = cellplan.overlay_lower_dir(OPTIONS["peak_cache_dir"])
    assert mount["volume_options"] == {"type": "overlay", "device": "overlay", "o": f"lowerdir={data}:{lower}"}
    assert mount["target"] == data and mount["type"] == "volume" and "source" not in mount
    # An anonymous volume: Docker refuses read_only on one (400 Bad Request). Lower layers only, no upperdir: the
    # kernel mounts the overlay read-only by itself.
    assert "read_only" not in mount and "upperdir" not in mount["volume_options"]["o"]
    assert mount["labels"]["org.platbench.campaign"] == OPTIONS["campaign"]
    assert not any(volume.startswith(f"{data}:") for volume in overlay["container"]["volumes"])
    assert "overlayfs" in overlay["runtime"]["data_through"]
    bound = planned("cn", "bind")
    assert bound["container"]["mounts"] == [] and bound["container"]["volumes"][0] == f"{data}:{data}:ro"
    with pytest.raises(Exception, match="bm reads its data through a bind mount only"):
        planned("bm", "overlay")
    with pytest.raises(Exception, match="podman engine reads its data through a bind mount only"):
        planned("pd", "overlay")


def test_only_on_and_data_path_are_checked_naming_the_field():
    from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
        ExperimentError,
        validate_experiment,
    )

    base = {
        "name": "x",
        "workload": "cnn_train",
        "platforms": ["bm", "cn"],
        "scaleup": [1],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
        "params": {"data": "real"},
        "dataset": {"generator": "imagenet", "args": {"images": 8}},
    }
    assert validate_experiment({**base, "data_path": ["bind", "overlay"], "only_on": {"data_path": ["cn"]}})
    for extra, message in (
        ({"data_path": ["copy"]}, "data_path: ['copy'] must list bind"),
        ({"data_path": ["bind", "overlay"], "only_on": {"data_path": ["gv"]}}, "only_on.data_path: ['gv'] must list"),
        ({"only_on": {"data_path": ["cn"]}}, "only_on.data_path: data_path is not a dimension"),
        ({"only_on": {"storage": ["cn"]}}, "only_on.storage: applies to data_path, guest_setup, network only"),
    ):
        with pytest.raises(ExperimentError, match=re.escape(message)):
            validate_experiment({**base, **extra})
    with pytest.raises(ExperimentError, match="data_path: says how the workload reads its data directory"):
        validate_experiment({**{k: v for k, v in base.items() if k != "dataset"}, "data_path": ["bind", "overlay"]})
    guests = {**base, "platforms": ["bm", "vm"], "guest_setup": ["floating", "pinned"]}
    assert validate_experiment(guests)
    for extra, message in (
        ({"guest_setup": ["pinned", "pinned"]}, "guest_setup: ['pinned', 'pinned'] must list set-ups"),
        ({"guest_setup": ["numa"]}, "guest_setup: ['numa'] must list set-ups"),
        ({"cpu_config": ["pin", "vnl"]}, "guest_setup: its guests run on the cell's own CPUs"),
        ({"cpu_config": ["vnl"]}, "guest_setup: its guests run on the cell's own CPUs"),
        ({"mode": "shared"}, "guest_setup: a cell of one guest only"),
    ):
        with pytest.raises(ExperimentError, match=re.escape(message)):
            validate_experiment({**guests, **extra})


def rounds_ladder(tmp_path, overlay=1.05, rounds=10, seed=5):
    """A rounds campaign of cn's ladder on files: the steps CN_STEPS, then cn's data through overlayfs at ``overlay``
    (an elapsed time: higher is slower), every cell of a round under the same drift."""
    noise = random.Random(seed)
    level = {"bm": 10.0, "cr": 10.0 / 0.99, "ns": 10.0 / 0.99, "sc": 10.0 / (0.99 * 0.98)}
    level["cn[data_path:bind]"] = level["sc"] / 1.01
    level["cn[data_path:overlay]"] = level["cn[data_path:bind]"] * overlay
    samples = []
    for repeat in range(rounds):
        drift = 1.0 + 0.1 * math.sin(repeat)
        for index, (rung, value) in enumerate(level.items()):
            platform, settings = rungs.parse(rung)
            sample = throughput_sample(
                platform,
                value * drift * math.exp(noise.gauss(0, 0.01)),
                repeat,
                60.0 * repeat + index,
                experiment="explain",
                schedule="rounds",
                data_path=settings.get("data_path", "bind"),
            )
            sample.update(metric="e2e_time", unit="s")
            sample["labels"]["cell"] = f"{rung}|r{repeat}"
            samples.append(sample)
    directory = tmp_path / "rounds"
    append_samples(directory / "samples.jsonl", samples)
    baselines = {
        "cr": "bm",
        "ns": "cr",
        "sc": "ns",
        "cn[data_path:bind]": "sc",
        "cn[data_path:overlay]": ["cn[data_path:bind]", "bm"],
    }
    (directory / "plan.json").write_text(json.dumps({"plan": {"name": "explain", "baselines": baselines}}))
    return directory


def test_the_data_path_rung_is_a_step_of_its_own_compared_round_by_round(tmp_path):
    directory = rounds_ladder(tmp_path)
    rows, _keys, _units = summarize(load_samples(directory), ["e2e_time"])
    found = report_ladder.attribution_of(rows, report_ladder.plan_baselines(directory), "e2e_time")
    assert [step.mechanism for step, _ in found.steps][-2:] == ["engine", "overlay data"]
    overlay = found.steps[-1][1]
    assert overlay.interval()[0] <= 1.05 <= overlay.interval()[1] and overlay.pairs == 10
    assert found.platform == "cn[data_path:overlay]" and found.largest()[0].mechanism == "overlay data"
    assert attribution.line(found).startswith("cn[data_path:overlay]/bm ")


def test_steps_compared_in_the_same_rounds_telescope_and_the_check_says_it_cannot_tell(tmp_path):
    directory = rounds_ladder(tmp_path)
    rows, _keys, _units = summarize(load_samples(directory), ["e2e_time"])
    found = report_ladder.attribution_of(rows, report_ladder.plan_baselines(directory), "e2e_time")
    assert found.telescoping and found.product == found.direct and found.agrees() is None
    made = attribution.product([estimate for _, estimate in found.steps])
    assert made.ratio == pytest.approx(found.direct.ratio)  # each round's steps multiply to its direct ratio
    assert "no interaction can be told" in attribution.check_line(found)
    # Duet pairs of their own do not telescope.
    assert not found_in(ladder_campaign(tmp_path)).telescoping


# -- a guest's set-ups as rungs (static here: no KVM on this project's hosts) -----------------------------------------


def test_a_guest_climbs_its_set_ups_pinning_huge_pages_and_virtio_one_rung_each(host_ready):
    plan = command.prepare(parsed("vmcn"))
    assert [step.rung for step in plan.steps] == [
        "vm[guest_setup:floating]",
        "vm[guest_setup:pinned]",
        "vm[guest_setup:hugepages]",
        "vm[guest_setup:virtio]",
        "vmcn",
    ]
    assert [step.mechanism for step in plan.steps] == [
        "guest",
        "vCPU pinning",
        "huge pages",
        "virtio devices",
        "engine in the guest",
    ]
    assert plan.steps[-1].below_rung == "vm[guest_setup:virtio]"
    assert "only_on.guest_setup=[vm]" in plan.settings
    setups = {}
    for cell in plan.cells:
        setups.setdefault(cell["labels"]["platform"], set()).add(cell["labels"].get("guest_setup"))
    # vm's four set-ups; vmcn at the lab's own (virtio); bm carries no such label.
    assert setups == {"bm": {None}, "vm": {"floating", "pinned", "hugepages", "virtio"}, "vmcn": {"virtio"}}
    # A guest cannot run beside another: the rungs run in rounds, and the plan says why, not that a baseline is missing.
    reasons = {entry["reason"] for entry in plan.experiment["schedule_fallbacks"]}
    assert all("guest platform" in reason for reason in reasons), reasons
    # Without KVM the guests are emulated: refused, saying why.
    host_ready["vm"] = "its guests run under QEMU's emulator (no usable KVM): the figures would measure TCG"
    assert command.main(parsed("vm", "--plan")) == 2


@pytest.mark.parametrize(
    "setup, floating, hugepages, bus, nic",
    [
        ("floating", True, False, "sata", "e1000"),
        ("pinned", False, False, "sata", "e1000"),
        ("hugepages", False, True, "sata", "e1000"),
        ("virtio", False, True, "virtio", "virtio-net-pci"),
    ],
)
def test_each_guest_set_up_is_in_the_domain_xml_it_renders(playbook, tmp_path, setup, floating, hugepages, bus, nic):
    import guest_domain
    from plan_options import plan_options

    facts = {
        "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
        "cpus_allowed": [0, 1, 2, 3],
        "numa_nodes": {"0": [0, 1, 2, 3]},
        "gpus": [],
        "gpu_count": 0,
        "vm_accelerator": "kvm",
        "qemu_binary": "/usr/bin/qemu-system-x86_64",
    }
    options = plan_options(host="kvm1", campaign="c1")
    domain, _ = guest_domain.render(playbook, tmp_path, "vm", "cpu", facts, options, labels={"guest_setup": setup})
    vcpu = domain.find("vcpu")
    pins = domain.findall("cputune/vcpupin")
    if floating:
        assert vcpu.get("cpuset") and not pins and domain.find("cputune/emulatorpin") is not None
    else:
        assert vcpu.get("cpuset") is None and len(pins) == 2
    assert (domain.find("memoryBacking/hugepages") is not None) == hugepages
    targets = [disk.find("target") for disk in domain.findall("devices/disk")]
    assert {target.get("bus") for target in targets} == {bus}
    assert targets[0].get("dev") == ("vda" if bus == "virtio" else "sda")
    arguments = [argument.get("value") for argument in domain.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    assert any(value.startswith(f"{nic},netdev=pbnet0") for value in arguments), arguments


def test_ranks_that_talk_get_the_network_path_as_rungs_and_kinds_without_several_instances_are_left_out(host_ready):
    plan = command.prepare(parsed("cn", "--workload", "distributed"))
    assert plan.paths == ["network"] and plan.experiment["mode"] == "distributed"
    assert [step.rung for step in plan.steps] == ["cn[network:loopback]", "cn[network:bridge]", "cn[network:overlay]"]
    assert [step.mechanism for step in plan.steps][1:] == ["bridge and veth", "VXLAN overlay"]
    assert plan.steps[0].mechanism == "image root + namespaces + seccomp and capabilities + engine"
    assert {label for label, _ in plan.left_out} == {"cr", "ns", "sc"}
    assert all("places no cell of several instances" in why for _, why in plan.left_out)
    networks = {}
    for cell in plan.cells:
        networks.setdefault(cell["labels"]["platform"], set()).add(cell["labels"]["network"])
    assert networks == {"bm": {"loopback"}, "cn": {"loopback", "bridge", "overlay"}}
    assert "network=[loopback,bridge,overlay]" in plan.settings and "only_on.network=[cn]" in plan.settings
