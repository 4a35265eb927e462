"""platbench.lab.openstack_instances live, through ansible-playbook, against the test cloud (conftest.py):
flavors, servers (one that finds no valid host, recorded as a failed cell), an Ironic node deployed and undeployed,
add_host, teardown that leaves the cloud as found, bad input, and no secret in any output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from playbook_run import run_playbook

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing  # noqa: E402
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan  # noqa: E402

pytestmark = pytest.mark.openstack

PCI_ALIAS = "nvidia-h100"
CAMPAIGN = "live-instances"
NODE = {
    "name": "node0",
    "driver": "fake-hardware",
    "driver_info": {},
    "interfaces": {"boot": "fake", "deploy": "fake", "management": "fake", "power": "fake", "network": "noop"},
    "nics": [{"mac": "52:54:00:12:34:56"}],
    "properties": {"cpus": "8", "memory_mb": "16384", "local_gb": "100", "cpu_arch": "x86_64"},
    "address": "198.18.41.10",
}
# Fernet tokens start so; none may reach an output or a result.
TOKEN_MARK = "gAAAAA"
# An oslo.log line that states a problem (its first line: a traceback's lines carry no request context "[...]"),
# or the scheduler's note that placement offered no host.
LOGGED_PROBLEM = re.compile(r" (ERROR|WARNING) \S+ \[|no allocation candidates")


def cell(platform, scaleup, cpu_config, processor):
    scenario = f"{platform}/{scaleup}/{cpu_config}/{processor}"
    labels = {
        "experiment": "live",
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": cpu_config,
        "processor": processor,
        "workload": "cnn_train",
        "framework": "tensorflow",
        "model": "tiny",
        "repeat": 0,
    }
    # As cells_to_run hands it to cell.yml: sized (a cloud instance's cores are its flavor's).
    return sizing.sized(
        {"id": f"{scenario}|r0", "scenario": scenario, "params": {"framework": "tensorflow"}, "labels": labels}, {}
    )


# A CPU server, three 1-GPU servers for the cloud's two GPUs (the third finds no valid host), an Ironic node,
# and a pinned server on two of the compute host's four dedicated CPUs (PCPU).
CELLS = [
    cell("nova", 1, "vnl", "cpu"),
    cell("nova", 1, "vnl", "gpu"),
    cell("nova", 2, "vnl", "gpu"),
    cell("nova", 4, "vnl", "gpu"),
    cell("ironic", 1, "vnl", "cpu"),
    cell("nova", 2, "pin", "cpu"),
]
PLAYBOOK = [
    {
        "name": "Apply openstack_instances",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "roles": ["platbench.lab.openstack_instances"],
    },
    {
        "name": "Write what add_host added, and record the cells of instances that failed as platform_run does",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "tasks": [
            {
                "name": "Write the inventory groups and host vars",
                "ansible.builtin.copy": {
                    "dest": "{{ inventory_dump }}",
                    "mode": "0600",
                    "content": "{{ groups | platbench_test_dump(hostvars) | to_json }}",
                },
                "when": "inventory_dump is defined",
            },
            {
                "name": "Read the facts cell plans need",
                "platbench.lab.host_facts": {},
                "when": "record_cells | length > 0",
            },
            {
                "name": "Run and record each cell as platform_run does",
                "ansible.builtin.include_role": {"name": "platbench.lab.platform_run", "tasks_from": "cell.yml"},
                "loop": "{{ record_cells }}",
                "loop_control": {"loop_var": "platform_run_cell"},
                "vars": {
                    "platform_run_plan": {"name": "live", "cells": "{{ record_cells }}"},
                    "platform_run_campaign": CAMPAIGN,
                    "platform_run_engines": {},
                    "platform_run_guest": {},
                    "platform_run_sif": {},
                    "platform_run_apptainer_version": None,
                    "platform_run_k8s_node_name": None,
                },
            },
        ],
    },
]


# What the dump keeps of each added host (hostvars hold much more).
DUMP_FILTER = """
KEYS = ("group_names", "ansible_host", "ansible_user", "platbench_platform", "platbench_openstack_flavor",
        "platbench_openstack_scenario", "platbench_openstack_failure")


