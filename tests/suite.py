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
  ``PLATBENCH_QUIET_LOCK`` names a file, only once they hold it: `make test` runs the OpenStack tests beside the
  lab tests under that lock (Makefile), and a measurement must not share the 2 cores with a test cloud.

Under pytest-xdist the reports reach the controller's hooks, where the gate and the summary run.
`make test` runs pytest three times (the unit group on xdist workers; then the lab tests, with the OpenStack tests
beside them in a process of their own): with ``PLATBENCH_TEST_DURATIONS`` naming a file, each run adds its times
and its span to it and prints the sum of the runs so far; the wall time is the union of the spans, since two runs
overlap. ``python -m tests.suite FILE`` prints that sum again at the end.
"""

from __future__ import annotations

import fcntl
import json
import os
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
    config.pluginmanager.register(SuiteRules(config), "platbench-suite-rules")


def main(argv):
    """``python -m tests.suite FILE``: the durations summary of the runs FILE holds (the end of `make test`)."""
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
