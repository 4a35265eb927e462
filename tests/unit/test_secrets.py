"""No OpenStack password, Kubernetes join token or registry credential reaches any output, run.json or sample, at
-vvv: one ansible-playbook run, no lab and no cloud, through the real paths that handle each secret, with planted
values where a user keeps them:

- OpenStack: clouds.yaml's password and OS_PASSWORD, the Ironic nodes' BMC password (driver_info); the
  openstack_instances role provisioning, then deleting, a campaign on a cloud that does not answer (127.0.0.1:9) -
  its plan (which holds driver_info), its login, its failure messages;
- Kubernetes: the bootstrap token of the kubernetes role's join (join.yml: the token created on the control plane,
  the JoinConfiguration written, kubeadm join), against a stand-in kubeadm that checks the token reached it;
- a registry credential: kolla-ansible's docker_registry_password in passwords.yml, which
  platbench.lab.kolla_passwords keeps (run here without the no_log the role gives it: the module itself never returns
  a value);
- and a campaign recorded meanwhile (a nova cell whose server failed, through platform_run's cell.yml, record_cell
  and the results callback), so that run.json and samples.jsonl exist to be searched.

Then every output (ansible-playbook's at -vvv, its log file, ansible-runner's events) and every file the run wrote
are searched for each planted value. What the test itself wrote (inputs/, ansible-runner's env/) holds them, and only
that. The cloud's provisioning with a real cloud at default verbosity: tests/openstack/test_instances.py; the token's
JoinConfiguration removed: tests/unit/test_kubernetes_role.py."""

from __future__ import annotations

import json
import secrets
import stat
from pathlib import Path

import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import openstack_plan
from playbook_run import ANSIBLE_ENV, run_playbook

CAMPAIGN = "secrets1"
# Planted values: each unlike anything else the run prints.
OPENSTACK_PASSWORD = "os-pw-" + secrets.token_hex(12)
OS_ENV_PASSWORD = "os-env-pw-" + secrets.token_hex(12)
BMC_PASSWORD = "bmc-pw-" + secrets.token_hex(12)
JOIN_TOKEN = f"{secrets.token_hex(3)}.{secrets.token_hex(8)}"
REGISTRY_PASSWORD = "registry-pw-" + secrets.token_hex(12)
INSTANCE_PASSWORD = "instance-ssh-pw-" + secrets.token_hex(12)  # the campaign's servers' SSH password
PLANTED = {
    "OpenStack password (clouds.yaml)": OPENSTACK_PASSWORD,
    "OpenStack password (OS_PASSWORD)": OS_ENV_PASSWORD,
    "BMC password (driver_info)": BMC_PASSWORD,
    "Kubernetes join token": JOIN_TOKEN,
    "the join token's secret half": JOIN_TOKEN.split(".")[1],
    "registry password": REGISTRY_PASSWORD,
    "an instance's SSH password": INSTANCE_PASSWORD,
}
CA_HASH = "sha256:" + "5e" * 32
# kubeadm on the control plane and on the worker: `token create --print-join-command` prints the join command with
# the token; `join --config FILE` succeeds only when FILE holds the token, and says so in a file of its own.
KUBEADM = f"""#!/bin/sh
case "$1" in
  token) echo "kubeadm join 127.0.0.1:6443 --token {JOIN_TOKEN} --discovery-token-ca-cert-hash {CA_HASH}" ;;
  join) grep -q "{JOIN_TOKEN}" "$3" && touch "$(dirname "$0")/../joined" ;;
  *) exit 2 ;;
esac
"""
LABELS = {
    "experiment": "secrets",
    "platform": "nova",
    "scaleup": 1,
    "cpu_config": "vnl",
    "processor": "cpu",
    "workload": "cnn_train",
    "framework": "tensorflow",
    "model": "tiny",
    "repeat": 0,
}
CELL = {"id": "nova/1/vnl/cpu|r0", "scenario": "nova/1/vnl/cpu", "params": {"framework": "tensorflow"}}
IRONIC_CELL = {**CELL, "id": "ironic/1/vnl/cpu|r0", "scenario": "ironic/1/vnl/cpu"}
FAULT = "nova: No valid host was found. There are not enough hosts available."


def cells():
    """The two cells as cells_to_run hands them to cell.yml: sized (their cores are their flavors')."""
    nova = sizing.sized({**CELL, "labels": LABELS}, {})
    ironic = sizing.sized({**IRONIC_CELL, "labels": {**LABELS, "platform": "ironic"}}, {})
    return nova, ironic


