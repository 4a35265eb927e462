"""Command line, measurements and result record of micro_net: the network part of Xu 2017's micro-benchmarks.

Two instances of one platform (two processes on bm, two containers on a bridge of the cell's own on
cn, two network namespaces in the lab test) and the traffic between them:
- throughput: ``iperf3`` TCP tests, one per --streams value (parallel streams, ``-P``), each metric
  entry labelled with its stream count;
- latency: the median round trip of small messages over one TCP connection (pingpong.py).

The other end is ``python -m workloads.micro_net.peer``: already running at --peer (the lab runs it as the
cell's second instance), or started here as a child process with --serve-peer (by hand). Only loopback
and the benchmarking range 198.18.0.0/15 may be --peer (addresses.py). Every loop is bounded in count and time.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..common import tools
from ..common.args import positive_int
from ..common.harness import Outcome, WorkloadFailed
from ..common.record import metric
from ..common.workload import Workload
from . import iperf, pingpong
from .addresses import AddressRefused, allowed_address, path_of
from .peer import DEFAULT_PINGPONG_PORT, DEFAULT_PORT, READY_PREFIX, port_number
from .processes import OutputDrain, stop_process, wait_for_line

WORKLOAD = "micro_net"
PATHS = ("loopback", "bridge", "veth")
MAX_DURATION_SECONDS = 300
MAX_STREAM_COUNTS = 8
MAX_PINGPONG_COUNT = 1_000_000
MAX_WAIT_SECONDS = 600
PEER_START_SECONDS = 30  # a --serve-peer child must say it is ready within this
PEER_SLACK_SECONDS = 60  # its lifetime beyond the time the planned tests take
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # holds workloads/: the child finds its module there


def bounded_int(low, high):
    def parse(text):
        value = positive_int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {text!r}")
        return value

    return parse


def stream_counts(text):
    """``"1,4"`` -> [1, 4]: one iperf3 test per value, each with that many parallel streams."""
    parts = [part.strip() for part in str(text).split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("expected a comma-separated list of stream counts, e.g. 1,4")
    counts = [bounded_int(1, iperf.MAX_PARALLEL_STREAMS)(part) for part in parts]
    if len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"each stream count once, got {text!r}")
    if len(counts) > MAX_STREAM_COUNTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_STREAM_COUNTS} stream counts, got {len(counts)}")
    return counts


def _arguments(parser):
    add = parser.add_argument
    add(
        "--peer",
        help="the peer's IPv4 address, in 127.0.0.0/8 or 198.18.0.0/15 (required; the platform adds it: "
        "127.0.0.1 on bm, the peer container's address on the cell's bridge on cn)",
    )
    add("--serve-peer", action="store_true", help="start the peer here, a child process bound to --peer; stop it after")
    add("--port", type=port_number, default=DEFAULT_PORT, help="the peer's iperf3 port")
    add("--pingpong-port", type=port_number, default=DEFAULT_PINGPONG_PORT, help="the peer's ping-pong port")
    add(
        "--duration",
        type=bounded_int(1, MAX_DURATION_SECONDS),
        default=5,
        help="seconds of each iperf3 test (iperf3 --time)",
    )
    add("--streams", type=stream_counts, default=[1, 4], help="parallel TCP streams per iperf3 test, comma-separated")
    add(
        "--message-bytes",
        type=bounded_int(1, pingpong.MAX_MESSAGE_BYTES),
        default=64,
        help="bytes of each ping-pong message",
    )
    add(
        "--pingpong-count",
        type=bounded_int(1, MAX_PINGPONG_COUNT),
        default=2000,
        help="round trips timed (after a few uncounted ones)",
    )
    add(
        "--pingpong-seconds",
        type=bounded_int(1, MAX_DURATION_SECONDS),
        default=10,
        help="the ping-pong stops after this long even if fewer round trips were done",
    )
    add(
        "--peer-wait",
        type=bounded_int(1, MAX_WAIT_SECONDS),
        default=30,
        help="seconds to wait for the peer to accept connections (it may start at the same time as this run)",
    )
    add(
        "--path",
        choices=PATHS,
        help="what lies between the two ends, for the record (default: loopback for 127.0.0.0/8, bridge otherwise)",
    )


def _check_peer(parser, args, _allowed_cpus):
    if args.peer is None:
        # The platform adds --peer when it places the cell; the plan-time check of the params runs without it.
        if not args.check_args:
            parser.error(
                "micro_net needs --peer ADDRESS: the address of a running `python -m workloads.micro_net.peer` "
                "(127.0.0.0/8 or 198.18.0.0/15), or --peer 127.0.0.1 --serve-peer to start one here"
            )
    else:
        try:
            args.peer = allowed_address(args.peer, "--peer")
        except AddressRefused as refusal:
            parser.error(str(refusal))
        if args.path is None:
            args.path = path_of(args.peer)
    if args.port == args.pingpong_port:
        parser.error(f"--port and --pingpong-port must differ, both are {args.port}")


def planned_seconds(args):
    """An upper bound of the time the tests take: the ping-pong's deadline and every iperf3 run's timeout."""
    return args.peer_wait + args.pingpong_seconds + len(args.streams) * (args.duration + iperf.CLIENT_EXTRA_SECONDS)


class ServedPeer:
    """The peer running as a child process (--serve-peer) and its stderr, kept for failure messages."""

    def __init__(self, process, stderr):
        self.process, self.stderr = process, stderr

    def error_tail(self):
        self.stderr.seek(0)
        return tools.output_tail(self.stderr.read().decode(errors="replace"))

    def exited(self):
        """What to add to a failure's message when the peer has died: its exit code and last words."""
        if self.process.poll() is None:
            return ""
        return f"; the --serve-peer peer exited with {self.process.returncode}: {self.error_tail() or 'no output'}"


