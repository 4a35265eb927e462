"""The fault catalogue (docs/src/running.md, "Faults"): each entry injects one fault into a real short campaign on bm
and cn (fault_lab.campaign_argv: the smoke experiment, one pinned cell per platform) and asserts that the failed cell is
recorded with a reason that names the fault, that the campaign goes on or stops with a clear message, that a rerun
resumes it with no sample lost and none recorded twice, and that nothing is left on the host: no process,
container, namespace, link, cgroup, fence or mount. Lab tests: they run with the lab (marker `lab`, the `lab`
fixture), as root.

A campaign costs half a minute of playbook before its cells, so entries that need not stand apart share one: the
killed workload (bm) and the cell timeout (cn) fail the two cells of one run; a crashed controller (SIGKILL, during
bm) is followed by a rerun that SIGTERM stops (during cn), and that by the rerun that completes; the clock step,
the second run refused by the lock, and (a copy of it) the truncated last line use one whole campaign. Each entry's
assertions are a test of their own."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from fault_lab import (
    BUSY_STEPS,
    CELL_SECONDS,
    CELLS,
    ENDLESS_STEPS,
    FENCE_STATE,
    Run,
    assert_nothing_left,
    assert_resumed,
    campaign_argv,
    cell_line,
    host_state,
    lab_workloads,
    left_behind,
    samples_of,
    workload_pid,
)
from playbook_run import run_lab_playbook, wait_for

from tests import skips

pytestmark = [
    pytest.mark.lab,
    pytest.mark.usefixtures("lab"),
    skips.requires(commands=["docker", "ip", "pgrep", "mount", "date"], by=skips.LAB),
]


def idle_host():
    """The host before an entry's fault, which nothing-is-left compares with: no workload may run already."""
    assert lab_workloads() == [], "a workload runs already: the lab is busy"
    return host_state()


@pytest.fixture
def clean_host(lab):
    return idle_host()


def until_done(argv, results):
    """A `platbench run` to its end: ``(exit status, output)``."""
    run = Run(argv, results)
    try:
        return run.finish(), run.output
    finally:
        run.stop()


def failed_errors(samples):
    return {sample["labels"]["cell"]: sample["metadata"]["error"] for sample in samples if sample["metric"] == "failed"}


# -- the workload and its cell: kill -9 (bm) and the cell timeout (cn), one run ------------------------------------

CELL_TIMEOUT = 12  # seconds; the bm workload is killed long before, the cn one trains on past it


@pytest.fixture(scope="module")
def cell_faults(lab, tmp_path_factory):
    """One run whose bm workload gets kill -9 and whose cn cell outlasts the cell timeout; then the rerun."""
    before, campaign = idle_host(), "fault-cells"
    results = tmp_path_factory.mktemp("cells") / "results"
    run = Run(campaign_argv(campaign, ENDLESS_STEPS, "-e", f"platform_run_cell_timeout={CELL_TIMEOUT}"), results)
    try:
        os.kill(wait_for(lambda: workload_pid("bm"), CELL_SECONDS, "bm workload"), signal.SIGKILL)
        run.wait_line(cell_line(CELLS[0], "failed"))
        bm_left = workload_pid("bm")
        run.wait_line(cell_line(CELLS[1], "failed"))
        cn_left = lab_workloads()
        code = run.finish()
    finally:
        run.stop()
    first = samples_of(results / campaign)
    left = left_behind(before, campaign)
    again = until_done(campaign_argv(campaign), results)
    return {
        "first": (code, run.output, first, left, bm_left, cn_left),
        "rerun": again,
        "dir": results / campaign,
        "before": before,
    }


def test_kill_9_of_the_workload_fails_its_cell_and_the_campaign_goes_on(cell_faults):
    code, output, first, left, bm_left, _ = cell_faults["first"]
    assert code == 1, output
    assert bm_left is None
    error = failed_errors(first)[CELLS[0]]
    assert "killed by SIGKILL (signal 9): the kernel's OOM killer, a `kill -9`" in error, error
    assert re.search(cell_line(CELLS[1], "failed"), output, re.M)  # the campaign went on to the next cell
    assert left == []
    rerun_code, rerun_output = cell_faults["rerun"]
    assert rerun_code == 0, rerun_output
    assert "localhost: 2 cells to run" in rerun_output  # failed cells run again
    assert_resumed(cell_faults["dir"], kept=first, failed=CELLS)
    assert_nothing_left(cell_faults["before"], "fault-cells")


