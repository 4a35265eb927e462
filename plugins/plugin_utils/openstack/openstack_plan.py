# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What one campaign creates on an OpenStack cloud for its ``ironic``, ``nova`` and ``magnum`` cells.

``instances_plan`` turns the experiment's cells and the role's settings into the resources to create
(flavors, image, keypair, network and subnet, Ironic nodes, Nova servers, a Magnum cluster template and
clusters), each with its name and the campaign's tag. The role ``platbench.lab.openstack_instances``
only executes it; ``instance_name`` is what the cell plan delegates a cell to.

One instance per (platform, scale-up, CPU configuration, processor): the repeats and workloads of a
scenario share it, as the cells of a scenario share the host on ``bm``.

Ownership, so that teardown deletes exactly what this campaign created:
- servers carry the metadata ``platbench_campaign=<campaign>``, the image the tag ``platbench-campaign=<campaign>``,
  Magnum templates and clusters the label ``platbench_campaign``;
- what has neither (flavors, keypairs, networks, subnets, Ironic nodes: openstack.cloud 2.5.0's modules cannot
  set their tags, extra or description) carries the campaign's name prefix ``pb-`` + 10 hex digits of the
  SHA-1 of the campaign, which no other campaign's names share.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.scenario import Scenario, is_pinned

# The platforms provisioned from the cloud (the registry's cloud_instance kind), in registry order.
OPENSTACK_PLATFORMS = platforms.REMOTE
METADATA_KEY = "platbench_campaign"
TAG_PREFIX = "platbench-campaign="
PREFIX_HASH_CHARS = 10
NETWORK_DRIVERS = ("flannel", "calico")
IRONIC_DEPLOY_MODES = ("standalone", "through_nova")
# Nova's flavor extra spec keys, per what the scenario asks.
PIN_SPEC = "hw:cpu_policy"
PCI_SPEC = "pci_passthrough:alias"
CAMPAIGN_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ALIAS_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")
RESOURCE_CLASS_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")

OPTIONS = {
    "campaign": None,  # the campaign's name (required): the tag on everything
    "cloud": None,  # the clouds.yaml cloud name (required)
    "pci_alias": "nvidia-h100",  # nova's [pci] alias a GPU flavor asks for
    "gpus_per_cell": 1,  # devices of the alias per GPU instance
    "memory_mb": 2048,  # RAM of a Nova server and a Magnum node
    "disk_gb": 20,  # root disk of a Nova server and a Magnum node
    "image_file": None,  # the guest image uploaded to glance (required for nova/magnum unless image_name exists)
    "image_disk_format": "qcow2",
    "image_name": None,  # an image already in glance to use instead of uploading image_file
    "public_key_file": None,  # the SSH public key the keypair is made of
    "network_cidr": "198.18.40.0/24",
    "ssh_user": "debian",  # the user add_host connects as
    "ironic_nodes": [],  # the bare-metal nodes to enroll: name, driver, driver_info, address, ...
    "ironic_resource_class": "baremetal",
    # standalone: deployed through Ironic's API; through_nova: booted as a server of the Ironic flavor
    "ironic_deploy": "standalone",
    "magnum_network_driver": "flannel",
    "magnum_image": None,  # the COE image (Fedora CoreOS) name; default: the campaign's image
    "magnum_os_distro": "fedora-coreos",  # the uploaded image's os_distro when magnum boots it
    "magnum_external_network": None,
    "magnum_master_count": 1,
    "magnum_node_count": 1,
}


class OpenStackPlanError(ValueError):
    """The settings cannot give a plan; the message names the setting and what to change."""


def _digest(text, chars):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:chars]


def campaign_prefix(campaign):
    """The name prefix of everything the campaign creates: ``pb-`` and 10 hex digits."""
    return f"pb-{_digest(str(campaign), PREFIX_HASH_CHARS)}-"