@contextlib.contextmanager
def served_peer(args):
    """Starts the peer bound to --peer, yields it once it says it is ready, always stops it.

    Its lifetime covers the planned tests and a margin, so even a peer this process cannot stop
    (this process killed with SIGKILL) ends on its own."""
    lifetime = planned_seconds(args) + PEER_SLACK_SECONDS
    argv = [sys.executable, "-m", "workloads.micro_net.peer", "--bind", str(args.peer), "--port", str(args.port)]
    argv += ["--pingpong-port", str(args.pingpong_port), "--lifetime", str(lifetime)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if part)
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env)
        peer = ServedPeer(process, stderr)
        try:  # `finally` also covers a stop signal: the harness turns it into an exception in this body
            ready, output = wait_for_line(process, READY_PREFIX, PEER_START_SECONDS)
            OutputDrain(process.stdout, output)
            if not ready:
                late = "" if process.poll() is not None else f" within {PEER_START_SECONDS} s"
                raise WorkloadFailed(
                    f"the peer started with --serve-peer on {args.peer} did not get ready{late}{peer.exited()}"
                )
            yield peer
        finally:
            stop_process(process)


def _measure(args, run):
    """The harness body: the ping-pong, then one iperf3 test per stream count."""
    tools.require(["iperf3"])
    run.metadata["tool_versions"] = tools.versions(["iperf3"])
    with served_peer(args) if args.serve_peer else contextlib.nullcontext() as peer:
        try:
            return Outcome(_tests(args, run))
        except WorkloadFailed as failure:
            raise WorkloadFailed(f"{failure}{peer.exited() if peer else ''}") from None


def _tests(args, run):
    try:
        pingpong.wait_for_server(args.peer, args.pingpong_port, args.peer_wait)
        samples = pingpong.round_trips(
            args.peer, args.pingpong_port, args.message_bytes, args.pingpong_count, args.pingpong_seconds
        )
        rtt = pingpong.summary(samples)
    except pingpong.PingPongError as error:
        raise WorkloadFailed(str(error)) from None
    run.metadata["pingpong"] = {**rtt, "requested": args.pingpong_count, "warmup": pingpong.WARMUP_ROUND_TRIPS}
    metrics = [metric("net_rtt", rtt["median_us"], "us")]
    run.metadata["iperf3"] = []
    for streams in args.streams:
        result = _iperf3_test(args, streams)
        run.metadata["iperf3"].append(result.details)
        labels = {"streams": streams}
        metrics.append(metric("net_throughput", result.received_bits_per_second / 1e9, "Gbit/s", labels))
        if result.retransmits is not None:
            metrics.append(metric("net_retransmits", result.retransmits, "count", labels))
    return metrics


def _iperf3_test(args, streams):
    argv = iperf.client_argv(args.peer, args.port, args.duration, streams)
    done = tools.run(argv, timeout=args.duration + iperf.CLIENT_EXTRA_SECONDS, check=False)
    try:
        return iperf.parse_client_json(done.stdout)
    except iperf.IperfOutputError as error:
        raise WorkloadFailed(
            f"{' '.join(argv)} (exit code {done.returncode}): {error}"
            + (f"; stderr: {tools.output_tail(done.stderr)}" if done.stderr.strip() else "")
        ) from None


def _metadata(args):
    return {
        "peer": {
            "address": str(args.peer),
            "port": args.port,
            "pingpong_port": args.pingpong_port,
            "served_by": "this run (--serve-peer)" if args.serve_peer else "a peer started by the platform",
        },
        "path": args.path,
        "streams": list(args.streams),
        "pingpong_seconds": args.pingpong_seconds,
    }


SPEC = Workload(
    name=WORKLOAD,
    description="Measure TCP throughput (iperf3, per number of parallel streams) and the small-message round "
    "trip to a peer (python -m workloads.micro_net.peer) and print one PLATBENCH_RESULT line.",
    arguments=_arguments,
    validate=_check_peer,
    own_labels=lambda args: {
        "duration": args.duration,
        "message_bytes": args.message_bytes,
        "pingpong_count": args.pingpong_count,
    },
    metadata=_metadata,
    body=_measure,
    not_checked="--threads against the CPUs, and whether the peer answers",
    sets_thread_env=False,  # iperf3 and a socket loop: no compute threads
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
