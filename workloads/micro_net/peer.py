"""The peer micro_net measures against: an iperf3 server and the ping-pong echo server, for a bounded time.

    python -m workloads.micro_net.peer --bind 198.18.7.2 --port 5201 --pingpong-port 5202 --lifetime 600

Prints one line ``PLATBENCH_PEER_READY ...`` on stdout once both servers listen, then serves until
--lifetime seconds have passed, SIGTERM/SIGINT arrives or --max-connections ping-pong connections
have been served (the iperf3 server keeps serving until the end). At the end the iperf3 server is
stopped; it also runs under coreutils' ``timeout``, so it cannot outlive the lifetime even when this
process is killed. Exit code 0 at the end of a normal life, 1 when a server could not start or
iperf3 exited early, 2 on bad arguments.
"""

import argparse
import shutil
import signal
import subprocess
import sys
import threading
import time

from ..common.args import positive_int
from ..common.tools import missing_message
from . import iperf, pingpong
from .addresses import AddressRefused, allowed_address
from .processes import OutputDrain, stop_process, wait_for_line

READY_PREFIX = "PLATBENCH_PEER_READY"
IPERF3_READY_MARKER = "Server listening on"
IPERF3_START_SECONDS = 15
MAX_LIFETIME_SECONDS = 7 * 24 * 3600
DEFAULT_PORT = 5201  # iperf3's own default
DEFAULT_PINGPONG_PORT = 5202


def port_number(text):
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {text!r}")
    return value


def lifetime_seconds(text):
    value = positive_int(text)
    if value > MAX_LIFETIME_SECONDS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_LIFETIME_SECONDS} s, got {text!r}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m workloads.micro_net.peer",
        description="Serve iperf3 and the ping-pong echo on one address for a bounded time: the other end of "
        "python -m workloads.micro_net.",
    )
    add = parser.add_argument
    add("--bind", required=True, help="the address both servers listen on (127.0.0.0/8 or 198.18.0.0/15)")
    add("--port", type=port_number, default=DEFAULT_PORT, help="the iperf3 server's port")
    add("--pingpong-port", type=port_number, default=DEFAULT_PINGPONG_PORT, help="the ping-pong server's port")
    add("--lifetime", type=lifetime_seconds, required=True, help="seconds after which the peer stops")
    add(
        "--max-connections",
        type=positive_int,
        default=100,
        help="ping-pong connections served before that server stops (each run uses one, plus readiness probes)",
    )
    return parser


def parse_args(argv=None, parser=None):
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    try:
        args.bind = allowed_address(args.bind, "--bind")
    except AddressRefused as refusal:
        parser.error(str(refusal))
    if args.port == args.pingpong_port:
        parser.error(f"--port and --pingpong-port must differ, both are {args.port}")
    return args


def _iperf3_server_argv(args):
    """iperf3's server, under coreutils' `timeout` where there is one, so it dies at the end of the lifetime
    even if this process is killed first."""
    argv = iperf.server_argv(args.bind, args.port)
    if shutil.which("timeout"):
        argv = ["timeout", "--kill-after=5", str(args.lifetime), *argv]
    return argv


def serve(args, stop):
    """Starts both servers, says so, serves until the end of the lifetime or ``stop``; returns the exit code."""
    deadline = time.monotonic() + args.lifetime
    if shutil.which("iperf3") is None:
        print(f"micro_net peer: {missing_message('iperf3')}", file=sys.stderr)
        return 1
    try:
        listener = pingpong.listen(args.bind, args.pingpong_port)  # first: a taken port fails before iperf3 starts
    except pingpong.PingPongError as error:
        print(f"micro_net peer: {error}", file=sys.stderr)
        return 1
    server = subprocess.Popen(
        _iperf3_server_argv(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    echo = None
    try:
        ready, output = wait_for_line(server, IPERF3_READY_MARKER, IPERF3_START_SECONDS)
        drain = OutputDrain(server.stdout, output)
        if not ready:
            late = "" if server.poll() is not None else f" within {IPERF3_START_SECONDS} s"
            stop_process(server)
            print(
                f"micro_net peer: the iperf3 server on {args.bind}:{args.port} did not start{late}: "
                f"{drain.tail() or 'no output'}",
                file=sys.stderr,
            )
            return 1
        echo = threading.Thread(
            target=pingpong.serve_echo, args=(listener, stop, deadline, args.max_connections), daemon=True
        )
        echo.start()
        print(
            f"{READY_PREFIX} iperf3={args.bind}:{args.port} pingpong={args.bind}:{args.pingpong_port} "
            f"lifetime={args.lifetime}",
            flush=True,
        )
        while not stop.wait(pingpong.POLL_SECONDS) and time.monotonic() < deadline:
            if server.poll() is not None:
                print(
                    f"micro_net peer: the iperf3 server exited early with {server.returncode}: {drain.tail()}",
                    file=sys.stderr,
                )
                return 1
        return 0
    finally:
        stop.set()
        stop_process(server)
        listener.close()
        if echo is not None:
            echo.join(pingpong.POLL_SECONDS * 4)


def main(argv=None):
    args = parse_args(argv)
    stop = threading.Event()
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda _signum, _frame: stop.set())
    return serve(args, stop)


if __name__ == "__main__":
    sys.exit(main())
