"""The collection passes ansible-lint's production profile, its playbooks parse, and ruff passes the Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
# ruff is pinned in requirements.txt; look beside this interpreter first (the venv's bin/).
RUFF = shutil.which("ruff", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@skips.requires(commands=["ansible-lint"])
def test_ansible_lint_production_profile():
    lint = subprocess.run(
        ["ansible-lint", "--offline", "--profile", "production"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert lint.returncode == 0, lint.stdout[-8000:] + lint.stderr[-4000:]


@pytest.mark.parametrize(
    "playbook", ["site.yml", "playbooks/experiment.yml", "playbooks/teardown.yml", "playbooks/openstack_cloud.yml"]
)
def test_playbook_syntax(playbook):
    check = subprocess.run(
        ["ansible-playbook", "--syntax-check", playbook], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(
    "command", [["check", "--output-format", "concise"], ["format", "--check", "--diff"]], ids=["check", "format"]
)
def test_ruff(command):
    """The rules and the format are in pyproject.toml ([tool.ruff]); `ruff check --fix .` and
    `ruff format .` fix most findings."""
    assert RUFF, f"ruff is missing (beside {sys.executable} and on PATH): `make venv` installs it (requirements.txt)"
    ruff = subprocess.run([RUFF, *command, "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ruff.returncode == 0, ruff.stdout[-8000:] + ruff.stderr[-2000:]