def test_the_cell_timeout_stops_the_cell_for_good(cell_faults):
    code, output, first, left, _, cn_left = cell_faults["first"]
    assert code == 1, output
    error = failed_errors(first)[CELLS[1]]
    assert error.startswith(f"stopped by the cell timeout ({CELL_TIMEOUT} s)"), error
    assert cn_left == [], "the timed-out cell's workload runs on"
    assert "campaign fault-cells: 0 ok, 2 failed, 0 skipped of 2 cells run" in output
    assert left == []
    assert cell_faults["rerun"][0] == 0, cell_faults["rerun"][1]
    assert_resumed(cell_faults["dir"], kept=first, failed=CELLS)


# -- the Docker engine stopped mid-cell ------------------------------------------------------------------------------

# The engine started again as site.yml starts it: the docker role's own tasks (start.yml), on the facts host_facts
# gathers (a whole site.yml run takes minutes).
START_ENGINE = [
    {
        "name": "Start the Docker engine as site.yml does",
        "hosts": "platbench_container_hosts",
        "become": True,
        "gather_facts": False,
        "tasks": [
            {"name": "Read what the lab needs of the host", "platbench.lab.host_facts": {}},
            {
                "name": "Start the engine",
                "ansible.builtin.include_role": {"name": "platbench.lab.docker", "tasks_from": "start.yml"},
            },
        ],
    }
]


