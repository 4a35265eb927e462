"""platbench reproduce: the findings files against their schema and the experiments, each relation's verdict on
fixed data, the refusals before any cell, and the page every finding is on."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from platbench import store
from platbench.reproduce import command, findings, lab, page, planning, relations

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = lab.Lab([lab.Host(f"h{index}", 256, 8, True, True, True, frozenset(lab.TOOLS)) for index in range(4)])
THIS_LAB = lab.Lab([lab.Host("localhost", 2, 0, False, False, False)])


# -- the files ---------------------------------------------------------------------------------------------------


def test_the_four_studies_have_a_findings_file():
    assert set(findings.available()) >= {"lin2018", "xu2017", "samani2022", "chopra2022"}


@pytest.mark.parametrize("name", findings.available())
def test_every_findings_file_validates_against_the_schema(name):
    study = findings.load(name)
    assert study.findings, name
    assert all(len(finding.claim) > 10 for finding in study.findings)
    for source in study.data["sources"]:
        assert source.endswith(".txt"), source


@pytest.mark.parametrize("name", findings.available())
def test_every_findings_experiment_scenarios_and_metric_exist(name):
    # Planned as on a lab that has everything: every finding, expressible here or not, names cells its experiment
    # plans and a metric its workload emits (planning.check_finding raises StudyError otherwise).
    study = findings.load(name)
    plan = planning.plan(study.findings, EVERYTHING, "/nonexistent")
    assert plan.not_expressible == []
    assert sorted(f.id for c in plan.campaigns for f in c.findings) == sorted(f.id for f in study.findings)


@pytest.mark.parametrize("name", findings.available())
def test_every_study_can_express_some_finding_on_a_two_core_cpu_host(name):
    plan = planning.plan(findings.load(name).findings, THIS_LAB, "/nonexistent")
    assert plan.campaigns, f"{name}: nothing is expressible on one 2-core CPU host"
    for finding, lacking in plan.not_expressible:
        assert lacking and finding.needs, finding.id


def _study_file(tmp_path, change):
    data = yaml.safe_load((REPO / "studies" / "chopra2022.yml").read_text())
    change(data)
    shutil.copy(REPO / "studies" / "findings.schema.yml", tmp_path / "findings.schema.yml")
    (tmp_path / "chopra2022.yml").write_text(yaml.safe_dump(data))
    return tmp_path


def test_a_finding_without_its_relation_is_refused_naming_it(tmp_path):
    directory = _study_file(tmp_path, lambda data: data["findings"][0].pop("relation"))
    with pytest.raises(findings.StudyError, match=r"findings\[0\] \(id [a-z0-9-]+\): 'relation' is a required"):
        findings.load("chopra2022", directory)


def test_a_within_relation_needs_its_tolerance(tmp_path):
    def change(data):
        data["findings"][0]["relation"] = {"type": "within", "of": "cn", "to": "bm", "bound": 1.0}

    with pytest.raises(findings.StudyError, match="tolerance"):
        findings.load("chopra2022", _study_file(tmp_path, change))


def test_an_id_given_twice_is_refused(tmp_path):
    def change(data):
        data["findings"][1]["id"] = data["findings"][0]["id"]

    with pytest.raises(findings.StudyError, match="the id is given twice"):
        findings.load("chopra2022", _study_file(tmp_path, change))


def test_an_unknown_study_or_finding_is_refused_naming_the_known_ones():
    with pytest.raises(findings.StudyError, match="no study 'lin2019': the studies are chopra2022"):
        findings.load("lin2019")
    with pytest.raises(findings.StudyError, match="no finding 'nope' in study chopra2022; its findings: "):
        findings.selected(findings.load("chopra2022"), ["nope"])


def _expressible(study_name):
    study = findings.load(study_name)
    plan = planning.plan(study.findings, THIS_LAB, "/nonexistent")
    return plan.campaigns[0].findings[0]


def test_a_metric_the_experiment_does_not_measure_is_refused():
    finding = _expressible("chopra2022")
    wrong = finding._replace(data={**finding.data, "metric": "hpl_gflops"})
    with pytest.raises(findings.StudyError, match=r"metric 'hpl_gflops' is not one that experiment chopra2022-"):
        planning.plan([wrong], THIS_LAB, "/nonexistent")


def test_a_scenario_the_experiment_does_not_plan_is_refused():
    finding = _expressible("chopra2022")
    relation = finding.relation._replace(of=findings.Selector.parse("cn/8/pin/cpu"))
    with pytest.raises(findings.StudyError, match=r"plans no such cell: cn/8/pin/cpu: no cell measured"):
        planning.plan([finding._replace(relation=relation)], THIS_LAB, "/nonexistent")


def test_a_selector_that_picks_two_cells_a_round_is_refused():
    finding = _expressible("chopra2022")
    data = {**finding.data, "set": {**(finding.data.get("set") or {}), "cpu_config": ["pin", "vnl"]}}
    with pytest.raises(findings.StudyError, match=r"2 cells in round 0"):
        planning.plan([finding._replace(data=data)], THIS_LAB, "/nonexistent")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nope"], "no study 'nope'"),
        (["chopra2022", "--finding", "nope"], "no finding 'nope'"),
        (["chopra2022", "--max-time", "2 hours"], "--max-time 2 hours: give a duration such as 90s, 30m or 1h30m"),
        (["chopra2022", "--precision", "2"], "--precision 2.0: give the interval half-width"),
    ],
)
def test_bad_input_is_refused_before_any_cell(tmp_path, capsys, argv, message):
    from platbench import cli

    assert cli.main(["reproduce", *argv, "--results-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_plan_shares_campaigns_and_sets_apart_what_this_lab_cannot_express(capsys):
    from platbench import cli

    assert cli.main(["reproduce", "chopra2022", "--plan"]) == 0
    printed = capsys.readouterr().out
    assert "not expressible here: cnn-batch-64-fastest needs 1 GPU on a host" in printed
    study = findings.load("chopra2022")
    plan = planning.plan(study.findings, THIS_LAB, "/nonexistent")
    for campaign in plan.campaigns:
        assert campaign.name in printed and len(campaign.findings) >= 1
        assert len({json.dumps(planning.settings_of(f)) for f in campaign.findings}) == 1


# -- the relations -------------------------------------------------------------------------------------------------


def _frame(sides, metric="throughput", rounds=None):
    """A campaign's samples: ``sides`` maps a platform to its values, one per round."""
    rows = []
    for platform, values in sides.items():
        for index, value in enumerate(values if rounds is None else values[:rounds]):
            scenario = f"{platform}/2/pin/cpu"
            rows.append(
                {
                    "metric": metric,
                    "value": value,
                    "platform": platform,
                    "scenario": scenario,
                    "repeat": index,
                    "cell": f"{scenario}|r{index}",
                    "model": "m",
                }
            )
    return pd.DataFrame(rows)


