"""The small-message ping-pong: an echo server (the peer's) and a client that times round trips. Stdlib only.

One TCP connection with TCP_NODELAY on both ends, so every message leaves at once instead of
waiting for Nagle's algorithm; the client sends ``message_bytes``, waits for the same bytes back,
and times that round trip. Python sockets add a per-message cost of their own (a few system calls
and interpreter work on each side), the same on every platform since both ends run the same code
in the same image: the median is a figure to compare between platforms, not an absolute latency
of the network path.

Every loop is bounded: the client by a count and a deadline, the server by its lifetime, a number
of connections, an idle timeout per connection and a number of messages per connection.
"""

import math
import socket
import statistics
import time

CONNECT_TIMEOUT_SECONDS = 5
ROUND_TRIP_TIMEOUT_SECONDS = 5  # one round trip longer than this fails the run: the peer is gone or stuck
WARMUP_ROUND_TRIPS = 20  # not counted: connection set-up, first-touch of buffers and code paths
POLL_SECONDS = 0.5  # how often the server's loops look at their stop event and deadline
IDLE_SECONDS = 30  # a connection that sends nothing for this long is closed
MAX_MESSAGES_PER_CONNECTION = 10_000_000
MAX_MESSAGE_BYTES = 65536
PROBE_INTERVAL_SECONDS = 0.2


class PingPongError(RuntimeError):
    """The ping-pong could not be done; the message says where it stopped and what to check."""


def _no_delay(sock):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def listen(bind, port):
    """The server's listening socket (SO_REUSEADDR, so a run right after another can bind again)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((str(bind), int(port)))
    except OSError as error:
        listener.close()
        raise PingPongError(f"the ping-pong server cannot listen on {bind}:{port}: {error.strerror or error}") from None
    listener.listen(8)
    listener.settimeout(POLL_SECONDS)
    return listener


def _should_stop(stop, deadline):
    return stop.is_set() or time.monotonic() >= deadline


def echo_connection(connection, stop, deadline):
    """Sends back every byte the connection sends, until it closes, idles, or the server must stop;
    returns the number of messages (reads) echoed."""
    _no_delay(connection)
    connection.settimeout(POLL_SECONDS)
    messages, idle_since = 0, time.monotonic()
    while messages < MAX_MESSAGES_PER_CONNECTION and not _should_stop(stop, deadline):
        try:
            data = connection.recv(MAX_MESSAGE_BYTES)
        except TimeoutError:
            if time.monotonic() - idle_since >= IDLE_SECONDS:
                break
            continue
        except OSError:
            break
        if not data:  # the client closed the connection
            break
        try:
            connection.sendall(data)
        except OSError:
            break
        messages += 1
        idle_since = time.monotonic()
    return messages


def serve_echo(listener, stop, deadline, max_connections):
    """Serves connections one after the other until ``stop`` is set, ``deadline`` (time.monotonic) passes
    or ``max_connections`` have been served; returns how many were."""
    served = 0
    while served < max_connections and not _should_stop(stop, deadline):
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            break  # the listener was closed: the peer is stopping
        with connection:
            echo_connection(connection, stop, deadline)
        served += 1
    return served


def wait_for_server(address, port, seconds):
    """Returns once ``address:port`` accepts a TCP connection; PingPongError after ``seconds``."""
    deadline = time.monotonic() + seconds
    last_error = None
    while True:
        try:
            with socket.create_connection((str(address), int(port)), timeout=min(CONNECT_TIMEOUT_SECONDS, seconds)):
                return
        except OSError as error:
            last_error = error
        if time.monotonic() + PROBE_INTERVAL_SECONDS >= deadline:
            break
        time.sleep(PROBE_INTERVAL_SECONDS)
    raise PingPongError(
        f"the peer's ping-pong server at {address}:{port} accepted no connection within {seconds} s "
        f"({getattr(last_error, 'strerror', None) or last_error}): start `python -m workloads.micro_net.peer "
        f"--bind {address}` there first, or let this run start it with --serve-peer"
    )


def _receive_exactly(sock, size):
    chunks, received = [], 0
    while received < size:
        chunk = sock.recv(size - received)
        if not chunk:
            raise PingPongError("the peer closed the ping-pong connection in the middle of a round trip")
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


def round_trips(address, port, message_bytes, count, seconds, warmup=WARMUP_ROUND_TRIPS):
    """Round-trip times in nanoseconds of up to ``count`` messages of ``message_bytes``, after ``warmup``
    uncounted ones, stopping early when ``seconds`` have passed (then fewer are returned)."""
    if not 1 <= message_bytes <= MAX_MESSAGE_BYTES:
        raise PingPongError(f"a ping-pong message holds 1 to {MAX_MESSAGE_BYTES} bytes, got {message_bytes}")
    deadline = time.monotonic() + seconds
    message = bytes(index % 251 for index in range(message_bytes))
    samples = []
    try:
        with socket.create_connection((str(address), int(port)), timeout=CONNECT_TIMEOUT_SECONDS) as sock:
            _no_delay(sock)
            sock.settimeout(ROUND_TRIP_TIMEOUT_SECONDS)
            for index in range(warmup + count):
                if time.monotonic() >= deadline:
                    break
                started = time.perf_counter_ns()
                sock.sendall(message)
                echoed = _receive_exactly(sock, message_bytes)
                elapsed = time.perf_counter_ns() - started
                if echoed != message:
                    raise PingPongError(f"the peer at {address}:{port} echoed other bytes than were sent")
                if index >= warmup:
                    samples.append(elapsed)
    except TimeoutError:
        raise PingPongError(
            f"a round trip to {address}:{port} took more than {ROUND_TRIP_TIMEOUT_SECONDS} s: the peer is stuck"
        ) from None
    except OSError as error:
        raise PingPongError(f"ping-pong with {address}:{port} failed: {error.strerror or error}") from None
    return samples


def summary(samples_ns):
    """Statistics of round-trip times in nanoseconds, in microseconds: median (the metric), min, p90, p99, max."""
    if not samples_ns:
        raise PingPongError("no round trip was timed")
    ordered = sorted(samples_ns)

    def percentile(fraction):  # nearest rank
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] / 1000

    return {
        "round_trips": len(ordered),
        "median_us": statistics.median(ordered) / 1000,
        "min_us": ordered[0] / 1000,
        "p90_us": percentile(0.90),
        "p99_us": percentile(0.99),
        "max_us": ordered[-1] / 1000,
    }