def campaign_tag(campaign):
    """The image tag (and Neutron-style tag) of the campaign."""
    return f"{TAG_PREFIX}{campaign}"


def scenario_slug(labels):
    """``2-pin-gpu``: scale-up, CPU configuration and processor, as names can hold them."""
    return f"{labels['scaleup']}-{labels['cpu_config']}-{labels['processor']}"


def instance_name(campaign, labels):
    """The name of the instance (server, node deployment or cluster) and inventory host a cell runs on."""
    return f"{campaign_prefix(campaign)}{labels['platform']}-{scenario_slug(labels)}"


def group_name(platform):
    """The inventory group of a platform's instances (the registry's ``group``)."""
    return platforms.get(platform).group


def _instance(platform):
    """What the cloud makes for the platform: the registry's ``instance`` (baremetal_node, server, coe_cluster)."""
    return platforms.get(platform).instance


def _options(options):
    options = options or {}
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise OpenStackPlanError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    merged = {**OPTIONS, **{key: value for key, value in options.items() if value is not None}}
    problems = []
    campaign = merged["campaign"]
    if not campaign or not CAMPAIGN_PATTERN.match(str(campaign)):
        problems.append(
            f"openstack_instances_campaign: {campaign!r} is no campaign name "
            "(letters, digits, '_', '.', '-', starting with a letter or digit)"
        )
    if not merged["cloud"]:
        problems.append("openstack_instances_cloud: name the clouds.yaml cloud to provision on")
    if merged["magnum_network_driver"] not in NETWORK_DRIVERS:
        problems.append(
            f"openstack_instances_magnum_network_driver: {merged['magnum_network_driver']!r} is not one of "
            f"{', '.join(NETWORK_DRIVERS)}"
        )
    if merged["ironic_deploy"] not in IRONIC_DEPLOY_MODES:
        problems.append(
            f"openstack_instances_ironic_deploy: {merged['ironic_deploy']!r} is not one of "
            f"{', '.join(IRONIC_DEPLOY_MODES)}"
        )
    if not ALIAS_PATTERN.match(str(merged["pci_alias"])):
        problems.append(f"openstack_instances_pci_alias: {merged['pci_alias']!r} is no PCI alias name")
    if not RESOURCE_CLASS_PATTERN.match(str(merged["ironic_resource_class"])):
        problems.append(
            f"openstack_instances_ironic_resource_class: {merged['ironic_resource_class']!r} is no resource class "
            "(letters, digits, '_')"
        )
    for key in ("gpus_per_cell", "memory_mb", "disk_gb", "magnum_master_count", "magnum_node_count"):
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"openstack_instances_{key}: must be a positive integer, got {value!r}")
    try:
        network = ipaddress.ip_network(str(merged["network_cidr"]))
        if network.version != 4 or network.num_addresses < 8:
            raise ValueError
    except ValueError:
        problems.append(
            f"openstack_instances_network_cidr: {merged['network_cidr']!r} is no IPv4 network of at least 8 addresses"
        )
    if problems:
        raise OpenStackPlanError("; ".join(problems))
    return merged


def resource_class_spec(resource_class):
    """``resources:CUSTOM_BAREMETAL``: the placement resource class Nova gives an Ironic node of ``resource_class``."""
    return "resources:CUSTOM_" + re.sub(r"[^A-Z0-9]", "_", str(resource_class).upper())


def flavor(name, labels, opts):
    """The flavor of a scenario: vCPUs = the scale-up; pinned for ``pin``; the PCI alias for ``gpu``;
    on Ironic the node's resource class and no standard resources (the node is consumed whole)."""
    if _instance(labels["platform"]) == "baremetal_node":
        return {
            "name": name,
            "vcpus": 1,
            "ram": 1,
            "disk": 1,
            "extra_specs": {
                resource_class_spec(opts["ironic_resource_class"]): "1",
                "resources:VCPU": "0",
                "resources:MEMORY_MB": "0",
                "resources:DISK_GB": "0",
            },
        }
    specs = {}
    if is_pinned(labels):
        specs[PIN_SPEC] = "dedicated"
    if labels["processor"] == "gpu":
        specs[PCI_SPEC] = f"{opts['pci_alias']}:{opts['gpus_per_cell']}"
    return {
        "name": name,
        "vcpus": int(labels["scaleup"]),
        "ram": int(opts["memory_mb"]),
        "disk": int(opts["disk_gb"]),
        "extra_specs": specs,
    }