def openstack_role(state):
    """The openstack_instances role as experiment.yml (present) and teardown.yml (absent) apply it; the cloud does
    not answer, so it fails: rescued, the run goes on."""
    return {
        "name": f"Apply openstack_instances, state {state}, on a cloud that does not answer",
        "block": [
            {
                "name": f"Apply openstack_instances ({state})",
                "ansible.builtin.include_role": {"name": "platbench.lab.openstack_instances"},
                "vars": {"openstack_instances_state": state},
            }
        ],
        "rescue": [{"name": f"Go on after openstack_instances ({state})", "ansible.builtin.debug": {"msg": "rescued"}}],
    }


def plays(inputs, results):
    nova, ironic = cells()
    instance = openstack_plan.instance_name(CAMPAIGN, LABELS)
    local = {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    return [
        {
            "name": "OpenStack: provision, then delete, the campaign's instances",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                **local,
                "openstack_instances_cloud": "nowhere",
                "openstack_instances_campaign": CAMPAIGN,
                "openstack_instances_cells": [nova, ironic],
                "openstack_instances_image_file": str(inputs / "disk.raw"),
            },
            "tasks": [openstack_role("present"), openstack_role("absent")],
        },
        {
            "name": "Kubernetes: a worker joins with a bootstrap token",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                **local,
                "kubernetes_control_plane_host": "localhost",
                "kubernetes_node_name": "k8s-worker1",
                "kubernetes_join_config_path": str(inputs / "join.yaml"),
            },
            "tasks": [
                {
                    "name": "Join the cluster as the kubernetes role does",
                    "ansible.builtin.include_role": {"name": "platbench.lab.kubernetes", "tasks_from": "join"},
                }
            ],
        },
        {
            "name": "A registry credential: kolla-ansible's passwords.yml",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": local,
            "tasks": [
                {
                    "name": "Keep passwords.yml, adding the keys a release asks for",
                    "platbench.lab.kolla_passwords": {
                        "path": str(inputs / "passwords.yml"),
                        "template": str(inputs / "passwords-template.yml"),
                    },
                    "register": "kolla_passwords",
                },
                {
                    "name": "Show what the module returned",
                    "ansible.builtin.debug": {"var": "kolla_passwords"},
                },
            ],
        },
        {
            "name": "Add the nova cell's server, which did not come up, as openstack_instances does",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Add it",
                    "ansible.builtin.add_host": {
                        "name": instance,
                        "groups": ["platbench_nova_failed"],
                        "platbench_platform": "nova",
                        "platbench_openstack_failure": FAULT,
                    },
                }
            ],
        },
        {
            "name": "Run and record the cell as platform_run does",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": local,
            "tasks": [
                {"name": "Read the facts", "platbench.lab.host_facts": {}},
                {
                    "name": "Run the cell",
                    "ansible.builtin.include_role": {"name": "platbench.lab.platform_run", "tasks_from": "cell.yml"},
                    "vars": {
                        "platform_run_cell": nova,
                        "platform_run_plan": {"name": "secrets", "cells": [nova]},
                        "platform_run_campaign": CAMPAIGN,
                        "platform_run_results_dir": str(results / CAMPAIGN),
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


def write_inputs(inputs):
    """Everything that holds a planted value, as a user would keep it: clouds.yaml, the inventory, kubeadm, the
    passwords file."""
    (inputs / "bin").mkdir(parents=True)
    (inputs / "bin" / "kubeadm").write_text(KUBEADM)
    (inputs / "bin" / "kubeadm").chmod(0o755)
    (inputs / "disk.raw").write_bytes(b"\0" * 1024)
    auth = {"auth_url": "http://127.0.0.1:9/v3", "username": "admin", "password": OPENSTACK_PASSWORD}
    clouds = {"clouds": {"nowhere": {"auth": {**auth, "project_name": "admin"}}}}
    (inputs / "clouds.yaml").write_text(yaml.safe_dump(clouds))
    node = {
        "name": "node0",
        "driver": "ipmi",
        "driver_info": {"ipmi_address": "198.18.41.1", "ipmi_username": "admin", "ipmi_password": BMC_PASSWORD},
        "nics": [{"mac": "52:54:00:12:34:56"}],
    }
    host = {"ansible_connection": "local", "openstack_instances_ironic_nodes": [node]}
    # The campaign's servers log in with a password of the inventory's (add_host puts them in these groups).
    servers = {"vars": {"ansible_password": INSTANCE_PASSWORD}}
    groups = {"platbench_nova": servers, "platbench_nova_failed": servers}
    inventory = {"hosts": {"localhost": host}, "children": groups}
    (inputs / "hosts.yml").write_text(yaml.safe_dump({"all": inventory}))
    (inputs / "passwords-template.yml").write_text("database_password:\ndocker_registry_password:\n")
    (inputs / "passwords.yml").write_text(yaml.safe_dump({"docker_registry_password": REGISTRY_PASSWORD}))
    (inputs / "passwords.yml").chmod(0o600)


def test_no_secret_reaches_any_output_run_json_or_sample_at_vvv(tmp_path):
    inputs, results = tmp_path / "inputs", tmp_path / "results"
    write_inputs(inputs)
    env = {
        "OS_CLIENT_CONFIG_FILE": str(inputs / "clouds.yaml"),
        "OS_PASSWORD": OS_ENV_PASSWORD,
        "PATH": f"{inputs / 'bin'}:{ANSIBLE_ENV['PATH']}",
        "ANSIBLE_LOG_PATH": str(tmp_path / "ansible.log"),
    }
    run = run_playbook(plays(inputs, results), tmp_path, {}, "-vvv", inventory=inputs / "hosts.yml", env=env)
    assert run.rc == 0, run.output[-6000:]

    # Each path really ran with its secret: the cloud was asked and refused the run, the token reached kubeadm join
    # (and its JoinConfiguration is gone), the registry password was kept, the cell was recorded.
    output = run.output
    assert "Log in to cloud nowhere" in output and "Find which services the cloud offers" in output
    assert output.count("rescued") >= 2
    assert (inputs / "joined").exists() and not (inputs / "join.yaml").exists()
    kept = yaml.safe_load((inputs / "passwords.yml").read_text())
    assert kept["docker_registry_password"] == REGISTRY_PASSWORD and kept["database_password"]
    assert stat.S_IMODE((inputs / "passwords.yml").stat().st_mode) == 0o600
    assert run.results("Keep passwords.yml, adding the keys a release asks for")[0]["added"] == ["database_password"]
    campaign = results / CAMPAIGN
    (sample,) = [json.loads(line) for line in (campaign / "samples.jsonl").read_text().splitlines()]
    assert sample["metric"] == "failed" and FAULT in sample["metadata"]["error"]
    assert json.loads((campaign / "run.json").read_text())["campaign"] == CAMPAIGN
    assert "<localhost> EXEC" in output  # -vvv: every command Ansible ran is shown

    planted = {**PLANTED, "a generated database password": kept["database_password"]}
    searched = {"ansible-playbook's output": output}
    for path in sorted(tmp_path.rglob("*")):
        # The test's inputs, and ansible-runner's copies of them: env/ (the extra variables and environment given)
        # and artifacts/<run>/command (its command line and the whole environment it started ansible-playbook with).
        parts = path.relative_to(tmp_path).parts
        written_by_the_test = path.is_relative_to(inputs) or "env" in parts or parts[-1] == "command"
        if path.is_file() and not written_by_the_test:
            searched[str(path.relative_to(tmp_path))] = path.read_text(errors="replace")
    assert {"results/secrets1/run.json", "results/secrets1/samples.jsonl", "ansible.log"} <= set(searched)
    assert any("job_events" in name for name in searched)  # ansible-runner's events, each task's result
    leaks = [(what, where) for what, value in planted.items() for where, text in searched.items() if value in text]
    assert leaks == []
    # The inputs do hold them: the search looks for what is really there.
    held = "".join(path.read_text() for path in inputs.rglob("*") if path.is_file() and path.suffix != ".raw")
    assert all(value in held for what, value in PLANTED.items() if what != "OpenStack password (OS_PASSWORD)")


def test_the_planted_values_are_found_when_they_are_printed(tmp_path):
    """The same search over a run that prints a planted value (a debug task of the test's own) finds it: the search
    fails when a secret is shown."""
    plays = [
        {
            "name": "Print a secret",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": [{"name": "Show it", "ansible.builtin.debug": {"msg": "{{ lookup('env', 'X') }}"}}],
        }
    ]
    run = run_playbook(plays, tmp_path, {}, "-vvv", env={"X": JOIN_TOKEN})
    assert run.rc == 0 and JOIN_TOKEN in run.output
    events = [path for path in Path(tmp_path).rglob("*.json") if "job_events" in str(path)]
    assert any(JOIN_TOKEN in path.read_text() for path in events)
