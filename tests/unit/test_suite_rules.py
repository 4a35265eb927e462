"""tests/suite.py, the suite's own rules: on pytest sessions of their own (pytester) and function by function."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import skips, suite

REPO = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _own_durations(monkeypatch):
    """The sessions these tests start keep their times to themselves: `make test` exports the file where its runs
    add theirs up (PLATBENCH_TEST_DURATIONS), and a fake session's tests must neither land there nor read it."""
    monkeypatch.delenv("PLATBENCH_TEST_DURATIONS", raising=False)
    monkeypatch.delenv("PLATBENCH_QUIET_LOCK", raising=False)
    monkeypatch.delenv("PLATBENCH_LAB_BUILT", raising=False)


def run(pytester, source, *args, path="tests/unit/test_it.py"):
    """A session of its own with the suite's rules loaded, over one test file at ``path``."""
    target = pytester.path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    return pytester.runpytest_inprocess("-p", "tests.suite", "-p", "no:cacheprovider", *args)


def test_a_skip_for_an_unlisted_reason_fails_the_session_naming_the_test_and_the_reason(pytester):
    result = run(
        pytester,
        "import pytest\n"
        "def test_ok():\n    pass\n"
        "def test_guarded():\n    pytest.skip('the feature is not written yet')\n",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*skips and xfails that are not allowed*",
            "tests/unit/test_it.py::test_guarded: skipped for a reason not listed in tests/skips.py: "
            "the feature is not written yet",
            "1 test(s) broke the skip rule*",
        ]
    )


def test_skips_with_the_listed_reasons_pass(pytester):
    result = run(
        pytester,
        "import pytest\nfrom tests import skips\n"
        "@pytest.mark.skipif(True, reason=skips.message(skips.NO_GPU, 'needs a CUDA device'))\n"
        "def test_marked():\n    pass\n"
        "def test_called():\n    skips.skip(skips.NO_KUBELET, 'the k8s Job runs on a node')\n"
        "@pytest.fixture\ndef cloud():\n    skips.skip(skips.CLOUD_NOT_INSTALLABLE, 'apt-get failed')\n"
        "def test_in_a_fixture(cloud):\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=3)
    assert "not allowed" not in result.stdout.str()


def test_a_skip_that_only_looks_like_a_listed_reason_fails(pytester):
    result = run(pytester, "import pytest\ndef test_it():\n    pytest.skip('not rooted yet')\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    "decorator", ["@pytest.mark.xfail(reason='flaky')", "@pytest.mark.xfail(reason='fixed', strict=False)"]
)
def test_xfail_fails_the_session_whether_the_test_fails_or_passes(pytester, decorator):
    body = "assert False" if "flaky" in decorator else "pass"
    result = run(pytester, f"import pytest\n{decorator}\ndef test_it():\n    {body}\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test_it: xfail is not allowed*"])


def test_a_run_that_collects_no_test_fails_and_says_so(pytester):
    result = run(pytester, "def helper():\n    pass\n")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*no test ran*", "*a run that tests nothing is a failure*"])


def test_a_run_whose_marker_expression_deselects_everything_fails(pytester):
    result = run(pytester, "def test_it():\n    pass\n", "-m", "lab")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_missing_requirement_fails_the_test_naming_what_installs_it(pytester):
    result = run(
        pytester,
        "from tests import skips\n"
        "@skips.requires(modules=['platbench_no_such_module'], commands=['platbench-no-such-tool'])\n"
        "def test_it():\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the Python module 'platbench_no_such_module' (in *) and the command `platbench-no-such-tool` (on PATH)"
            " are missing: `make venv` (requirements.txt) installs them*"
        ]
    )