def _scenarios(cells):
    """{(platform, scaleup, cpu_config, processor): [cell ids]} of the OpenStack cells, in the cells' order."""
    scenarios = {}
    for cell in cells or []:
        if not isinstance(cell, dict) or "labels" not in cell or "id" not in cell:
            raise OpenStackPlanError(f"expected cells of the expanded experiment (id, labels), got {cell!r}")
        labels = cell["labels"]
        if labels.get("platform") not in OPENSTACK_PLATFORMS:
            continue
        key = (labels["platform"], labels["scaleup"], labels["cpu_config"], labels["processor"])
        scenarios.setdefault(key, []).append(cell["id"])
    return scenarios


def _ironic_nodes(nodes, prefix, opts):
    if not isinstance(nodes, list):
        raise OpenStackPlanError(f"openstack_instances_ironic_nodes: must be a list of nodes, got {nodes!r}")
    planned = []
    for index, node in enumerate(nodes):
        where = f"openstack_instances_ironic_nodes[{index}]"
        if not isinstance(node, dict) or not node.get("name") or not node.get("driver"):
            raise OpenStackPlanError(f"{where}: a node needs at least 'name' and 'driver', got {node!r}")
        unknown = sorted(set(node) - {"name", "driver", "driver_info", "properties", "nics", "interfaces", "address"})
        if unknown:
            raise OpenStackPlanError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known: name, driver, driver_info, properties, nics, "
                "interfaces, address"
            )
        planned.append(
            {
                "name": prefix + str(node["name"]),
                "driver": node["driver"],
                "driver_info": node.get("driver_info") or {},
                "properties": node.get("properties") or {},
                "nics": node.get("nics") or [],
                "interfaces": node.get("interfaces") or {},
                "resource_class": opts["ironic_resource_class"],
                "address": node.get("address"),
            }
        )
    return planned


