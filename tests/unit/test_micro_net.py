"""micro_net: iperf3's JSON report, the ping-pong and its statistics, the address rule, and a real run on loopback."""

import socket
import threading
import time
from pathlib import Path

import pytest
from workload_run import metric_values, only_record, run_module

from tests import skips
from workloads.micro_net import cli, iperf, peer, pingpong
from workloads.micro_net.addresses import AddressRefused, allowed_address

DATA = Path(__file__).parent / "data"
needs_iperf3 = skips.needs_lab("iperf3")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Saved real reports: `iperf3 -c 127.0.0.1 -t 1 -J` (-P 4 for the second), iperf 3.12 on Debian 12.
@pytest.mark.parametrize(
    "name, streams, bits_per_second, retransmits",
    [("iperf3_tcp_p1.json", 1, 12387600723.864765, 34), ("iperf3_tcp_p4.json", 4, 15873791819.906143, 5)],
)
def test_iperf3_reports_give_received_throughput_and_retransmits(name, streams, bits_per_second, retransmits):
    result = iperf.parse_client_json((DATA / name).read_text())
    assert result.streams == streams
    assert result.received_bits_per_second == bits_per_second
    assert result.retransmits == retransmits
    assert result.details["iperf3_version"] == "iperf 3.12"
    assert result.details["duration_s"] == 1


def test_an_iperf3_error_report_is_refused_with_its_reason():
    # A real report of a client that found no server: iperf3 3.12 exits 0 and says so only in "error".
    with pytest.raises(iperf.IperfOutputError, match="unable to connect to server: Connection refused"):
        iperf.parse_client_json((DATA / "iperf3_refused.json").read_text())


@pytest.mark.parametrize(
    "text, message",
    [
        ("iperf3: error - unable to connect\n", "no JSON report; its output ends with: iperf3: error"),
        ('{"start": {}, "end": {"sum_received": {}}}', "end.sum_received.bits_per_second"),
        ("[]", "not a JSON object"),
    ],
)
def test_iperf3_output_without_a_report_says_what_it_was(text, message):
    with pytest.raises(iperf.IperfOutputError, match=message):
        iperf.parse_client_json(text)


def test_the_client_command_line():
    assert iperf.client_argv("198.18.7.2", 5201, 5, 4) == [
        "iperf3",
        "--client",
        "198.18.7.2",
        "--port",
        "5201",
        "--time",
        "5",
        "--parallel",
        "4",
        "--connect-timeout",
        "5000",
        "--json",
    ]


def test_round_trip_statistics_in_microseconds():
    stats = pingpong.summary([4000, 1000, 3000, 2000])
    assert stats == {
        "round_trips": 4,
        "median_us": 2.5,
        "min_us": 1.0,
        "p90_us": 4.0,
        "p99_us": 4.0,
        "max_us": 4.0,
    }
    assert pingpong.summary([5000, 1000, 3000])["median_us"] == 3.0
    many = pingpong.summary(list(range(1000, 101000, 1000)))  # 1..100 us
    assert (many["p90_us"], many["p99_us"]) == (90.0, 99.0)
    with pytest.raises(pingpong.PingPongError, match="no round trip"):
        pingpong.summary([])


@pytest.fixture
def echo_server():
    """The peer's echo server on loopback in a thread: (port, stop event, thread)."""
    listener = pingpong.listen("127.0.0.1", 0)
    stop = threading.Event()
    thread = threading.Thread(target=pingpong.serve_echo, args=(listener, stop, time.monotonic() + 30, 3))
    thread.start()
    yield listener.getsockname()[1], stop, thread
    stop.set()
    thread.join(5)
    listener.close()


def test_the_ping_pong_times_count_round_trips_after_its_warm_up(echo_server):
    port, _, _ = echo_server
    pingpong.wait_for_server("127.0.0.1", port, 5)
    samples = pingpong.round_trips("127.0.0.1", port, 64, 50, 10, warmup=5)
    assert len(samples) == 50 and all(sample > 0 for sample in samples)


def test_the_ping_pong_stops_at_its_deadline(echo_server):
    port, _, _ = echo_server
    started = time.monotonic()
    samples = pingpong.round_trips("127.0.0.1", port, 64, 1_000_000, 1, warmup=0)
    assert time.monotonic() - started < 3
    assert 0 < len(samples) < 1_000_000


def test_the_echo_server_stops_after_its_connections_and_on_stop(echo_server):
    port, stop, thread = echo_server
    for _ in range(3):  # the fixture's server serves 3 connections
        pingpong.round_trips("127.0.0.1", port, 8, 2, 5, warmup=0)
    thread.join(5)
    assert not thread.is_alive()