def _finding(relation, **data):
    raw = {
        "id": "f",
        "claim": "a claim of ten chars",
        "shown_in": "Figure 1",
        "experiment": "x",
        "metric": "throughput",
        "scaled": "s",
        "relation": relation,
        **data,
    }
    return findings.Finding("s", "f", raw, findings.Relation.parse(relation))


WITHIN = {"type": "within", "of": "cn", "to": "bm", "tolerance": 0.05}
BM = [100.0, 90.0, 110.0, 95.0, 105.0, 100.0]


def test_within_is_reproduced_when_the_whole_interval_is_within_the_tolerance():
    frame = _frame({"bm": BM, "cn": [value * 1.01 for value in BM[:3]] + [value * 0.995 for value in BM[3:]]})
    outcome = relations.evaluate(_finding(WITHIN), frame, 0.01)
    assert outcome.verdict == relations.REPRODUCED and outcome.settled
    item = outcome.measurements[0]
    assert item.rounds == 6 and item.method == relations.PAIRED
    assert 0.95 < item.interval[0] < item.estimate < item.interval[1] < 1.05


def test_within_is_not_reproduced_when_the_interval_lies_beyond_the_tolerance():
    factors = [0.8, 0.82, 0.79, 0.81, 0.8, 0.8]
    frame = _frame({"bm": BM, "cn": [value * factor for value, factor in zip(BM, factors, strict=True)]})
    outcome = relations.evaluate(_finding(WITHIN), frame, 0.01)
    assert outcome.verdict == relations.NOT_REPRODUCED and outcome.settled
    assert outcome.measurements[0].interval[1] < 0.95


