"""The suite's own rules, as a pytest plugin (tests/conftest.py loads it).

- A skip must give one of the reasons listed in tests/skips.py; any other skip, and any xfail,
  fails the session, naming each test and its reason.
- A run that collects no test fails (pytest's exit status 5), saying so.
- ``requires`` marks (tests/skips.py) fail a test whose venv module or lab tool is missing (after its fixtures:
  the ``lab`` fixture installs the lab's tools).
- A test that uses the ``lab`` fixture is marked ``lab``, one that uses ``test_cloud`` is marked
  ``openstack``: `make unit` (``-m "not lab and not openstack"``) then builds no lab and starts no cloud.
- At the end: the time spent per group (unit, lab, OpenStack, lint) and the wall time against
  ``BUDGET_MINUTES``; over it, a warning with the slowest tests (never a failure: machines differ).

- Tests marked ``quiet`` (those that assert a measured effect) run after the others of their run, and, when
  ``PLATBENCH_QUIET_LOCK`` names a file, only once they hold it: `make test` runs the OpenStack tests and then the
  unit tests beside the lab tests under that lock (Makefile, ``beside_lab``), and a measurement must not share the
  2 cores with a test cloud or a unit test.
- Tests marked ``host`` act on the host where a live lab would see them or suffer from them (a cell's cgroup, a
  network namespace, the harness's cgroup, a real teardown): `make test` runs them first, before the lab is up.

Under pytest-xdist the reports reach the controller's hooks, where the gate and the summary run.
`make test` runs pytest four times: the ``host`` unit tests on xdist workers; then the lab tests, with a process
beside them that runs the OpenStack tests and then, once the lab is built, the other unit tests (``beside_lab``: a
lab test leaves a core idle much of the time, and the unit tests fill it). With ``PLATBENCH_TEST_DURATIONS`` naming
a file, each run adds its times and its span to it and prints the sum of the runs so far; the wall time is the
union of the spans, since runs overlap. ``python -m tests.suite FILE`` prints that sum again at the end.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path, PurePosixPath

import pytest

from tests import skips

# `make test` on a fresh 2-core machine, lab and test cloud included.
BUDGET_MINUTES = 45
SLOWEST = 10
GROUPS = ("unit", "lab", "openstack", "lint")
TITLES = {"unit": "unit", "lab": "lab", "openstack": "OpenStack", "lint": "lint"}
# A file where the runs of one `make test` add up their times (Makefile).
DURATIONS_FILE_ENV = "PLATBENCH_TEST_DURATIONS"
# A file whose lock a run beside this one holds (Makefile): the ``quiet`` tests take it before they start.
QUIET_LOCK_ENV = "PLATBENCH_QUIET_LOCK"
QUIET_MARKER = "quiet"
HOST_MARKER = "host"
# A file the ``lab`` fixture writes once site.yml has run (tests/conftest.py), and the Makefile once the lab tests
# have ended: the unit tests beside the lab start then, not while the lab's build runs apt and dpkg.
LAB_BUILT_ENV = "PLATBENCH_LAB_BUILT"
# How long the unit tests beside the lab wait for it at most (a fresh machine's build takes about 16 minutes).
LAB_BUILT_WAIT_SECONDS = 3 * 3600
# The unit tests beside the lab run at a lower priority: where both want a core, the lab test gets most of it.
BESIDE_LAB_NICENESS = 10
# The fixtures that build the lab and start the test cloud, and the marker each needs.
HEAVY_FIXTURES = {"lab": "lab", "test_cloud": "openstack"}


def group_of(nodeid, markers):
    """The group of a test, by its markers and its path (relative to the repository)."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if "openstack" in markers or parts[:2] == ("tests", "openstack"):
        return "openstack"
    if "lab" in markers or parts[:2] == ("tests", "integration"):
        return "lab"
    if parts == ("tests", "test_lint.py"):
        return "lint"
    return "unit"


