"""The OpenStack plan of a campaign: flavors, names, tags, instances, outcomes and ownership."""

from __future__ import annotations

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan as op


def cell(platform, scaleup=1, cpu_config="vnl", processor="cpu", repeat=0):
    labels = {"platform": platform, "scaleup": scaleup, "cpu_config": cpu_config, "processor": processor}
    return {"id": f"{platform}/{scaleup}/{cpu_config}/{processor}/r{repeat}", "labels": labels, "params": {}}


OPTIONS = {
    "campaign": "c1",
    "cloud": "lab",
    "image_file": "/images/debian.qcow2",
    "public_key_file": "/k.pub",
    "magnum_external_network": "public",
}
NODE = {
    "name": "node0",
    "driver": "fake-hardware",
    "driver_info": {"ipmi_password": "s3cret"},
    "address": "198.18.41.10",
}


def test_flavors_pin_gpu_and_ironic_extra_specs():
    cells = [
        cell("nova", 2, "pin", "cpu"),
        cell("nova", 1, "vnl", "gpu"),
        cell("ironic", 4, "pin", "cpu"),
        cell("bm", 2, "pin", "cpu"),
    ]
    plan = op.instances_plan(cells, {**OPTIONS, "ironic_nodes": [NODE], "gpus_per_cell": 2, "pci_alias": "a100"})
    flavors = {flavor["name"]: flavor for flavor in plan["flavors"]}
    prefix = op.campaign_prefix("c1")
    assert flavors[f"{prefix}nova-2-pin-cpu"] == {
        "name": f"{prefix}nova-2-pin-cpu",
        "vcpus": 2,
        "ram": 2048,
        "disk": 20,
        "extra_specs": {"hw:cpu_policy": "dedicated"},
    }
    assert flavors[f"{prefix}nova-1-vnl-gpu"]["extra_specs"] == {"pci_passthrough:alias": "a100:2"}
    assert flavors[f"{prefix}ironic-baremetal"]["extra_specs"] == {
        "resources:CUSTOM_BAREMETAL": "1",
        "resources:VCPU": "0",
        "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0",
    }
    assert plan["platforms"] == ["ironic", "nova"]
    # bm cells are not OpenStack's
    assert all(instance["platform"] != "bm" for instance in plan["instances"])


def test_one_instance_per_scenario_shared_by_repeats():
    cells = [cell("nova", 2, "pin", "cpu", repeat) for repeat in range(3)] + [cell("nova", 1, "vnl", "cpu")]
    plan = op.instances_plan(cells, OPTIONS)
    assert [server["name"] for server in plan["servers"]] == [
        op.campaign_prefix("c1") + "nova-2-pin-cpu",
        op.campaign_prefix("c1") + "nova-1-vnl-cpu",
    ]
    assert plan["servers"][0]["cells"] == [c["id"] for c in cells[:3]]
    assert plan["servers"][0]["metadata"] == {"platbench_campaign": "c1"}
    assert plan["servers"][0]["group"] == "platbench_nova"
    assert plan["servers"][0]["key_name"] == op.campaign_prefix("c1") + "key"
    assert op.instance_name("c1", cells[0]["labels"]) == plan["servers"][0]["name"]


def test_names_tags_and_network():
    plan = op.instances_plan([cell("nova")], {**OPTIONS, "network_cidr": "198.18.44.0/24"})
    prefix = plan["prefix"]
    assert prefix.startswith("pb-") and len(prefix) == len("pb-") + op.PREFIX_HASH_CHARS + 1
    assert op.campaign_prefix("c2") != prefix
    assert plan["image"]["tags"] == ["platbench-campaign=c1"] and plan["image"]["name"] == prefix + "image"
    assert plan["network"] == {"name": prefix + "net", "subnet": {"name": prefix + "subnet", "cidr": "198.18.44.0/24"}}


