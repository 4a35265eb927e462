"""benchmarks/harness_noise.py's own reading, without a lab: a round's row from platbench's pairs and the direct ones,
the verdicts against the targets (the ratio within ±1.5% every round, the pooled log spread at most 1.5 times the
direct one), the table, and what counts as platbench running beside it."""

from __future__ import annotations

import importlib.util
import math

import pytest

from platbench import direct_duet

REPO = direct_duet.REPO
_spec = importlib.util.spec_from_file_location("harness_noise", REPO / "benchmarks" / "harness_noise.py")
harness_noise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness_noise)

DRIFT = [1.00, 0.90, 1.08, 0.95, 1.04, 0.93]
DIRECT = [1.012, 1.006, 1.015, 1.009, 1.013, 1.007]


def direct_results(ratios):
    return [
        {"cn": 1000.0 * d * r, "bm": 1000.0 * d, "cpus": direct_duet.pair_cpus(("0", "1"), index)}
        for index, (d, r) in enumerate(zip(DRIFT, ratios, strict=True))
    ]


def through(ratios):
    return [(1000.0 * d * r, 1000.0 * d) for d, r in zip(DRIFT, ratios, strict=True)], [0, 1, 0, 1, 0, 1]


def row(number, through_ratios, direct_ratios=DIRECT):
    pairs, sides = through(through_ratios)
    return harness_noise.round_row(number, pairs, sides, direct_results(direct_ratios))


def test_a_quiet_harness_meets_both_targets():
    rows = [row(n, [r * 1.002 for r in DIRECT]) for n in (1, 2, 3)]
    assert rows[0]["difference"] == pytest.approx(0.002)
    assert rows[0]["spread_ratio"] == pytest.approx(1.0)
    judged = harness_noise.verdicts(rows)
    assert judged["ratio"]["met"] and judged["spread"]["met"]
    lines = harness_noise.table_lines(rows, judged)
    assert lines[0] == harness_noise.HEADER and len(lines) == 6
    assert lines[1].split()[0] == "1" and "+0.20%" in lines[1]
    assert lines[-2].endswith(": met") and lines[-1].endswith(": met")


def test_a_ratio_moved_in_one_round_misses_the_ratio_target():
    rows = [row(1, DIRECT), row(2, [r * 1.03 for r in DIRECT]), row(3, DIRECT)]
    judged = harness_noise.verdicts(rows)
    assert judged["ratio"]["worst_difference"] == pytest.approx(0.03) and not judged["ratio"]["met"]
    assert judged["spread"]["met"]
    assert harness_noise.table_lines(rows, judged)[-2].endswith("(worst +3.00%): NOT met")


def test_a_widened_spread_misses_the_spread_target():
    center = sum(math.log(r) for r in DIRECT) / len(DIRECT)
    loud = [math.exp(center + 2.5 * (math.log(r) - center)) for r in DIRECT]
    rows = [row(n, loud) for n in (1, 2, 3)]
    judged = harness_noise.verdicts(rows)
    assert judged["spread"]["ratio"] == pytest.approx(2.5) and not judged["spread"]["met"]
    assert judged["ratio"]["met"]  # the same center: only the spread says so


@pytest.mark.parametrize(
    ("argv", "is_platbench"),
    [
        (["/usr/bin/python3", "/work/.venv/bin/ansible-playbook", "site.yml"], True),
        (["/work/.venv/bin/platbench", "run", "smoke"], True),
        (["python", "-m", "platbench", "calibrate"], True),
        (["python", "-m", "platbench.direct_duet", "--pairs", "6"], True),
        (["taskset", "--cpu-list", "0", "/opt/platbench/venv/bin/python", "-m", "workloads.cnn_train"], True),
        (["vim", "/work/main/platbench/run.py"], False),
        (["tail", "-f", "/tmp/site.log"], False),
    ],
)
def test_what_counts_as_platbench_running_beside_the_benchmark(argv, is_platbench):
    assert harness_noise.is_platbench(argv) is is_platbench