def test_within_is_undecided_at_the_boundary_and_says_how_many_rounds_would_tell():
    factors = [0.90, 1.0, 0.93, 0.97, 0.91, 0.99]
    frame = _frame({"bm": BM, "cn": [value * factor for value, factor in zip(BM, factors, strict=True)]})
    outcome = relations.evaluate(_finding(WITHIN), frame, 0.01)
    item = outcome.measurements[0]
    assert outcome.verdict == relations.UNDECIDED and not outcome.settled
    assert item.interval[0] < 0.95 < item.interval[1]
    assert outcome.rounds_needed is not None and outcome.rounds_needed > 6


def test_an_interval_within_the_precision_that_still_straddles_is_settled_as_undecided():
    # cn/bm 0.95 exactly, the pairs spreading 0.1%: the interval is ±0.1% and straddles the bound 0.95.
    factors = [0.949, 0.951, 0.950, 0.9495, 0.9505, 0.950]
    frame = _frame({"bm": BM, "cn": [value * factor for value, factor in zip(BM, factors, strict=False)]})
    outcome = relations.evaluate(_finding(WITHIN), frame, 0.01)
    assert outcome.verdict == relations.UNDECIDED and outcome.settled
    assert "sits on the bound" in outcome.reason


@pytest.mark.parametrize(
    "kind, bound, factor, verdict",
    [
        ("above", 1.10, 1.30, relations.REPRODUCED),
        ("above", 1.10, 1.00, relations.NOT_REPRODUCED),
        ("above", 1.10, 1.10, relations.UNDECIDED),
        ("below", 1.0, 0.80, relations.REPRODUCED),
        ("below", 1.0, 1.20, relations.NOT_REPRODUCED),
        ("below", 1.0, 1.00, relations.UNDECIDED),
    ],
)
def test_above_and_below_on_fixed_data(kind, bound, factor, verdict):
    wobble = [1.02, 0.98, 1.01, 0.99, 1.03, 0.97]
    frame = _frame({"bm": BM, "vm": [value * factor * w for value, w in zip(BM, wobble, strict=False)]})
    relation = {"type": kind, "of": "vm", "to": "bm", "bound": bound}
    assert relations.evaluate(_finding(relation), frame, 0.001).verdict == verdict


def test_an_ordering_of_two_platforms_against_bm_is_their_own_ratio():
    frame = _frame({"bm": BM, "vm": [value * 0.8 for value in BM], "cn": [value * 0.99 for value in BM]})
    frame.loc[frame["platform"] == "vm", "value"] *= [1.01, 0.99, 1.0, 1.02, 0.98, 1.0]
    outcome = relations.evaluate(_finding({"type": "below", "of": "vm", "to": "cn", "bound": 1.0}), frame, 0.01)
    assert outcome.verdict == relations.REPRODUCED
    assert math.isclose(outcome.measurements[0].estimate, 0.8 / 0.99, rel_tol=0.01)


def test_a_ratio_of_ratios_measures_an_interaction():
    # A GPU speedup end to end (2x) far below the inference-only one (10x): their ratio 0.2, below 0.5.
    rows = []
    for index in range(4):
        wobble = 1 + 0.01 * (index - 1.5)
        for processor, e2e, inference in (("cpu", 20.0, 10.0), ("gpu", 10.0, 1.0)):
            for metric, value in (("e2e_time", e2e * wobble), ("inference_time", inference * wobble)):
                rows.append(
                    {
                        "metric": metric,
                        "value": value,
                        "platform": "bm",
                        "processor": processor,
                        "repeat": index,
                        "cell": f"bm/{processor}|r{index}",
                    }
                )
    relation = {
        "type": "below",
        "of": {"processor": "cpu"},
        "to": {"processor": "gpu"},
        "per": {
            "of": {"processor": "cpu", "metric": "inference_time"},
            "to": {"processor": "gpu", "metric": "inference_time"},
        },
        "bound": 0.5,
    }
    outcome = relations.evaluate(_finding(relation, metric="e2e_time"), pd.DataFrame(rows), 0.01)
    assert outcome.verdict == relations.REPRODUCED
    assert math.isclose(outcome.measurements[0].estimate, 0.2, rel_tol=1e-9)