def dockerd():
    found = subprocess.run(["pgrep", "--exact", "dockerd"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def engine_answers():
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def test_dockerd_stopped_mid_cell_fails_that_cell_and_the_rerun_measures_it(clean_host, tmp_path):
    campaign, results = "fault-dockerd", tmp_path / "results"
    argv = campaign_argv(campaign, BUSY_STEPS)  # the rerun is the same command: its plan file refuses another
    run = Run(argv, results)
    try:
        run.wait_line(cell_line(CELLS[0], "ok"))
        wait_for(lambda: workload_pid("cn"), CELL_SECONDS, "cn workload")
        os.kill(dockerd(), signal.SIGTERM)
        wait_for(lambda: dockerd() is None, 60, "end of dockerd")
        run.wait_line(cell_line(CELLS[1], "failed"))
        code = run.finish()
        started = run_lab_playbook(START_ENGINE, tmp_path / "start")
        assert started.rc == 0, started.failed_messages()
    finally:
        run.stop()
        if not engine_answers():  # whatever failed, the lab's later tests need their engine
            run_lab_playbook(START_ENGINE, tmp_path / "start-again")
    assert engine_answers()
    # The engine's own links, cgroups and mounts are as its start made them: nothing-is-left looks from here on.
    started_again = host_state()
    assert code == 1, run.output
    first = samples_of(results / campaign)
    assert failed_errors(first)[CELLS[1]].startswith("the Docker engine stopped answering during the cell")
    assert f"  {CELLS[1]} on localhost: the Docker engine stopped answering" in run.output

    # The container the engine held when it stopped is exited, not removed: the rerun's cell replaces it.
    code, output = until_done(argv, results)
    assert code == 0, output
    assert "localhost: 1 cells to run, 1 already measured" in output
    assert_resumed(results / campaign, kept=first, failed=[CELLS[1]])
    assert_nothing_left(started_again, campaign)


# -- the controller: SIGKILL to the runner and its playbook (during bm), then SIGTERM to the rerun (during cn) --------


@pytest.fixture(scope="module")
def controller_faults(lab, tmp_path_factory):
    """A run killed with its playbook (a crashed controller) during the bm cell; its rerun, which cleans up after it
    and is stopped by SIGTERM during the cn cell; the rerun that completes the campaign."""
    before, campaign = idle_host(), "fault-controller"
    results = tmp_path_factory.mktemp("controller") / "results"
    argv = campaign_argv(campaign, BUSY_STEPS)
    crashed = Run(argv, results)
    try:
        wait_for(lambda: workload_pid("bm"), CELL_SECONDS, "bm workload")
        record = json.loads((results / campaign / "run.lock").read_text())
        crashed.process.kill()
        os.kill(record["playbook_pid"], signal.SIGKILL)
        crashed_code = crashed.finish()
    finally:
        crashed.stop()
    after_crash = samples_of(results / campaign)

    terminated = Run(argv, results)
    try:
        terminated.wait_line(cell_line(CELLS[0], "ok"))
        wait_for(lambda: workload_pid("cn"), CELL_SECONDS, "cn workload")
        terminated.process.send_signal(signal.SIGTERM)
        terminated_code = terminated.finish()
    finally:
        terminated.stop()
    after_sigterm = samples_of(results / campaign)
    left = left_behind(before, campaign)

    return {
        "crashed": (crashed_code, crashed.process.pid, record, after_crash),
        "terminated": (terminated_code, terminated.output, after_sigterm, left),
        "last": until_done(argv, results),
        "dir": results / campaign,
        "before": before,
    }


def test_sigkill_to_the_runner_and_its_playbook_then_a_rerun_cleans_up_and_resumes(controller_faults):
    """A crashed controller: nothing cleans up the bm cell it was running; the next run finds the campaign's lock
    file unheld, says so, stops what the dead playbook left (its worker, the workload) and removes the rest."""
    code, pid, record, after_crash = controller_faults["crashed"]
    assert code == -signal.SIGKILL and record["pid"] == pid and record["playbook_pid"], record
    assert after_crash == []  # the cell it was running records nothing
    _, output, after_rerun, _ = controller_faults["terminated"]
    assert (
        f"the last run of campaign fault-controller (platbench run pid {pid}, started {record['started']}: " in output
    )
    assert "ended without cleaning up: it was killed or its controller stopped" in output
    cleaned = output.index("removed what the last run left; resuming campaign fault-controller")
    assert cleaned < output.index("localhost: 2 cells to run")  # the crashed cell runs again
    assert re.search(cell_line(CELLS[0], "ok"), output, re.M)
    assert [sample for sample in after_rerun if sample["labels"]["cell"] != CELLS[0]] == []


def test_sigterm_to_the_runner_cleans_up_the_cell_and_the_rerun_resumes(controller_faults):
    code, output, after_sigterm, left = controller_faults["terminated"]
    assert code == 128 + signal.SIGTERM, output
    assert f"stopped by SIGTERM: cleaned up cell {CELLS[1]}; rerun the same command to resume: platbench run " in output
    assert {sample["labels"]["cell"] for sample in after_sigterm} == {CELLS[0]}  # a stopped cell records nothing
    assert left == []
    last_code, last_output = controller_faults["last"]
    assert last_code == 0, last_output
    assert "localhost: 1 cells to run, 1 already measured" in last_output
    assert_resumed(controller_faults["dir"], kept=after_sigterm)
    assert not (controller_faults["dir"] / "run.lock").exists()
    assert_nothing_left(controller_faults["before"], "fault-controller")


# -- the results directory's file system full ------------------------------------------------------------------------

FULL_FS_SIZE = "8m"  # a file system of a few MB: the campaign's files, and the filler that takes the rest


def fill(path):
    """Write ``path`` until its file system has no byte left."""
    chunk = 1 << 20
    with open(path, "wb", buffering=0) as stream:
        while chunk:
            try:
                stream.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2


def test_a_full_results_file_system_stops_the_campaign_whole_and_the_rerun_completes(clean_host, tmp_path):
    from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples

    campaign, results = "fault-full", tmp_path / "results"
    argv = campaign_argv(campaign, BUSY_STEPS)
    directory = results / campaign
    results.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_FS_SIZE}", "tmpfs", str(results)], check=True)
    try:
        run = Run(argv, results)
        try:
            run.wait_line(cell_line(CELLS[0], "ok"))
            # Full once the bm cell's samples are on disk (its event may come before the callback has written them).
            wait_for(lambda: samples_of(directory), CELL_SECONDS, "samples of the bm cell on disk")
            fill(results / "filler")
            code = run.finish()
        finally:
            run.stop()
        assert code == 1, run.output
        assert f"cell {CELLS[1]} is not recorded: the results directory {directory} has only " in run.output
        assert "too little to record this cell" in run.output
        assert "The campaign stops here; the samples written before are kept whole. Free space on that" in run.output
        samples = directory / "samples.jsonl"
        first = samples_of(directory)
        assert {sample["labels"]["cell"] for sample in first} == {CELLS[0]}
        assert all(json.loads(line) for line in samples.read_text().splitlines())  # no partial line

        # The results callback's own write on the full disk, two pages left free so that it begins: taken back whole,
        # the error raised.
        filler = results / "filler"
        os.truncate(filler, filler.stat().st_size - 8192)
        before = samples.read_bytes()
        with pytest.raises(OSError) as raised:
            append_samples(samples, first * 50)
        assert raised.value.errno == errno.ENOSPC and samples.read_bytes() == before

        filler.unlink()
        code, output = until_done(argv, results)
        assert code == 0, output
        assert "localhost: 1 cells to run, 1 already measured" in output
        assert_resumed(directory, kept=first)
    finally:
        subprocess.run(["umount", str(results)], check=False)
    assert_nothing_left(clean_host, campaign)


# -- one whole campaign: a clock step during its bm cell, a second run refused while it runs ---------------------------

MEASURED = "fault-measured"
# A step of the wall clock during a cell: the workloads time themselves on monotonic clocks (perf_counter, the
# process's start against /proc/uptime), so no figure moves by it. Stepped forward once the bm workload has run a
# moment, back by as much once it ended: a figure taken from the wall clock would be off by the step.
CLOCK_STEP = 60  # seconds: far more than a cell of BUSY_STEPS lasts, less than any timeout a run here has


def step_clock(seconds):
    subprocess.run(["date", "--set", f"@{time.time() + seconds:.6f}"], capture_output=True, check=True)


@pytest.fixture(scope="module")
def measured(lab, tmp_path_factory):
    """A whole campaign: the wall clock stepped during its bm cell, and a second `platbench run` of it started while
    it ran."""
    before = idle_host()
    results = tmp_path_factory.mktemp("measured") / "results"
    argv = campaign_argv(MEASURED, BUSY_STEPS)
    offset = time.time() - time.monotonic()
    first = Run(argv, results)
    stepped = False
    try:
        first.wait_line(rf"^platbench: campaign {MEASURED}, ")  # the lock is held from here
        second = Run(argv, results)
        try:
            second_code = second.finish(timeout=60)
        finally:
            second.stop()
        first_running = first.process.poll() is None
        workload = wait_for(lambda: workload_pid("bm"), CELL_SECONDS, "bm workload")
        time.sleep(1.0)  # into the cell: its process started, its steps under way
        alive = workload_pid("bm") == workload
        step_clock(CLOCK_STEP)
        stepped = True
        wait_for(lambda: workload_pid("bm") is None, CELL_SECONDS, "end of the bm workload")
    finally:
        if stepped:
            step_clock(-CLOCK_STEP)
    try:
        code = first.finish()
    finally:
        first.stop()
    return {
        "dir": results / MEASURED,
        "argv": argv,  # a rerun of the campaign is the same command: its plan file refuses another
        "before": before,
        "first": (code, first.output, first.process.pid, first_running),
        "second": (second_code, second.output),
        "clock": (alive, abs(time.time() - time.monotonic() - offset)),
    }


def test_a_second_run_of_a_running_campaign_is_refused_naming_the_first(measured):
    code, output, pid, first_running = measured["first"]
    second_code, second_output = measured["second"]
    assert second_code == 2, second_output
    assert f"campaign {MEASURED} is being run already, by platbench run pid {pid}, started " in second_output
    assert f"Wait for it to end, or stop it (Ctrl-C in its terminal, or kill -INT {pid}), then run this command" in (
        second_output
    )
    assert first_running and code == 0, output  # the first went on, to its end
    assert_resumed(measured["dir"])
    assert not (measured["dir"] / "run.lock").exists()
    assert_nothing_left(measured["before"], MEASURED)


def test_a_clock_step_during_a_cell_moves_no_timing(measured):
    alive, drift = measured["clock"]
    assert alive, "the bm cell ended within a second: give it more steps (BUSY_STEPS)"
    assert drift < 5, "the clock was not stepped back"
    code, output, _, _ = measured["first"]
    assert code == 0, output
    value = {(s["labels"]["platform"], s["metric"]): s["value"] for s in assert_resumed(measured["dir"])}
    for platform in ("bm", "cn"):
        assert 0 < value[(platform, "elapsed")] < CLOCK_STEP, value  # from the wall clock it would be above
        assert value[(platform, "throughput")] > 0, value
    # The stepped cell's figures stand beside the other platform's, as they do without a step: not off by the step.
    assert 0.2 < value[("bm", "throughput")] / value[("cn", "throughput")] < 5, value
    assert 0.2 < value[("bm", "elapsed")] / value[("cn", "elapsed")] < 5, value


def test_a_truncated_last_line_is_named_skipped_and_its_cell_runs_again(measured, clean_host, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(measured["dir"], results / MEASURED)
    samples = results / MEASURED / "samples.jsonl"
    lines = samples.read_bytes().splitlines(keepends=True)
    last = lines[-1]
    samples.write_bytes(b"".join(lines[:-1]) + last[: len(last) // 2])  # a crash in the middle of the last write
    cell = json.loads(last)["labels"]["cell"]  # whose write it cut
    kept = [sample for sample in samples_of(results / MEASURED) if sample["labels"]["cell"] != cell]

    code, output = until_done(measured["argv"], results)
    assert code == 0, output
    assert f"warning: {samples} line {len(lines)} is no whole sample (a write cut short by a crash?): skipped" in output
    assert f"the rest of cell {cell}'s samples, whose write was cut short: skipped; that cell runs again" in output
    assert "localhost: 1 cells to run, 1 already measured" in output
    assert re.search(cell_line(cell, "ok"), output, re.M)
    assert_resumed(results / MEASURED, kept=kept, cut_lines=[len(lines)])
    assert_nothing_left(clean_host, MEASURED)


# -- a crashed run's leftovers on the host ---------------------------------------------------------------------------

# A cell's network path that a crashed run left: names the lab uses (pb + 8 hex digits), an address of 198.18.0.0/15.
LEFT_TAG = "pbfa017e57"
LEFT_NAMESPACE, LEFT_BRIDGE, LEFT_ADDRESS = f"{LEFT_TAG}-0", f"{LEFT_TAG}br", "198.19.254.1/24"
# A top-level cpuset group of the test's own, on CPU 0 alone: the fence left up widened it to every core.
FENCED_GROUP = "platbench-fault-fence"
# A data volume of the campaign, as an overlay cell's (labelled, with mount options: Docker's prune keeps it).
LEFT_VOLUME = f"{LEFT_TAG}-data"


def ip(*argv, check=True):
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=check)


VOLUME_OPTIONS = ["--driver", "local", "--opt", "type=tmpfs", "--opt", "device=tmpfs", "--opt", "o=size=1m"]


def docker(*argv, check=True):
    return subprocess.run(["docker", *argv], capture_output=True, text=True, check=check).stdout.strip()


def test_leftovers_of_a_crashed_run_are_named_by_the_prechecks_and_removed_by_teardown(clean_host, tmp_path):
    from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence

    assert not os.path.exists(FENCE_STATE), "a fence is up already"
    every_core = cpu_fence.format_cpus(sorted(os.sched_getaffinity(0)))
    campaign, results = "fault-leftovers", tmp_path / "results"
    group = os.path.join(cpu_fence.hierarchy()[1], FENCED_GROUP)
    try:
        ip("netns", "add", LEFT_NAMESPACE)
        ip("link", "add", LEFT_BRIDGE, "type", "bridge")
        ip("addr", "add", LEFT_ADDRESS, "dev", LEFT_BRIDGE)
        os.makedirs(group, exist_ok=True)
        for name in ("cpuset.mems", "cpuset.cpus"):  # v1 takes the memory nodes first
            if os.path.exists(os.path.join(group, name)):
                with open(os.path.join(group, name), "w") as stream:
                    stream.write("0")
        cpu_fence.put_up(every_core, FENCE_STATE)
        assert os.path.exists(FENCE_STATE)
        docker("volume", "create", *VOLUME_OPTIONS, "--label", f"org.platbench.campaign={campaign}", LEFT_VOLUME)

        code, output = until_done(campaign_argv(campaign), results)
        assert code == 1, output
        assert "localhost holds what an earlier run left, or a campaign running there now:" in output
        assert f"  the network paths of cells: namespace {LEFT_NAMESPACE}; bridge {LEFT_BRIDGE};" in output
        assert f"  an idle_cores fence: every top-level cgroup kept on CPUs {every_core} ({FENCE_STATE})" in output
        assert "remove them with `ansible-playbook -i INVENTORY playbooks/teardown.yml`" in output
        assert samples_of(results / campaign) == []  # no cell ran beside them

        teardown = run_lab_playbook("playbooks/teardown.yml", tmp_path / "teardown")
        assert teardown.rc == 0, teardown.failed_messages()
        assert LEFT_NAMESPACE not in ip("netns", "list").stdout
        assert ip("link", "show", LEFT_BRIDGE, check=False).returncode != 0
        assert not os.path.exists(FENCE_STATE)
        with open(os.path.join(group, "cpuset.cpus")) as stream:
            assert stream.read().strip() == "0"  # restored
        assert docker("volume", "ls", "--quiet", "--filter", f"label=org.platbench.campaign={campaign}") == ""
    finally:
        docker("volume", "rm", "--force", LEFT_VOLUME, check=False)
        ip("netns", "del", LEFT_NAMESPACE, check=False)
        ip("link", "del", LEFT_BRIDGE, check=False)
        cpu_fence.take_down(FENCE_STATE)
        if os.path.isdir(group):
            os.rmdir(group)
    assert_nothing_left(clean_host, campaign)
