"""Make the repository importable as it is used: the collection by its FQCN
(``ansible_collections.platbench.lab``, through ``collections/``) and the ``platbench`` package;
and the ``playbook`` fixture, through which the tests run playbooks (playbook_run.py)."""

import sys
from pathlib import Path

import pytest
from ansible.plugins.loader import init_plugin_loader
from playbook_run import run_playbook

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO / "collections"

for path in (REPO, COLLECTIONS):
    if str(path) in sys.path:
        sys.path.remove(str(path))
    sys.path.insert(0, str(path))

# Ansible's collection loader must own every ansible_collections import before the first
# one happens: plugins loaded by FQCN and modules imported by tests are then the same modules.
init_plugin_loader([str(COLLECTIONS)])


@pytest.fixture
def playbook(tmp_path):
    """Runs a playbook in the test's tmp_path: ``playbook(path_or_plays, variables, *options, inventory=...,
    env=..., timeout=...)`` gives the PlaybookRun (playbook_run.run_playbook, which session fixtures call)."""

    def run(path_or_plays, variables=None, *options, **keywords):
        return run_playbook(path_or_plays, tmp_path, variables, *options, **keywords)

    return run