def instances_plan(cells, options=None):
    """The resources the campaign's OpenStack cells need (see the module's docstring)."""
    opts = _options(options)
    campaign = str(opts["campaign"])
    prefix = campaign_prefix(campaign)
    scenarios = _scenarios(cells)
    platforms_used = sorted({key[0] for key in scenarios}, key=OPENSTACK_PLATFORMS.index)
    instances_used = {_instance(platform) for platform in platforms_used}
    plan = {
        "campaign": campaign,
        "cloud": opts["cloud"],
        "prefix": prefix,
        "tag": campaign_tag(campaign),
        "metadata": {METADATA_KEY: campaign},
        "platforms": platforms_used,
        "flavors": [],
        "image": None,
        "keypair": None,
        "network": None,
        "ironic_nodes": [],
        "servers": [],
        "ironic_deployments": [],
        "coe": None,
        "instances": [],
    }
    if not scenarios:
        return plan
    # Every platform boots an image: Nova servers, Magnum's nodes, an Ironic deployment.
    if opts["image_name"]:
        plan["image"] = {"name": opts["image_name"], "upload": False}
    elif opts["image_file"]:
        plan["image"] = {
            "name": f"{prefix}image",
            "upload": True,
            "filename": str(opts["image_file"]),
            "disk_format": opts["image_disk_format"],
            "container_format": "bare",
            "tags": [plan["tag"]],
            # Magnum takes only images that say which distribution they hold (its drivers are chosen by it).
            "properties": {"os_distro": opts["magnum_os_distro"]} if "coe_cluster" in instances_used else {},
        }
    else:
        raise OpenStackPlanError(
            "openstack_instances_image_file: the nova, magnum and ironic instances boot an image: set "
            "openstack_instances_image_file (uploaded to glance) or openstack_instances_image_name (already there)"
        )
    if opts["public_key_file"]:
        plan["keypair"] = {"name": f"{prefix}key", "public_key_file": str(opts["public_key_file"])}
    network = ipaddress.ip_network(str(opts["network_cidr"]))
    plan["network"] = {
        "name": f"{prefix}net",
        "subnet": {"name": f"{prefix}subnet", "cidr": str(network)},
    }
    if "baremetal_node" in instances_used:
        plan["ironic_nodes"] = _ironic_nodes(opts["ironic_nodes"], prefix, opts)
        if not plan["ironic_nodes"]:
            raise OpenStackPlanError(
                "openstack_instances_ironic_nodes: the experiment has ironic cells; list the bare-metal nodes to "
                "enroll (name, driver, driver_info, address)"
            )
    flavors = {}
    ironic_index = 0
    magnum_clusters = []
    for key, cell_ids in scenarios.items():
        platform, scaleup, cpu_config, processor = key
        labels = {"platform": platform, "scaleup": scaleup, "cpu_config": cpu_config, "processor": processor}
        name = instance_name(campaign, labels)
        kind = _instance(platform)
        flavor_name = f"{prefix}{platform}-{scenario_slug(labels)}"
        if kind == "baremetal_node":
            # One flavor for every bare-metal scenario: the node is consumed whole.
            flavor_name = f"{prefix}{platform}-{opts['ironic_resource_class'].lower()}"
        flavors.setdefault(flavor_name, flavor(flavor_name, labels, opts))
        instance = {
            "name": name,
            "platform": platform,
            "group": group_name(platform),
            "scenario": Scenario(platform, scaleup, cpu_config, processor).name,
            "flavor": flavor_name,
            "cells": cell_ids,
        }
        if kind == "server" or (kind == "baremetal_node" and opts["ironic_deploy"] == "through_nova"):
            plan["servers"].append(
                {
                    **instance,
                    "image": plan["image"]["name"],
                    "key_name": plan["keypair"]["name"] if plan["keypair"] else None,
                    "network": plan["network"]["name"],
                    "metadata": dict(plan["metadata"]),
                }
            )
        elif kind == "baremetal_node":
            # Scenarios share the nodes in turn: a bare-metal node runs one cell at a time, like bm's host.
            node = plan["ironic_nodes"][ironic_index % len(plan["ironic_nodes"])]
            ironic_index += 1
            instance["node"] = node["name"]
            instance["address"] = node["address"]
            plan["ironic_deployments"].append(instance)
        else:
            magnum_clusters.append({**instance, "labels": dict(plan["metadata"])})
        plan["instances"].append(instance)
    plan["flavors"] = list(flavors.values())
    # An Ironic node is deployed once, whatever the number of scenarios it serves.
    deployed = {}
    for deployment in plan["ironic_deployments"]:
        deployed.setdefault(deployment["node"], deployment)
    plan["ironic_node_deployments"] = list(deployed.values())
    if magnum_clusters and not opts["magnum_external_network"]:
        raise OpenStackPlanError(
            "openstack_instances_magnum_external_network: Magnum's cluster templates give their nodes floating IPs "
            "from an external network: name one (openstack network list --external)"
        )
    if magnum_clusters:
        plan["coe"] = {
            "template": {
                "name": f"{prefix}k8s",
                "coe": "kubernetes",
                "network_driver": opts["magnum_network_driver"],
                "image": opts["magnum_image"] or plan["image"]["name"],
                "keypair": plan["keypair"]["name"] if plan["keypair"] else None,
                "external_network": opts["magnum_external_network"],
                "labels": dict(plan["metadata"]),
            },
            "clusters": [
                {
                    **cluster,
                    "master_count": opts["magnum_master_count"],
                    "node_count": opts["magnum_node_count"],
                    "template": f"{prefix}k8s",
                }
                for cluster in magnum_clusters
            ],
        }
    return plan


