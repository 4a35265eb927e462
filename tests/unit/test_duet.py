"""The duet schedule (issue 38): a cell and its baseline's copy paired round by round on disjoint CPU sets that
swap every round, partner ids both ways, the cells that cannot pair left alone and said, the refusal of a pair that
does not fit twice, the role's units (a stopped pair is run again whole, each side recorded once), both sides
started together by duet_run, their records' results, the start line of their timed windows, and the report that
pairs by duet pair and says what duet measures."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy
import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import duet as duet_run
from ansible_collections.platbench.lab.plugins.modules import duet_run as duet_run_module
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import duet_pair
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, duet_cpus
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import cells_to_run, duet_problems, run_units
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import schedule
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import plan_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import validate_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import cell_outcome
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from plan_options import cell_plan, plan_options
from record_cell_run import record_line
from round_samples import throughput_sample
from scipy import stats

from platbench import cli
from platbench.report import stats as report_stats
from platbench.report.load import load_samples
from platbench.report.tables import (
    DUET_NOTE,
    DUET_PAIRED,
    DUET_PAIRED_UNBLOCKED,
    PAIRED,
    baseline_rows,
    comparison,
    rounds_needed,
    summarize,
)
from tests import skips
from workloads.cnn_train import training
from workloads.common import duet as workload_duet
from workloads.common.record import RECORD_FILE_ENV, RECORD_FILE_TEMPORARY_SUFFIX, parse_result_lines

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = {
    "name": "duet",
    "workload": "cnn_train",
    "platforms": ["bm", "cn", "pd"],
    "scaleup": [1],
    "cpu_config": ["pin"],
    "processor": ["cpu"],
    "repeats": 4,
    "schedule": "duet",
    "schedule_seed": 3,
}
TWO_CPUS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1],
    "numa_nodes": {"0": [0, 1]},
    "gpu_count": 0,
    "gpus": [],
}
CPU_CGROUP = {"version": "v2", "directory": "/sys/fs/cgroup"}


def duet_cells(**fields):
    return expand(validate_experiment({**EXPERIMENT, **fields}))


def test_each_cell_runs_beside_a_copy_of_bms_and_the_sides_swap_every_round():
    cells = duet_cells()
    by_id = {cell["id"]: cell for cell in cells}
    leads = [cell for cell in cells if cell["labels"].get("duet_role") == "lead"]
    assert sorted(cell["labels"]["platform"] for cell in leads) == ["cn"] * 4 + ["pd"] * 4
    # bm runs only as the partners' copies: one per lead, right after it.
    assert all(cell["labels"].get("duet_role") for cell in cells) and len(cells) == 16
    for index, cell in enumerate(cells):
        labels = cell["labels"]
        partner = by_id[labels["duet_partner"]]
        assert partner["labels"]["duet_partner"] == cell["id"]  # each names the other
        assert labels["duet_pair"] == partner["labels"]["duet_pair"]
        assert {labels["duet_side"], partner["labels"]["duet_side"]} == {0, 1}
        assert labels["schedule"] == "duet"
        if labels["duet_role"] == "lead":
            assert cells[index + 1] is partner and partner["labels"]["platform"] == "bm"
            assert partner["id"] == f"bm/1/pin/cpu|r{labels['repeat']}|partner={labels['scenario']}"
            assert labels["duet_side"] == labels["repeat"] % 2  # the lead's side swaps every round
    # Every round: the same pairs, in an order shuffled by round.
    orders = {}
    for cell in leads:
        orders.setdefault(cell["labels"]["repeat"], []).append(cell["labels"]["platform"])
    assert all(sorted(order) == ["cn", "pd"] for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == 2
    assert [cell["id"] for cell in duet_cells()] == [cell["id"] for cell in cells]  # the seed decides


def test_an_injected_cell_pairs_with_its_own_platform_without_injection():
    cells = duet_cells(platforms=["bm"], inject=["none", {"cpu_quota": 0.95}], repeats=2)
    assert len(cells) == 4
    for lead in (cell for cell in cells if cell["labels"]["duet_role"] == "lead"):
        assert lead["labels"]["inject"] == "cpu_quota=0.95" and lead["labels"]["platform"] == "bm"
        (partner,) = [cell for cell in cells if cell["id"] == lead["labels"]["duet_partner"]]
        assert partner["labels"]["inject"] == "none"
        assert partner["id"].endswith("|partner=bm/1/pin/cpu[cpu_quota=0.95]")


def test_cells_that_cannot_pair_run_alone_under_rounds_and_the_plan_says_why():
    cells = duet_cells(platforms=["bm", "cn", "vm"], repeats=2)
    alone = [cell for cell in cells if cell["labels"]["schedule"] == "rounds"]
    assert sorted(cell["id"] for cell in alone) == sorted(
        ["bm/1/pin/cpu|r0", "bm/1/pin/cpu|r1", "vm/1/pin/cpu|r0", "vm/1/pin/cpu|r1"]
    )  # bm runs alone too: vm is compared with it
    assert all("duet_pair" not in cell["labels"] for cell in alone)
    plan, _ = plan_experiment(
        str(REPO / "experiments"),
        "smoke",
        {"platforms": ["bm", "cn", "vm"], "cpu_config": ["pin", "vnl"], "schedule": "duet", "emulated": None},
    )
    reasons = {(entry["platform"], entry["reason"]) for entry in plan["schedule_fallbacks"]}
    assert ("vm", "vm is a guest platform; only a process's or a container's cells run in pairs") in reasons
    assert any(platform == "cn" and "not pinned" in reason for platform, reason in reasons)
    assert plan["schedule_seed"] == schedule.seed_for("smoke")
    assert not cells_of_schedule(plan, "sequential")


def test_make_labs_answer_is_cn_beside_bm_in_duet_pairs_that_time_seconds_of_steps():
    # `make lab` runs the smoke's size `answer` (Makefile SIZE) until decided: every cell in a pair, none alone.
    plan, _ = plan_experiment(str(REPO / "experiments"), "smoke", {}, size="answer")
    assert plan["as_run"]["size"] == "answer" and not plan["schedule_fallbacks"]
    assert {cell["labels"]["scenario"] for cell in plan["cells"]} == {"bm/1/pin/cpu", "cn/1/pin/cpu"}
    assert {cell["labels"]["schedule"] for cell in plan["cells"]} == {"duet"}
    leads = [cell for cell in plan["cells"] if cell["labels"]["duet_role"] == "lead"]
    assert [cell["labels"]["platform"] for cell in leads] == ["cn"] * plan["repeats"]
    assert {cell["labels"]["steps"] for cell in plan["cells"]} == {"auto"}
    makefile = (REPO / "Makefile").read_text()
    assert "SIZE ?= $(if $(filter smoke,$(EXPERIMENT)),answer)" in makefile


def cells_of_schedule(plan, name):
    return [cell for cell in plan["cells"] if cell["labels"]["schedule"] == name]


def test_the_pairs_cpu_sets_are_disjoint_in_one_numa_node():
    assert duet_cpus([0, 1], 1) == ([1], [0])
    assert duet_cpus(list(range(8)), 2, numa_nodes={"0": [0, 2, 4, 6], "1": [1, 3, 5, 7]}) == ([5, 7], [1, 3])
    with pytest.raises(CellPlanError, match="needs 2 x 3 free CPUs in one NUMA node"):
        duet_cpus(list(range(8)), 3, numa_nodes={"0": [0, 2, 4, 6], "1": [1, 3, 5, 7]})
    with pytest.raises(CellPlanError, match="runs twice, side by side: scale-up 4 needs 4 CPUs but only 2"):
        duet_cpus([0, 1], 2)


def test_each_sides_plan_gets_its_half_and_the_halves_swap_by_round():
    options = plan_options(
        host="runner-a",
        campaign="c1",
        engines={"docker": {"answers": True, "version": "24.0.5", "image_id": "sha256:" + "cd" * 32}},
    )
    cells = duet_cells(platforms=["bm", "cn"], repeats=2)
    cpus = {cell["id"]: cell_plan(cell, TWO_CPUS, options)["cpus"] for cell in cells}
    for cell in cells:
        partner = cell["labels"]["duet_partner"]
        assert sorted(cpus[cell["id"]] + cpus[partner]) == [0, 1]
    leads = sorted((cell for cell in cells if cell["labels"]["duet_role"] == "lead"), key=lambda c: c["id"])
    assert [cpus[cell["id"]] for cell in leads] == [[1], [0]]  # round 0 side 0 (CPU 1), round 1 side 1


def test_a_pair_that_does_not_fit_twice_is_refused_before_any_cell_naming_the_scenario():
    cells = duet_cells(platforms=["bm", "cn"], scaleup=[1, 2], repeats=1)
    (problem,) = duet_problems("duet", cells, TWO_CPUS, [], "lab1")
    assert problem.startswith("Experiment 'duet' runs scenario cn/2/pin/cpu as a duet (schedule: duet) on lab1")
    assert "Use schedule: rounds, or a lower scale-up, in experiments/duet.yml." in problem
    assert duet_problems("duet", duet_cells(platforms=["bm", "cn"], repeats=1), TWO_CPUS, [], "lab1") == []


def test_a_pair_runs_as_one_unit_and_a_side_measured_before_a_stop_is_not_recorded_again():
    plan = {"name": "duet", "cells": duet_cells(platforms=["bm", "cn"], repeats=2)}
    status = {"bm": {"ready": True}, "cn": {"ready": True}}
    chosen = cells_to_run(plan, status, "lab1", facts=TWO_CPUS)
    assert [unit["tasks"] for unit in chosen["units"]] == ["duet.yml", "duet.yml"]
    first = chosen["units"][0]
    assert first["partner"]["id"] == first["cell"]["labels"]["duet_partner"]
    assert first["record"] == [first["cell"]["id"], first["partner"]["id"]]
    # The run stopped after the lead's record: the pair runs again whole, and only the partner is recorded.
    again = cells_to_run(plan, status, "lab1", done=[first["cell"]["id"]], facts=TWO_CPUS)
    assert again["units"][0]["record"] == [first["partner"]["id"]] and len(again["units"]) == 2
    both = cells_to_run(plan, status, "lab1", done=first["record"], facts=TWO_CPUS)
    assert len(both["units"]) == 1
    # A lead whose partner's platform cannot run here runs alone.
    (alone,) = run_units([first["cell"]])
    assert alone == {"tasks": "cell.yml", "cell": first["cell"], "partner": None, "record": [first["cell"]["id"]]}


def run_pair(sides, timeout, **keywords):
    """duet_run.run_pair with the waiter's policy left as it is: pytest's own thread must not go idle."""
    return duet_run.run_pair(sides, timeout, idle=lambda: "unchanged: a test", **keywords)


def test_duet_run_starts_both_sides_before_either_ends_and_stops_one_at_the_timeout(tmp_path):
    mark = tmp_path / "started"
    # The second side waits for the first's mark: it ends only if both ran at once.
    pair = run_pair(
        [
            {"command": f"touch {mark}; sleep 1; echo first"},
            {"command": f"for i in $(seq 50); do [ -e {mark} ] && break; sleep 0.1; done; [ -e {mark} ] && echo seen"},
        ],
        timeout=30,
    )
    results = pair["sides"]
    assert [result["rc"] for result in results] == [0, 0]
    assert results[1]["stdout"] == "seen\n" and results[0]["stdout"] == "first\n"
    assert pair["overlap_seconds"] > 0 and abs(results[0]["started"] - results[1]["started"]) < 1.0
    began = time.monotonic()
    slow, quick = run_pair([{"command": "sleep 60"}, {"command": "exit 3"}], timeout=1)["sides"]
    assert slow["timed_out"] and slow["rc"] == -9 and time.monotonic() - began < 30
    assert quick == {**quick, "rc": 3, "timed_out": False}
    with pytest.raises(duet_run.DuetError, match="a side is a shell line"):
        run_pair([{"container": {"engine": "lxc", "name": "x"}}], timeout=1)


def test_duet_run_clears_the_pairs_start_line_before_the_sides_start_removes_it_after_and_inspects_each_container(
    tmp_path,
):
    duet_dir = tmp_path / "duet" / "pair"
    duet_dir.mkdir(parents=True)
    (duet_dir / "platbench-a.ready").write_text("an earlier try's mark")
    inspected = []

    def inspect(container):
        inspected.append((container["name"], sorted(path.name for path in duet_dir.iterdir())))
        return ({"Id": "abc", "State": {"OOMKilled": False}}, None) if container["name"] == "pb-a" else (None, "gone")

    def fake_engine(argv, **keywords):
        # `docker start --attach` of a created container: here a shell that looks at the start line.
        return subprocess.Popen([sys.executable, "-c", "print('started')"], **keywords)

    marks = f"ls {duet_dir} 2>/dev/null | wc -l; mkdir -p {duet_dir}; touch {duet_dir}/platbench-b.ready"
    sides = [
        {"command": marks},
        {"container": {"engine": "docker", "name": "pb-a"}},
        {"container": {"engine": "docker", "name": "pb-b"}},
    ]
    pair = run_pair(sides, timeout=30, duet_dir=str(duet_dir), inspect=inspect, popen=selective_popen(fake_engine))
    process, container, lost = pair["sides"]
    assert process["stdout"] == "0\n"  # the earlier try's mark was gone before the sides started
    assert container["inspect"] == {"Id": "abc", "State": {"OOMKilled": False}} and "inspect_error" not in container
    assert lost["inspect_error"] == "gone" and "inspect" not in lost and "inspect" not in process
    # Both containers inspected once both sides ended (the mark the process side left still there), the folder gone.
    assert inspected == [("pb-a", ["platbench-b.ready"]), ("pb-b", ["platbench-b.ready"])]
    assert not duet_dir.exists() and "duet_dir_error" not in pair


def test_duet_run_makes_a_process_sides_cgroup_before_the_sides_start_and_removes_it_once_they_ended(tmp_path):
    cgroup = {"path": str(tmp_path / "platbench-cell-0123456789ab"), "version": "v2", "quota_us": -1, "period_us": 100}
    made, removed = [], []

    def create(path, version, quota, period_us):
        made.append((path, version, quota, period_us))
        os.mkdir(path)
        return True, {}

    def remove(path, grace):
        removed.append(path)
        os.rmdir(path)
        return True, []

    # The side sees its cgroup there when it starts, as its shell line enters it.
    sides = [{"command": f"test -d {cgroup['path']} && echo there", "cgroup": cgroup}, {"command": "echo other"}]
    pair = run_pair(sides, timeout=30, cgroups=(create, remove))
    assert pair["sides"][0]["stdout"] == "there\n" and not os.path.exists(cgroup["path"])
    assert made == [(cgroup["path"], "v2", -1, 100)] and removed == [cgroup["path"]] and "cgroups_left" not in pair

    # One that cannot go is said, per side and for the pair; the measurement stands.
    def stuck(path, grace):
        raise duet_run.cpu_quota.QuotaError(f"cannot remove the cgroup {path}: Device or resource busy")

    pair = run_pair(sides, timeout=30, cgroups=(create, stuck))
    assert pair["sides"][0]["rc"] == 0 and pair["cgroups_left"] == [cgroup["path"]]
    assert "Device or resource busy" in pair["sides"][0]["cgroup_error"] and "cgroup_error" not in pair["sides"][1]
    os.rmdir(cgroup["path"])

    # One that cannot be made fails the pair before any side starts, and those made before it go.
    second = {**cgroup, "path": str(tmp_path / "platbench-cell-ba9876543210")}
    mark = tmp_path / "ran"

    def refusing(path, version, quota, period_us):
        if path == second["path"]:
            raise duet_run.cpu_quota.QuotaError(f"cannot create the cgroup {path}: Permission denied")
        return create(path, version, quota, period_us)

    removed.clear()
    two = [{"command": f"touch {mark}", "cgroup": cgroup}, {"command": f"touch {mark}", "cgroup": second}]
    with pytest.raises(duet_run.DuetError, match=r"platbench-cell-ba9876543210 of a side cannot be made.*denied"):
        run_pair(two, timeout=30, cgroups=(refusing, remove))
    assert not mark.exists() and removed == [cgroup["path"]] and not os.path.exists(cgroup["path"])


def test_duet_runs_module_takes_a_sides_cgroup_and_names_the_one_it_cannot_make(tmp_path, capsys):
    # Before any side starts, and before the module's process goes idle: the real cpu_quota.create.
    path = tmp_path / "no-hierarchy" / "platbench-cell-0123456789ab"
    side = {"command": f"touch {tmp_path / 'ran'}", "cgroup": {"path": str(path), "version": "v1", "quota_us": -1}}
    with patch_module_args({"sides": [side], "timeout": 30}), pytest.raises(SystemExit):
        duet_run_module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] and f"the cgroup {path} of a side cannot be made" in result["msg"]
    assert "does not exist" in result["msg"] and not (tmp_path / "ran").exists()


def selective_popen(engine):
    """A Popen that runs shell lines as they are and hands each engine CLI's argv to ``engine``."""

    def popen(argv, **keywords):
        if argv[0] in duet_run.ENGINES:
            return engine(argv, **keywords)
        return subprocess.Popen(argv, **keywords)

    return popen