def test_waiting_for_an_absent_peer_is_bounded_and_says_what_to_do():
    started = time.monotonic()
    with pytest.raises(pingpong.PingPongError, match="accepted no connection within 1 s.*--serve-peer"):
        pingpong.wait_for_server("127.0.0.1", free_port(), 1)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("address", ["127.0.0.1", "127.9.8.7", "198.18.0.2", "198.19.255.254"])
def test_loopback_and_the_benchmarking_range_are_allowed(address):
    assert str(allowed_address(address)) == address


@pytest.mark.parametrize("address", ["8.8.8.8", "10.0.0.2", "10.255.1.1", "192.168.1.1", "198.20.0.1", "::1", "peer"])
def test_any_other_address_is_refused(address):
    with pytest.raises(AddressRefused, match="127.0.0.0/8 or 198.18.0.0/15"):
        allowed_address(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "10.1.2.3"])
def test_the_client_and_the_peer_refuse_other_networks(address, capsys):
    with pytest.raises(SystemExit) as client_exit:
        cli.parse_args(["--peer", address])
    assert client_exit.value.code == 2
    assert f"--peer {address} is refused: micro_net only talks to 127.0.0.0/8 or 198.18.0.0/15" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as peer_exit:
        peer.parse_args(["--bind", address, "--lifetime", "5"])
    assert peer_exit.value.code == 2
    assert f"--bind {address} is refused" in capsys.readouterr().err


def test_the_client_needs_a_peer_except_to_check_the_other_arguments(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args([])
    assert "micro_net needs --peer ADDRESS" in capsys.readouterr().err
    # The plan-time check runs with the cell's params; the platform adds --peer when it places the cell.
    assert cli.parse_args(["--check-args", "--duration", "2"]).peer is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--streams", "1,1"], "each stream count once"),
        (["--streams", "0"], "expected a positive integer"),
        (["--streams", "129"], "from 1 to 128"),
        (["--duration", "301"], "from 1 to 300"),
        (["--port", "5300", "--pingpong-port", "5300"], "--port and --pingpong-port must differ"),
    ],
)
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--peer", "127.0.0.1", *argv])
    assert message in capsys.readouterr().err


def test_defaults_and_the_inferred_path():
    args = cli.parse_args(["--peer", "127.0.0.1"])
    assert (args.port, args.pingpong_port, args.duration, args.streams) == (5201, 5202, 5, [1, 4])
    assert (args.message_bytes, args.pingpong_count, args.path) == (64, 2000, "loopback")
    assert cli.parse_args(["--peer", "198.18.3.2"]).path == "bridge"
    assert cli.parse_args(["--peer", "198.19.0.2", "--path", "veth"]).path == "veth"


@needs_iperf3
def test_a_real_run_on_loopback_serves_its_own_peer_and_stops_it():
    """Two processes on 127.0.0.1, as a bm cell runs it, at a tiny size."""
    port, pingpong_port = free_port(), free_port()
    process, records = run_module(
        "micro_net",
        *["--peer", "127.0.0.1", "--serve-peer", "--duration", 1, "--pingpong-count", 200, "--streams", "1,2"],
        *["--port", port, "--pingpong-port", pingpong_port],
        timeout=120,
    )
    record = only_record(process, records)
    assert process.returncode == 0 and record["status"] == "ok", process.stderr
    values = metric_values(record)
    assert values["net_rtt"] > 0
    throughput = {
        entry["labels"]["streams"]: entry["value"] for entry in record["metrics"] if entry["metric"] == "net_throughput"
    }
    assert set(throughput) == {1, 2} and all(value > 0 for value in throughput.values())
    assert {entry["labels"]["streams"] for entry in record["metrics"] if entry["metric"] == "net_retransmits"} == {1, 2}
    metadata = record["metadata"]
    assert metadata["tool_versions"]["iperf3"]
    assert metadata["path"] == "loopback" and metadata["peer"]["address"] == "127.0.0.1"
    assert metadata["pingpong"]["round_trips"] == 200
    assert record["labels"]["workload"] == "micro_net" and record["labels"]["pingpong_count"] == 200
    # The peer and its iperf3 server are gone: both ports can be listened on again (SO_REUSEADDR: closed
    # connections may linger in TIME_WAIT, but Linux refuses the bind while another socket listens there).
    for used in (port, pingpong_port):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", used))
            sock.listen()


@needs_iperf3
def test_a_run_without_its_peer_is_a_failed_record_that_says_what_to_do():
    process, records = run_module(
        "micro_net", "--peer", "127.0.0.1", "--pingpong-port", free_port(), "--peer-wait", 1, timeout=60
    )
    record = only_record(process, records)
    assert process.returncode == 1 and record["status"] == "failed"
    assert "accepted no connection within 1 s" in record["error"] and "--serve-peer" in record["error"]