def skip_reason(report):
    """The message of a skip report ("Skipped: " removed)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def offence(report):
    """Why a report breaks the skip rule, or None."""
    if hasattr(report, "wasxfail"):
        return f"xfail is not allowed (fix the test or the code): {report.wasxfail or 'no reason given'}"
    if report.skipped:
        reason = skip_reason(report)
        if skips.allowed_reason(reason) is None:
            return f"skipped for a reason not listed in tests/skips.py: {reason}"
    return None


def budget_lines(seconds, wall, per_test, budget_minutes=BUDGET_MINUTES, slowest=SLOWEST):
    """(lines of the durations summary, whether the run went over budget)."""
    lines = [
        "%-9s %8.1f s  (%d tests)" % (TITLES[group], seconds[group]["seconds"], seconds[group]["tests"])
        for group in GROUPS
    ]
    lines.append(
        "total     %8.1f s  = %.1f min of wall time; budget %d min (tests/suite.py BUDGET_MINUTES)"
        % (wall, wall / 60, budget_minutes)
    )
    over = wall > budget_minutes * 60
    if over:
        lines.append(
            "WARNING: %.1f min is over the %d min budget; the %d slowest tests (setup + call + teardown):"
            % (wall / 60, budget_minutes, slowest)
        )
        ranked = sorted(per_test.items(), key=lambda item: item[1], reverse=True)[:slowest]
        lines += ["  %8.1f s  %s" % (duration, nodeid) for nodeid, duration in ranked]
    return lines, over


def union_seconds(spans):
    """The seconds covered by ``spans`` ([start, end] pairs, which may overlap)."""
    covered, reached = 0.0, None
    for start, end in sorted(spans):
        if reached is None or start > reached:
            covered += end - start
            reached = end
        elif end > reached:
            covered += end - reached
            reached = end
    return covered


def add_up(earlier, groups, span, per_test):
    """The times of the runs so far (``earlier``, None for none) with this run's added: a dict with
    ``groups`` ({group: {seconds, tests}}), ``spans`` (each run's [start, end], epoch seconds), ``wall`` (the
    seconds their union covers) and ``per_test`` ({nodeid: seconds})."""
    total = earlier or {"groups": {}, "spans": [], "per_test": {}}
    summed = {}
    for group in GROUPS:
        before = total["groups"].get(group, {"seconds": 0.0, "tests": 0})
        summed[group] = {
            "seconds": before["seconds"] + groups[group]["seconds"],
            "tests": before["tests"] + groups[group]["tests"],
        }
    tests = dict(total["per_test"])
    for nodeid, seconds in per_test.items():
        tests[nodeid] = tests.get(nodeid, 0.0) + seconds
    spans = [*total.get("spans", []), list(span)]
    return {"groups": summed, "spans": spans, "wall": union_seconds(spans), "per_test": tests}


def add_to_file(path, groups, span, per_test):
    """``add_up`` this run to the durations file at ``path``, under its lock (two runs may end at once): the sum,
    and whether the file held earlier runs."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read()
        earlier = json.loads(text) if text.strip() else None
        totals = add_up(earlier, groups, span, per_test)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(totals))
    return totals, earlier is not None


def quiet_last(items):
    """``items`` with the ``quiet`` tests moved after the others, each part in its order (a module moves whole
    when its marker is the module's)."""
    return sorted(items, key=lambda item: item.get_closest_marker(QUIET_MARKER) is not None)


def wait_for_quiet(path, say):
    """Hold the lock on ``path`` from now to the end of the process, waiting while a run beside this one holds it.
    The open file is returned (its lock goes with it)."""
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"waiting for the tests beside this run to end ({path}): the next tests measure")
        started = time.monotonic()
        fcntl.flock(handle, fcntl.LOCK_EX)
        say(f"waited {time.monotonic() - started:.0f} s for the tests beside this run")
    return handle