def test_an_engines_inspect_is_read_from_its_cli_and_each_way_it_fails_is_said():
    def answering(returncode, stdout=b"", stderr=b""):
        return lambda argv, **keywords: subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    container = {"engine": "podman", "name": "pb-a"}
    found, error = duet_run.inspect_container(container, run=answering(0, b'[{"Id": "abc"}]'))
    assert (found, error) == ({"Id": "abc"}, None)
    for run, said in (
        (answering(125, stderr=b"Error: no such container pb-a\n"), "failed: Error: no such container pb-a"),
        (answering(0, b"not json"), "printed no JSON"),
        (answering(0, b"[]"), "printed no container"),
    ):
        found, error = duet_run.inspect_container(container, run=run)
        assert found is None and error.startswith("podman inspect --type container pb-a") and said in error

    def missing(argv, **keywords):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    assert "No such file or directory" in duet_run.inspect_container(container, run=missing)[1]


def policy_of(output):
    """The policy `chrt -p` printed: ``SCHED_IDLE``..."""
    return re.search(r"scheduling policy: (SCHED_\w+)", output).group(1)


@skips.needs_root("a thread at SCHED_IDLE goes back to SCHED_OTHER only with CAP_SYS_NICE")
def test_duet_run_waits_at_idle_priority_and_a_podman_sides_cli_runs_at_the_normal_policy():
    docker = duet_run.argv_of({"container": {"engine": "docker", "name": "pb-a"}})
    podman = duet_run.argv_of({"container": {"engine": "podman", "name": "pb-a"}})
    assert docker == ["docker", "start", "--attach", "pb-a"]  # containerd starts the container, at its own policy
    assert podman == ["chrt", "--other", "0", "podman", "start", "--attach", "pb-a"]
    normal = podman[: podman.index("podman")]
    sides = [{"command": "chrt -p $$"}, {"command": shlex.join([*normal, "/bin/sh", "-c", "chrt -p $$"])}]
    pair = {}
    # The policy is the calling thread's, and its children's: a thread of its own keeps pytest's as it is.
    waiter = threading.Thread(target=lambda: pair.update(duet_run.run_pair(sides, timeout=30)))
    waiter.start()
    waiter.join(timeout=60)
    assert pair["waiter_policy"] == duet_run.IDLE
    inherited, reset = pair["sides"]
    assert policy_of(inherited["stdout"]) == "SCHED_IDLE"  # what a side would run at that did not set its own
    assert policy_of(reset["stdout"]) == "SCHED_OTHER" and reset["rc"] == 0
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_waiter_the_kernel_keeps_at_its_policy_runs_the_pair_and_says_why(monkeypatch, capsys):
    def refused(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refused)
    assert duet_run.wait_at_idle_priority() == "unchanged: SCHED_IDLE was refused (Operation not permitted)"
    with patch_module_args({"sides": [{"command": "echo hi"}], "timeout": 30}), pytest.raises(SystemExit):
        duet_run_module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["waiter_policy"].startswith("unchanged: SCHED_IDLE was refused")
    assert result["sides"][0]["stdout"] == "hi\n" and result["changed"]


