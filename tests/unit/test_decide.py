"""Run until decided (platbench/decide.py and `platbench run --precision`): the refusals of bad options, each naming
it; the state of a campaign against a precision; and the stopping rule, driven through `platbench run` with a
stand-in for the playbook that appends the rounds it is asked for: it stops when the intervals are within the
precision, when every budget is decided, and when the time is spent."""

import argparse
import itertools
import math
import statistics
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample

from platbench import budgets, cli, decide, run
from platbench.campaign import EXIT_BAD_INPUT, EXIT_OK

# Acts on the host where a live lab would see it or suffer from it: the harness cgroup that `platbench run` makes for
# itself (quiet.isolate), which the quiet tests assert absent. `make test` runs it first, before the lab is up (marker
# `host`, docs/src/tests.md).
pytestmark = pytest.mark.host


def sample(platform, value, repeat):
    return throughput_sample(platform, value, repeat, 30.0 * repeat, schedule="rounds")


# cn's share of bm per round: about 0.96, spread about 1% round to round; the host drifts by round on both sides.
SHARES = itertools.cycle([0.955, 0.962, 0.951, 0.968, 0.958, 0.964, 0.949, 0.961])
DRIFT = itertools.cycle([1.0, 0.86, 1.1, 0.93, 1.04, 0.9])


def write_rounds(path, first, last):
    samples = []
    for repeat in range(first, last):
        drift, share = next(DRIFT), next(SHARES)
        samples += [sample("bm", 1000 * drift, repeat), sample("cn", 1000 * drift * share, repeat)]
    append_samples(path, samples)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--precision", "0"], "--precision 0.0: give the interval half-width to reach as a fraction above 0"),
        (["--precision", "1"], "--precision 1.0: give the interval half-width"),
        (["--precision", "0.02", "--max-time", "soon"], "--max-time soon: give a duration such as 90s, 30m or 1h30m"),
        (["--precision", "0.02", "--max-time", "0m"], "--max-time 0m: give a duration above 0"),
        (["--max-time", "10m"], "--max-time 10m: it bounds a run until decided; give --precision too"),
        (["--until", "precision"], "--until precision: it says what ends a run until decided; give --precision too"),
        (["--precision", "0.02", "--set", "repeats=3"], "--precision adds rounds through --repeats"),
    ],
)
def test_bad_options_are_refused_naming_them(capsys, monkeypatch, argv, expected):
    monkeypatch.setattr(run.ansible_runner, "run_async", lambda **kwargs: pytest.fail("a playbook was started"))
    assert cli.main(["run", "smoke", *argv]) == 2
    assert expected in capsys.readouterr().err


def test_durations():
    assert decide.parse_duration("90s") == 90
    assert decide.parse_duration("30m") == 1800
    assert decide.parse_duration("1h30m") == 5400
    assert decide.parse_duration("600") == 600


def test_the_state_of_a_campaign_against_a_precision(tmp_path):
    write_rounds(tmp_path / "samples.jsonl", 0, 4)
    wide = decide.state(tmp_path, 0.005)
    assert wide.rounds == 4 and not wide.precise and wide.more > 0
    assert wide.where == "cn/bm (1/pin/cpu)" and wide.seconds_per_round == pytest.approx(90.0 / 4)
    assert decide.state(tmp_path, 0.05).precise
    assert "widest interval ±" in decide.describe(wide, 0.005)


def args_for(tmp_path, precision, max_time=None, budgets_file=None, until=None):
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    argv = ["smoke", "--campaign", "until", "--results-dir", str(tmp_path), "--precision", str(precision)]
    argv += ["--platforms", "bm,cn", "--repeats", "2", "--set", "scaleup=[1]", "--set", "cpu_config=[pin]"]
    argv += ["--max-time", max_time] if max_time else []
    argv += ["--budgets", str(budgets_file)] if budgets_file else []
    argv += ["--until", until] if until else []
    return parser.parse_args(argv)


@pytest.fixture
def passes(monkeypatch, tmp_path):
    """`platbench run`'s passes, each appending the rounds its plan adds (the campaign's samples so far kept)."""
    asked = []

    def one_pass(args, plan, extravars, lock, kept, out, err):
        path = tmp_path / "until" / "samples.jsonl"
        path.parent.mkdir(exist_ok=True)
        done = len(asked) and asked[-1]
        asked.append(plan["repeats"])
        write_rounds(path, done, plan["repeats"])
        kept[0] = False
        return EXIT_OK

    monkeypatch.setattr(run, "_run", one_pass)
    return asked


def test_rounds_are_added_until_every_interval_is_within_the_precision(tmp_path, passes, capsys):
    assert run.main(args_for(tmp_path, 0.01)) == EXIT_OK
    out = capsys.readouterr().out
    assert passes[0] == 2 and passes[-1] > 2 and passes == sorted(passes)
    assert out.rstrip().endswith("until decided: every ratio to bm is within ±1.0%: decided")
    assert decide.state(tmp_path / "until", 0.01).precise


def test_the_time_ends_the_run_undecided(tmp_path, passes, capsys, monkeypatch):
    clock = itertools.count(0.0, 700.0)  # every reading of the clock 700 s later: the first pass spends the 10 minutes
    monkeypatch.setattr(run.time, "monotonic", lambda: next(clock))
    assert run.main(args_for(tmp_path, 0.001, max_time="10m")) == EXIT_OK
    out = capsys.readouterr().out
    assert "until decided: the time is spent (--max-time 10 min): undecided" in out
    assert len(passes) == 1


