"""The collection passes ansible-lint's production profile and its playbooks parse."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


@pytest.mark.skipif(not shutil.which("ansible-lint"), reason="ansible-lint is installed by `make venv`")
def test_ansible_lint_production_profile():
    lint = subprocess.run(["ansible-lint", "--offline", "--profile", "production"], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=900)
    assert lint.returncode == 0, lint.stdout[-8000:] + lint.stderr[-4000:]


@pytest.mark.parametrize("playbook", ["site.yml", "playbooks/experiment.yml", "playbooks/teardown.yml"])
def test_playbook_syntax(playbook):
    check = subprocess.run(["ansible-playbook", "--syntax-check", playbook], cwd=REPO, env=ENV,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