def record_command(path=None, to_stdout=False):
    """A side whose workload emits a real record (workloads/common/record.py) with ``path`` as its record file, and
    whose stream loses it unless ``to_stdout``."""
    program = "from workloads.common.record import emit_record, metric; emit_record('cnn_train', {}, " + (
        "[metric('throughput', 812.5, 'images/sec')], {'cpuset': '1'})"
    )
    env = {"PYTHONPATH": str(REPO), **({RECORD_FILE_ENV: str(path)} if path else {})}
    lost = "" if to_stdout else " > /dev/null"
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-c", program]) + lost


def test_duet_run_returns_what_each_record_file_holds_and_removes_it_and_one_an_earlier_try_left(tmp_path):
    written, unwritten = tmp_path / "pair" / "platbench-a.record", tmp_path / "pair" / "platbench-b.record"
    unwritten.parent.mkdir()
    for stale in (unwritten, Path(str(unwritten) + duet_run.RECORD_TEMPORARY_SUFFIX)):
        stale.write_text("PLATBENCH_RESULT {an earlier try's")
    sides = [
        {"command": record_command(written), "record_file": str(written)},
        {"command": "echo no record", "record_file": str(unwritten)},
    ]
    lost, silent = run_pair(sides, timeout=60)["sides"]
    assert lost["rc"] == 0 and lost["stdout"] == ""  # the stream lost the line
    (record,) = parse_result_lines(lost["record_text"])
    assert record["metrics"][0]["value"] == 812.5
    assert silent["record_text"] is None and "record_file_error" not in silent  # not the earlier try's
    assert list(unwritten.parent.iterdir()) == []  # every record file read, and gone
    assert duet_run.RECORD_TEMPORARY_SUFFIX == RECORD_FILE_TEMPORARY_SUFFIX  # the workload's temporary file goes too