def dump(groups, hostvars):
    hosts = [host for host in groups["all"] if host != "localhost"]
    return {"groups": {name: list(members) for name, members in groups.items()},
            "hostvars": {host: {key: hostvars[host].get(key) for key in KEYS} for host in hosts}}


class FilterModule:
    def filters(self):
        return {"platbench_test_dump": dump}
"""


# Lists every resource type with openstacksdk in a process of its own: in this test process, `openstack` is this
# directory's package (tests/openstack), not the SDK.
LISTER = """
import json, sys
import openstack

project, system, magnum = openstack.connect(cloud=sys.argv[1]), openstack.connect(cloud=sys.argv[2]), sys.argv[3] == "1"
listed = {
    "servers": project.compute.servers(all_projects=True),
    "flavors": project.compute.flavors(is_public=None),
    "images": project.image.images(),
    "keypairs": project.compute.keypairs(),
    "networks": project.network.networks(),
    "subnets": project.network.subnets(),
    "ports": project.network.ports(),
    "security_groups": project.network.security_groups(),
    "baremetal_nodes": system.baremetal.nodes(),
}
if magnum:
    listed["magnum_templates"] = project.container_infrastructure_management.cluster_templates()
    listed["magnum_clusters"] = project.container_infrastructure_management.clusters()
print(json.dumps({kind: sorted(f"{item.id} {item.name}" for item in items) for kind, items in listed.items()}))
"""
# What the live checks read back, as JSON: flavors' extra specs, servers, allocations, the node, Magnum's.
READER = """
import json, sys
import openstack

project, system, prefix = openstack.connect(cloud=sys.argv[1]), openstack.connect(cloud=sys.argv[2]), sys.argv[3]
servers = [s for s in project.compute.servers() if s.name.startswith(prefix)]
found = {
    "flavors": {f.name: f.extra_specs for f in project.compute.flavors(is_public=None) if f.name.startswith(prefix)},
    "servers": {s.name: {"status": s.status, "metadata": s.metadata} for s in servers},
    "allocations": {
        s.name: project.placement.get(f"/allocations/{s.id}", microversion="1.28").json()["allocations"]
        for s in servers
    },
    "nodes": {
        n.name: {"provision_state": n.provision_state, "resource_class": n.resource_class}
        for n in system.baremetal.nodes(details=True)
        if n.name.startswith(prefix)
    },
}
print(json.dumps(found))
"""


def sdk(test_cloud, script, *args):
    env = {**test_cloud.env, "PYTHONPATH": ""}
    argv = [str(REPO / ".venv/bin/python"), "-c", script, test_cloud.cloud, test_cloud.system_cloud, *args]
    done = subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def resources(test_cloud):
    """Every resource type the role could touch, by id and name, as the test cloud lists them."""
    return sdk(test_cloud, LISTER, "1" if test_cloud.magnum else "0")


def apply(test_cloud, tmp_path, variables, playbook=PLAYBOOK, clouds_yaml=None):
    """ansible-playbook of the role (and the recording play) with ``variables``; its PlaybookRun."""
    filters = tmp_path / "filter_plugins"
    filters.mkdir(exist_ok=True)
    # What the dump keeps of each added host (hostvars hold much more).
    (filters / "dump.py").write_text(DUMP_FILTER)
    env = {
        "OS_CLIENT_CONFIG_FILE": str(clouds_yaml or test_cloud.env["OS_CLIENT_CONFIG_FILE"]),
        "ANSIBLE_FILTER_PLUGINS": str(filters),
    }
    run = run_playbook(playbook, tmp_path, {"record_cells": [], **variables}, env=env, timeout=600)
    # Kept for reading after a failure (pytest's tmp_path).
    (tmp_path / f"ansible-{len(list(tmp_path.glob('ansible-*.log')))}.log").write_text(run.output)
    return run


def role_vars(test_cloud, tmp_path, **more):
    image = tmp_path / "disk.raw"
    if not image.exists():
        image.write_bytes(b"\0" * 1024 * 1024)
    variables = {
        "openstack_instances_cloud": test_cloud.cloud,
        "openstack_instances_campaign": CAMPAIGN,
        "openstack_instances_cells": CELLS,
        "openstack_instances_pci_alias": PCI_ALIAS,
        "openstack_instances_memory_mb": 512,
        "openstack_instances_disk_gb": 1,
        "openstack_instances_image_file": str(image),
        "openstack_instances_image_disk_format": "raw",
        "openstack_instances_network_cidr": "198.18.40.0/24",
        "openstack_instances_ironic_nodes": [NODE],
        "openstack_instances_timeout": 120,
    }
    if shutil.which("ssh-keygen"):
        key = tmp_path / "id_ed25519"
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
        variables["openstack_instances_public_key_file"] = str(key) + ".pub"
    return {**variables, **more}


def password(test_cloud):
    clouds = yaml.safe_load(Path(test_cloud.clouds_yaml).read_text())["clouds"]
    return clouds[test_cloud.cloud]["auth"]["password"]


def assert_no_secret(test_cloud, *texts):
    secret = password(test_cloud)
    for text in texts:
        assert secret not in text
        assert TOKEN_MARK not in text


def done(run):
    return run.output[-9000:]


def why_servers_failed(test_cloud, run):
    """What a failed server assertion shows: the role's "which servers failed" lines, and the one-line errors and
    warnings of nova's conductor, scheduler and compute and of placement (a server in ERROR says why only there;
    traceback lines and neutronclient's deprecation warning are left out)."""
    said = run.output.split("Say which servers failed", 1)[-1].split("TASK", 1)[0] if "Say which" in run.output else ""
    logged = []
    for service in ("nova-conductor", "nova-scheduler", "nova-compute", "placement-api"):
        log = Path(test_cloud.state_dir) / "logs" / f"{service}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        kept = [line for line in lines if LOGGED_PROBLEM.search(line) and "neutronclient" not in line]
        logged += [f"{service}: {line}" for line in kept[-10:]]
    return "the role said:" + said[-3000:] + "\nnova and placement logged:\n" + "\n".join(logged)[-6000:]


