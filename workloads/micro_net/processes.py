"""Child processes of micro_net (the iperf3 server, the peer): wait for a ready line, drain, stop. Stdlib only.

A pipe is read with os.read on its descriptor, not readline: a buffered reader can hold the
awaited line while select() says the pipe is empty, and the wait would then run out for nothing.
"""

import collections
import os
import select
import subprocess
import threading
import time

STOP_GRACE_SECONDS = 5
TAIL_LINES = 20


def wait_for_line(process, marker, seconds):
    """(True, output so far) once a line of ``process.stdout`` contains ``marker``; (False, output) when the
    process exits first or ``seconds`` pass. The stdout must be a binary pipe."""
    deadline = time.monotonic() + seconds
    descriptor = process.stdout.fileno()
    received = b""
    while True:
        # Only a whole line counts: the marker may be the start of a longer line still coming.
        if any(marker.encode() in line for line in received.split(b"\n")[:-1]):
            return True, received.decode(errors="replace")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False, received.decode(errors="replace")
        readable, _, _ = select.select([descriptor], [], [], min(remaining, 0.5))
        if readable:
            chunk = os.read(descriptor, 65536)
            if not chunk:  # end of file: the process closed its stdout (it exited)
                return False, received.decode(errors="replace")
            received += chunk


class OutputDrain:
    """Reads a child's binary stdout to its end in a daemon thread, so the pipe never fills and blocks the
    child, keeping the last lines for an error message."""

    def __init__(self, stream, first_text=""):
        self.lines = collections.deque(first_text.splitlines(), maxlen=TAIL_LINES)
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        descriptor = self._stream.fileno()
        pending = b""
        while True:
            try:
                chunk = os.read(descriptor, 65536)
            except OSError:
                return
            if not chunk:
                return
            pending += chunk
            *complete, pending = pending.split(b"\n")
            self.lines.extend(line.decode(errors="replace") for line in complete)

    def tail(self):
        return " | ".join(line.strip() for line in list(self.lines) if line.strip())


def stop_process(process, grace=STOP_GRACE_SECONDS):
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code (None if it could not be reaped)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                return None
    return process.returncode
