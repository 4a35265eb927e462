"""Start the cloud's processes, wait for them, and stop them by the PIDs recorded in the state dir."""

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from .layout import HOST

STOP_GRACE_SECONDS = 15


class CloudError(RuntimeError):
    """Something the user can act on; the message says what and where to look."""


def log_tail(path, lines=25):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


def port_in_use(port):
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


def start(layout, name, argv, env=None):
    """Start ``argv`` in a session of its own (so its children stop with it); record its PID."""
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    log = layout.log_dir / f"{name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(arg) for arg in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=layout.state_dir,
            start_new_session=True,
        )
    (layout.run_dir / f"{name}.pid").write_text(str(process.pid))
    return process


def pid_files(layout):
    return sorted(layout.run_dir.glob("*.pid")) if layout.run_dir.is_dir() else []


def recorded_pids(layout):
    """{name: pid} of every process the cloud started that is still alive."""
    alive = {}
    for pid_file in pid_files(layout):
        pid = int(pid_file.read_text())
        if _alive(pid):
            alive[pid_file.stem] = pid
    return alive


def session_pids(layout):
    """Every live PID in the sessions the cloud started (workers and children included)."""
    leaders = set(recorded_pids(layout).values())
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getsid(int(entry)) in leaders:
                    found.add(int(entry))
    return found


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_until(check, what, timeout, log, process=None, interval=0.5):
    """Poll ``check`` (bounded by ``timeout`` seconds and a count); raise with the log's tail."""
    deadline = time.monotonic() + timeout
    for _attempt in range(int(timeout / interval) + 1):
        if check():
            return
        if process is not None and process.poll() is not None:
            raise CloudError(f"{what}: exited with status {process.returncode}. Last lines of {log}:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise CloudError(f"{what}: not ready after {timeout}s. Last lines of {log}:\n{log_tail(log)}")


def port_open(port):
    def check():
        with socket.socket() as probe:
            probe.settimeout(1)
            return probe.connect_ex((HOST, port)) == 0

    return check


def http_answers(url):
    """True once the URL answers HTTP at all (any status: an API that answers 401 is up)."""

    def check():
        try:
            with urllib.request.urlopen(url, timeout=5):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            return False

    return check


def stop_all(layout):
    """TERM every recorded session, KILL what is left after a bounded wait; return PIDs that survived."""
    leaders = recorded_pids(layout)
    members = session_pids(layout)
    for pid in leaders.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and any(_alive(pid) for pid in members):
        time.sleep(0.3)
    for pid in members:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    for pid_file in pid_files(layout):
        pid_file.unlink()
    return sorted(pid for pid in members if _alive(pid))