def test_for_each_holds_only_where_every_group_holds():
    near = _frame({"bm": BM, "cn": [value * 1.002 for value in BM]}).assign(model="a")
    far = _frame({"bm": BM, "cn": [value * 0.7 for value in BM]}).assign(model="b")
    far["cell"] = far["cell"] + "|b"
    frame = pd.concat([near, far], ignore_index=True)
    outcome = relations.evaluate(_finding(WITHIN, for_each=["model"]), frame, 0.01)
    assert [item.group for item in outcome.measurements] == [{"model": "a"}, {"model": "b"}]
    assert [item.verdict for item in outcome.measurements] == [relations.REPRODUCED, relations.NOT_REPRODUCED]
    assert outcome.verdict == relations.NOT_REPRODUCED


def test_one_round_gives_no_interval_and_stays_undecided():
    outcome = relations.evaluate(_finding(WITHIN), _frame({"bm": BM, "cn": BM}, rounds=1), 0.01)
    assert outcome.verdict == relations.UNDECIDED and not outcome.settled
    assert "fewer than two rounds" in outcome.reason


# -- the page ------------------------------------------------------------------------------------------------------


def _fixture_frames(plan):
    """Each campaign of ``plan`` as a campaign would record it: 4 rounds of bm and cn, every metric it needs."""
    frames = {}
    for campaign in plan.campaigns:
        rows = []
        metrics = {metric for finding in campaign.findings for metric in finding.metrics()} | {"elapsed", "system_time"}
        for cell in campaign.cells + [dict(c, labels={**c["labels"], "repeat": 1}) for c in campaign.cells]:
            labels = dict(cell["labels"])
            for metric in metrics:
                value = 10.0 * (1.02 if labels["platform"] != "bm" else 1.0) * (1 + 0.003 * labels["repeat"])
                rows.append({**labels, "cell": f"{cell['id']}|{labels['repeat']}", "metric": metric, "value": value})
        frames[campaign.name] = pd.DataFrame(rows)
    return frames


@pytest.mark.parametrize("name", findings.available())
def test_the_page_renders_every_finding_of_the_study(tmp_path, name):
    study = findings.load(name)
    plan = planning.plan(study.findings, THIS_LAB, "/nonexistent")
    frames = _fixture_frames(plan)
    entries = command.entries_of(study, study.findings, plan, "/nonexistent", 0.01, frames)
    reproduction = {
        "study": study,
        "entries": entries,
        "lab": THIS_LAB.describe(),
        "when": "2026-12-06 19:00",
        "spent": "1 min of --max-time 2h",
    }
    text = page.write(tmp_path, reproduction, frames)
    html = (tmp_path / page.HTML).read_text()
    data = json.loads((tmp_path / page.JSON).read_text())
    assert text.splitlines()[0] == data["summary"]
    assert data["summary"].startswith(f"{page.short_name(name)}: ")
    assert len(data["findings"]) == len(study.findings)
    for finding in study.findings:
        assert f'id="{finding.id}"' in html and f"[{finding.id}]" in text
    lacking = len(plan.not_expressible)
    if lacking:
        assert f"{lacking} need " in data["summary"]
    if study.figure == "diff_table":
        assert "Diff% here [95%]" in html
    else:
        assert "<svg" in html