def test_a_requirement_is_checked_once_the_fixture_that_installs_it_has_run(pytester, monkeypatch, tmp_path):
    """As the `lab` fixture installs the tools of the tests that `skips.needs_lab` marks."""
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    tool = tmp_path / "platbench-made-tool"
    result = run(
        pytester,
        "import os, pytest\nfrom tests import skips\n"
        f"@pytest.fixture\ndef installer():\n    open({str(tool)!r}, 'w').write('#!/bin/sh\\n')\n"
        f"    os.chmod({str(tool)!r}, 0o755)\n"
        "@skips.requires(commands=['platbench-made-tool'], by='the installer fixture')\n"
        "def test_it(installer):\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    assert tool.exists()


def test_a_test_using_the_lab_without_the_lab_marker_is_refused_at_collection(pytester):
    result = run(
        pytester,
        "import pytest\n@pytest.fixture(scope='session')\ndef lab():\n    raise AssertionError('built')\n"
        "def test_it(lab):\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "tests/unit/test_it.py::test_it uses the `lab` fixture but is not marked `lab`" in result.stderr.str()


def test_the_durations_summary_counts_each_group(pytester, monkeypatch):
    # A process of its own: a fake tests/test_lint.py would clash with the real one already imported here.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for path, source in {
        "tests/unit/test_u.py": "def test_a():\n    pass\ndef test_b():\n    pass\n",
        "tests/unit/test_l.py": "import pytest\npytestmark = pytest.mark.lab\ndef test_c():\n    pass\n",
        "tests/integration/test_i.py": "def test_d():\n    pass\n",
        "tests/openstack/test_o.py": "def test_e():\n    pass\n",
        "tests/test_lint.py": "def test_f():\n    pass\n",
    }.items():
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(source)
    pytester.makeini("[pytest]\nmarkers =\n    lab: the lab\n")
    result = pytester.runpytest_subprocess("-p", "tests.suite", "-p", "no:cacheprovider", "tests")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*durations per group*",
            "unit * s  (2 tests)",
            "lab * s  (2 tests)",
            "OpenStack * s  (1 tests)",
            "lint * s  (1 tests)",
            "total * s  = * min of wall time; budget 45 min (tests/suite.py BUDGET_MINUTES)",
        ]
    )
    assert "WARNING" not in result.stdout.str()


@pytest.mark.parametrize(
    "nodeid, markers, group",
    [
        ("tests/unit/test_matrix.py::test_x", {"parametrize"}, "unit"),
        ("tests/unit/test_micro_net.py::test_real_run", {"lab", "usefixtures"}, "lab"),
        ("tests/integration/test_vm.py::test_vm[kvm]", set(), "lab"),
        ("tests/integration/test_lab.py::test_smoke", {"lab"}, "lab"),
        ("tests/faults/test_catalogue.py::test_kill_9", {"lab", "usefixtures", "requires"}, "lab"),
        ("tests/openstack/test_instances.py::test_nova", {"openstack"}, "openstack"),
        ("tests/unit/test_cloud_client.py::test_y", {"openstack"}, "openstack"),
        ("tests/test_lint.py::test_ruff[check]", set(), "lint"),
        ("tests/unit/test_lint_rules.py::test_z", set(), "unit"),
    ],
)
def test_a_test_is_grouped_by_its_markers_then_its_path(nodeid, markers, group):
    assert suite.group_of(nodeid, markers) == group


def groups(**seconds):
    return {group: {"seconds": seconds.get(group, 0.0), "tests": 1} for group in suite.GROUPS}


def test_under_budget_the_summary_has_no_warning():
    lines, over = suite.budget_lines(groups(unit=300.0, lab=900.0), 1500.0, {"a": 1.0}, budget_minutes=45)
    assert not over
    assert lines[:4] == [
        "unit         300.0 s  (1 tests)",
        "lab          900.0 s  (1 tests)",
        "OpenStack      0.0 s  (1 tests)",
        "lint           0.0 s  (1 tests)",
    ]
    assert lines[4] == "total       1500.0 s  = 25.0 min of wall time; budget 45 min (tests/suite.py BUDGET_MINUTES)"
    assert len(lines) == 5


