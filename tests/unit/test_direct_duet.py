"""The direct duet pairs (platbench/direct_duet.py), the known answer platbench's harness is checked against, without
Docker: each side runs what platbench plans for a smoke-answer cell of its platform, placed as the harness places
it (bm pinned at the normal policy in a cgroup of its own, with a clean environment; cn a container on its CPUs);
the CPU sets swap every pair; the records are read from the output or the record file; the wait blocks until both
sides end; the summary is the report's paired interval with the log spread. The launch itself runs in
benchmarks/harness_noise.py and ``platbench calibrate``'s harness check."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from plan_options import cell_plan, plan_options

from platbench import direct_duet
from platbench.report.stats import paired_ratio_interval

V1 = {"version": "v1", "directory": "/sys/fs/cgroup/cpu"}
FACTS = {"cpus_allowed": [0, 1], "numa_nodes": {"0": [0, 1]}, "gpus": [], "cpu_cgroup": V1}
IMAGE_ID = "sha256:" + "ab" * 32
PAIR_DIR = "/var/cache/platbench/duet/platbench-direct-7-0"
CGROUP = "/sys/fs/cgroup/cpu/platbench-direct-7-0"


@pytest.fixture(scope="module")
def plans():
    return direct_duet.pair_plans(FACTS, direct_duet.plan_options(direct_duet.IMAGE, IMAGE_ID))


@pytest.fixture(scope="module")
def sides(plans):
    return direct_duet.sides_of(plans, V1)


def test_both_sides_run_the_smoke_answers_workload_with_its_steps_auto_window(plans, sides):
    assert plans["cn"]["platform"] == "cn" and plans["bm"]["platform"] == "bm"
    assert sides.argv[:2] == ["-m", "workloads.cnn_train"] and sides.argv[-2:] == ["--steps", "auto"]
    assert sides.cn_command == ["python", *sides.argv]
    assert sides.python == "/opt/platbench/venv/bin/python" and sides.chdir == "/opt/platbench"
    assert sides.image == IMAGE_ID  # the image the lab's cn cells run, by its id
    assert sides.cpu_sets == ("0", "1") and sides.cache_dir == "/var/cache/platbench"


def test_the_bm_side_is_the_bm_cells_command_pinned_at_the_normal_policy_in_a_cgroup_of_its_own(sides, monkeypatch):
    monkeypatch.setenv("PLATBENCH_LEAK_CHECK", "from the caller")
    argv, env = direct_duet.bm_command(sides, "1", CGROUP, PAIR_DIR)
    assert argv[:5] == ["/bin/sh", "-c", direct_duet.ENTER_CGROUP, "sh", f"{CGROUP}/cgroup.procs"]
    assert argv[5:11] == ["chrt", "--other", "0", "taskset", "--cpu-list", "1"]
    assert argv[11:] == ["/opt/platbench/venv/bin/python", *sides.argv]
    # Nothing of this process's environment: the plan's, a clean PATH, LANG and HOME, and the pair's start line.
    assert "PLATBENCH_LEAK_CHECK" not in env
    assert env["PYTHONPATH"] == "/opt/platbench" and env["OMP_NUM_THREADS"] == "1"
    assert env["PATH"] == direct_duet.BASE_ENV["PATH"] and env["HOME"]
    assert env["PLATBENCH_DUET_DIR"] == PAIR_DIR and env["PLATBENCH_DUET_SIDE"] == "1"


def test_the_bm_command_is_the_tail_of_what_platbench_runs_for_a_bm_cell(sides):
    # The bm partner of the smoke answer's first pair as the role plans it (tests/unit/plan_options.py), on the same
    # CPU: its command ends in the same python and workload, in the same environment but for the pair's own start
    # line and record file.
    experiment, _ = plan_experiment(str(direct_duet.EXPERIMENTS), "smoke", size="answer", campaign="c1")
    partner = next(cell for cell in experiment["cells"] if cell["labels"]["duet_role"] == "partner")
    planned = cell_plan(partner, FACTS, plan_options())
    assert planned["platform"] == "bm" and planned["argv"] == sides.argv
    argv, env = direct_duet.bm_command(sides, planned["cpuset"], CGROUP, PAIR_DIR)
    python = argv.index(sides.python)
    assert planned["process"]["argv"][-(len(argv) - python) :] == argv[python:]
    own = ("PLATBENCH_DUET_DIR", "PLATBENCH_RECORD_FILE")
    assert {k: v for k, v in planned["process"]["env"].items() if k not in own} == {
        k: v for k, v in env.items() if k in planned["process"]["env"] and k not in own
    }


def test_the_cn_side_is_the_cn_cells_container_on_its_cpus_with_the_same_workload_and_environment(sides):
    argv = direct_duet.cn_command(sides, "0", "platbench-direct-7-0", PAIR_DIR)
    assert argv[:6] == ["chrt", "--idle", "0", "docker", "run", "--rm"]  # the CLI idle; dockerd runs the container
    options = dict(zip(argv[6::2], argv[7::2], strict=False))
    assert options["--name"] == "platbench-direct-7-0" and options["--cpuset-cpus"] == "0"
    assert options["--network"] == "none"
    assert argv[argv.index(IMAGE_ID) :] == [IMAGE_ID, "python", *sides.argv]
    envs = dict(value.split("=", 1) for flag, value in zip(argv, argv[1:], strict=False) if flag == "--env")
    assert envs["PLATBENCH_DUET_DIR"] == PAIR_DIR and envs["PLATBENCH_DUET_SIDE"] == "0"
    assert envs["OMP_NUM_THREADS"] == "1" and "PYTHONPATH" not in envs
    # The start line's directory lies in the cache, which the cell mounts at its own path: no mount of its own.
    volumes = [value for flag, value in zip(argv, argv[1:], strict=False) if flag == "--volume"]
    assert volumes == ["/var/cache/platbench:/var/cache/platbench:rw"]
    elsewhere = direct_duet.cn_command(sides, "0", "platbench-direct-7-0", "/srv/duet/p0")
    assert "/srv/duet/p0:/srv/duet/p0:rw" in elsewhere


def test_a_plan_that_gives_the_workload_a_record_file_gets_one_in_the_pairs_directory(sides):
    assert "PLATBENCH_RECORD_FILE" in sides.bm_env  # the plan's, for a duet side
    _, env = direct_duet.bm_command(sides, "1", CGROUP, PAIR_DIR)
    assert env["PLATBENCH_RECORD_FILE"] == direct_duet.record_file(PAIR_DIR, 1)
    assert direct_duet.pair_env({"A": "1"}, PAIR_DIR, 0) == {
        "A": "1",
        "PLATBENCH_DUET_DIR": PAIR_DIR,
        "PLATBENCH_DUET_SIDE": "0",
    }


def test_the_cpu_sets_swap_every_pair():
    placed = [direct_duet.pair_cpus(("0", "1"), index) for index in range(6)]
    assert placed[0] == {"cn": "0", "bm": "1"} and placed[1] == {"cn": "1", "bm": "0"}
    assert [p["cn"] for p in placed].count("0") == 3 and all(p["cn"] != p["bm"] for p in placed)


MOUNTS_V1 = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"""
MOUNTS_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate"


