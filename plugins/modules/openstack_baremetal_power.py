#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Power off an Ironic node whose power state Ironic does not know yet."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openstack_baremetal_power
short_description: Give an Ironic node a known power state before it is deployed
description:
  - C(openstack.cloud.baremetal_node_action) refuses to deploy a node whose power state is unknown
    (C(Node has unknown power state None)), and has no way to set it first; a node of a power interface that
    reports none until it is set (C(fake-hardware)) stays so. This powers such a node off through openstacksdk
    and waits until Ironic reports it; a node with a known power state is left alone.
version_added: "0.8.0"
author: platbench developers (@platbench)
requirements:
  - openstacksdk (the version requirements.txt pins)
options:
  cloud:
    description: The clouds.yaml cloud name.
    type: str
    required: true
  name:
    description: The node's name or id.
    type: str
    required: true
  timeout:
    description: Seconds to wait for the power state.
    type: int
    default: 120
attributes:
  check_mode:
    description: Says whether the node would be powered off.
    support: full
  diff_mode:
    description: No difference is shown.
    support: none
"""

EXAMPLES = r"""
- name: Make the node's power state known
  platbench.lab.openstack_baremetal_power:
    cloud: lab
    name: node0
"""

RETURN = r"""
power_state:
  description: The node's power state afterwards.
  returned: success
  type: str
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import openstack
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
else:
    SDK_IMPORT_ERROR = None


def main():
    module = AnsibleModule(
        argument_spec={
            "cloud": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    if SDK_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("openstacksdk"), exception=SDK_IMPORT_ERROR)
    params = module.params
    try:
        baremetal = openstack.connect(cloud=params["cloud"]).baremetal
        node = baremetal.find_node(params["name"], ignore_missing=False)
        if node.power_state in ("power on", "power off"):
            module.exit_json(changed=False, power_state=node.power_state)
        if module.check_mode:
            module.exit_json(changed=True, power_state=node.power_state)
        baremetal.set_node_power_state(node, "power off", wait=True, timeout=params["timeout"])
        node = baremetal.get_node(node.id)
    except openstack.exceptions.SDKException as exc:
        module.fail_json(msg=f"cloud {params['cloud']}, Ironic node {params['name']}: {exc}")
    module.exit_json(changed=True, power_state=node.power_state)


if __name__ == "__main__":
    main()
