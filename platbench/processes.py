"""Find and stop what an interrupted ansible-playbook leaves running on the controller (Linux /proc).

ansible-runner starts ansible-playbook in a session of its own (pexpect's pty: the playbook's pid is its
session id), and Ansible starts every worker it forks in a new session too (``WorkerProcess._detach`` calls
``setsid``); a worker's modules, and the workloads they start on a local connection, stay in the worker's
session. So the sessions to stop are those of the playbook and of every process below it, read before the
playbook is killed (its orphans lose their parent link but keep their session).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time


def process_table():
    """``{pid: (ppid, sid)}`` of every process readable in /proc (zombies left out: nothing to stop)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stream:
                stat = stream.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        table[int(entry)] = (int(fields[1]), int(fields[3]))
    return table


def sessions_below(root, table=None):
    """The session ids of ``root`` and of every process below it, without the caller's own session."""
    table = process_table() if table is None else table
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    sessions, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            sessions.add(table[pid][1])
        stack.extend(children.get(pid, []))
    sessions.discard(os.getsid(0))
    return sessions


def in_sessions(sessions, table=None):
    """The processes of ``sessions`` (never the caller itself)."""
    table = process_table() if table is None else table
    return sorted(pid for pid, (_, sid) in table.items() if sid in sessions and pid != os.getpid())


def kill_sessions(sessions, grace=5.0):
    """Stop every process of ``sessions``: SIGTERM, then SIGKILL to those still there after ``grace`` seconds.
    Returns the pids signalled."""
    signalled = in_sessions(sessions)
    _signal(signalled, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and in_sessions(sessions):
        time.sleep(0.1)
    deadline = time.monotonic() + 2.0  # SIGKILL until none is left (one may have forked meanwhile)
    while (left := in_sessions(sessions)) and time.monotonic() < deadline:
        _signal(left, signal.SIGKILL)
        time.sleep(0.05)
    return signalled


def _signal(pids, number):
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, number)