def test_decided_budgets_end_the_run(tmp_path, passes, capsys):
    budgets_file = tmp_path / "budgets.yml"
    budgets_file.write_text("budgets:\n  cn:\n    throughput: [1.0, -0.01, null]\n")
    assert budgets.load(budgets_file)
    assert run.main(args_for(tmp_path, 0.0001, budgets_file=budgets_file)) == EXIT_OK
    out = capsys.readouterr().out
    assert "until decided: every budget is decided (pass or fail)" in out


@pytest.mark.parametrize("until", ["either", "precision"])
def test_until_precision_runs_on_past_a_decided_budget(tmp_path, passes, capsys, until):
    # make lab's case: a loose budget (cn at least half of bm) is decided by the first pass, the ratio is not precise.
    budgets_file = tmp_path / "budgets.yml"
    budgets_file.write_text("budgets:\n  cn:\n    throughput: [1.0, -0.5, null]\n")
    assert run.main(args_for(tmp_path, 0.01, budgets_file=budgets_file, until=until)) == EXIT_OK
    out = capsys.readouterr().out
    if until == "either":
        assert passes == [2] and out.rstrip().endswith("until decided: every budget is decided (pass or fail)")
    else:
        assert "every budget is decided" not in out and len(passes) > 1
        assert out.rstrip().endswith("until decided: every ratio to bm is within ±1.0%: decided")


def test_make_lab_runs_the_smoke_answer_to_one_percent_within_ten_minutes_and_other_sizes_to_three_in_fifteen():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    recipe = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "$(if $(PRECISION),--precision $(PRECISION) --max-time $(MAX_TIME) --until precision)" in recipe
    assert "PRECISION ?= $(if $(filter answer,$(SIZE)),0.01,0.03)" in makefile
    assert "MAX_TIME ?= $(if $(filter answer,$(SIZE)),10m,15m)" in makefile
    assert decide.parse_duration("10m") == 600 and decide.precision_problem(0.01) is None


def test_an_experiment_changed_between_passes_is_refused_before_its_cells_mix(tmp_path, monkeypatch, capsys):
    asked = []

    def one_pass(args, plan, extravars, lock, kept, out, err):
        path = tmp_path / "until" / "samples.jsonl"
        path.parent.mkdir(exist_ok=True)
        asked.append(plan["repeats"])
        write_rounds(path, 0, plan["repeats"])
        kept[0] = False
        args.settings.append("params.steps=50")  # as if experiments/smoke.yml had been edited during the pass
        return EXIT_OK

    monkeypatch.setattr(run, "_run", one_pass)
    assert run.main(args_for(tmp_path, 0.001)) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert asked == [2]
    assert "until decided: " in err and "experiments/smoke.yml is planned otherwise than campaign until was (" in err
    assert "plan.json): cell " in err
    assert "was planned with other labels (steps: 100 -> 50); another pass would mix cells of both" in err
    assert "Restore the file and rerun the same command" in err


def test_a_cell_planned_alike_but_for_more_rounds_is_unchanged():
    first = {"cells": [{"id": "bm|r0", "labels": {"steps": "auto"}, "params": {"steps": "auto"}}]}
    more = {"cells": [*first["cells"], {"id": "bm|r1", "labels": {"steps": "auto"}, "params": {"steps": "auto"}}]}
    assert plan_file.changed_cell(first, more) is None
    edited = {"cells": [{"id": "bm|r0", "labels": {"steps": "auto"}, "params": {"steps": "auto", "auto_seconds": 20}}]}
    expected = "cell bm|r0 was planned with other params (auto_seconds: (not set) -> 20)"
    assert plan_file.changed_cell(first, edited) == expected


def test_an_interval_within_the_precision_that_the_answer_calls_undecided_does_not_stop_the_run(tmp_path):
    # cn 1.5% faster, its paired interval ±2% ([0.995, 1.035]): within a 2.5% precision, yet it holds 1 and reaches
    # beyond the answer's 3% on one side, so the answer says undecided; the run aims at the half-width that decides.
    deviations = [0.3, -1.1, 0.8, -0.4, 1.4, -0.9, 0.1, -1.3, 0.6, 0.5]
    scale = 0.02 / 2.262 * math.sqrt(10) / statistics.stdev(deviations)  # t(9) = 2.262
    samples = []
    for repeat, deviation in enumerate(deviations):
        drift = next(DRIFT)
        samples += [
            sample("bm", 1000 * drift, repeat),
            sample("cn", 1000 * drift * 1.015 * math.exp(scale * deviation), repeat),
        ]
    append_samples(tmp_path / "samples.jsonl", samples)
    current = decide.state(tmp_path, 0.025)
    assert current.widest < 0.025 and not current.precise
    where, deciding = current.undecided
    assert where == "cn/bm (1/pin/cpu)" and deciding == pytest.approx(0.015, abs=0.001)
    assert current.more >= 1 and decide.rounds_to_add(current, None) == current.more
    line = decide.describe(current, 0.025)
    assert line.endswith(
        "; cn/bm (1/pin/cpu) is within it but undecided (not yet clear of 1 nor within 3% of it): aiming at ±1.5% there"
    )