class SuiteRules:
    def __init__(self, config):
        self.config = config
        self.started = time.time()
        self.quiet_lock = None
        self.groups = {group: {"seconds": 0.0, "tests": 0} for group in GROUPS}
        self.per_test = defaultdict(float)
        self.offences = {}

    # -- collection: the heavy fixtures go with their markers ------------------------------------------------

    def pytest_collection_modifyitems(self, items):
        wrong = []
        for item in items:
            for fixture, marker in HEAVY_FIXTURES.items():
                if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None:
                    wrong.append(f"{item.nodeid} uses the `{fixture}` fixture but is not marked `{marker}`")
        if wrong:
            raise pytest.UsageError("\n".join(wrong))
        items[:] = quiet_last(items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        path = os.environ.get(QUIET_LOCK_ENV)
        if path and self.quiet_lock is None and item.get_closest_marker(QUIET_MARKER) is not None:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            say = reporter.write_line if reporter else print
            self.quiet_lock = wait_for_quiet(path, say)

    # -- requires marks: checked once the fixtures are set up (the `lab` fixture installs the lab's tools) -------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        for mark in item.iter_markers("requires"):
            skips.require(**mark.kwargs)

    # -- reports: the skip rule and the durations --------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item):
        report = yield
        markers = {mark.name for mark in item.iter_markers()}
        report.user_properties.append(("platbench_group", group_of(item.nodeid, markers)))
        return report

    def pytest_runtest_logreport(self, report):
        group = dict(report.user_properties).get("platbench_group") or group_of(report.nodeid, report.keywords)
        self.groups[group]["seconds"] += report.duration
        self.per_test[report.nodeid] += report.duration
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.groups[group]["tests"] += 1
        problem = offence(report)
        if problem:
            self.offences[report.nodeid] = problem

    def pytest_collectreport(self, report):
        if report.skipped:
            problem = offence(report)
            if problem:
                self.offences[report.nodeid] = problem

    # -- the end -------------------------------------------------------------------------------------------------

    def pytest_unconfigure(self, config):
        if self.quiet_lock is not None:
            self.quiet_lock.close()  # lets go of the lock
            self.quiet_lock = None

    def pytest_sessionfinish(self, session, exitstatus):
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: the controller decides
        if self.offences and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter, exitstatus):
        if hasattr(self.config, "workerinput"):
            return
        write = terminalreporter.write_line
        if self.offences:
            terminalreporter.section("skips and xfails that are not allowed", sep="=", red=True, bold=True)
            for nodeid, problem in sorted(self.offences.items()):
                write(f"{nodeid}: {problem}", red=True)
            write(f"{len(self.offences)} test(s) broke the skip rule (tests/skips.py lists the allowed reasons)")
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            terminalreporter.section("no test ran", sep="=", red=True, bold=True)
            write(
                "this run collected or selected no test (exit status 5): a run that tests nothing is a failure; "
                "check the paths and the -m/-k expressions",
                red=True,
            )
        if self.config.option.collectonly:
            return
        span = (self.started, time.time())
        title = "durations per group"
        path = os.environ.get(DURATIONS_FILE_ENV)
        if path:
            totals, earlier = add_to_file(path, self.groups, span, self.per_test)
            if earlier:
                title += " (this run and the earlier ones in %s)" % path
        else:
            totals = add_up(None, self.groups, span, self.per_test)
        terminalreporter.section(title, sep="=")
        lines, over = budget_lines(totals["groups"], totals["wall"], totals["per_test"])
        for line in lines:
            write(line, yellow=line.startswith("WARNING") or (over and line.startswith("  ")))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires(modules=(), commands=(), by=...): fail (never skip) when a module or command is missing "
        "(tests/skips.py)",
    )
    config.addinivalue_line(
        "markers",
        f"{QUIET_MARKER}: asserts a measured effect; runs last, and alone where {QUIET_LOCK_ENV} names a lock",
    )
    config.addinivalue_line(
        "markers",
        f"{HOST_MARKER}: acts on the host where a live lab would see it or suffer from it; `make test` runs it "
        "before the lab is up",
    )
    config.pluginmanager.register(SuiteRules(config), "platbench-suite-rules")