def test_provision_record_and_tear_down(test_cloud, tmp_path):
    before = resources(test_cloud)
    prefix = openstack_plan.campaign_prefix(CAMPAIGN)
    results = tmp_path / "results"
    dump = tmp_path / "inventory.json"
    failed_cell = CELLS[3]  # nova/4/vnl/gpu: the third GPU server
    variables = role_vars(
        test_cloud,
        tmp_path,
        inventory_dump=str(dump),
        record_cells=[failed_cell],
        platform_run_results_dir=str(results / CAMPAIGN),
    )
    try:
        run = apply(test_cloud, tmp_path, variables)
        assert run.rc == 0, done(run)
        seen = sdk(test_cloud, READER, prefix)

        # Flavors: GPU (the alias), Ironic (its resource class, zeroed standard resources).
        flavors = seen["flavors"]
        assert flavors[f"{prefix}nova-1-vnl-cpu"] == {}
        assert flavors[f"{prefix}nova-1-vnl-gpu"] == {"pci_passthrough:alias": f"{PCI_ALIAS}:1"}
        assert flavors[f"{prefix}nova-4-vnl-gpu"] == {"pci_passthrough:alias": f"{PCI_ALIAS}:1"}
        assert flavors[f"{prefix}nova-2-pin-cpu"] == {"hw:cpu_policy": "dedicated"}
        assert flavors[f"{prefix}ironic-baremetal"] == {
            "resources:CUSTOM_BAREMETAL": "1",
            "resources:VCPU": "0",
            "resources:MEMORY_MB": "0",
            "resources:DISK_GB": "0",
        }

        # Servers: the CPU, pinned and two GPU ones ACTIVE, tagged; the third GPU one deleted after its ERROR.
        servers = seen["servers"]
        names = ("nova-1-vnl-cpu", "nova-1-vnl-gpu", "nova-2-vnl-gpu", "nova-2-pin-cpu")
        active = [f"{prefix}{name}" for name in names]
        # A string, not a tuple: pytest shortens a non-string message to one line and would cut nova's reasons off.
        assert sorted(servers) == sorted(active), f"servers: {servers}\n{why_servers_failed(test_cloud, run)}"
        for name in active:
            assert servers[name] == {"status": "ACTIVE", "metadata": {"platbench_campaign": CAMPAIGN}}
        # Each GPU server holds one of the compute host's PCI devices in placement; the CPU server none.
        for name in active:
            classes = {rc for provider in seen["allocations"][name].values() for rc in provider["resources"]}
            assert any("PCI" in rc for rc in classes) == ("gpu" in name), (name, seen["allocations"][name])
        # The pinned server holds dedicated CPUs, the others shared ones.
        for name in active:
            used = {rc for provider in seen["allocations"][name].values() for rc in provider["resources"]}
            wanted, other = ("PCPU", "VCPU") if "-pin-" in name else ("VCPU", "PCPU")
            assert wanted in used and other not in used, (name, used)

        # The Ironic node: enrolled, made available and deployed.
        assert seen["nodes"] == {f"{prefix}node0": {"provision_state": "active", "resource_class": "baremetal"}}

        # add_host: every instance under its platform's group, the failed one under <group>_failed with nova's reason.
        inventory = json.loads(dump.read_text())
        groups = inventory["groups"]
        assert sorted(groups["platbench_nova"]) == sorted(active)
        assert groups["platbench_nova_failed"] == [f"{prefix}nova-4-vnl-gpu"]
        assert groups["platbench_ironic"] == [f"{prefix}ironic-1-vnl-cpu"]
        # The instances that run the workload as a process get the bare-metal environment (experiment.yml).
        assert sorted(groups["platbench_process_instances"]) == sorted([*active, f"{prefix}ironic-1-vnl-cpu"])
        hostvars = inventory["hostvars"]
        assert hostvars[active[0]]["platbench_platform"] == "nova"
        assert hostvars[active[0]]["platbench_openstack_flavor"] == f"{prefix}nova-1-vnl-cpu"
        assert hostvars[active[0]]["ansible_host"].startswith("198.18.40.")
        assert hostvars[f"{prefix}ironic-1-vnl-cpu"]["ansible_host"] == NODE["address"]
        reason = hostvars[f"{prefix}nova-4-vnl-gpu"]["platbench_openstack_failure"]
        assert "No valid host" in reason

        # The third GPU server's cell, recorded as failed with nova's reason (platform_run's cell.yml, run_nova.yml).
        samples = [json.loads(line) for line in (results / CAMPAIGN / "samples.jsonl").read_text().splitlines()]
        (sample,) = [s for s in samples if s["labels"]["platform"] == "nova"]
        assert sample["metric"] == "failed" and "No valid host" in sample["metadata"]["error"], sample
        texts = [run.output] + [p.read_text() for p in results.rglob("*") if p.is_file()]
        assert_no_secret(test_cloud, *texts)
    finally:
        teardown = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path, openstack_instances_state="absent"))
    assert teardown.rc == 0, done(teardown)
    assert f"{prefix}node0" in teardown.output.split("Undeploy the bare-metal nodes", 1)[1].split("TASK", 1)[0]
    assert_no_secret(test_cloud, teardown.output)
    assert resources(test_cloud) == before


