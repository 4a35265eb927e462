#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What openstack.cloud 2.5.0 has no info module for, read through openstacksdk."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openstack_extra_info
short_description: List what the openstack.cloud collection has no info module for
description:
  - Reads, through openstacksdk, the OpenStack resources that C(openstack.cloud) 2.5.0 cannot list
    and C(platbench.lab.openstack_instances) needs.
  - V(resource_providers) are placement's resource providers with their inventories (the capacity check
    that a flavor fits some compute host before anything is created).
  - V(coe_cluster_templates) and V(coe_clusters) are Magnum's (teardown finds the campaign's by label);
    empty where the cloud has no Magnum.
  - V(catalog) is which of the services platbench uses the cloud's catalog offers (teardown skips the others).
  - Uses the SDK only for these; everything else goes through C(openstack.cloud) modules.
version_added: "0.8.0"
author: platbench developers (@platbench)
requirements:
  - openstacksdk (the version requirements.txt pins)
options:
  cloud:
    description: The clouds.yaml cloud name.
    type: str
    required: true
  resources:
    description: What to list.
    type: list
    elements: str
    required: true
    choices: [catalog, resource_providers, coe_cluster_templates, coe_clusters]
attributes:
  check_mode:
    description: Only reads.
    support: full
  diff_mode:
    description: Nothing is changed.
    support: none
"""

EXAMPLES = r"""
- name: Read the compute hosts' capacity
  platbench.lab.openstack_extra_info:
    cloud: lab
    resources: [resource_providers]
  register: capacity
"""

RETURN = r"""
catalog:
  description: Which of compute, image, network, baremetal, Magnum and placement the cloud offers.
  returned: when asked for
  type: list
  elements: str
resource_providers:
  description:
    - Each provider's C(name), C(uuid) and C(inventories)
      (C(resource_class), C(total), C(reserved), C(max_unit), C(used)).
  returned: when asked for
  type: list
  elements: dict
coe_cluster_templates:
  description: Magnum cluster templates (C(id), C(name), C(labels), C(network_driver), C(coe)).
  returned: when asked for
  type: list
  elements: dict
coe_clusters:
  description: Magnum clusters (C(id), C(name), C(labels), C(status), C(status_reason)).
  returned: when asked for
  type: list
  elements: dict
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import openstack
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
else:
    SDK_IMPORT_ERROR = None


def _providers(conn):
    providers = []
    for provider in conn.placement.resource_providers():
        usages = conn.placement.get(f"/resource_providers/{provider.id}/usages").json().get("usages", {})
        inventories = [
            {
                "resource_class": inventory.resource_class,
                "total": inventory.total,
                "reserved": inventory.reserved,
                "max_unit": inventory.max_unit,
                "used": usages.get(inventory.resource_class, 0),
            }
            for inventory in conn.placement.resource_provider_inventories(provider)
        ]
        providers.append({"name": provider.name, "uuid": provider.id, "inventories": inventories})
    return providers


SERVICES = ("compute", "image", "network", "baremetal", "container-infrastructure-management", "placement")
MAGNUM = "container-infrastructure-management"


def _catalog(conn):
    return [service for service in SERVICES if conn.has_service(service)]


def _templates(conn):
    if not conn.has_service(MAGNUM):
        return []
    return [
        {
            "id": template.id,
            "name": template.name,
            "labels": template.labels or {},
            "coe": template.coe,
            "network_driver": template.network_driver,
        }
        for template in conn.container_infrastructure_management.cluster_templates()
    ]


def _clusters(conn):
    if not conn.has_service(MAGNUM):
        return []
    return [
        {
            "id": cluster.id,
            "name": cluster.name,
            "labels": cluster.labels or {},
            "status": cluster.status,
            "status_reason": cluster.status_reason,
        }
        for cluster in conn.container_infrastructure_management.clusters()
    ]


READERS = {
    "catalog": _catalog,
    "resource_providers": _providers,
    "coe_cluster_templates": _templates,
    "coe_clusters": _clusters,
}


def main():
    module = AnsibleModule(
        argument_spec={
            "cloud": {"type": "str", "required": True},
            "resources": {"type": "list", "elements": "str", "required": True, "choices": list(READERS)},
        },
        supports_check_mode=True,
    )
    if SDK_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("openstacksdk"), exception=SDK_IMPORT_ERROR)
    try:
        conn = openstack.connect(cloud=module.params["cloud"])
        listed = {name: READERS[name](conn) for name in module.params["resources"]}
    except openstack.exceptions.SDKException as exc:
        module.fail_json(msg=f"cloud {module.params['cloud']}: {exc}")
    module.exit_json(changed=False, **listed)


if __name__ == "__main__":
    main()
