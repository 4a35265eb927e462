# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The measurement of a cell's network path before training: the tools' command lines and their parsers.

- Throughput: one bounded iperf3 TCP test (``--time``, ``--connect-timeout``; the server answers one client,
  ``--one-off``), read from its ``--json`` report: what reached the receiver, ``end.sum_received``.
- Round-trip time: ``ping`` on the idle path (ICMP echo, ``-c`` packets ``-i 0.05`` apart, ``-W 1``), its
  summary line. iperf3 also reports the sender's smoothed TCP RTT, but sampled under its own full load, so it
  measures the queues the test fills; it is kept as a detail, and the idle ping is the path's latency.

Every figure comes from the tools' own reports. Pure functions; the module runs them.
"""

from __future__ import annotations

import json
import re

CONNECT_TIMEOUT_MS = 3000
PING_INTERVAL_S = 0.05
PING_WAIT_S = 1
# Seconds the tools may take beyond the test's own time: connecting, the end-of-test exchange, the report.
SLACK_S = 10
SUMMARY = re.compile(r"^rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms$", re.MULTILINE)
COUNTS = re.compile(r"^(\d+) packets transmitted, (\d+) received", re.MULTILINE)


class MeasureError(ValueError):
    """A tool's output holds no figure; the message quotes what it printed."""


def _in_netns(netns, argv):
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def _bounded(seconds, argv):
    # coreutils timeout: the tool is killed if it outlives its bound, whatever it waits on
    return ["timeout", "--kill-after=2", str(int(seconds)), *argv]


def server_argv(netns, address, port, seconds):
    """The iperf3 server: one client, then exit; killed after ``seconds`` if no client came."""
    argv = ["iperf3", "--server", "--one-off", "--bind", address, "--port", str(port), "--forceflush"]
    return _bounded(seconds, _in_netns(netns, argv))


def client_argv(netns, address, port, seconds):
    argv = ["iperf3", "--client", address, "--port", str(port), "--time", f"{seconds:g}"]
    argv += ["--connect-timeout", str(CONNECT_TIMEOUT_MS), "--json"]
    return _bounded(seconds + SLACK_S, _in_netns(netns, argv))


def ping_argv(netns, address, count):
    argv = ["ping", "-n", "-q", "-c", str(count), "-i", f"{PING_INTERVAL_S:g}", "-W", str(PING_WAIT_S), address]
    return _bounded(count * PING_INTERVAL_S + PING_WAIT_S + SLACK_S, _in_netns(netns, argv))


def _tail(text):
    return " | ".join(line.strip() for line in (text or "").strip().splitlines()[-3:]) or "nothing"


def parse_iperf3(text):
    """Throughput (Gbit/s, received), bytes, seconds and retransmissions of one iperf3 ``--json`` report,
    with the sender's mean TCP RTT under load (ms) where the kernel reports it."""
    try:
        report = json.loads(text)
    except ValueError:
        raise MeasureError(f"iperf3 printed no JSON report: {_tail(text)}") from None
    if not isinstance(report, dict):
        raise MeasureError(f"iperf3's report is no JSON object: {_tail(text)}")
    if report.get("error"):
        raise MeasureError(f"iperf3 failed: {report['error']}")
    end = report.get("end") or {}
    received = end.get("sum_received") or {}
    bits = received.get("bits_per_second")
    if isinstance(bits, bool) or not isinstance(bits, (int, float)) or bits <= 0:
        raise MeasureError(f"iperf3's report has no throughput at end.sum_received.bits_per_second: {bits!r}")
    senders = [stream.get("sender") or {} for stream in end.get("streams") or []]
    rtts = [sender["mean_rtt"] for sender in senders if isinstance(sender.get("mean_rtt"), (int, float))]
    return {
        "throughput_gbps": bits / 1e9,
        "bytes": received.get("bytes"),
        "seconds": received.get("seconds"),
        "retransmits": (end.get("sum_sent") or {}).get("retransmits"),
        "loaded_rtt_ms": sum(rtts) / len(rtts) / 1000 if rtts else None,  # iperf3 reports microseconds
    }


def not_listening_yet(text):
    """Whether iperf3's ``--json`` report says the client found no server listening (yet): a refused connection."""
    try:
        error = str((json.loads(text) or {}).get("error") or "")
    except (ValueError, AttributeError):
        return False
    return "unable to connect" in error.lower() and "refused" in error.lower()


def parse_ping(text):
    """Packets sent and received and the RTT's min/avg/max/mdev (ms) of ping's summary; MeasureError when no
    reply came back (ping prints no RTT line then)."""
    counts = COUNTS.search(text or "")
    if not counts:
        raise MeasureError(f"ping printed no packet counts: {_tail(text)}")
    sent, received = int(counts.group(1)), int(counts.group(2))
    summary = SUMMARY.search(text)
    if received == 0 or not summary:
        raise MeasureError(f"ping got no reply to {sent} packets: {_tail(text)}")
    low, mean, high, deviation = (float(value) for value in summary.groups())
    return {"sent": sent, "received": received, "min_ms": low, "avg_ms": mean, "max_ms": high, "mdev_ms": deviation}


def route_device(text):
    """``ip -j route get ADDRESS``: the device the path leaves by."""
    try:
        routes = json.loads(text)
        return routes[0]["dev"]
    except (ValueError, LookupError, TypeError):
        raise MeasureError(f"ip route get printed no route: {_tail(text)}") from None


def link_mtu(text):
    """``ip -j link show DEV``: its MTU."""
    try:
        return int(json.loads(text)[0]["mtu"])
    except (ValueError, LookupError, TypeError):
        raise MeasureError(f"ip link show printed no MTU: {_tail(text)}") from None


def samples(throughput, rtt, mtu):
    """The cell's metrics of its path, in the record's form (metric, value, unit)."""
    return [
        {"metric": "path_throughput", "value": round(throughput["throughput_gbps"], 4), "unit": "Gbit/s"},
        {"metric": "path_rtt", "value": rtt["avg_ms"], "unit": "ms"},
        {"metric": "path_mtu", "value": mtu, "unit": "bytes"},
    ]
