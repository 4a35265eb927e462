#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Choose a TCP port on a loopback address that nothing listens on."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: free_tcp_port
short_description: Choose, or check, a free TCP port on a loopback address
description:
  - With O(port=0), asks the kernel for a free port on O(address) and returns it.
  - With a port number, fails naming the port when something already listens there,
    so a forward never waits on a port it cannot have.
  - Only loopback addresses are accepted; platbench never forwards guests to other networks.
version_added: "0.2.0"
author: platbench developers (@platbench)
options:
  address:
    description: Loopback address the port is for.
    type: str
    default: 127.0.0.1
  port:
    description: Port to check; V(0) chooses one.
    type: int
    default: 0
attributes:
  check_mode:
    description: Checks or chooses a port exactly as in a real run; it binds nothing that outlives the check.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Choose a port for a guest's SSH forward
  platbench.lab.free_tcp_port:
  register: guest_port
"""

RETURN = r"""
port:
  description: The free port.
  returned: success
  type: int
  sample: 40913
"""

import ipaddress
import socket

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={"address": {"type": "str", "default": "127.0.0.1"}, "port": {"type": "int", "default": 0}},
        supports_check_mode=True,
    )
    address, port = module.params["address"], module.params["port"]
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        module.fail_json(msg=f"address {address!r} is not a loopback address; guests are forwarded to 127.0.0.0/8 only")
    if not 0 <= port <= 65535:
        module.fail_json(msg=f"port {port} is out of range 0-65535")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, port))
        except OSError as exc:
            module.fail_json(
                msg=f"port {port} on {address} is already in use ({exc.strerror}); "
                "choose another port or 0 to let platbench pick one"
            )
        port = sock.getsockname()[1]
    module.exit_json(changed=False, port=port)


if __name__ == "__main__":
    main()