def describe(plan):
    """The dry run's lines: what the plan would create, one resource a line."""
    lines = [f"campaign {plan['campaign']} on cloud {plan['cloud']} (names start with {plan['prefix']})"]
    for item in plan["flavors"]:
        specs = ", ".join(f"{key}={value}" for key, value in sorted(item["extra_specs"].items())) or "no extra specs"
        lines.append(f"flavor {item['name']}: {item['vcpus']} vCPU, {item['ram']} MB, {item['disk']} GB; {specs}")
    if plan["image"]:
        image = plan["image"]
        lines.append(
            f"image {image['name']} from {image['filename']} (tag {plan['tag']})"
            if image["upload"]
            else f"image {image['name']} (already in glance, not created)"
        )
    if plan["keypair"]:
        lines.append(f"keypair {plan['keypair']['name']} from {plan['keypair']['public_key_file']}")
    if plan["network"]:
        lines.append(f"network {plan['network']['name']} with subnet {plan['network']['subnet']['cidr']}")
    for node in plan["ironic_nodes"]:
        lines.append(f"Ironic node {node['name']} (driver {node['driver']}, resource class {node['resource_class']})")
    for server in plan["servers"]:
        lines.append(f"server {server['name']} of flavor {server['flavor']} for {len(server['cells'])} cell(s)")
    for deployment in plan["ironic_node_deployments"]:
        lines.append(f"Ironic deployment of {deployment['node']} (image {plan['image']['name']})")
    if plan["coe"]:
        template = plan["coe"]["template"]
        lines.append(f"Magnum cluster template {template['name']} (kubernetes, {template['network_driver']})")
        for cluster in plan["coe"]["clusters"]:
            lines.append(f"Magnum cluster {cluster['name']} of flavor {cluster['flavor']}")
    return lines


def owned(resources, campaign):
    """Of ``resources`` ({type: [resource, ...]} as the *_info modules list them), those the campaign created:
    by metadata, tag or label where the type has one, by the campaign's name prefix otherwise."""
    prefix = campaign_prefix(campaign)
    tag = campaign_tag(campaign)

    def named(item):
        return str(item.get("name") or "").startswith(prefix)

    def by_metadata(item):
        return (item.get("metadata") or {}).get(METADATA_KEY) == campaign

    def by_labels(item):
        return (item.get("labels") or {}).get(METADATA_KEY) == campaign and named(item)

    def by_tag(item):
        return tag in (item.get("tags") or []) and named(item)

    rules = {
        "servers": by_metadata,
        "images": by_tag,
        "flavors": named,
        "keypairs": named,
        "networks": named,
        "subnets": named,
        "ironic_nodes": named,
        "magnum_templates": by_labels,
        "magnum_clusters": by_labels,
    }
    unknown = sorted(set(resources or {}) - set(rules))
    if unknown:
        raise OpenStackPlanError(f"unknown resource type(s) {', '.join(unknown)}; known: {', '.join(rules)}")
    return {kind: [item for item in (resources or {}).get(kind) or [] if rules[kind](item)] for kind in rules}


def auth_problem(result, cloud):
    """What a failed look at the cloud (openstack.cloud.auth's result) means for the user, naming the setting;
    None when it succeeded."""
    if not result or not result.get("failed"):
        return None
    message = str(result.get("msg") or "")
    if "was not found" in message and "loud" in message:
        return (
            f"openstack_instances_cloud: there is no cloud {cloud!r} in the clouds.yaml that openstacksdk reads "
            "(OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml): "
            "name one of its clouds"
        )
    if "401" in message or "requires authentication" in message or "nauthorized" in message:
        return (
            f"openstack_instances_cloud: keystone refused the credentials of cloud {cloud!r} (HTTP 401): correct "
            "the username, password, project and domains of that cloud in clouds.yaml"
        )
    return f"openstack_instances_cloud: cloud {cloud!r} cannot be reached: {message}"


