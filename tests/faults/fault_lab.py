"""What every entry of the fault catalogue shares: the short campaign it injects its fault into (the smoke experiment
on bm and cn, one pinned cell each), a `platbench run` followed line by line, and the two checks each entry ends
with: nothing of the campaign is left on the host (``assert_nothing_left``), and the rerun resumed it with no sample
lost and none recorded twice (``assert_resumed``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from playbook_run import instance_leftovers, platbench_run, workload_processes

# The campaign's two cells, in the order the plan runs them (platforms interleaved within a repeat).
CELLS = ("bm/1/pin/cpu|r0", "cn/1/pin/cpu|r0")
# Steps of the tiny model: a cell of a few seconds, the framework's import included.
TINY_STEPS = 20
# Long enough that a cell is still training when its fault comes (kill -9, a stopped engine, a signal): a few
# seconds past the framework's import on a 2-core machine (some 25 steps a second); the rerun measures TINY_STEPS.
BUSY_STEPS = 100
# Far more than any cell trains before its fault stops it (the cell timeout).
ENDLESS_STEPS = 1_000_000
RUN_SECONDS = 300  # a whole short campaign, on a loaded 2-core machine
CELL_SECONDS = 120  # from a run's start to a given cell's workload running, or to a line about it
BM_PYTHON = "/opt/platbench/venv/bin/python"  # a bm cell's workload (platform_run_prefix /opt/platbench)
FENCE_STATE = "/run/platbench/cpu_fence.json"  # platform_run_fence_state_file's default
CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_DEPTH = 3  # a controller, the engine's parent group, a container's group (v1); v2 needs less
# The private directories of `platbench run` (ansible-runner's), which its playbooks name on their command lines.
RUN_DIRECTORIES = re.compile(r"/platbench-(run|teardown)-")
# iproute2's directory of named network namespaces: the first `ip netns add` on a host makes it a mount point of its
# own (shared, so that the namespaces bound in it show in every mount namespace) and no `ip netns del` undoes that.
# It is iproute2's, not a campaign's: each namespace in it is a mount of its own, and those are counted.
NETNS_DIRECTORY = os.path.realpath("/var/run/netns")


def campaign_argv(campaign, steps=TINY_STEPS, *extra):
    """`platbench run` of the smoke experiment narrowed to bm and cn, scale-up 1, pinned, one repeat."""
    return [
        "smoke",
        "--platforms",
        "bm,cn",
        "--repeats",
        "1",
        "--set",
        "scaleup=[1]",
        "--set",
        "cpu_config=[pin]",
        "--set",
        "params.warmup_steps=1",
        "--set",
        f"params.steps={steps}",
        # The plan's fixed order (CELLS: bm, then cn), which each fault is timed against; rounds would shuffle it.
        "--set",
        "schedule=sequential",
        "--campaign",
        campaign,
        *extra,
    ]


class Run:
    """A `platbench run` whose output is read as it comes (a thread), so that a test can wait for a line."""

    def __init__(self, argv, results_dir):
        self.process = platbench_run(argv, results_dir)
        self.lines = []
        self._done = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._done = True
            self._changed.notify_all()

    @property
    def output(self):
        with self._changed:
            return "\n".join(self.lines)

    def wait_line(self, pattern, timeout=CELL_SECONDS):
        """The first line that ``pattern`` (a regular expression) finds; AssertionError when the run ends or
        ``timeout`` seconds pass first."""
        regex, deadline = re.compile(pattern), time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for line in self.lines if regex.search(line)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    why = "the run ended" if self._done else f"{timeout} s passed"
                    raise AssertionError(f"{why} without a line matching {pattern!r}:\n" + "\n".join(self.lines))
                self._changed.wait(left)

    def finish(self, timeout=RUN_SECONDS):
        """The exit status, once the run ended and its output was read."""
        self.process.wait(timeout=timeout)
        self._reader.join(timeout=30)
        return self.process.returncode

    def stop(self, grace=180):
        """Stop a run a failed test left running as Ctrl-C does (its cell cleaned up), killed after ``grace`` s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def cell_line(cell, status):
    """The progress line of a finished cell: ``[1/2] bm/1/pin/cpu|r0 ok 4.2 s, ETA 5 s``."""
    return rf"^\[\d+/\d+\] {re.escape(cell)} {status} "


def _in_a_container(pid):
    try:
        return "/docker" in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def lab_workloads():
    """The workload processes of the lab's cells, ``pid command`` each: a bm cell's (its python under
    /opt/platbench, and the `timeout` in front of it) and a container's; not those of unit tests, which run the
    workloads from the checkout's venv beside the lab tests on a developer's machine."""
    found = []
    for line in workload_processes():
        pid, command = line.split(None, 1)
        if BM_PYTHON in command.split()[:8] or _in_a_container(pid):
            found.append(line)
    return found