def test_a_pci_alias_the_cloud_does_not_define_is_named_and_nothing_is_left(test_cloud, tmp_path):
    before = resources(test_cloud)
    run = apply(
        test_cloud,
        tmp_path,
        role_vars(test_cloud, tmp_path, openstack_instances_cells=[CELLS[1]], openstack_instances_pci_alias="no-such"),
    )
    assert run.rc != 0
    assert "openstack_instances_pci_alias: nova does not define the PCI alias 'no-such'" in run.output, done(run)
    assert "was deleted" in run.output
    assert resources(test_cloud) == before


def test_a_flavor_no_host_can_hold_is_named_before_anything_is_created(test_cloud, tmp_path):
    before = resources(test_cloud)
    run = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path, openstack_instances_memory_mb=1048576))
    assert run.rc != 0
    assert "fits no compute host" in run.output and "openstack_instances_memory_mb" in run.output, done(run)
    assert "Create the flavors" not in run.output
    # A pinned flavor (hw:cpu_policy=dedicated) wanting more dedicated CPUs (PCPU) than the compute host's four.
    pinned_cells = [cell("nova", 8, "pin", "cpu")]
    pinned = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path, openstack_instances_cells=pinned_cells))
    assert pinned.rc != 0
    assert "nova-8-pin-cpu (8 vCPU" in pinned.output and "PCPU 4" in pinned.output, done(pinned)
    assert "cpu_dedicated_set" in pinned.output
    assert "Create the flavors" not in pinned.output
    assert resources(test_cloud) == before


