"""Run this repository's playbooks through ansible-runner, as a user's command line would."""

from __future__ import annotations

import json
from pathlib import Path

import ansible_runner

REPO = Path(__file__).resolve().parents[2]


def run_playbook(playbook, tmp_path, extravars=None, inventory=None):
    """Run a playbook of this repo against ``inventory`` (default: the local one); return the runner."""
    private = tmp_path / "runner"
    private.mkdir(parents=True, exist_ok=True)
    env = {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(REPO / playbook),
        inventory=str(inventory or REPO / "inventories" / "local"),
        extravars=extravars or {},
        envvars=env,
        quiet=True,
        timeout=1800,
    )
    return runner


def output_of(runner):
    return runner.stdout.read() if runner.stdout else ""


def failed_messages(runner):
    """The msg of every failed task, for assertions and for readable test failures."""
    messages = []
    for event in runner.events:
        # A failing loop reports each item's message in its own event.
        if event.get("event") in ("runner_on_failed", "runner_item_on_failed"):
            res = event["event_data"].get("res", {})
            messages.append(str(res.get("msg", res)))
    return messages


def read_samples(campaign_dir):
    path = Path(campaign_dir) / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