def test_a_sides_record_the_stream_lost_or_cut_short_is_read_from_its_record_file():
    plans = [
        {"cell": "cn/1/pin/cpu|r0", "cpuset": "1", "container": {"engine": "docker", "name": "pb-a"}},
        {"cell": "bm/1/pin/cpu|r0|partner=cn/1/pin/cpu", "cpuset": "0", "process": {"command": "true"}},
    ]
    plans = [{**plan, "record_file": f"/cache/duet/pair/{index}.record"} for index, plan in enumerate(plans)]
    sides = duet_pair.sides(plans)
    assert [side["run"]["record_file"] for side in sides] == ["/cache/duet/pair/0.record", "/cache/duet/pair/1.record"]
    line = record_line(throughput=812.5)
    run = {
        "sides": [
            # The attach stream stopped mid-line: what record_cell would have failed as "not valid JSON".
            {"rc": 0, "stdout": "step 9\n" + line[:60], "stderr": "W a warning\n", "record_text": line + "\n"},
            {"rc": 0, "stdout": record_line(throughput=790.0) + "\n", "stderr": "", "record_text": "garbage"},
        ],
        "overlap_seconds": 8.0,
    }
    container, process = duet_pair.results(sides, run, [{"item": sides[0], "container": {"Id": "abc"}}])
    assert container["duet"]["record_from"] == "file" and process["duet"]["record_from"] == "stream"
    output = container["results"]["container"]["container"]["Output"]
    assert output == "step 9\n" + line + "\nW a warning\n"  # the cut line gone, the logs kept
    observed = placements.observed({"platform": "cn", "container": {"engine": "docker"}}, container["results"])
    status, error, samples = cell_outcome({"cell": "cn/1/pin/cpu|r0"}, observed.output, None, {}, {})
    assert (status, error) == ("ok", None) and metric_value(samples, "throughput") == 812.5
    assert process["results"]["process"]["stdout"] == run["sides"][1]["stdout"]  # a valid stream is kept as it is
    # Neither holds a record: the output stays, and the record fails with what it says.
    (nowhere,) = duet_pair.results(sides[1:], {"sides": [{"rc": 1, "stdout": "Killed", "record_text": None}]}, [])
    assert nowhere["duet"]["record_from"] is None and nowhere["results"]["process"]["stdout"] == "Killed"