def test_over_budget_the_summary_warns_and_names_the_slowest_tests_slowest_first():
    per_test = {f"tests/unit/test_{n:02d}.py::test": float(n) for n in range(15)}
    lines, over = suite.budget_lines(groups(lab=2900.0), 2760.0, per_test, budget_minutes=45, slowest=10)
    assert over
    assert lines[5] == "WARNING: 46.0 min is over the 45 min budget; the 10 slowest tests (setup + call + teardown):"
    assert lines[6:] == [f"      {n:4.1f} s  tests/unit/test_{n:02d}.py::test" for n in range(14, 4, -1)]


def test_the_allowed_reasons_are_matched_as_a_whole_prefix():
    assert skips.allowed_reason(skips.message(skips.NOT_ROOT, "apt-get needs it")) is skips.NOT_ROOT
    assert skips.allowed_reason(skips.NO_APPTAINER.text) is skips.NO_APPTAINER
    assert skips.allowed_reason("not rooted") is None
    assert skips.allowed_reason("tensorflow missing") is None


def test_runs_sharing_a_durations_file_are_summed_up_in_the_last_summary(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv(suite.DURATIONS_FILE_ENV, str(tmp_path / "durations.json"))
    first = run(pytester, "def test_a():\n    pass\n", path="tests/unit/test_a.py")
    first.stdout.fnmatch_lines(["*= durations per group =*", "unit * s  (1 tests)", "lab * s  (0 tests)"])
    (pytester.path / "tests/unit/test_a.py").unlink()
    second = run(
        pytester, "import pytest\npytestmark = pytest.mark.lab\ndef test_b():\n    pass\n", path="tests/unit/test_b.py"
    )
    second.stdout.fnmatch_lines(
        [
            "*durations per group (this run and the earlier ones in *durations.json)*",
            "unit * s  (1 tests)",
            "lab * s  (1 tests)",
        ]
    )


def test_adding_up_runs_sums_each_group_the_wall_time_and_each_test():
    one = suite.add_up(None, groups(unit=10.0), (100.0, 112.0), {"tests/unit/test_a.py::t": 10.0})
    both = suite.add_up(one, groups(lab=30.0, unit=1.0), (112.0, 143.0), {"tests/unit/test_a.py::t": 1.0, "b": 30.0})
    assert both["groups"]["unit"] == {"seconds": 11.0, "tests": 2}
    assert both["groups"]["lab"] == {"seconds": 30.0, "tests": 2}
    assert both["wall"] == 43.0
    assert both["per_test"] == {"tests/unit/test_a.py::t": 11.0, "b": 30.0}
    # A run beside the last one (the OpenStack tests beside the lab tests) adds its tests, and to the wall time
    # only what it ran past the others' end.
    beside = suite.add_up(both, groups(openstack=20.0), (120.0, 150.0), {"c": 20.0})
    assert beside["groups"]["openstack"] == {"seconds": 20.0, "tests": 3}
    assert beside["wall"] == 50.0


@pytest.mark.parametrize(
    ("spans", "seconds"),
    [([], 0.0), ([(0, 10), (10, 15)], 15.0), ([(5, 8), (0, 10)], 10.0), ([(0, 4), (6, 9), (3, 7)], 9.0)],
)
def test_the_wall_time_is_the_union_of_the_runs_spans(spans, seconds):
    assert suite.union_seconds(spans) == seconds


def test_the_last_summary_is_printed_again_from_the_file(tmp_path, capsys):
    path = tmp_path / "durations.json"
    totals, earlier = suite.add_to_file(path, groups(unit=10.0), (0.0, 12.0), {"tests/unit/test_a.py::t": 10.0})
    assert not earlier and totals["wall"] == 12.0
    totals, earlier = suite.add_to_file(path, groups(lab=5.0), (12.0, 20.0), {"b": 5.0})
    assert earlier and totals["wall"] == 20.0
    assert suite.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "unit          10.0 s  (2 tests)" in out and "lab            5.0 s  (2 tests)" in out
    assert "total         20.0 s  = 0.3 min of wall time" in out
    assert suite.main([str(tmp_path / "none.json")]) == 1


QUIET_TESTS = (
    "import pytest, time\npytestmark = pytest.mark.quiet\ndef test_measures():\n    print('measured at', time.time())\n"
)


def test_quiet_tests_run_after_the_others_of_their_run(pytester):
    (pytester.path / "tests/unit").mkdir(parents=True)
    (pytester.path / "tests/unit/test_a_measure.py").write_text(QUIET_TESTS)
    result = run(
        pytester, "def test_first():\n    pass\ndef test_second():\n    pass\n", "-v", path="tests/unit/test_b.py"
    )
    result.assert_outcomes(passed=3)
    ran = [line.split(" ")[0] for line in result.outlines if " PASSED" in line]
    assert ran == [
        "tests/unit/test_b.py::test_first",
        "tests/unit/test_b.py::test_second",
        "tests/unit/test_a_measure.py::test_measures",
    ]


def test_a_quiet_test_waits_for_the_run_beside_it_to_let_go_of_the_lock(pytester, monkeypatch, tmp_path):
    lock = tmp_path / "quiet.lock"
    monkeypatch.setenv("PLATBENCH_QUIET_LOCK", str(lock))
    # The run beside: flock(1) holds the lock for two seconds, as `make test` holds it around the OpenStack run, and
    # writes the time just before it lets go.
    released = tmp_path / "released"
    let_go = f"sleep 2; {sys.executable} -c 'import time; print(time.time())' > {released}"
    beside = subprocess.Popen(["flock", str(lock), "sh", "-c", let_go])
    try:
        wait_until = time.monotonic() + 10
        while subprocess.run(["flock", "-n", str(lock), "true"]).returncode == 0 and time.monotonic() < wait_until:
            time.sleep(0.05)
        result = run(pytester, QUIET_TESTS, "-s")
    finally:
        beside.wait(timeout=30)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*waiting for the tests beside this run to end (*quiet.lock)*", "*waited * s for*"])
    printed = next(line for line in result.outlines if "measured at" in line)
    measured = float(printed.split("measured at ")[1].split()[0])
    assert beside.returncode == 0 and measured >= float(released.read_text())  # it measured after the lock was free
    # Without a run beside it, the lock is free and the test starts at once, saying nothing.
    again = run(pytester, QUIET_TESTS)
    again.assert_outcomes(passed=1)
    assert "waiting for the tests beside" not in again.stdout.str()


@skips.requires(modules=["xdist"])
def test_under_xdist_workers_the_controller_still_fails_an_unlisted_skip_and_sums_the_groups(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the workers import tests.suite as this process does
    (pytester.path / "tests/unit").mkdir(parents=True)
    (pytester.path / "tests/unit/test_it.py").write_text(
        "import pytest\ndef test_ok():\n    pass\ndef test_guarded():\n    pytest.skip('not written yet')\n"
    )
    result = pytester.runpytest_subprocess("-p", "tests.suite", "-p", "no:cacheprovider", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "tests/unit/test_it.py::test_guarded: skipped for a reason not listed in tests/skips.py: not written yet",
            "*= durations per group =*",
            "unit * s  (2 tests)",
        ]
    )


# -- what `make test` runs beside the lab tests ------------------------------------------------------------------------

BESIDE_LAB_TESTS = """
import os, time

import pytest

def note(name):
    with open(os.environ["RAN"], "a") as out:
        out.write(f"{name} {time.time()} {os.nice(0)} {os.path.exists(os.environ['BUILT'])}\\n")

@pytest.mark.openstack
def test_cloud():
    note("openstack")

@pytest.mark.lab
def test_lab():
    note("lab")

@pytest.mark.host
def test_on_the_host():
    note("host")

def test_unit():
    note("unit")
"""


def beside_lab_project(pytester, monkeypatch, tmp_path, source=BESIDE_LAB_TESTS):
    """A project whose tests note, in ``ran``, their name, time, niceness and whether ``built`` exists; ``(ran,
    built, (OpenStack log, unit log))``. beside_lab runs pytest in the current directory: the project's."""
    (pytester.path / "pytest.ini").write_text("[pytest]\nmarkers =\n    openstack\n    lab\n    host\n")
    (pytester.path / "test_beside.py").write_text(source)
    ran, built = tmp_path / "ran", tmp_path / "lab-built"
    monkeypatch.setenv("RAN", str(ran))
    monkeypatch.setenv("BUILT", str(built))
    monkeypatch.chdir(pytester.path)
    return ran, built, (tmp_path / "openstack.log", tmp_path / "unit.log")


@skips.requires(modules=["xdist"])
def test_beside_the_lab_the_openstack_tests_run_then_the_other_unit_tests_once_the_lab_is_built(
    pytester, monkeypatch, tmp_path
):
    ran, built, logs = beside_lab_project(pytester, monkeypatch, tmp_path)
    result = {}
    side = threading.Thread(
        target=lambda: result.update(status=suite.beside_lab(*logs, 1, ["-p", "no:cacheprovider"], built=str(built)))
    )
    side.start()
    try:
        deadline = time.monotonic() + 60
        while not (ran.exists() and "openstack" in ran.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the OpenStack run over: the unit tests wait for the lab
        assert ran.read_text().split()[0] == "openstack" and len(ran.read_text().splitlines()) == 1
        built.touch()
    finally:
        side.join(timeout=120)
    assert result == {"status": 0}
    lines = [line.split() for line in ran.read_text().splitlines()]
    # Neither the lab's tests nor the `host` ones: those run in `make test`'s other runs.
    assert [line[0] for line in lines] == ["openstack", "unit"]
    # The unit tests started once the lab was built, yielding to it (19 the lowest priority, where this test runs
    # beside a lab already: `make test`).
    assert lines[1][3] == "True" and int(lines[1][2]) == min(19, os.nice(0) + suite.BESIDE_LAB_NICENESS)
    assert "1 passed" in logs[0].read_text() and "1 passed" in logs[1].read_text()


@skips.requires(modules=["xdist"])
def test_a_failed_run_beside_the_lab_gives_its_status_and_the_other_still_runs(pytester, monkeypatch, tmp_path):
    failing = BESIDE_LAB_TESTS.replace('note("openstack")', "assert False")
    ran, built, logs = beside_lab_project(pytester, monkeypatch, tmp_path, failing)
    built.touch()
    status = suite.beside_lab(*logs, 1, ["-p", "no:cacheprovider"], built=str(built))
    assert status == pytest.ExitCode.TESTS_FAILED
    assert "1 failed" in logs[0].read_text() and "1 passed" in logs[1].read_text()
    assert [line.split()[0] for line in ran.read_text().splitlines()] == ["unit"]


def test_waiting_for_the_lab_is_bounded(tmp_path):
    started = time.monotonic()
    assert suite.wait_for_file(tmp_path / "never", 0.3, poll=0.05) is False
    assert 0.3 <= time.monotonic() - started < 5
    (tmp_path / "there").touch()
    assert suite.wait_for_file(tmp_path / "there", 0.3) is True


@skips.requires(modules=["xdist"])
def test_once_the_lab_tests_are_stopped_before_the_build_the_unit_tests_beside_them_do_not_start(
    pytester, monkeypatch, tmp_path
):
    ran, built, logs = beside_lab_project(pytester, monkeypatch, tmp_path)
    lab_shell = subprocess.Popen(["sleep", "1"])  # the shell of the lab tests, stopped with Ctrl-C a second in
    try:
        status = suite.beside_lab(*logs, 1, ["-p", "no:cacheprovider"], built=str(built), lab_shell=lab_shell.pid)
    finally:
        lab_shell.wait(timeout=30)
    assert status == pytest.ExitCode.INTERRUPTED
    assert [line.split()[0] for line in ran.read_text().splitlines()] == ["openstack"]
    assert "stopped before the lab was built: these unit tests did not run" in logs[1].read_text()
