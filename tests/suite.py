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

Under pytest-xdist the reports reach the controller's hooks, where the gate and the summary run.
`make test` runs pytest twice (the unit group on xdist workers, then the lab and the cloud in one process):
with ``PLATBENCH_TEST_DURATIONS`` naming a file, each run adds its times to it and prints the sum of the runs
so far, so the last summary covers the whole of `make test`.
"""

from __future__ import annotations

import json
import os
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


def add_up(earlier, groups, wall, per_test):
    """The times of the runs so far (``earlier``, None for none) with this run's added: a dict with
    ``groups`` ({group: {seconds, tests}}), ``wall`` (seconds) and ``per_test`` ({nodeid: seconds})."""
    total = earlier or {"groups": {}, "wall": 0.0, "per_test": {}}
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
    return {"groups": summed, "wall": total["wall"] + wall, "per_test": tests}


class SuiteRules:
    def __init__(self, config):
        self.config = config
        self.started = time.monotonic()
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
        totals = add_up(None, self.groups, time.monotonic() - self.started, self.per_test)
        title = "durations per group"
        path = os.environ.get(DURATIONS_FILE_ENV)
        if path:
            file = Path(path)
            earlier = json.loads(file.read_text()) if file.exists() else None
            totals = add_up(earlier, self.groups, totals["wall"], self.per_test)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(totals))
            if earlier:
                title += " (this run and the earlier ones in %s)" % path
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
    config.pluginmanager.register(SuiteRules(config), "platbench-suite-rules")
