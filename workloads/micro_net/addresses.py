"""The network rule of the lab: micro_net talks only to loopback or to the benchmarking range.

127.0.0.0/8 stays on the machine; 198.18.0.0/15 (RFC 2544, set aside for benchmarking network
devices) is what the lab gives the networks it creates for a test (docker bridges, namespaces) and
removes after it. Any other address could reach a network the lab does not own, so both the
client and the peer refuse it. Stdlib only.
"""

import ipaddress

ALLOWED_NETWORKS = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("198.18.0.0/15"))
ALLOWED_TEXT = " or ".join(str(network) for network in ALLOWED_NETWORKS)


class AddressRefused(ValueError):
    """An address outside the networks micro_net may use; the message says which are allowed."""


def allowed_address(text, what="address"):
    """The IPv4 address ``text`` when it lies in ALLOWED_NETWORKS, else AddressRefused saying why."""
    try:
        address = ipaddress.ip_address(str(text).strip())
    except ValueError:
        raise AddressRefused(f"{what} {text!r} is not an IP address; give an IPv4 address in {ALLOWED_TEXT}") from None
    if not any(address in network for network in ALLOWED_NETWORKS):
        raise AddressRefused(
            f"{what} {address} is refused: micro_net only talks to {ALLOWED_TEXT} (loopback, or the benchmarking "
            "range the lab gives the networks it creates for a test), never to another network"
        )
    return address


def path_of(address):
    """The default --path: ``loopback`` for 127.0.0.0/8, ``bridge`` for the lab's test networks."""
    return "loopback" if address.is_loopback else "bridge"