def metric_value(samples, metric):
    (value,) = [sample["value"] for sample in samples if sample["metric"] == metric]
    return value


def test_each_duet_sides_plan_names_its_record_file_in_the_pairs_directory_and_gives_it_to_the_workload():
    options = plan_options(host="runner-a", campaign="c1")
    cells = duet_cells(platforms=["bm", "cn"], repeats=1)
    facts = {**TWO_CPUS, "cpu_cgroup": CPU_CGROUP}
    plans = [cell_plan(cell, facts, options) for cell in cells]
    for plan in plans:
        assert plan["record_file"] == f"{plan['duet_dir']}/{plan['name']}.record"
        assert plan["env"][RECORD_FILE_ENV] == plan["record_file"]
        assert plan["record_file"].startswith(options["peak_cache_dir"] + "/")  # mounted at its own path in a container
    assert len({plan["record_file"] for plan in plans}) == 2
    assert {side["engine"]: side["run"]["record_file"] for side in duet_pair.sides(plans)} == {
        (plan["container"]["engine"] if "container" in plan else None): plan["record_file"] for plan in plans
    }
    alone = cell_plan(duet_cells(platforms=["bm"], schedule="rounds", repeats=1)[0], facts, options)
    assert "record_file" not in alone and RECORD_FILE_ENV not in alone["env"]


