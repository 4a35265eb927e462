"""One ``platbench run`` per campaign at a time, and a run that died found by the next one.

The lock is ``RESULTS_DIR/CAMPAIGN/run.lock``, held with ``fcntl.flock`` for the whole run, with the run's pid, its
command line and start time written inside (and ansible-playbook's pid once the run knows it). A second run of the
campaign finds the lock held and is refused, naming that pid. A run that ends, however it ends, removes the file;
the kernel drops the flock of a process that dies, so a file that is there but not held is what a run killed
with SIGKILL (or a controller that crashed) left behind: the next run reads from it which run that was, and
platbench.run stops what is left of its playbook and removes the cells' leftovers before resuming.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

LOCK_FILE = "run.lock"


class CampaignBusy(Exception):
    """Another run holds the campaign's lock; the message names it and says what to do."""

    def __init__(self, campaign, path, holder):
        self.holder = holder
        who = describe(holder) if holder else "a run that has not written its pid yet"
        pid = holder.get("pid") if holder else None
        stop = f"Ctrl-C in its terminal, or kill -INT {pid}" if pid else "Ctrl-C in its terminal"
        super().__init__(
            f"campaign {campaign} is being run already, by {who} (it holds {path}); two runs of one campaign would "
            f"run its cells side by side and record them twice. Wait for it to end, or stop it ({stop}), then run "
            "this command again"
        )


def describe(record):
    """``platbench run pid 1234, started 2025-01-31 12:00:01: platbench run smoke --campaign c``."""
    words = f"platbench run pid {record.get('pid', '?')}"
    if record.get("started"):
        words += f", started {record['started']}"
    if record.get("command"):
        words += f": {record['command']}"
    return words


def _read(descriptor):
    """The record a run wrote into the lock file, or None (an empty or unreadable file)."""
    os.lseek(descriptor, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(descriptor, 65536):
        data += chunk
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class CampaignLock:
    """The campaign's lock, held: ``stale`` is the record of a run that died holding it, or None."""

    def __init__(self, path, descriptor, record, stale):
        self.path, self._descriptor, self.record, self.stale = path, descriptor, record, stale

    def update(self, **fields):
        """Add ``fields`` to the record in the file (ansible-playbook's pid, once known)."""
        self.record.update(fields)
        self._write()

    def _write(self):
        data = (json.dumps(self.record, sort_keys=True) + "\n").encode("utf-8")
        try:
            os.pwrite(self._descriptor, data, 0)  # over the old record, then cut what is left of it
            os.ftruncate(self._descriptor, len(data))
            os.fsync(self._descriptor)
        except OSError:
            pass  # a full disk: the lock is still held, and the file keeps the pid it had

    def release(self, keep=False):
        """Remove the file, then let go of the lock. ``keep``: the run left leftovers it could not remove, so the
        file stays with its record and the next run removes them first, as after a run that died."""
        if self._descriptor is None:
            return
        if not keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # while held: a run waiting on this file finds it gone and opens the new one
        os.close(self._descriptor)
        self._descriptor = None


def acquire(directory, campaign, command):
    """Take the lock of the campaign in ``directory`` (created when missing) for this process, whose ``command``
    line the record keeps. Raises CampaignBusy when another run holds it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(descriptor)
            os.close(descriptor)
            raise CampaignBusy(campaign, path, holder) from None
        try:
            same = os.fstat(descriptor).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(descriptor)  # its last holder removed it between our open and our lock: take the new one
    stale = _read(descriptor)
    record = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command}
    lock = CampaignLock(path, descriptor, record, stale)
    lock._write()
    return lock
