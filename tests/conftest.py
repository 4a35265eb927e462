"""Make the repository importable as it is used: the collection by its FQCN
(``ansible_collections.platbench.lab``, through ``collections/``) and the ``platbench`` package;
and the ``playbook`` fixture, through which the tests run playbooks (playbook_run.py)."""

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from ansible.plugins.loader import init_plugin_loader
from playbook_run import run_lab_playbook, run_playbook

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO / "collections"

for path in (REPO, COLLECTIONS):
    if str(path) in sys.path:
        sys.path.remove(str(path))
    sys.path.insert(0, str(path))

# Ansible's collection loader must own every ansible_collections import before the first
# one happens: plugins loaded by FQCN and modules imported by tests are then the same modules.
init_plugin_loader([str(COLLECTIONS)])

# The suite's own rules: the allowed skips (tests/skips.py), the durations per group and the budget.
pytest_plugins = ["tests.suite"]


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The local lab, built once per session by site.yml (the first run on a fresh machine does the real
    work): root on Debian, with Debian's package mirror. Only tests marked ``lab`` use it (tests/suite.py)."""
    from tests import skips, suite

    skips.unless_root("the lab is built as root (packages, Docker engine, /opt/platbench)")
    assert shutil.which("apt-get"), "the local lab is built on Debian/Ubuntu hosts: run the lab tests on one"
    tmp = tmp_path_factory.mktemp("site")
    try:
        runner = run_lab_playbook("site.yml", tmp)
    finally:
        suite.lab_built(os.environ.get(suite.LAB_BUILT_ENV))  # the unit tests beside the lab may start (Makefile)
    assert runner.rc == 0, "site.yml failed: %s\n%s" % (runner.failed_messages(), runner.output[-6000:])
    return runner


@pytest.fixture
def playbook(tmp_path):
    """Runs a playbook in the test's tmp_path: ``playbook(path_or_plays, variables, *options, inventory=...,
    env=..., timeout=...)`` gives the PlaybookRun (playbook_run.run_playbook, which session fixtures call)."""

    def run(path_or_plays, variables=None, *options, **keywords):
        return run_playbook(path_or_plays, tmp_path, variables, *options, **keywords)

    return run


@pytest.fixture
def in_process(monkeypatch):
    """A workload's main in this process: pytest's signal handlers come back afterwards, and no GPU probe."""
    from workloads.common import gpus

    saved_handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    monkeypatch.setattr(gpus, "probe_devices", list)
    yield
    for number, handler in saved_handlers.items():
        signal.signal(number, handler)