def test_each_sides_record_gets_its_kinds_result_and_the_pair():
    plans = [
        {"cell": "cn/1/pin/cpu|r0", "cpuset": "1", "container": {"engine": "docker", "name": "pb-a"}},
        {"cell": "bm/1/pin/cpu|r0|partner=cn/1/pin/cpu", "cpuset": "0", "process": {"command": "echo hi"}},
    ]
    sides = duet_pair.sides(plans)
    assert [side["run"] for side in sides] == [
        {"container": {"engine": "docker", "name": "pb-a"}},
        {"command": "echo hi"},
    ]
    run = {
        "sides": [
            {"rc": 0, "stdout": "out", "stderr": "err", "started": 10.0, "ended": 20.0, "timed_out": False},
            {"rc": 0, "stdout": "line", "stderr": "", "started": 10.25, "ended": 19.0, "timed_out": False},
        ],
        "overlap_seconds": 8.75,
    }
    infos = [{"item": sides[0], "container": {"Id": "abc", "HostConfig": {"CpusetCpus": "1"}}}]
    container, process = duet_pair.results(sides, run, infos)
    assert container["results"]["container"] == {
        "container": {"Id": "abc", "HostConfig": {"CpusetCpus": "1"}, "Output": "outerr"},
        "status": 0,
    }
    # Without a play's own inspect, the one duet_run returned with the side.
    own = {"Id": "def", "HostConfig": {"CpusetCpus": "1"}}
    with_own = {**run, "sides": [{**run["sides"][0], "inspect": own}, run["sides"][1]]}
    assert duet_pair.results(sides, with_own)[0]["results"]["container"]["container"] == {**own, "Output": "outerr"}
    assert process["results"]["process"] == {"rc": 0, "stdout": "line", "stderr": ""}
    assert container["duet"] == {
        "partner": "bm/1/pin/cpu|r0|partner=cn/1/pin/cpu",
        "cpus": "1",
        "overlap_seconds": 8.75,
        "start_skew_seconds": 0.25,
        "timed_out": False,
    }
    # What the container kind reads from it: the engine's cpuset and the output.
    observed = placements.observed({"platform": "cn", "container": {"engine": "docker"}}, container["results"])
    assert observed.output == "outerr" and observed.runtime["engine_cpuset_cpus"] == "1"
    # A process side's cgroup of its own goes to duet_run, which makes and removes it.
    cgroup = {"path": "/sys/fs/cgroup/cpu/platbench-cell-0123456789ab", "version": "v1", "quota_us": -1}
    planned = {**plans[1], "process": {"command": "echo hi", "cgroup": {**cgroup, "period_us": 100000, "leave": []}}}
    assert duet_pair.sides([planned])[0]["run"] == {"command": "echo hi", "cgroup": {**cgroup, "period_us": 100000}}
    with pytest.raises(duet_pair.DuetPlanError, match="only a process's or a container's cells run as a duet pair"):
        duet_pair.sides([{"cell": "vm/1/pin/cpu|r0", "placement": "guest"}])