def _first_address(server, network):
    addresses = (server.get("addresses") or {}).get(network) or []
    for address in addresses:
        if address.get("addr"):
            return address["addr"]
    return server.get("access_ipv4") or None


def server_outcome(created, found, server, pci_alias):
    """One server's outcome, from openstack.cloud.server's result (``created``) and the servers of its name
    that openstack.cloud.server_info found afterwards (``found``).

    ``status`` is ``active`` (with its ``address``), ``failed`` (nova put it in ERROR, e.g. "No valid host was
    found": its cells are recorded as failed with nova's fault message as ``reason``), or ``bad_input`` (nova
    refused the request: the whole provisioning stops with ``reason``, which names the setting).
    """
    name = server["name"]
    current = (found or [None])[0]
    fault = ((current or {}).get("fault") or {}).get("message")
    if current and current.get("status") == "ACTIVE" and not (created or {}).get("failed"):
        return {"name": name, "status": "active", "address": _first_address(current, server["network"]), "reason": None}
    if current and current.get("status") == "ERROR":
        return {"name": name, "status": "failed", "address": None, "reason": f"nova: {fault or 'server in ERROR'}"}
    message = str((created or {}).get("msg") or "")
    if "PCI alias" in message or "pci_passthrough:alias" in message:
        return {
            "name": name,
            "status": "bad_input",
            "address": None,
            "reason": (
                f"openstack_instances_pci_alias: nova does not define the PCI alias {pci_alias!r} (its [pci] alias "
                f"setting); set an alias the cloud defines (nova said: {message})"
            ),
        }
    state = current.get("status") if current else "absent"
    return {
        "name": name,
        "status": "bad_input",
        "address": None,
        "reason": f"server {name} of flavor {server['flavor']} did not become ACTIVE (it is {state}): {message}",
    }


def server_outcomes(boot_results, found_results, pci_alias):
    """``server_outcome`` of every server: the registered loop results of openstack.cloud.server (each with its
    plan server as ``item``) and of openstack.cloud.server_info over those (each with the boot result as ``item``)."""
    found_by_name = {}
    for result in found_results or []:
        name = ((result.get("item") or {}).get("item") or {}).get("name")
        found_by_name[name] = result.get("servers") or []
    return [
        server_outcome(result, found_by_name.get(result["item"]["name"], []), result["item"], pci_alias)
        for result in boot_results or []
    ]


def cluster_outcome(created, cluster):
    """A Magnum cluster's outcome, as ``server_outcome``: ``active`` (CREATE_COMPLETE), ``failed`` with Magnum's
    status reason (CREATE_FAILED, e.g. Heat could not build it), or ``pending`` (still being created)."""
    status = str(((created or {}).get("cluster") or {}).get("status") or "")
    reason = ((created or {}).get("cluster") or {}).get("status_reason") or (created or {}).get("msg")
    if status.endswith("_COMPLETE"):
        return {"name": cluster["name"], "status": "active", "address": None, "reason": None}
    if status.endswith("_FAILED") or (created or {}).get("failed"):
        return {"name": cluster["name"], "status": "failed", "address": None, "reason": f"magnum: {reason}"}
    return {
        "name": cluster["name"],
        "status": "pending",
        "address": None,
        "reason": f"magnum: cluster {cluster['name']} is {status or 'not created'}",
    }


def _max_units(inventories):
    units = {}
    for inventory in inventories or []:
        resource_class = inventory.get("resource_class")
        reserved = int(inventory.get("reserved") or 0)
        total = int(inventory.get("total") or 0)
        usable = min(int(inventory.get("max_unit") or total), total - reserved)
        units[resource_class] = max(units.get(resource_class, 0), usable)
    return units


