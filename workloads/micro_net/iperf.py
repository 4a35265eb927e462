"""iperf3 as micro_net runs it: the client's and the server's command lines, and the client's JSON report.

Every figure comes from iperf3's own ``--json`` report, never from a count of ours:
``end.sum_received.bits_per_second`` (what reached the receiver over the whole test, all streams
together) is the throughput, ``end.sum_sent.retransmits`` the TCP retransmissions on the sender
(Linux only: iperf3 reads them from TCP_INFO). Stdlib only.
"""

import json
from typing import NamedTuple

# iperf3 gives up on a control connection that is not up in this time (ms), rather than waiting on TCP's.
CONNECT_TIMEOUT_MS = 5000
# Seconds a client run may take beyond --time: connecting, the end-of-test exchange, the JSON report.
CLIENT_EXTRA_SECONDS = 20
MAX_PARALLEL_STREAMS = 128  # iperf3's own limit on -P


class IperfOutputError(ValueError):
    """iperf3 printed no usable report; the message says what it printed instead."""


class IperfResult(NamedTuple):
    streams: int
    received_bits_per_second: float
    retransmits: int | None  # None where the sender's kernel does not report them
    details: dict  # for the record's metadata


def client_argv(peer, port, duration, streams):
    """One TCP test of ``duration`` seconds with ``streams`` parallel streams, reported as JSON."""
    return [
        "iperf3",
        "--client",
        str(peer),
        "--port",
        str(port),
        "--time",
        str(duration),
        "--parallel",
        str(streams),
        "--connect-timeout",
        str(CONNECT_TIMEOUT_MS),
        "--json",
    ]


def server_argv(bind, port):
    """The server, bound to one address; --forceflush so its "Server listening" line says when it is ready."""
    return ["iperf3", "--server", "--bind", str(bind), "--port", str(port), "--forceflush"]


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IperfOutputError(f"iperf3's report has no number at {where} (got {value!r})")
    return value


def parse_client_json(text):
    """The IperfResult of one client run's ``--json`` report; IperfOutputError when there is none."""
    try:
        report = json.loads(text)
    except ValueError:
        tail = " | ".join(line.strip() for line in (text or "").strip().splitlines()[-5:]) or "nothing"
        raise IperfOutputError(f"iperf3 printed no JSON report; its output ends with: {tail}") from None
    if not isinstance(report, dict):
        raise IperfOutputError(f"iperf3's report is not a JSON object: {type(report).__name__}")
    if report.get("error"):
        raise IperfOutputError(f"iperf3 reported an error: {report['error']}")
    end = report.get("end") or {}
    received = end.get("sum_received") or {}
    sent = end.get("sum_sent") or {}
    bits_per_second = _number(received.get("bits_per_second"), "end.sum_received.bits_per_second")
    retransmits = sent.get("retransmits")
    if retransmits is not None:
        retransmits = _number(retransmits, "end.sum_sent.retransmits")
    test_start = (report.get("start") or {}).get("test_start") or {}
    streams = test_start.get("num_streams") or len(end.get("streams") or [])
    cpu = end.get("cpu_utilization_percent") or {}
    details = {
        "streams": streams,
        "duration_s": test_start.get("duration"),
        "received_seconds": received.get("seconds"),
        "received_bytes": received.get("bytes"),
        "sent_bits_per_second": sent.get("bits_per_second"),
        "retransmits": retransmits,
        "sender_cpu_percent": cpu.get("host_total"),
        "receiver_cpu_percent": cpu.get("remote_total"),
        "congestion_control": end.get("sender_tcp_congestion"),
        "iperf3_version": (report.get("start") or {}).get("version"),
    }
    return IperfResult(streams, float(bits_per_second), retransmits, details)