def workload_pid(platform):
    """The pid of the running workload of a bm cell (its python, not the `timeout` in front of it) or of a cn cell
    (the container's python, as the host sees it), or None."""
    for line in lab_workloads():
        pid, command = line.split(None, 1)
        program = command.split()[0]
        if os.path.basename(program).startswith("python") and (program == BM_PYTHON) == (platform == "bm"):
            return int(pid)
    return None


def run_directory_processes():
    """Processes of `platbench run`'s playbooks (ansible-playbook and its workers), as ``pid command`` lines."""
    found = subprocess.run(["pgrep", "-a", "-f", "ansible"], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if RUN_DIRECTORIES.search(line)]


# -- nothing is left -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostState:
    """What of the host a campaign may add to and must take away again."""

    links: frozenset
    namespaces: frozenset
    cgroups: frozenset
    mounts: frozenset


def _cgroups():
    found = set()
    for directory, children, _ in os.walk(CGROUP_ROOT):
        depth = len(Path(directory).relative_to(CGROUP_ROOT).parts)
        found.add(directory)
        if depth >= CGROUP_DEPTH:
            children.clear()
    return frozenset(found)


def host_state():
    """The host's links, named network namespaces, cgroups (to CGROUP_DEPTH) and mount points now (not iproute2's
    NETNS_DIRECTORY)."""
    links = frozenset(link["ifname"] for link in json.loads(subprocess.check_output(["ip", "-j", "link"], text=True)))
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    namespaces = frozenset(line.split()[0] for line in listed.splitlines() if line.strip())
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        points = (line.split()[4] for line in mountinfo if line.strip())
        mounts = frozenset(point for point in points if point != NETNS_DIRECTORY)
    return HostState(links, namespaces, _cgroups(), mounts)


def leftovers(before, campaign):
    """What the campaign left: workload processes, its playbooks' processes, its containers, the links, namespaces,
    cgroups and mounts the host did not have ``before`` (a HostState), and a fence's state file."""
    found = [f"workload process {line}" for line in lab_workloads()]
    found += [f"playbook process {line}" for line in run_directory_processes()]
    found += [f"container, link or namespace of {campaign}: {name}" for name in instance_leftovers(campaign)]
    now = host_state()
    for what in ("links", "namespaces", "cgroups", "mounts"):
        found += [f"{what[:-1]} {name}" for name in sorted(getattr(now, what) - getattr(before, what))]
    if os.path.exists(FENCE_STATE):
        found.append(f"a fence's state file {FENCE_STATE}")
    return found


def left_behind(before, campaign, grace=10):
    """``leftovers`` once they are gone or ``grace`` seconds have passed (the engine lets go of a removed container's
    cgroups and mounts a moment after it is removed): [] when nothing is left."""
    deadline = time.monotonic() + grace
    while (found := leftovers(before, campaign)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def assert_nothing_left(before, campaign, grace=10):
    """No process, container, namespace, link, cgroup, fence or mount of the campaign is left once its runs ended."""
    found = left_behind(before, campaign, grace)
    assert found == [], f"left on the host by {campaign}:\n" + "\n".join(found)


# -- the rerun resumes -----------------------------------------------------------------------------------------


def samples_of(campaign_dir):
    """The campaign's samples as every reader of the file reads them (lines a crash cut short are skipped)."""
    from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import read_samples

    path = Path(campaign_dir) / "samples.jsonl"
    return read_samples(path) if path.exists() else []


def _key(sample):
    return json.dumps({key: sample.get(key) for key in ("metric", "labels", "timestamp")}, sort_keys=True)


def assert_resumed(campaign_dir, kept=(), failed=(), cells=CELLS, cut_lines=()):
    """After the rerun: every sample recorded before it (``kept``) is still there (none lost); every cell of the
    campaign measured once, its throughput and elapsed once each, and no sample recorded twice (none duplicated);
    the failed records are those of ``failed``'s cells (the fault's, kept). Every line of the file but the numbers
    in ``cut_lines`` (a crash's, which readers skip) is a whole sample. Returns the samples."""
    samples = samples_of(campaign_dir)
    keys = Counter(_key(sample) for sample in samples)
    assert [key for key, count in keys.items() if count > 1] == [], "samples recorded twice"
    assert [sample for sample in kept if _key(sample) not in keys] == [], "samples the rerun lost"
    measured = Counter(
        (sample["labels"]["cell"], sample["metric"])
        for sample in samples
        if sample["metric"] in ("throughput", "elapsed")
    )
    assert measured == Counter({(cell, metric): 1 for cell in cells for metric in ("throughput", "elapsed")})
    assert sorted(sample["labels"]["cell"] for sample in samples if sample["metric"] == "failed") == sorted(failed)
    for number, line in enumerate((Path(campaign_dir) / "samples.jsonl").read_text().splitlines(), start=1):
        if number not in cut_lines:
            assert isinstance(json.loads(line), dict), f"line {number} is no whole sample: {line[:200]}"
    return samples
