"""host:port lists, as --ps-hosts and --worker-hosts take them (tf_cnn_benchmarks' notation)."""

import re
import socket

LOOPBACK = "127.0.0.1"
_HOSTNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
EXPECTED_HOSTS = "a comma-separated list of host:port, e.g. 127.0.0.1:2222,127.0.0.1:2223"


class AddressError(ValueError):
    pass


def parse_host_list(text):
    """'h1:p1,h2:p2' -> [(h1, p1), (h2, p2)]; IPv6 hosts in brackets; AddressError says what was expected."""

    def fail(reason):
        raise AddressError(f"expected {EXPECTED_HOSTS}; got {text!r}: {reason}")

    addresses = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            fail("empty entry")
        host, sep, port_text = item.rpartition(":")
        if not sep or not host:
            fail(f"{item!r} is not host:port")
        if host.startswith("[") and host.endswith("]"):
            try:
                socket.inet_pton(socket.AF_INET6, host[1:-1])
            except OSError:
                fail(f"{host!r} is not an IPv6 address")
            host = host[1:-1]
        elif not _HOSTNAME.match(host):
            fail(f"{host!r} is not a host name or IPv4 address")
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            fail(f"port {port_text!r} of {item!r} is not a number from 1 to 65535")
        address = (host, int(port_text))
        if address in addresses:
            fail(f"{item} is listed twice")
        addresses.append(address)
    return addresses


def format_address(address):
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def format_host_list(addresses):
    return ",".join(map(format_address, addresses))