def test_an_existing_image_is_used_not_uploaded():
    plan = op.instances_plan([cell("nova")], {**OPTIONS, "image_name": "debian-12"})
    assert plan["image"] == {"name": "debian-12", "upload": False}
    assert plan["servers"][0]["image"] == "debian-12"


def test_no_openstack_cells_plan_nothing():
    plan = op.instances_plan([cell("bm"), cell("cn")], {"campaign": "c1", "cloud": "lab"})
    assert plan["instances"] == [] and plan["flavors"] == [] and plan["network"] is None


def test_ironic_nodes_are_prefixed_and_shared_in_turn():
    cells = [cell("ironic", 1), cell("ironic", 2), cell("ironic", 4)]
    nodes = [NODE, {**NODE, "name": "node1", "address": "198.18.41.11"}]
    plan = op.instances_plan(cells, {**OPTIONS, "ironic_nodes": nodes})
    prefix = plan["prefix"]
    assert [node["name"] for node in plan["ironic_nodes"]] == [prefix + "node0", prefix + "node1"]
    assert [d["node"] for d in plan["ironic_deployments"]] == [prefix + "node0", prefix + "node1", prefix + "node0"]
    assert [d["node"] for d in plan["ironic_node_deployments"]] == [prefix + "node0", prefix + "node1"]
    assert plan["ironic_deployments"][2]["address"] == "198.18.41.10"
    assert plan["servers"] == []


def test_ironic_through_nova_boots_servers_of_the_ironic_flavor():
    plan = op.instances_plan([cell("ironic")], {**OPTIONS, "ironic_nodes": [NODE], "ironic_deploy": "through_nova"})
    assert plan["servers"][0]["flavor"] == plan["prefix"] + "ironic-baremetal"
    assert plan["ironic_deployments"] == []


def test_magnum_template_and_clusters():
    options = {**OPTIONS, "magnum_network_driver": "calico", "magnum_external_network": "public"}
    plan = op.instances_plan([cell("magnum", 2, "pin")], options)
    assert plan["coe"]["template"]["external_network"] == "public"
    assert plan["image"]["properties"] == {"os_distro": "fedora-coreos"}
    template = plan["coe"]["template"]
    assert template["coe"] == "kubernetes" and template["network_driver"] == "calico"
    assert template["labels"] == {"platbench_campaign": "c1"}
    cluster = plan["coe"]["clusters"][0]
    assert cluster["template"] == template["name"] and cluster["flavor"] == plan["prefix"] + "magnum-2-pin-cpu"