def test_samanis_phases_are_a_bar_per_scenario_and_per_storage_its_finding_compares():
    samani = {finding.id: finding for finding in findings.load("samani2022").findings}
    rows = []
    for storage, pre in (("ssd", 1.0), ("hdd", 3.0)):
        for repeat in range(2):
            for metric, value in (("pre_time", pre + repeat), ("inference_time", 5.0), ("post_time", 0.5)):
                rows.append({"scenario": "bm/all/vnl/cpu", "storage": storage, "metric": metric, "value": value})
    frame = pd.DataFrame(rows)
    # One scenario, two storages: the storage finding gets a bar for each (they were one bar, averaged, before).
    assert page.phase_bars(frame, [samani["ssd-helps-many-small-files"]]) == {
        "bm/all/vnl/cpu, storage=hdd": {"pre_time": 3.5, "inference_time": 5.0, "post_time": 0.5},
        "bm/all/vnl/cpu, storage=ssd": {"pre_time": 1.5, "inference_time": 5.0, "post_time": 0.5},
    }
    # A finding that compares platforms only keeps a bar per scenario, baseline first.
    cn = frame.assign(scenario="cn/all/vnl/cpu", value=frame["value"] * 2)
    bars = page.phase_bars(pd.concat([cn, frame]), [samani["edge-cn-near-bm"]])
    assert list(bars) == ["bm/all/vnl/cpu", "cn/all/vnl/cpu"]
    assert bars["bm/all/vnl/cpu"]["pre_time"] == 2.5 and bars["cn/all/vnl/cpu"]["pre_time"] == 5.0
    # One that compares metrics (end to end against inference) keeps a bar per scenario too.
    assert list(page.phase_bars(frame, [samani["rs-pre-post-dominate"]])) == ["bm/all/vnl/cpu"]
    entry = page.Entry(samani["ssd-helps-many-small-files"], relations.REPRODUCED, None, [], "c", None)
    (svg,) = page.stacked_phases([entry], {"c": frame})
    assert svg.startswith("<svg")


def test_the_summary_line_counts_each_verdict():
    study = findings.load("chopra2022")
    verdicts = [relations.REPRODUCED, relations.NOT_REPRODUCED, relations.UNDECIDED, relations.UNDECIDED]
    entries = [page.Entry(f, v, None, [], None, None) for f, v in zip(study.findings, verdicts, strict=False)]
    entries += [page.Entry(f, relations.NOT_EXPRESSIBLE, None, ["KVM"], None, None) for f in study.findings[4:6]]
    line = page.summary_line(study, entries)
    assert line.startswith("Chopra 2022: 1 reproduced, 1 not, 2 undecided, 2 need ")
    samani = findings.load("samani2022")
    lacking = [page.Entry(f, relations.NOT_EXPRESSIBLE, None, ["x"], None, None) for f in samani.findings if f.needs]
    words = page.summary_line(samani, lacking).split(" need ")[1]
    assert words.count("cores") == 1 and words.endswith(("cores", "hosts")), words


def test_the_verdicts_go_to_the_store_and_history_shows_them_over_time(tmp_path, capsys):
    from platbench import cli

    location = tmp_path / "store.duckdb"
    for when, verdict in ((1000.0, "undecided"), (2000.0, "reproduced")):
        data = {
            "study": "chopra2022",
            "lab": "l",
            "findings": [
                {
                    "finding": "cnn-real-time-same",
                    "verdict": verdict,
                    "estimate": 1.01,
                    "low": 0.99,
                    "high": 1.03,
                    "groups": [],
                    "detail": "d",
                    "campaign": "c",
                }
            ],
        }
        store.record_findings(str(location), f"reproduce-chopra2022-{int(when)}", when, data)
    rows = store.findings_over_time(str(location), "chopra2022")
    assert [row["verdict"] for row in rows] == ["undecided", "reproduced"]
    assert cli.main(["history", "--store", str(location), "--study", "chopra2022"]) == 0
    printed = capsys.readouterr().out
    assert printed.index("undecided") < printed.index("reproduced")
    assert "1.010 [0.990, 1.030]" in printed


