"""The one way the tests run a playbook: ansible-playbook through ansible-runner, as a user's command line
would, with this checkout's ansible.cfg and the venv's Ansible first on PATH.

Role tests apply a role (or some of its task files) to this machine (the inventory ``localhost,``, the
default) with injected variables; the lab tests run the repository's playbooks against the lab's
inventory (``run_lab_playbook``). Every run has a directory of its own and gives back its exit status, what
it printed (ansible-playbook's errors included: both streams go to one terminal) and Ansible's events,
which hold each task's result. The ``playbook`` fixture (tests/conftest.py) binds a run to the test's
tmp_path."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner
import yaml

REPO = Path(__file__).resolve().parents[1]
THIS_HOST = "localhost,"
LAB_INVENTORY = REPO / "inventories" / "local"
LAB_SECONDS = 1800
# What every run adds to the environment: the checkout's ansible.cfg (collections path, callbacks), plain
# output and the venv's Ansible first; each run adds a library (ANSIBLE_LIBRARY) with the test module below.
ANSIBLE_ENV = {
    "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PATH": f"{REPO / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}",
}
# The same environment for the few tests that call `ansible` (one module) or another tool directly.
ENV = dict(os.environ, **ANSIBLE_ENV)
# A module that hands the play the facts a real platbench.lab.host_facts (or setup) run would have gathered,
# for roles that read GPUs, distributions or CPUs this machine does not have: `inject_facts: {facts: {...}}`.
INJECT_FACTS = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}}, supports_check_mode=True)
module.exit_json(changed=False, ansible_facts=module.params["facts"])
"""


@dataclass(frozen=True)
class PlaybookRun:
    """How one ansible-playbook run ended: its exit status, its output and its events (ansible-runner's)."""

    rc: int
    status: str
    output: str
    events: list = field(repr=False)

    @property
    def stats(self):
        """The play recap by counter and host ({'changed': {'localhost': 2}, 'failures': {}, ...}); {} when the
        run stopped before any play (a syntax error)."""
        found = [event["event_data"] for event in self.events if event.get("event") == "playbook_on_stats"]
        return found[-1] if found else {}

    def recap(self, host="localhost"):
        """(changed, failed) of ``host`` in the play recap."""
        stats = self.stats
        assert stats, f"no play recap (rc {self.rc}):\n{self.output[-4000:]}"
        assert host in stats.get("processed", {}), f"{host} is not in the recap:\n{self.output[-4000:]}"
        return stats.get("changed", {}).get(host, 0), stats.get("failures", {}).get(host, 0)

    def failed_messages(self):
        """The msg of every failed task, for assertions and for readable test failures."""
        messages = []
        for event in self.events:
            # A failing loop reports each item's message in its own event.
            if event.get("event") in ("runner_on_failed", "runner_item_on_failed"):
                res = event["event_data"].get("res", {})
                messages.append(str(res.get("msg", res)))
        return messages

    def results(self, task):
        """The results of every host's run of the task named ``task`` that did not fail or skip, in order."""
        return [
            event["event_data"]["res"]
            for event in self.events
            if event.get("event") == "runner_on_ok" and event["event_data"].get("task") == task
        ]


def run_playbook(playbook, workdir, variables=None, *options, inventory=THIS_HOST, env=None, timeout=300):
    """Run ``playbook`` with ``variables`` as extra vars and ``options`` on the command line (``--check``...).

    playbook: a path (relative to the repository, or absolute), or a list of plays, written to
    ``workdir/play.yml`` (beside the test's own files: filter_plugins/, ...). inventory: a host list
    (``"a,b,"``) or a path. env: more environment variables. A run that outlives ``timeout`` seconds is
    stopped and raises TimeoutError with the end of its output."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if isinstance(playbook, (str, Path)):
        path = REPO / playbook
    else:
        path = workdir / "play.yml"
        path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    private = Path(tempfile.mkdtemp(prefix="ansible-run-", dir=workdir))
    (private / "library").mkdir()
    (private / "library/inject_facts.py").write_text(INJECT_FACTS)
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(path),
        inventory=[str(inventory)],
        extravars=variables or {},
        cmdline=shlex.join(str(option) for option in options) or None,
        envvars={**ANSIBLE_ENV, "ANSIBLE_LIBRARY": str(private / "library"), **(env or {})},
        quiet=True,
        timeout=timeout,
    )
    artifacts = Path(runner.config.artifact_dir)
    output = (artifacts / "stdout").read_text() if (artifacts / "stdout").exists() else ""
    if runner.status == "timeout":
        raise TimeoutError(f"{path} ran past {timeout} s:\n{output[-4000:]}")
    # Read from the files: ansible-runner's own reader waits a minute for events a failed start never writes.
    events = [json.loads(event.read_text()) for event in (artifacts / "job_events").glob("*.json")]
    events.sort(key=lambda event: event["counter"])
    return PlaybookRun(rc=runner.rc, status=runner.status, output=output, events=events)


def run_lab_playbook(playbook, workdir, variables=None, *options, inventory=LAB_INVENTORY):
    """run_playbook against the lab (the local inventory, as ``ansible-playbook site.yml`` uses it) with the time
    a lab playbook may take: site.yml builds the whole lab on its first run."""
    return run_playbook(playbook, workdir, variables, *options, inventory=inventory, timeout=LAB_SECONDS)


def read_samples(campaign_dir):
    """The samples an experiment's runs recorded in ``campaign_dir``."""
    path = Path(campaign_dir) / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def platbench_run(argv, results_dir, **popen):
    """``platbench run ARGV --results-dir RESULTS_DIR`` started as a user starts it, in the repository, what it prints
    on both streams in one pipe (text): the Popen."""
    return subprocess.Popen(
        [sys.executable, "-m", "platbench", "run", *argv, "--results-dir", str(results_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def platbench_command(*argv, timeout=1200):
    """``python -m platbench ARGV`` run to its end as a user runs it, in the repository: the CompletedProcess, its
    streams as text. AssertionError with the ends of both streams when it exits other than 0."""
    done = subprocess.run(
        [sys.executable, "-m", "platbench", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done


def wait_for(condition, timeout, what):
    """Poll ``condition`` until it gives something true, which is returned; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout} s")


def workload_processes():
    """The lab's workload processes running on this host (bm's, and a container's as the host sees them), each as
    ``pid command``: none should be left once a cell has ended, however it ended. Not the unit tests' own: they run
    the workloads with this checkout's venv (its path among the command's first words), and `make test` runs them
    beside the lab tests."""
    found = subprocess.run(["pgrep", "-a", "-f", r"python[0-9.]* -m workloads\."], capture_output=True, text=True)
    checkout = f"{REPO}{os.sep}"
    return [
        line
        for line in found.stdout.splitlines()
        if line.strip() and not any(word.startswith(checkout) for word in line.split()[1:9])
    ]


def instance_leftovers(campaign):
    """Links and namespaces of network paths, containers of ``campaign`` and process cells' (or instances')
    cgroups still on the host."""
    # Here, not at the top: tests/conftest.py imports this module before Ansible's collection loader is set up.
    from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota
    from ansible_collections.platbench.lab.plugins.module_utils.network_path import LINK_NAME, NETNS_NAME

    links = [link["ifname"] for link in json.loads(subprocess.check_output(["ip", "-j", "link"], text=True))]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    containers = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", f"label=org.platbench.campaign={campaign}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [name for name in links if LINK_NAME.match(name)]
    netns = [line.split()[0] for line in namespaces.splitlines() if line.strip() and NETNS_NAME.match(line.split()[0])]
    return paths + netns + containers + cpu_quota.leftovers()