@pytest.mark.parametrize(
    ("options", "setting"),
    [
        ({"magnum_network_driver": "weave"}, "openstack_instances_magnum_network_driver"),
        ({"campaign": "a b"}, "openstack_instances_campaign"),
        ({"cloud": ""}, "openstack_instances_cloud"),
        ({"image_file": None}, "openstack_instances_image_file"),
        ({"network_cidr": "198.18.0.0/30"}, "openstack_instances_network_cidr"),
        ({"gpus_per_cell": 0}, "openstack_instances_gpus_per_cell"),
        ({"pci_alias": "a:b"}, "openstack_instances_pci_alias"),
        ({"ironic_deploy": "maas"}, "openstack_instances_ironic_deploy"),
        ({"magnum_external_network": None}, "openstack_instances_magnum_external_network"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_settings_are_named(options, setting):
    # None is "not set": image_file None leaves the plan without an image.
    merged = {**OPTIONS, **options}
    with pytest.raises(op.OpenStackPlanError, match=setting):
        op.instances_plan([cell("nova"), cell("magnum")], merged)


def test_ironic_cells_need_nodes():
    with pytest.raises(op.OpenStackPlanError, match="openstack_instances_ironic_nodes"):
        op.instances_plan([cell("ironic")], OPTIONS)
    with pytest.raises(op.OpenStackPlanError, match=r"ironic_nodes\[0\].*unknown key"):
        op.instances_plan([cell("ironic")], {**OPTIONS, "ironic_nodes": [{**NODE, "bmc": 1}]})


def test_describe_lists_every_resource_and_no_secret():
    plan = op.instances_plan(
        [cell("nova", 2, "pin", "gpu"), cell("ironic"), cell("magnum")], {**OPTIONS, "ironic_nodes": [NODE]}
    )
    text = "\n".join(op.describe(plan))
    for name in [f["name"] for f in plan["flavors"]] + [plan["network"]["name"], plan["image"]["name"]]:
        assert name in text
    assert "pci_passthrough:alias=nvidia-h100:1" in text and "Magnum cluster template" in text
    assert "s3cret" not in text


def boot(server, failed=False, msg=""):
    return {"item": server, "failed": failed, "msg": msg}


def found(result, servers):
    return {"item": result, "servers": servers}


def test_server_outcomes_active_failed_and_bad_input():
    plan = op.instances_plan([cell("nova", 1), cell("nova", 2), cell("nova", 3)], OPTIONS)
    first, second, third = plan["servers"]
    net = plan["network"]["name"]
    boots = [
        boot(first),
        boot(second, True, "Error in creating the server"),
        boot(third, True, "BadRequestException: 400: PCI alias nvidia-h100 is not defined"),
    ]
    founds = [
        found(boots[0], [{"status": "ACTIVE", "addresses": {net: [{"addr": "198.18.40.5"}]}}]),
        found(boots[1], [{"status": "ERROR", "fault": {"message": "No valid host was found. "}}]),
        found(boots[2], []),
    ]
    outcomes = op.server_outcomes(boots, founds, "nvidia-h100")
    assert [o["status"] for o in outcomes] == ["active", "failed", "bad_input"]
    assert outcomes[0]["address"] == "198.18.40.5"
    assert outcomes[1]["reason"] == "nova: No valid host was found. "
    assert "openstack_instances_pci_alias" in outcomes[2]["reason"] and "'nvidia-h100'" in outcomes[2]["reason"]


def test_inventory_groups_up_and_failed_instances():
    plan = op.instances_plan(
        [cell("nova", 1), cell("nova", 2), cell("ironic"), cell("magnum")], {**OPTIONS, "ironic_nodes": [NODE]}
    )
    outcomes = [
        {"name": plan["servers"][0]["name"], "status": "active", "address": "198.18.40.5", "reason": None},
        {"name": plan["servers"][1]["name"], "status": "failed", "address": None, "reason": "nova: No valid host"},
    ]
    cluster = plan["coe"]["clusters"][0]
    clusters = [{"item": cluster, "cluster": {"status": "CREATE_FAILED", "status_reason": "no heat"}}]
    hosts = {host["name"]: host for host in op.inventory(plan, outcomes, clusters, "debian")}
    up = hosts[plan["servers"][0]["name"]]
    assert up["groups"] == ["platbench_nova", "platbench_process_instances"]
    assert up["vars"]["ansible_host"] == "198.18.40.5" and up["vars"]["ansible_user"] == "debian"
    assert up["vars"]["platbench_platform"] == "nova" and up["vars"]["platbench_openstack_failure"] is None
    down = hosts[plan["servers"][1]["name"]]
    assert (
        down["groups"] == ["platbench_nova_failed"]
        and down["vars"]["platbench_openstack_failure"] == "nova: No valid host"
    )
    ironic = hosts[plan["ironic_deployments"][0]["name"]]
    assert (
        ironic["groups"] == ["platbench_ironic", "platbench_process_instances"]
        and ironic["vars"]["ansible_host"] == "198.18.41.10"
    )
    assert hosts[cluster["name"]]["groups"] == ["platbench_magnum_failed"]
    assert hosts[cluster["name"]]["vars"]["platbench_openstack_failure"] == "magnum: no heat"


def test_auth_problems_name_the_cloud_setting():
    assert op.auth_problem({"failed": False}, "lab") is None
    assert "no cloud 'nope'" in op.auth_problem({"failed": True, "msg": "Cloud nope was not found."}, "nope")
    refused = op.auth_problem(
        {"failed": True, "msg": "The request you have made requires authentication. (HTTP 401)"}, "lab"
    )
    assert refused.startswith("openstack_instances_cloud:") and "credentials" in refused


def test_a_flavor_no_host_can_hold_is_a_problem():
    inventories = [
        {"resource_class": "VCPU", "total": 8, "reserved": 0, "max_unit": 8},
        {"resource_class": "MEMORY_MB", "total": 16384, "reserved": 512, "max_unit": 16384},
        {"resource_class": "DISK_GB", "total": 200, "reserved": 0, "max_unit": 200},
    ]
    shared_only = [{"name": "compute1", "inventories": inventories}]
    dedicated = [
        {"name": "compute2", "inventories": inventories + [{"resource_class": "PCPU", "total": 4, "max_unit": 4}]}
    ]
    opts = op._options(OPTIONS)
    vanilla = op.flavor("f0", {"platform": "nova", "scaleup": 8, "cpu_config": "vnl", "processor": "cpu"}, opts)
    pinned = op.flavor("f1", {"platform": "nova", "scaleup": 4, "cpu_config": "pin", "processor": "cpu"}, opts)
    assert op.unsatisfiable([vanilla], shared_only) == []
    assert op.unsatisfiable([vanilla, pinned], dedicated) == []
    # Pinned flavors are scheduled as PCPU: a cloud without dedicated CPUs can never hold one.
    (no_pcpu,) = op.unsatisfiable([pinned], shared_only)
    assert "f1" in no_pcpu and "PCPU 0" in no_pcpu and "cpu_dedicated_set" in no_pcpu
    too_big = {**vanilla, "name": "f2", "ram": 16384}
    (problem,) = op.unsatisfiable([too_big], shared_only)
    assert "f2" in problem and "openstack_instances_memory_mb" in problem and "MEMORY_MB 15872" in problem
    assert "cpu_dedicated_set" not in problem
    ironic = op.flavor("f3", {"platform": "ironic", "scaleup": 1, "cpu_config": "pin", "processor": "cpu"}, opts)
    assert op.unsatisfiable([ironic], []) == []


def test_owned_takes_only_the_campaigns_resources():
    prefix = op.campaign_prefix("c1")
    other = op.campaign_prefix("c10")
    listed = {
        "servers": [
            {"name": "x", "metadata": {"platbench_campaign": "c1"}},
            {"name": "y", "metadata": {"platbench_campaign": "c10"}},
        ],
        "images": [{"name": prefix + "image", "tags": ["platbench-campaign=c1"]}, {"name": "debian", "tags": []}],
        "flavors": [{"name": prefix + "nova-1-vnl-cpu"}, {"name": other + "nova-1-vnl-cpu"}, {"name": "m1.small"}],
        "keypairs": [{"name": prefix + "key"}, {"name": "mine"}],
        "networks": [{"name": prefix + "net"}, {"name": "public"}],
        "subnets": [{"name": prefix + "subnet"}],
        "ironic_nodes": [{"name": prefix + "node0"}, {"name": "node0"}],
        "magnum_templates": [
            {"name": prefix + "k8s", "labels": {"platbench_campaign": "c1"}},
            {"name": "k8s", "labels": {}},
        ],
        "magnum_clusters": [],
    }
    mine = op.owned(listed, "c1")
    assert [s["name"] for s in mine["servers"]] == ["x"]
    assert [i["name"] for i in mine["images"]] == [prefix + "image"]
    assert [f["name"] for f in mine["flavors"]] == [prefix + "nova-1-vnl-cpu"]
    assert [k["name"] for k in mine["keypairs"]] == [prefix + "key"]
    assert [n["name"] for n in mine["ironic_nodes"]] == [prefix + "node0"]
    assert [t["name"] for t in mine["magnum_templates"]] == [prefix + "k8s"]
    with pytest.raises(op.OpenStackPlanError, match="volumes"):
        op.owned({"volumes": []}, "c1")
