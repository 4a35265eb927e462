"""The test cloud is what it claims: real APIs on loopback, the fake GPU host, Ironic's fake hardware."""

import ipaddress
import json
import re
import subprocess
import urllib.request
import uuid

import pytest

from tests.openstack.testcloud import processes
from tests.openstack.testcloud.layout import Layout

pytestmark = pytest.mark.openstack

PCI_RESOURCE_CLASS = "CUSTOM_PCI_10DE_2330"


def token(test_cloud):
    return test_cloud.openstack("token", "issue", "-f", "json")["id"]


def get_json(url, auth_token, headers=None):
    request = urllib.request.Request(url, headers={"X-Auth-Token": auth_token, **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read() or b"null")


def test_every_catalog_service_answers_with_a_project_token(test_cloud):
    catalog = {entry["Type"] for entry in test_cloud.openstack("catalog", "list", "-f", "json")}
    assert set(test_cloud.endpoints) <= catalog
    auth_token = token(test_cloud)
    for service, url in test_cloud.endpoints.items():
        status, _body = get_json(url, auth_token)
        assert status < 400, f"{service} at {url} answered {status}"


def test_system_scope_lists_the_fake_hardware_driver(test_cloud):
    drivers = test_cloud.openstack("baremetal", "driver", "list", "-f", "json", system=True)
    assert "fake-hardware" in [driver["name"] for driver in drivers]


def test_compute_host_is_mapped_up_and_sized(test_cloud):
    services = test_cloud.openstack("compute", "service", "list", "--service", "nova-compute", "-f", "json")
    assert [(svc["Host"], svc["State"], svc["Status"]) for svc in services] == [
        (test_cloud.compute_host, "up", "enabled")
    ]
    hypervisor = test_cloud.openstack("hypervisor", "show", test_cloud.compute_host, "-f", "json")
    assert hypervisor["state"] == "up"
    # Newer compute microversions hide sizes from the hypervisor: placement holds them.
    inventories = provider_inventories(test_cloud)
    assert inventories[test_cloud.compute_host] == {"VCPU": 8, "MEMORY_MB": 16384, "DISK_GB": 200}


def provider_inventories(test_cloud):
    """{provider name: {resource class: total}} from placement."""
    auth_token = token(test_cloud)
    placement = test_cloud.endpoints["placement"]
    version = {"OpenStack-API-Version": "placement 1.14"}
    _status, body = get_json(f"{placement}/resource_providers", auth_token, version)
    inventories = {}
    for provider in body["resource_providers"]:
        _status, inventory = get_json(
            f"{placement}/resource_providers/{provider['uuid']}/inventories", auth_token, version
        )
        inventories[provider["name"]] = {name: item["total"] for name, item in inventory["inventories"].items()}
    return inventories


def test_placement_holds_the_two_gpus(test_cloud):
    gpus = {name: inv for name, inv in provider_inventories(test_cloud).items() if PCI_RESOURCE_CLASS in inv}
    assert sorted(gpus) == [f"{test_cloud.compute_host}_0000:81:00.0", f"{test_cloud.compute_host}_0000:82:00.0"]
    assert all(inventory == {PCI_RESOURCE_CLASS: 1} for inventory in gpus.values())


def test_a_server_reaches_active_and_is_deleted(test_cloud, tmp_path):
    name = f"fixture-{uuid.uuid4().hex[:8]}"
    image_file = tmp_path / "tiny.img"
    image_file.write_bytes(b"\0" * 1024 * 1024)
    created = []
    try:
        image = test_cloud.openstack(
            "image", "create", "--disk-format", "raw", "--container-format", "bare", "--file", str(image_file), name,
            "-f", "json",
        )  # fmt: skip
        created.append(("image", image["id"]))
        flavor = test_cloud.openstack(
            "flavor", "create", "--vcpus", "1", "--ram", "256", "--disk", "1", name, "-f", "json"
        )
        created.append(("flavor", flavor["id"]))
        network = test_cloud.openstack("network", "create", name, "-f", "json")
        created.append(("network", network["id"]))
        test_cloud.openstack("subnet", "create", "--network", network["id"], "--subnet-range", "198.18.41.0/24", name)
        server = test_cloud.openstack(
            "server", "create", "--image", image["id"], "--flavor", flavor["id"], "--network", network["id"], "--wait",
            name, "-f", "json", timeout=180,
        )  # fmt: skip
        created.append(("server", server["id"]))
        assert server["status"] == "ACTIVE"
        test_cloud.openstack("server", "delete", "--wait", server["id"], timeout=180)
        created.remove(("server", server["id"]))
        assert test_cloud.openstack("server", "list", "--name", name, "-f", "json") == []
    finally:
        for kind, resource_id in reversed(created):
            test_cloud.openstack(kind, "delete", resource_id, check=False)


def test_nothing_listens_outside_loopback(test_cloud):
    pids = processes.session_pids(
        Layout(test_cloud.state_dir, int(test_cloud.endpoints["identity"].rsplit(":", 1)[1]) - 10)
    )
    listening = subprocess.run(["ss", "-Hltnup"], capture_output=True, text=True, check=True).stdout.splitlines()
    ours = []
    for line in listening:
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            address = line.split()[4].rsplit(":", 1)[0].strip("[]")
            ours.append(address)
            assert ipaddress.ip_address(address.split("%")[0]).is_loopback, line
    assert len(ours) >= 10, "the cloud's services should be among the listening sockets"
