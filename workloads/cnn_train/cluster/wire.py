"""The parameter-server wire protocol: length-prefixed messages over one TCP connection per worker.

Each message is a header (kind, step, payload bytes) and its payload. A worker says HELO (its
view of the cluster, as JSON), the chief sends its initial variables (PARM, step 0); then each
step every worker sends its gradients (GRAD) and receives the new variables (PARM); DONE ends a
worker's run. Workers only dial out. Every wait is bounded by --net-timeout, every loop by a
count; a failing process sends FAIL with its reason so that the others stop at once instead of
timing out.
"""

import contextlib
import json
import math
import socket
import struct
import time

from .addresses import format_address

HEADER = struct.Struct("!4sIQ")  # kind, step, payload bytes
HELLO, PARAMS, GRADIENTS, DONE, FAIL = b"HELO", b"PARM", b"GRAD", b"DONE", b"FAIL"
MAX_CONTROL_BYTES = 1 << 20  # JSON and error messages
CONNECT_RETRY_SECONDS = 0.2
CONNECT_ATTEMPT_SECONDS = 10.0
FAIL_DRAIN_SECONDS = 2.0
FAIL_DRAIN_CHUNKS = 1024  # of 64 kB


class ProtocolError(ConnectionError):
    pass


class RemoteFailure(RuntimeError):
    """Another process of the cluster failed and said why."""


class Channel:
    """One TCP connection carrying length-prefixed messages; every wait bounded by `timeout`."""

    def __init__(self, sock, timeout):
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.timeout = sock, timeout
        self.bytes_sent = self.bytes_received = 0

    def send(self, kind, step, payload=b""):
        view = memoryview(payload).cast("B")
        self.sock.sendall(HEADER.pack(kind, step, view.nbytes))
        if view.nbytes:
            self.sock.sendall(view)
        self.bytes_sent += HEADER.size + view.nbytes

    def send_json(self, kind, step, value):
        self.send(kind, step, json.dumps(value).encode())

    def _receive_into(self, view, deadline):
        received = 0
        while received < view.nbytes:  # each pass receives at least one byte, or raises
            if time.monotonic() > deadline:
                raise TimeoutError(f"no complete message within {self.timeout:g}s")
            count = self.sock.recv_into(view[received:])
            if count == 0:
                raise ProtocolError("the peer closed the connection")
            received += count
        self.bytes_received += view.nbytes

    def receive(self, kinds, step=None, into=None):
        """(kind, step, payload): payload is bytes, or `into` (a numpy array) filled in place."""
        deadline = time.monotonic() + self.timeout
        header = bytearray(HEADER.size)
        self._receive_into(memoryview(header), deadline)
        kind, got_step, length = HEADER.unpack(header)
        if kind == FAIL and length <= MAX_CONTROL_BYTES:
            text = bytearray(length)
            self._receive_into(memoryview(text), deadline)
            raise RemoteFailure(text.decode(errors="replace"))
        if kind not in kinds:
            raise ProtocolError(f"expected {b'/'.join(kinds).decode()}, got {kind!r}")
        if step is not None and got_step != step:
            raise ProtocolError(f"expected step {step}, got step {got_step}")
        if into is not None:
            if length != into.nbytes:
                raise ProtocolError(f"expected {into.nbytes} bytes of {kind.decode()}, got {length}")
            self._receive_into(memoryview(into).cast("B"), deadline)
            return kind, got_step, into
        if length > MAX_CONTROL_BYTES:
            raise ProtocolError(f"{kind.decode()} message of {length} bytes is too large")
        payload = bytearray(length)
        self._receive_into(memoryview(payload), deadline)
        return kind, got_step, bytes(payload)

    def receive_json(self, kinds, step=None):
        kind, got_step, payload = self.receive(kinds, step)
        try:
            return kind, json.loads(payload)
        except ValueError:
            raise ProtocolError(f"{kind.decode()} message is not JSON") from None

    def fail(self, message):
        """Best effort: tell the peer why this process stops.

        Then half-close and drain what the peer still sends (bounded): closing a socket with
        unread data makes the kernel send a reset, and the peer would see "connection reset"
        instead of the reason.
        """
        try:
            self.sock.settimeout(FAIL_DRAIN_SECONDS)
            self.send(FAIL, 0, message.encode()[:MAX_CONTROL_BYTES])
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + FAIL_DRAIN_SECONDS
            for _ in range(FAIL_DRAIN_CHUNKS):
                if time.monotonic() > deadline or not self.sock.recv(1 << 16):
                    break
        except OSError:
            pass

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()


def cluster_config(args):
    """What every member of one cluster must agree on."""
    return {
        "framework": args.framework,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "num_classes": args.num_classes,
        "total_steps": args.warmup_steps + args.steps,
        "workers": len(args.worker_hosts),
    }


def connect(address, timeout):
    """A Channel to `address`, retried (the PS may start later) for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    for _ in range(max(1, math.ceil(timeout / CONNECT_RETRY_SECONDS))):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            sock = socket.create_connection(address, timeout=min(remaining, CONNECT_ATTEMPT_SECONDS))
            return Channel(sock, timeout)
        except OSError as error:
            last_error = error
            time.sleep(min(CONNECT_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))
    raise ConnectionError(
        f"could not reach the parameter server at {format_address(address)} within {timeout:g}s: {last_error}"
    )