def test_the_cpu_hierarchy_is_read_from_mountinfo():
    offers = {"/sys/fs/cgroup": True, "/sys/fs/cgroup/unified": False}.get
    # A hybrid host: the unified hierarchy holds no cpu controller, v1's cpu mount does.
    assert direct_duet.cpu_hierarchy(MOUNTS_V1, offers) == V1
    assert direct_duet.cpu_hierarchy(MOUNTS_V2, offers) == {"version": "v2", "directory": "/sys/fs/cgroup"}
    assert direct_duet.cpu_hierarchy(MOUNTS_V2, lambda directory: False) is None


def record_line(value, arrived=True, waited=0.5):
    """A cnn_train duet side's record line."""
    record = {
        "schema": 1,
        "workload": "cnn_train",
        "status": "ok",
        "error": None,
        "timestamp": 1.0,
        "labels": {},
        "metrics": [{"metric": "throughput", "value": value, "unit": "images/sec"}],
        "metadata": {"duet_start": {"waited_seconds": waited, "partner_arrived": arrived, "window_seconds": 10}},
    }
    return "PLATBENCH_RESULT " + json.dumps(record)


def test_each_sides_record_is_read_from_its_output_or_its_record_file():
    found = direct_duet.side_record("cn", f"2024 tensorflow noise\n{record_line(980.0)}\n")
    assert found["metrics"][0]["value"] == 980.0
    # The stream lost the line (docker start --attach can): the record file holds it whole.
    assert direct_duet.side_record("cn", "no record here", record_line(975.0))["metrics"][0]["value"] == 975.0
    with pytest.raises(direct_duet.DirectDuetError, match=r"the bm side left no ok record \(no record at all, exit"):
        direct_duet.side_record("bm", "Traceback: ImportError", None, returncode=1)