def test_a_finding_whose_cells_were_skipped_by_design_is_settled_and_says_why():
    reason = "HPCG is not built on this lab: set micro_tools_hpcg: true"
    frame = pd.DataFrame(
        [
            {
                "metric": "skipped",
                "value": 1.0,
                "platform": platform,
                "scenario": f"{platform}/2/pin/cpu",
                "repeat": 0,
                "cell": f"{platform}|r0",
                "skip_reason": reason,
            }
            for platform in ("bm", "cn")
        ]
    )
    outcome = relations.evaluate(_finding(WITHIN), frame, 0.01)
    assert outcome.verdict == relations.UNDECIDED and outcome.settled
    assert outcome.reason == f"not measured: its cells were skipped here ({reason})"


def test_cells_recorded_before_their_workload_reported_the_metric_leave_the_finding_open_for_new_rounds():
    # Xu 2017's HPL findings moved to hpl_gflops_best: a campaign of 17 rounds recorded before micro_cpu reported it
    # is resumed, and its findings must ask for rounds, not be settled as never measured.
    older = _frame({"bm": BM, "cn": BM}, metric="hpl_gflops")
    outcome = relations.evaluate(_finding(WITHIN, metric="hpl_gflops_best"), older, 0.01)
    assert outcome.verdict == relations.UNDECIDED and not outcome.settled
    assert outcome.rounds_needed == len(BM) + relations.FIRST_ROUNDS
    assert outcome.reason.startswith("not measured yet: the campaign's 6 round(s) hold no hpl_gflops_best")
    # Once new rounds hold it, those rounds decide: the older ones have no value of it and add none.
    newer = _frame({"bm": BM, "cn": [value * 1.01 for value in BM]}, metric="hpl_gflops_best")
    newer["repeat"] += len(BM)
    newer["cell"] = newer["scenario"] + "|r" + newer["repeat"].astype(str)
    both = pd.concat([older, newer], ignore_index=True)
    outcome = relations.evaluate(_finding(WITHIN, metric="hpl_gflops_best"), both, 0.01)
    assert outcome.verdict == relations.REPRODUCED and outcome.measurements[0].rounds == len(BM)


def test_the_lab_lacks_what_a_finding_needs_in_words():
    needs = {"gpus": 2, "kvm": True, "hosts": 3, "cores": 8, "apptainer": True, "tools": ["hpcg"]}
    assert THIS_LAB.missing(needs) == [
        "3 hosts (the inventory has 1)",
        "8 cores on a host (at most 2 here)",
        "2 GPUs on a host (0 here)",
        "KVM",
        "Apptainer",
        "HPCG (the lab builds it where the inventory sets micro_tools_hpcg: true)",
    ]
    assert EVERYTHING.missing(needs) == []


def test_the_local_inventory_is_read_as_this_host(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    platbench_runners:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          micro_tools_hpcg: true\n"
    )
    (host,) = lab.probe(inventory).hosts
    assert host.name == "localhost" and host.cores >= 1 and host.tools == frozenset({"hpcg"})


def test_an_inventory_without_runner_hosts_is_refused_before_any_plan(tmp_path, capsys):
    from platbench import cli

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    controller:\n      ansible_connection: local\n")
    with pytest.raises(ValueError, match="no host in its group platbench_runners, so nothing could run a cell"):
        lab.probe(inventory)
    argv = ["reproduce", "xu2017", "--plan", "--inventory", str(inventory), "--results-dir", str(tmp_path)]
    assert cli.main(argv) == 2
    assert f"--inventory {inventory}: no host in its group platbench_runners" in capsys.readouterr().err


@pytest.mark.parametrize("needed, rounds, asked", [(449, 3, 3), (449, 34, 34), (40, 34, 6), (35, 34, 3), (10, 12, 3)])
def test_a_pass_adds_at_most_as_many_rounds_again_as_are_done_and_at_least_three(needed, rounds, asked):
    assert command.rounds_to_ask(needed, rounds) == asked


# -- sharing --max-time among the campaigns ----------------------------------------------------------------------