# -- the report ----------------------------------------------------------------------------------------------------

# Two partners of bm per round (cn and pd), the host's capacity drifting by pair: cn is 3% slower in every pair.
DRIFT = [1.00, 0.88, 1.07, 0.93, 1.10, 0.91]


def pair_samples(platform, value, bm_value, repeat, stamp, side, bm_side):
    """A duet pair's two samples: ``platform``'s lead cell on CPU set ``side`` and bm's partner on ``bm_side``."""
    lead = f"{platform}/1/pin/cpu|r{repeat}"
    pair = {"schedule": "duet", "duet_pair": lead}
    mine = throughput_sample(platform, value, repeat, stamp, **pair, duet_side=side)
    partner = throughput_sample("bm", bm_value, repeat, stamp, **pair, duet_side=bm_side, duet_partner=lead)
    partner["labels"]["cell"] = f"bm/1/pin/cpu|r{repeat}|partner={platform}/1/pin/cpu"
    return [mine, partner]


def written(tmp_path, name, samples):
    directory = tmp_path / name
    directory.mkdir()
    append_samples(directory / "samples.jsonl", samples)
    return directory


def duet_campaign(tmp_path):
    samples = []
    for repeat, drift in enumerate(DRIFT):
        for platform, share, bm_drift in (("cn", 0.97, drift), ("pd", 1.0, drift * 1.04)):
            side = repeat % 2
            samples += pair_samples(
                platform, 1000.0 * drift * share, 1000.0 * bm_drift, repeat, 60.0 * repeat, side, side
            )
    return written(tmp_path, "duet", samples)