def test_a_pair_reads_both_throughputs_its_ratio_its_cpus_and_its_waits():
    records = {
        "cn": direct_duet.side_record("cn", record_line(990.0, waited=0.1)),
        "bm": direct_duet.side_record("bm", record_line(1000.0, waited=2.5)),
    }
    result = direct_duet.pair_result(3, records, {"cn": "1", "bm": "0"})
    assert result == {
        "pair": 3,
        "cn": 990.0,
        "bm": 1000.0,
        "ratio": pytest.approx(0.99),
        "cpus": {"cn": "1", "bm": "0"},
        "waited_seconds": {"cn": 0.1, "bm": 2.5},
    }
    assert direct_duet.pair_line(result).startswith("pair 3: cn 990.0 on CPU 1, bm 1000.0 on CPU 0: cn/bm 0.9900")
    alone = {**records, "bm": direct_duet.side_record("bm", record_line(1000.0, arrived=False))}
    with pytest.raises(direct_duet.DirectDuetError, match="partner never reached the start line"):
        direct_duet.pair_result(3, alone, {"cn": "1", "bm": "0"})


def test_the_wait_blocks_until_both_sides_end_and_names_those_past_the_timeout():
    quick = [subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True) for _ in range(2)]
    assert direct_duet.wait_all(quick, timeout=60) == []
    assert all(process.returncode == 0 for process in quick)
    slow = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert direct_duet.wait_all([slow], timeout=0.2) == [slow] and slow.returncode is None
    finally:
        slow.kill()
        slow.wait()


def test_the_summary_is_the_reports_paired_interval_and_the_log_spread():
    ratios = [1.02, 1.00, 1.03, 0.99, 1.01, 1.02]
    drift = [1.0, 0.9, 1.1, 0.95, 1.05, 0.92]  # the host's drift falls on both sides alike
    pairs = [(1000.0 * d * r, 1000.0 * d) for d, r in zip(drift, ratios, strict=True)]
    sides = [direct_duet.pair_cpus(("0", "1"), index)["cn"] for index in range(6)]
    found = direct_duet.summary(pairs, sides)
    logs = [math.log(r) for r in ratios]
    assert found["pairs"] == 6
    assert found["log_spread"] == pytest.approx(statistics.stdev(logs))
    estimate, low, high = paired_ratio_interval(pairs, sides=sides)
    assert found["estimate"] == pytest.approx(estimate) and found["interval"] == pytest.approx([low, high])
    assert found["estimate"] == pytest.approx(math.exp(statistics.fmean(logs)))  # balanced sides: the geomean
    results = [
        {"cn": cn, "bm": bm, "cpus": {"cn": side, "bm": "x"}} for (cn, bm), side in zip(pairs, sides, strict=True)
    ]
    assert direct_duet.summary_of(results) == found
    one = direct_duet.summary(pairs[:1])
    assert one["estimate"] == pytest.approx(1.02) and one["interval"] is None and one["log_spread"] is None
    assert direct_duet.summary_line(found).startswith(f"direct cn/bm {found['estimate']:.4f} [")


def test_a_machine_without_the_lab_is_told_what_to_build(tmp_path):
    found = direct_duet.problems(prefix=str(tmp_path), docker="no-such-docker-cli")
    assert any(f"{tmp_path}/venv/bin/python is missing" in problem for problem in found)
    assert any("no-such-docker-cli is not installed" in problem for problem in found)