class _Lab:
    """Campaigns on a fake clock: each takes ``round_seconds`` a round and settles once it holds ``settles_at``
    rounds (None: never); ``fails`` ones return EXIT_FAILED, ``stuck`` ones spend their share adding no round."""

    def __init__(self, **campaigns):
        self.now = 0.0
        self.campaigns = {name: SimpleNamespace(name=name, **vars(facts)) for name, facts in campaigns.items()}
        self.rounds = dict.fromkeys(campaigns, 0)
        self.runs = []

    def clock(self):
        return self.now

    def stand(self, campaign):
        settles_at = campaign.settles_at
        settled = settles_at is not None and self.rounds[campaign.name] >= settles_at
        return settled, self.rounds[campaign.name], f"{self.rounds[campaign.name]} round(s)"

    def run_one(self, campaign, seconds):
        self.runs.append((campaign.name, round(seconds)))
        if getattr(campaign, "fails", False):
            self.now += 60
            return command.EXIT_FAILED
        if getattr(campaign, "stuck", False):
            self.now += seconds
            return command.EXIT_OK
        wanted = None if campaign.settles_at is None else campaign.settles_at - self.rounds[campaign.name]
        affordable = int(seconds // campaign.round_seconds)
        added = affordable if wanted is None else min(wanted, affordable)
        self.rounds[campaign.name] += added
        self.now += added * campaign.round_seconds
        return command.EXIT_OK

    def run(self, seconds):
        out = io.StringIO()
        code = command.run_until_settled(
            list(self.campaigns.values()), seconds, self.stand, self.run_one, out, clock=self.clock
        )
        return code, out.getvalue()


def test_time_a_campaign_settled_early_leaves_goes_to_those_still_open():
    # The micro campaign gets a third of an hour and never settles; the two others settle in 5 minutes each. The
    # 40 minutes they leave go to the micro campaign in a second pass, not back to the user.
    fake = _Lab(
        micro=SimpleNamespace(round_seconds=60, settles_at=None),
        cnn=SimpleNamespace(round_seconds=60, settles_at=5),
        lstm=SimpleNamespace(round_seconds=60, settles_at=5),
    )
    code, printed = fake.run(3600)
    assert code == command.EXIT_OK
    assert fake.runs == [("micro", 1200), ("cnn", 1200), ("lstm", 2100), ("micro", 3600 - 1200 - 300 - 300)]
    assert fake.rounds == {"micro": 50, "cnn": 5, "lstm": 5} and fake.now == 3600
    assert "micro: pass 2, running for at most 30 min" in printed


def test_passes_go_on_until_every_campaign_is_settled_and_stop_there():
    fake = _Lab(a=SimpleNamespace(round_seconds=100, settles_at=50), b=SimpleNamespace(round_seconds=100, settles_at=3))
    code, _ = fake.run(7200)
    assert code == command.EXIT_OK and fake.rounds == {"a": 50, "b": 3}
    assert fake.runs == [("a", 3600), ("b", 3600), ("a", 3300)] and fake.now == 5300


def test_a_failed_or_stuck_campaign_is_not_run_again_and_a_failure_is_the_exit_status():
    fake = _Lab(
        broken=SimpleNamespace(round_seconds=60, settles_at=None, fails=True),
        stuck=SimpleNamespace(round_seconds=60, settles_at=None, stuck=True),
        open=SimpleNamespace(round_seconds=60, settles_at=None),
    )
    code, printed = fake.run(1800)
    assert code == command.EXIT_FAILED
    assert [name for name, _ in fake.runs].count("broken") == 1 and [n for n, _ in fake.runs].count("stuck") == 1
    assert "stuck: the pass added no round: not run again" in printed


def test_a_share_under_the_smallest_is_not_run_and_a_settled_campaign_is_only_read():
    fake = _Lab(
        done=SimpleNamespace(round_seconds=60, settles_at=0), late=SimpleNamespace(round_seconds=60, settles_at=9)
    )
    code, printed = fake.run(command.SMALLEST_SHARE - 1)
    assert code == command.EXIT_OK and fake.runs == []
    assert "done: already settled in the results (0 round(s)): not run again" in printed
    assert "late: not run, 2 min of --max-time left for it" in printed