def lab_built(path):
    """Record that the lab is built (or will not be: its tests have ended), where ``path`` is set."""
    if path:
        Path(path).touch()


def wait_for_file(path, limit, poll=5.0, waiting_for=None):
    """Wait until ``path`` exists, at most ``limit`` seconds, and while the process ``waiting_for`` (a pid) lives;
    whether it exists."""
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() >= deadline or (waiting_for and not _alive(waiting_for)):
            return os.path.exists(path)
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    return True


def _alive(pid):
    """Whether process ``pid`` runs (a zombie, ended but not yet waited for, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def beside_lab(openstack_log, unit_log, workers, pytest_args, built=None, lab_shell=None, wait_limit=None):
    """What `make test` runs beside the lab tests, under the quiet lock (Makefile): the OpenStack tests, then, once
    the lab is built (``built``, LAB_BUILT_ENV), the unit tests that are not ``host``, on ``workers`` xdist workers
    at a lower priority. Each run's output goes to its log. ``lab_shell``: the pid of the shell that runs the lab
    tests; once it is gone (Ctrl-C) before the lab is built, the unit tests do not start. Returns the first failed
    run's exit status, else 0."""
    built = built or os.environ.get(LAB_BUILT_ENV)
    wait_limit = LAB_BUILT_WAIT_SECONDS if wait_limit is None else wait_limit
    run_pytest = [sys.executable, "-m", "pytest"]
    statuses = []
    with open(openstack_log, "w", encoding="utf-8") as out:
        argv = [*run_pytest, "-m", "openstack and not lab", *pytest_args]
        statuses.append(subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False).returncode)
    with open(unit_log, "w", encoding="utf-8") as out:
        if built and not wait_for_file(built, wait_limit, waiting_for=lab_shell):
            if lab_shell and not _alive(lab_shell):
                print("the lab tests were stopped before the lab was built: these unit tests did not run", file=out)
                return next((status for status in statuses if status), int(pytest.ExitCode.INTERRUPTED))
            print(f"the lab was not built within {wait_limit} s ({built}): the unit tests start anyway", file=out)
            out.flush()
        argv = ["nice", "-n", str(BESIDE_LAB_NICENESS), *run_pytest, "-n", str(workers)]
        argv += ["-m", f"not lab and not openstack and not {HOST_MARKER}", *pytest_args]
        statuses.append(subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False).returncode)
    return next((status for status in statuses if status), 0)


def main(argv):
    """``python -m tests.suite FILE``: the durations summary of the runs FILE holds (the end of `make test`).
    ``python -m tests.suite beside-lab OPENSTACK_LOG UNIT_LOG WORKERS LAB_SHELL_PID [PYTEST_ARGS...]``:
    ``beside_lab``."""
    if argv[:1] == ["beside-lab"]:
        parser = argparse.ArgumentParser(prog="python -m tests.suite beside-lab")
        parser.add_argument("openstack_log")
        parser.add_argument("unit_log")
        parser.add_argument("workers", type=int)
        parser.add_argument("lab_shell", type=int, help="the pid of the shell that runs the lab tests")
        parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
        options = parser.parse_args(argv[1:])
        return beside_lab(
            options.openstack_log, options.unit_log, options.workers, options.pytest_args, lab_shell=options.lab_shell
        )
    if len(argv) != 1:
        print("usage: python -m tests.suite DURATIONS_FILE", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"{path}: no durations file (no pytest run wrote one)", file=sys.stderr)
        return 1
    totals = json.loads(path.read_text())
    print(f"==== durations per group, every run of this `make test` ({path}) ====")
    lines, _ = budget_lines(totals["groups"], totals["wall"], totals["per_test"])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
