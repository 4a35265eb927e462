"""``platbench run``'s side of the quiet instrument: it places itself below the cells before it starts anything,
reads its own CPU time once a second, and tells the playbook where it is, for the records.

The placement itself (SCHED_IDLE, the harness's cgroup, its CPUs, a systemd scope) is worked out and applied by
plugins/module_utils/quiet.py; the cells' side (each workload back at the normal policy in a cgroup of its own) by
the kinds' plans. docs/src/calibrating.md, "A quiet harness", says what a user checks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from pathlib import Path

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils import quiet

# The extra variable the playbook gets: record_cell copies it into every sample's metadata.
EXTRAVAR = "platbench_harness"


def reserved_cpus(inventory):
    """The CPUs the inventory keeps from the cells on the hosts this controller runs cells on itself
    (``platbench_reserved_cpus`` of its local-connection hosts): where the harness may run beside them; [] for none
    or an inventory that cannot be read here (the playbook reports that itself)."""
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        loader = DataLoader()
        hosts = InventoryManager(loader=loader, sources=[str(inventory)])
        variables = VariableManager(loader=loader, inventory=hosts)
        found = None
        for host in hosts.get_hosts():
            values = variables.get_vars(host=host, include_hostvars=False)
            if values.get("ansible_connection") != "local" and host.name not in ("localhost", "127.0.0.1"):
                continue
            cpus = {int(cpu) for cpu in values.get("platbench_reserved_cpus") or []}
            found = cpus if found is None else found & cpus
        return sorted(found or [])
    except Exception:  # noqa: BLE001 - an inventory Ansible cannot read is the playbook's to report, not ours
        return []


def place(inventory, pid=None, environ=os.environ, cgroup_root=quiet.CGROUP_ROOT):
    """Where this process goes: ``module_utils.quiet.placement`` for this host and the inventory's reserved CPUs. A
    systemd host whose ``systemd-run`` is missing falls back to the cgroup of its own."""
    found = quiet.layout(cgroup_root)
    if found["systemd"] and not shutil.which("systemd-run"):
        found = {**found, "systemd": False}
    allowed = set(os.sched_getaffinity(0))
    spare = [cpu for cpu in reserved_cpus(inventory) if cpu in allowed]
    return quiet.placement(
        found, os.getpid() if pid is None else pid, spare, in_scope=bool(environ.get(quiet.SCOPE_ENV))
    )


def reexec_in_scope(chosen, argv=None):
    """On a host where systemd is PID 1: run this command again inside a transient scope of the harness's own (the
    scope adopts the process; systemd removes it when the run ends). Returns only when it could not."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = [*chosen["scope_argv"], "--", sys.executable, "-m", "platbench", *argv]
    os.environ[quiet.SCOPE_ENV] = "1"
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        return f"systemd-run could not start the harness's scope ({exc.strerror or exc})"
    return None  # not reached


class Harness:
    """The harness placed, and its CPU time read once a second into the campaign's series while ``running``."""

    def __init__(self, state):
        self.state = state
        self._stop = threading.Event()
        self._thread = None
        self.series = None

    @property
    def warning(self):
        """What the user is told when the harness could not keep out of the cells' way; None when it could."""
        if self.state["isolated"]:
            return None
        return f"harness not isolated: {'; '.join(self.state['problems'])}"

    def start_series(self, directory):
        """Read the harness's CPU time into ``directory``'s series, once a second, until ``stop``."""
        if not self.state.get("accounting") or self._thread is not None:
            return
        self.series = str(Path(directory) / quiet.SERIES_FILE)
        accounting = self.state["accounting"]

        def read_on():
            while True:
                try:
                    quiet.append_reading(self.series, accounting, time.time())
                except OSError:
                    return  # the campaign's directory went away: nothing left to count for
                if self._stop.wait(quiet.SAMPLE_SECONDS):  # a blocking wait: the reader never spins
                    return

        # A thread created now inherits this one's SCHED_IDLE.
        self._thread = threading.Thread(target=read_on, name="harness-cpu", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        problems = quiet.release(self.state)
        # A run killed with SIGKILL left its group, which still held that run's processes when this one started;
        # they are stopped by now (run._after_a_dead_run).
        _remove_dead_runs_groups()
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)

    def extravar(self):
        """What the playbook gets as ``platbench_harness``: whether the harness is isolated and how, and where its CPU
        time is read (record_cell attributes it to each cell's timed part)."""
        return {
            "isolated": self.state["isolated"],
            "how": self.state["how"] if self.state["isolated"] else self.warning,
            "series": self.series,
            "accounting": self.state.get("accounting"),
        }


def _remove_dead_runs_groups():
    """The groups of runs killed with SIGKILL (their pid gone), where nothing is left in them."""
    for path in quiet.leftovers(quiet.layout()):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def isolate(inventory):
    """Place this process (``platbench run``) below the cells it will measure: a ``Harness``. On a systemd host the
    process is first re-executed inside its scope (this call does not return there, unless that fails)."""
    _remove_dead_runs_groups()
    chosen = place(inventory)
    if chosen["method"] == "systemd-scope" and chosen.get("scope_argv"):
        problem = reexec_in_scope(chosen)
        chosen = {**place(inventory), "method": "policy-only", "cgroups": [], "accounting": None}
        state = quiet.apply(chosen)
        state["problems"].insert(0, problem)
        state["isolated"] = False
        return Harness(state)
    return Harness(quiet.apply(chosen))