def _fits(host, vcpus, cpu_classes, wanted):
    return any(host.get(cls, 0) >= vcpus for cls in cpu_classes) and all(
        host.get(cls, 0) >= amount for cls, amount in wanted.items()
    )


def unsatisfiable(flavors, providers):
    """The problems of flavors that no compute host can ever hold, from the placement resource providers'
    inventories (``[{name, inventories: [{resource_class, total, reserved, max_unit}]}]``); empty when every
    flavor fits one provider. Ironic flavors (no standard resources) are left to Ironic's nodes."""
    problems = []
    units = [_max_units(provider.get("inventories")) for provider in providers or []]
    for item in flavors:
        specs = item.get("extra_specs") or {}
        if specs.get("resources:VCPU") == "0":
            continue
        # Nova schedules hw:cpu_policy=dedicated as PCPU: only hosts with [compute] cpu_dedicated_set offer it.
        cpu_classes = ("PCPU",) if specs.get(PIN_SPEC) == "dedicated" else ("VCPU",)
        wanted = {"MEMORY_MB": item["ram"], "DISK_GB": item["disk"]}

        if not any(_fits(host, item["vcpus"], cpu_classes, wanted) for host in units):
            biggest = ", ".join(
                f"{cls} {max((host.get(cls, 0) for host in units), default=0)}"
                for cls in cpu_classes + ("MEMORY_MB", "DISK_GB")
            )
            problems.append(
                f"flavor {item['name']} ({item['vcpus']} vCPU, {item['ram']} MB, {item['disk']} GB) fits no compute "
                f"host (the largest offer {biggest}): lower the experiment's scale-up, openstack_instances_memory_mb "
                "or openstack_instances_disk_gb"
                + (
                    "; pinned (pin) flavors need compute hosts with dedicated CPUs (nova's [compute] "
                    "cpu_dedicated_set), or drop the pin scenarios"
                    if cpu_classes == ("PCPU",)
                    else ""
                )
            )
    return problems


def inventory(plan, server_outcomes, cluster_results, ssh_user):
    """The hosts add_host adds: every instance of the plan under ``platbench_<platform>`` when it is up, under
    ``platbench_<platform>_failed`` with the reason when it is not; host vars say platform, flavor, address."""
    outcomes = {outcome["name"]: outcome for outcome in server_outcomes or []}
    for result in cluster_results or []:
        outcomes[result["item"]["name"]] = cluster_outcome(result, result["item"])
    hosts = []
    for instance in plan["instances"]:
        outcome = outcomes.get(instance["name"])
        kind = _instance(instance["platform"])
        if outcome is None and kind == "baremetal_node" and plan["ironic_deployments"]:
            outcome = {"status": "active", "address": instance.get("address"), "reason": None}
        outcome = outcome or {"status": "failed", "address": None, "reason": "not provisioned"}
        up = outcome["status"] == "active"
        host_vars = {
            "platbench_platform": instance["platform"],
            "platbench_openstack_flavor": instance["flavor"],
            "platbench_openstack_scenario": instance["scenario"],
            "platbench_openstack_cells": instance["cells"],
            "platbench_openstack_failure": None if up else outcome["reason"],
        }
        if up and outcome["address"]:
            host_vars.update(ansible_host=outcome["address"], ansible_user=ssh_user)
        workload = placements.KINDS[platforms.get(instance["platform"]).workload_kind]
        if workload.through_api:
            # Its cells are created from the runner through the platform's API (a Job through the kubeconfig).
            host_vars["ansible_connection"] = "local"
        # Instances that run the workload as a process also join one group, which gets the bare-metal environment.
        shared = [platforms.PROCESS_INSTANCES_GROUP] if up and workload.launched else []
        hosts.append(
            {
                "name": instance["name"],
                "groups": [instance["group"] if up else platforms.get(instance["platform"]).failed_group, *shared],
                "vars": host_vars,
            }
        )
    return hosts
