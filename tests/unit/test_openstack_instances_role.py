"""The openstack_instances role through ansible-playbook, without a cloud: the dry run, argument specs, and a
cloud name clouds.yaml does not have. The live tests are tests/openstack/test_instances.py."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan
from playbook_run import run_playbook

PLAYBOOK = {
    "name": "Apply openstack_instances",
    "hosts": "localhost",
    "connection": "local",
    "gather_facts": False,
    "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
    "roles": ["platbench.lab.openstack_instances"],
}


def cell(platform, scaleup, cpu_config, processor):
    labels = {"platform": platform, "scaleup": scaleup, "cpu_config": cpu_config, "processor": processor}
    return {"id": f"{platform}/{scaleup}/{cpu_config}/{processor}|r0", "labels": labels, "params": {}}


CELLS = [
    cell("nova", 2, "pin", "gpu"),
    cell("nova", 1, "vnl", "cpu"),
    cell("magnum", 1, "vnl", "cpu"),
    cell("bm", 1, "vnl", "cpu"),
]


@pytest.fixture
def setup(tmp_path):
    """A playbook applying the role, and a clouds.yaml whose only cloud answers nowhere (port 9 of 127.0.0.1)."""
    playbook = tmp_path / "apply.yml"
    playbook.write_text(yaml.safe_dump([PLAYBOOK]))
    clouds = tmp_path / "clouds.yaml"
    auth = {"auth_url": "http://127.0.0.1:9/v3", "username": "admin", "password": "pw-never-shown-4711"}
    clouds.write_text(yaml.safe_dump({"clouds": {"nowhere": {"auth": {**auth, "project_name": "admin"}}}}))
    return playbook, {"OS_CLIENT_CONFIG_FILE": str(clouds)}


def run(setup, tmp_path, variables):
    """ansible-playbook with the test's clouds.yaml (OS_CLIENT_CONFIG_FILE)."""
    playbook, env = setup
    return run_playbook(playbook, tmp_path, variables, env=env, timeout=180)


BASE = {
    "openstack_instances_cloud": "nowhere",
    "openstack_instances_campaign": "dry1",
    "openstack_instances_cells": CELLS,
    "openstack_instances_image_file": "/srv/images/debian.qcow2",
    "openstack_instances_magnum_external_network": "public",
}


def test_the_dry_run_prints_the_plan_and_touches_no_cloud(setup, tmp_path):
    done = run(setup, tmp_path, {**BASE, "openstack_instances_dry_run": True})
    assert done.rc == 0, done.output[-3000:]
    prefix = openstack_plan.campaign_prefix("dry1")
    specs = "hw:cpu_policy=dedicated, pci_passthrough:alias=nvidia-h100:1"
    assert f"flavor {prefix}nova-2-pin-gpu: 2 vCPU, 2048 MB, 20 GB; {specs}" in done.output
    assert f"server {prefix}nova-1-vnl-cpu of flavor {prefix}nova-1-vnl-cpu" in done.output
    assert f"Magnum cluster template {prefix}k8s (kubernetes, flannel)" in done.output
    assert "bm-" not in done.output
    # Nothing asked the cloud (it answers nowhere): no login, no creation.
    assert "Log in to cloud" not in done.output and "Create the flavors" not in done.output
    assert "pw-never-shown-4711" not in done.output


def test_a_network_driver_other_than_flannel_or_calico_is_refused_by_the_argument_specs(setup, tmp_path):
    done = run(setup, tmp_path, {**BASE, "openstack_instances_magnum_network_driver": "weave"})
    assert done.rc != 0
    assert "openstack_instances_magnum_network_driver" in done.output and "flannel, calico" in done.output


def test_a_cloud_name_clouds_yaml_does_not_have_is_named(setup, tmp_path):
    done = run(setup, tmp_path, {**BASE, "openstack_instances_cloud": "nope"})
    assert "nowhere" in (tmp_path / "clouds.yaml").read_text()
    assert done.rc != 0
    assert "openstack_instances_cloud: there is no cloud 'nope' in the clouds.yaml" in done.output, done.output[-3000:]
    # It stopped before anything could be created.
    assert "Create the flavors" not in done.output
    assert "pw-never-shown-4711" not in done.output


def test_a_setting_the_plan_refuses_is_named_in_the_output(setup, tmp_path):
    # The plan task itself hides its result (BMC credentials); its refusal must still reach the user.
    variables = {key: value for key, value in BASE.items() if key != "openstack_instances_image_file"}
    done = run(setup, tmp_path, variables)
    assert done.rc != 0
    assert "set openstack_instances_image_file (uploaded to glance) or openstack_instances_image_name" in done.output
    assert "Log in to cloud" not in done.output