def test_a_duet_campaign_is_compared_pair_by_pair_and_the_report_says_what_duet_measures(tmp_path, capsys):
    directory = duet_campaign(tmp_path)
    rows, keys, _ = summarize(load_samples(directory), ["throughput"])
    assert [row["platform"] for row in rows] == ["bm", "cn", "pd"]  # the duet labels make no rows of their own
    compared = {
        row["platform"]: comparison(row, baseline, "throughput")
        for row, baseline in zip(rows, baseline_rows(rows, keys), strict=True)
        if baseline and baseline is not row
    }
    assert compared["cn"]["method"] == DUET_PAIRED != PAIRED and len(compared["cn"]["pairs"]) == 6
    assert compared["cn"]["estimate"] == pytest.approx(0.97)
    assert compared["pd"]["estimate"] == pytest.approx(1 / 1.04)  # its own partners, not cn's
    assert cli.main(["report", str(directory)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"Answer: throughput, each platform against bm (95% interval, {DUET_PAIRED})")
    assert "cn/bm throughput 0.970 [0.970, 0.970]: 3% slower" in printed
    assert DUET_NOTE in printed


# -- the start line of a pair's timed windows (workloads/common/duet.py) ---------------------------------------------


def test_both_sides_meet_at_the_start_line_and_a_lonely_side_goes_on_after_the_limit(tmp_path):
    arrived = {}

    def side(number, delay):
        time.sleep(delay)
        arrived[number] = (workload_duet.start_line(str(tmp_path / "pair"), number), time.monotonic())

    sides = [threading.Thread(target=side, args=(0, 0.0)), threading.Thread(target=side, args=(1, 0.5))]
    for thread in sides:
        thread.start()
    for thread in sides:
        thread.join(timeout=30)
    (early, early_left), (late, late_left) = arrived[0], arrived[1]
    assert early["partner_arrived"] and late["partner_arrived"]
    assert early["waited_seconds"] >= 0.4 and late["waited_seconds"] < 0.1
    assert abs(early_left - late_left) < 0.2  # they leave the line together
    alone = workload_duet.start_line(str(tmp_path / "alone"), 0, limit=0.2)
    assert alone["partner_arrived"] is False and alone["waited_seconds"] >= 0.2
    assert workload_duet.pair_from_env({"PLATBENCH_DUET_DIR": "/c/duet/x", "PLATBENCH_DUET_SIDE": "1"}) == (
        "/c/duet/x",
        1,
    )
    assert workload_duet.pair_from_env({"PLATBENCH_DUET_DIR": "/c/duet/x"}) is None


# The CPU set a side ran on speeds it up or slows it down (one vCPU busier than the other): side 1 is 8% faster than
# side 0 for whichever cell runs there, the schedule swaps the sets every pair, and cn is 3% slower than bm.
CORE = {0: 1.0, 1: 1.08}
NOISE = [1.004, 0.993, 1.006, 0.998, 0.995, 1.003, 1.001, 0.996]


def core_campaign(tmp_path):
    samples = []
    for repeat, noise in enumerate(NOISE):
        side = repeat % 2
        samples += pair_samples("cn", 970.0 * CORE[side] * noise, 1000.0 * CORE[1 - side], repeat, 0.0, side, 1 - side)
    return written(tmp_path, "core", samples)


def test_a_duet_comparison_is_blocked_on_the_cpu_set_so_a_faster_core_does_not_widen_it(tmp_path):
    rows, keys, _ = summarize(load_samples(core_campaign(tmp_path)), ["throughput"])
    cn, bm = rows[1], baseline_rows(rows, keys)[1]
    compared = comparison(cn, bm, "throughput")
    assert compared["method"] == DUET_PAIRED and compared["sides"] == [0, 1] * 4
    low, high = compared["interval"]
    assert low < 0.97 < high and high - low < 0.02  # the noise alone
    unblocked = report_stats.paired_ratio_interval(compared["pairs"])
    assert unblocked[2] - unblocked[1] > 5 * (high - low)  # the cores' 8%, alternating, would have widened it
    assert report_stats.pairs_needed(compared["pairs"], 0.01, sides=compared["sides"]) < report_stats.pairs_needed(
        compared["pairs"], 0.01
    )


def test_a_duet_comparison_with_one_pair_on_a_cpu_set_says_it_is_not_blocked_and_how_many_rounds_it_needs(tmp_path):
    samples = []
    for repeat, noise in enumerate(NOISE[:3]):  # sides 0, 1, 0: one pair on side 1, too few to block on
        side = repeat % 2
        samples += pair_samples("cn", 970.0 * noise, 1000.0, repeat, 0.0, side, 1 - side)
    rows, keys, _ = summarize(load_samples(written(tmp_path, "few", samples)), ["throughput"])
    cn, bm = rows[1], baseline_rows(rows, keys)[1]
    compared = comparison(cn, bm, "throughput")
    assert compared["method"] == DUET_PAIRED_UNBLOCKED != DUET_PAIRED and compared["sides"] == [0, 1, 0]
    assert compared["interval"] == pytest.approx(report_stats.paired_ratio_interval(compared["pairs"])[1:])
    needed = report_stats.pairs_needed(compared["pairs"], 0.001)
    assert rounds_needed(compared, cn, bm, "throughput", 0.001) == needed - 3 > 0
    assert rounds_needed({**compared, "interval": None}, cn, bm, "throughput", 0.001) is None


def test_the_blocked_interval_is_least_squares_with_a_side_term():
    pairs = [(95.0, 100.0), (104.0, 97.0), (93.5, 99.0), (101.0, 96.5), (94.0, 98.0), (99.5, 97.5)]
    sides = [0, 1, 0, 1, 0, 0]  # unbalanced: the estimate weighs the two sets' means equally
    logs = numpy.log([value / baseline for value, baseline in pairs])
    design = numpy.column_stack([numpy.ones(len(logs)), [1.0 if side == 0 else -1.0 for side in sides]])
    coefficients, residual, _, _ = numpy.linalg.lstsq(design, logs, rcond=None)
    variance = residual[0] / (len(logs) - 2)
    standard_error = math.sqrt(variance * numpy.linalg.inv(design.T @ design)[0, 0])
    half = stats.t.ppf(0.975, len(logs) - 2) * standard_error
    estimate, low, high = report_stats.paired_ratio_interval(pairs, sides=sides)
    assert estimate == pytest.approx(math.exp(coefficients[0]))
    assert (low, high) == pytest.approx((math.exp(coefficients[0] - half), math.exp(coefficients[0] + half)))
    # one pair on a set, or a single set: nothing to block on, the plain paired interval
    assert report_stats.paired_ratio_interval(pairs[:3], sides=sides[:3]) == report_stats.paired_ratio_interval(
        pairs[:3]
    )
    assert report_stats.paired_ratio_interval(pairs, sides=[0] * 6) == report_stats.paired_ratio_interval(pairs)


def test_a_duet_side_with_steps_auto_times_a_window_of_its_seconds_after_the_line(tmp_path):
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "side1").write_text("1")  # the partner is there already

    # A clock that only the steps move: each step lasts 1/16 s exactly, so the window of 0.5 s holds 8 steps, and no
    # gap between steps on a busy host can shorten the timed sum (a sleeping step on the wall clock did, in CI).
    now = [0.0]

    def step(batch):
        now[0] += 0.0625
        return 1.0

    run = training.run_steps(
        lambda: None, step, 2, "auto", None, auto_seconds=0.5, pair=(str(tmp_path / "pair"), 0), clock=lambda: now[0]
    )
    assert run.calibration is None and run.duet_start["partner_arrived"]
    # The window's steps, not the warmup's: 10 steps in all, the last 8 timed.
    assert run.step_times == [0.0625] * 8 and len(run.losses) == 10
    assert (tmp_path / "pair" / "side0").exists()
