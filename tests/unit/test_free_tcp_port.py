"""free_tcp_port: guests' SSH forwards get a free loopback port, or fail naming the taken one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_tcp_port(**args):
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-m",
            "platbench.lab.free_tcp_port",
            *(["-a", json.dumps(args)] if args else []),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1"),
    )
    return done.returncode, json.loads(done.stdout.split("=>", 1)[1])


def test_a_chosen_port_is_free_on_loopback():
    rc, result = free_tcp_port()
    assert rc == 0 and 1024 <= result["port"] <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", result["port"]))


def test_a_taken_port_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, result = free_tcp_port(port=port)
    assert rc != 0 and f"port {port} on 127.0.0.1 is already in use" in result["msg"]


def test_only_loopback_addresses_are_accepted():
    rc, result = free_tcp_port(address="198.18.0.1")
    assert rc != 0 and "not a loopback address" in result["msg"]
