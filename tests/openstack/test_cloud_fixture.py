"""The test cloud is what it claims: real APIs on loopback, the fake GPU host, Ironic's fake hardware."""

import ipaddress
import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests import skips
from tests.openstack.testcloud import backing, cloud, install, processes
from tests.openstack.testcloud.layout import Layout, new_secrets
from tests.openstack.testcloud.processes import CloudError

pytestmark = pytest.mark.openstack

PCI_RESOURCE_CLASS = "CUSTOM_PCI_10DE_2330"


def token(test_cloud):
    return test_cloud.openstack("token", "issue", "-f", "json")["id"]


def get_json(url, auth_token, headers=None):
    """(status, parsed body); a version document's 300 Multiple Choices is an answer too."""
    request = urllib.request.Request(url, headers={"X-Auth-Token": auth_token, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


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


def test_a_fake_hardware_node_goes_through_its_lifecycle_by_api_alone(test_cloud, scratch):
    def baremetal(*args):
        return test_cloud.openstack("baremetal", "--os-baremetal-api-version", "latest", "node", *args)

    node = scratch.create("baremetal node", "--driver", "fake-hardware", "--resource-class", "baremetal", "--name")
    assert node["provision_state"] == "enroll"
    for action, state in (
        ("manage", "manageable"),
        ("provide", "available"),
        ("deploy", "active"),
        ("undeploy", "available"),
    ):
        baremetal(action, "--wait", "60", node["uuid"])
        shown = baremetal("show", node["uuid"], "-f", "json")
        assert (shown["provision_state"], shown["last_error"]) == (state, None), action


def test_compute_host_is_mapped_up_and_sized(test_cloud):
    services = test_cloud.openstack("compute", "service", "list", "--service", "nova-compute", "-f", "json")
    assert [(svc["Host"], svc["State"], svc["Status"]) for svc in services] == [
        (test_cloud.compute_host, "up", "enabled")
    ]
    hypervisor = test_cloud.openstack("hypervisor", "show", test_cloud.compute_host, "-f", "json")
    assert hypervisor["state"] == "up"
    # Newer compute microversions hide sizes from the hypervisor: placement holds them.
    inventories = provider_inventories(test_cloud)
    assert inventories[test_cloud.compute_host] == {"VCPU": 8, "PCPU": 4, "MEMORY_MB": 16384, "DISK_GB": 200}


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


class Scratch:
    """Creates a test's resources under one random name; deletes them afterwards, newest first."""

    def __init__(self, test_cloud, tmp_path):
        self.cloud = test_cloud
        self.tmp_path = tmp_path
        self.name = f"fixture-{uuid.uuid4().hex[:8]}"
        self.created = []

    def create(self, kind, *args, timeout=120):
        """``openstack <kind> create <args> <name> -f json``, remembered for deletion."""
        resource = self.cloud.openstack(*kind.split(), "create", *args, self.name, "-f", "json", timeout=timeout)
        self.created.append((kind, resource.get("id") or resource.get("uuid") or self.name))
        return resource

    def remember(self, kind, resource_id):
        self.created.append((kind, resource_id))

    def image(self, *properties):
        image_file = self.tmp_path / "tiny.img"
        image_file.write_bytes(b"\0" * 1024 * 1024)
        return self.create(
            "image", "--disk-format", "raw", "--container-format", "bare", "--file", str(image_file), *properties
        )

    def flavor(self):
        return self.create("flavor", "--vcpus", "1", "--ram", "256", "--disk", "1")

    def delete_all(self):
        """Every resource is deleted even when one of them fails (a network left on physnet1 would make the next
        flat network of the session fail); the first failure is raised at the end."""
        problems = []
        for kind, resource_id in reversed(self.created):
            try:
                self.cloud.openstack(*kind.split(), "delete", resource_id, check=False)
                if kind == "coe cluster":
                    wait_for(lambda: self.cloud.openstack("coe", "cluster", "list", "-f", "json"), [])
            except AssertionError as problem:
                problems.append(problem)
        if problems:
            raise problems[0]


@pytest.fixture
def scratch(test_cloud, tmp_path):
    resources = Scratch(test_cloud, tmp_path)
    yield resources
    resources.delete_all()


def test_a_server_reaches_active_and_is_deleted(test_cloud, scratch):
    image, flavor = scratch.image(), scratch.flavor()
    network = scratch.create("network")
    scratch.create("subnet", "--network", network["id"], "--subnet-range", "198.18.41.0/24")
    args = ["--image", image["id"], "--flavor", flavor["id"], "--network", network["id"], "--wait"]
    server = scratch.create("server", *args, timeout=180)
    assert server["status"] == "ACTIVE"
    test_cloud.openstack("server", "delete", "--wait", server["id"], timeout=180)
    assert test_cloud.openstack("server", "list", "--name", scratch.name, "-f", "json") == []


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


def test_magnum_validates_templates_and_fails_clusters_with_its_reason(test_cloud, scratch):
    assert test_cloud.magnum, f"magnum is not running in the test cloud: {test_cloud.magnum_reason}"
    image, flavor = scratch.image("--property", "os_distro=fedora-coreos"), scratch.flavor()
    network = scratch.create(
        "network", "--external", "--provider-network-type", "flat", "--provider-physical-network", "physnet1"
    )
    scratch.create("keypair", "--private-key", str(scratch.tmp_path / "key"))
    name = scratch.name
    template_args = ["--coe", "kubernetes", "--image", image["id"], "--keypair", name, "--external-network"]
    template_args += [network["id"], "--flavor", flavor["id"], "--master-flavor", flavor["id"]]
    refused = test_cloud.openstack(
        "coe", "cluster", "template", "create", *template_args, "--network-driver", "weave", f"{name}-bad", check=False
    )
    assert refused.returncode != 0 and "weave is not supported" in refused.stderr
    test_cloud.openstack("coe", "cluster", "template", "create", *template_args, "--network-driver", "flannel", name)
    scratch.remember("coe cluster template", name)
    test_cloud.openstack("coe", "cluster", "create", "--cluster-template", name, "--node-count", "1", name)
    scratch.remember("coe cluster", name)
    cluster = wait_for(lambda: test_cloud.openstack("coe", "cluster", "show", name, "-f", "json"), "CREATE_FAILED")
    assert "no orchestration" in cluster["status_reason"]


def wait_for(read, wanted, attempts=30, interval=2):
    """Poll ``read`` (bounded) until it is ``wanted`` (or, for a dict, its status is)."""
    for _attempt in range(attempts):
        value = read()
        if value == wanted or (isinstance(value, dict) and value.get("status") == wanted):
            return value
        time.sleep(interval)
    raise AssertionError(f"never reached {wanted!r}; last: {value!r}")


def test_up_refuses_a_taken_port_naming_it(tmp_path):
    """No cloud needed: `up` checks every port before it starts anything."""
    layout = Layout(tmp_path / "cloud", 19200)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", layout.port("nova")))
        taken.listen()
        with pytest.raises(CloudError, match=rf"port {layout.port('nova')} on 127\.0\.0\.1 \(nova\) is already in use"):
            cloud.check_ports_free(layout)
    assert not layout.state_dir.exists()


def test_a_mariadb_that_does_not_start_is_an_error_with_its_log_not_a_skip(tmp_path, monkeypatch):
    """Only what cannot be installed skips (install.Unsupported); a start failure, of our own
    configuration included, is an error that shows MariaDB's own words."""
    skips.unless_root("MariaDB is installed with apt-get and started as root")
    try:
        install.check_host()
        install.ensure_debian_packages()
    except install.Unsupported as reason:
        skips.skip(skips.CLOUD_NOT_INSTALLABLE, str(reason))
    layout = Layout(tmp_path / "cloud", 19500)
    cloud.check_ports_free(layout)
    real_config = backing.mysql_config
    monkeypatch.setattr(backing, "mysql_config", lambda layout: real_config(layout) + "no-such-option = 1\n")
    monkeypatch.setattr(backing, "start_rabbitmq", lambda layout, password: None)  # MariaDB alone
    try:
        with pytest.raises(CloudError) as raised:
            cloud._bring_up(layout, new_secrets(), say=lambda line: None)
    finally:
        processes.stop_all(layout)
    assert not isinstance(raised.value, install.Unsupported)
    assert str(raised.value).startswith("MariaDB did not start: "), raised.value
    assert "no-such-option" in str(raised.value), raised.value  # MariaDB's complaint, from its output or log