def test_an_unknown_cloud_and_wrong_credentials_are_named(test_cloud, tmp_path):
    before = resources(test_cloud)
    unknown = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path, openstack_instances_cloud="no-such-cloud"))
    assert unknown.rc != 0
    assert "openstack_instances_cloud: there is no cloud 'no-such-cloud'" in unknown.output, done(unknown)

    clouds = yaml.safe_load(Path(test_cloud.clouds_yaml).read_text())
    clouds["clouds"][test_cloud.cloud]["auth"]["password"] = "wrong-password-0815"
    wrong = tmp_path / "wrong-clouds.yaml"
    wrong.write_text(yaml.safe_dump(clouds))
    refused = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path), clouds_yaml=wrong)
    assert refused.rc != 0
    assert "keystone refused the credentials of cloud" in refused.output, done(refused)
    for run in (unknown, refused):
        assert "wrong-password-0815" not in run.output
        assert_no_secret(test_cloud, run.output)
    assert resources(test_cloud) == before


EXTERNAL = """
import sys
import openstack

cloud, _system, action, name = sys.argv[1:5]
network = openstack.connect(cloud=cloud).network
if action == "create":
    net = network.create_network(
        name=name, is_router_external=True, provider_network_type="flat", provider_physical_network="physnet1"
    )
    network.create_subnet(name=name, network_id=net.id, ip_version=4, cidr="198.18.60.0/24", is_dhcp_enabled=False)
else:
    found = network.find_network(name)
    if found:
        for subnet in network.subnets(network_id=found.id):
            network.delete_subnet(subnet)
        network.delete_network(found)
print("{}")
"""


def test_magnum_template_and_cluster_up_to_heat(test_cloud, tmp_path):
    assert test_cloud.magnum, f"magnum does not run in the test cloud: {test_cloud.magnum_reason}"
    external = "platbench-test-external"
    prefix = openstack_plan.campaign_prefix(CAMPAIGN)
    dump = tmp_path / "inventory.json"
    sdk(test_cloud, EXTERNAL, "create", external)
    try:
        before = resources(test_cloud)
        variables = role_vars(
            test_cloud,
            tmp_path,
            openstack_instances_cells=[cell("magnum", 1, "vnl", "cpu")],
            openstack_instances_magnum_wait=False,
            openstack_instances_magnum_external_network=external,
            inventory_dump=str(dump),
        )
        try:
            # The test cloud's Magnum driver validates the template as Magnum does and fails every cluster
            # where Heat would start (testcloud's no-orchestration driver).
            run = apply(test_cloud, tmp_path, variables)
            assert run.rc == 0, done(run)
            listed = resources(test_cloud)
            assert any(entry.endswith(f" {prefix}k8s") for entry in listed["magnum_templates"]), listed
            assert any(entry.endswith(f" {prefix}magnum-1-vnl-cpu") for entry in listed["magnum_clusters"])
            # The cluster is never built: its cells go to the failed group with Magnum's status.
            groups = json.loads(dump.read_text())["groups"]
            assert groups["platbench_magnum_failed"] == [f"{prefix}magnum-1-vnl-cpu"]
        finally:
            teardown = apply(test_cloud, tmp_path, role_vars(test_cloud, tmp_path, openstack_instances_state="absent"))
        assert teardown.rc == 0, done(teardown)
        assert resources(test_cloud) == before
    finally:
        sdk(test_cloud, EXTERNAL, "delete", external)
