"""Running a test playbook against this machine (connection local) and reading its recap: shared by the
role tests that apply a role, or some of its task files, with injected variables."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The checkout's ansible.cfg (collections path, callbacks), plain output, and the venv's ansible first.
ENV = dict(
    os.environ,
    ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
    ANSIBLE_NOCOLOR="1",
    ANSIBLE_FORCE_COLOR="0",
    PATH=f"{REPO / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}",
)


def run_playbook(playbook, tmp_path, variables, *options, timeout=300):
    """ansible-playbook PLAYBOOK against localhost with ``variables`` as extra vars (from a JSON file)."""
    vars_file = Path(tmp_path) / "vars.json"
    vars_file.write_text(json.dumps(variables))
    return subprocess.run(
        ["ansible-playbook", "-i", "localhost,", str(playbook), "-e", f"@{vars_file}", *options],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def recap(run):
    """(changed, failed) of localhost in the play recap."""
    match = re.search(r"localhost\s+:.*changed=(\d+).*failed=(\d+)", run.stdout)
    assert match, run.stdout[-3000:] + run.stderr[-2000:]
    return int(match.group(1)), int(match.group(2))
