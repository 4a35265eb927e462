"""The openstack_deploy role, applied for real to a scratch configuration directory with the example
inventory of the Lin 2018 lab (one controller, three workers with two GPUs each): the files kolla-ansible
would read (globals.yml, passwords.yml, the multinode inventory, the nova/ironic/magnum overrides), the
kolla-ansible commands it runs, idempotence, and the bad inputs it stops on. No kolla-ansible is installed:
a stand-in virtualenv holds a kolla-ansible that records its arguments and the release's two data files."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter import kolla as kolla_filters
from ansible_collections.platbench.lab.plugins.plugin_utils.openstack import kolla
from playbook_run import ENV, REPO, run_playbook

INVENTORY = REPO / "inventories/examples/lin2018-openstack"
GPU_HOSTS = ["gpu1", "gpu2", "gpu3"]
H100 = {"vendor_id": "10de", "product_id": "2330"}
NOVA_DEFAULTS = list(kolla.NOVA_DEFAULT_FILTERS)
# A passwords template with one key of each kind kolla-ansible's releases have.
PASSWORDS_TEMPLATE = """\
database_password:
keystone_admin_password:
rbd_secret_uuid:
gnocchi_project_id:
barbican_crypto_key:
designate_rndc_key:
prometheus_bcrypt_salt:
docker_registry_password:
nova_ssh_key:
  private_key:
  public_key:
"""
# A multinode inventory shaped as kolla-ansible's: host groups, then service groups made of them.
RELEASE_INVENTORY = """\
# service layout of the release
[control]
control01

[network]
network01

[compute]
compute01

[monitoring]
monitoring01

[storage]
storage01

[deployment]
localhost       ansible_connection=local

[baremetal:children]
control
network
compute
storage
monitoring

[nova:children]
control

[nova-compute:children]
compute

[nova-compute-ironic:children]
nova

[ironic:children]
control
"""
# Where a release defines its variables: group_vars, roles' defaults, the documented (commented) globals.
RELEASE_VARIABLES = {
    "ansible/group_vars/all/common.yml": "openstack_release: x\nkolla_base_distro: x\nkolla_internal_vip_address: x\n"
    "network_interface: x\nnode_custom_config: x\nneutron_external_interface: x\nenable_haproxy: x\n"
    "nova_compute_virt_type: x\nenable_ironic: x\nenable_magnum: x\nenable_heat: x\n",
    "ansible/roles/ironic/defaults/main.yml": "ironic_dnsmasq_interface: x\nironic_dnsmasq_dhcp_ranges:\n"
    "ironic_cleaning_network:\n  nested_key_is_no_variable: x\n",
    "etc_examples/kolla/globals.yml": '#openstack_region_name: "RegionOne"\n',
}
FAKE_KOLLA_ANSIBLE = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.log"
"""
PLAY = [{"name": "Deploy", "hosts": "ctl1", "gather_facts": False, "roles": ["platbench.lab.openstack_deploy"]}]


def stand_in_venv(root):
    """A 'virtualenv' whose python is this test's, with the release's data files and a recording kolla-ansible."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    log = '"$(dirname "$0")/python.log"'
    (venv / "bin/python").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec "{sys.executable}" "$@"\n')
    (venv / "bin/kolla-ansible").write_text(FAKE_KOLLA_ANSIBLE)
    for name in ("python", "kolla-ansible"):
        (venv / "bin" / name).chmod(0o755)
    share = venv / "share/kolla-ansible"
    (share / "etc_examples/kolla").mkdir(parents=True)
    (share / "etc_examples/kolla/passwords.yml").write_text(PASSWORDS_TEMPLATE)
    (share / "ansible/inventory").mkdir(parents=True)
    (share / "ansible/inventory/multinode").write_text(RELEASE_INVENTORY)
    for path, text in RELEASE_VARIABLES.items():
        (share / path).parent.mkdir(parents=True, exist_ok=True)
        (share / path).write_text(text)
    return venv


def deploy(root, config_dir, *options, **variables):
    """The role on the example inventory's deployment host (connected locally), install off."""
    variables = {
        "ansible_connection": "local",
        "openstack_deploy_install": False,
        "openstack_deploy_venv": str(root / "venv"),
        "openstack_deploy_config_dir": str(config_dir),
        "openstack_deploy_steps": [],
        **variables,
    }
    # The configured interpreter is the weakest setting: the role's own for the passwords module wins.
    env = {"ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    return run_playbook(PLAY, root, variables, *options, inventory=INVENTORY, env=env, timeout=180)


def recap(run):
    """(changed, failed) of the deployment host."""
    return run.recap("ctl1")


def ini(path):
    """[(section, key, value)] in file order: repeated keys (nova's multi-valued options) stay apart."""
    entries, section = [], None
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        header = re.fullmatch(r"\[(.+)\]", line)
        if header:
            section = header.group(1)
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        entries.append((section, key, value))
    return entries


def values(path, section, key):
    return [value for found_section, found_key, value in ini(path) if (found_section, found_key) == (section, key)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The role applied twice to one configuration directory: both runs, the directory, the stand-in venv."""
    root = tmp_path_factory.mktemp("openstack_deploy")
    venv = stand_in_venv(root)
    config = root / "etc-kolla"
    first = deploy(root, config)
    assert recap(first)[1] == 0, first.output[-6000:]
    passwords_before = (config / "passwords.yml").read_text()
    second = deploy(root, config)
    return {"first": first, "second": second, "config": config, "venv": venv, "passwords": passwords_before}


# --- the files, as kolla-ansible reads them -------------------------------------------------------------------


def test_globals_enable_ironic_and_magnum_with_heat_on_kvm_for_the_pinned_series(built):
    found = yaml.safe_load((built["config"] / "globals.yml").read_text())
    assert found["openstack_release"] == "2026.1"  # kolla-ansible 22.2.0's series
    assert (found["enable_ironic"], found["enable_magnum"], found["enable_heat"]) == (True, True, True)
    assert found["nova_compute_virt_type"] == "kvm"
    assert (found["network_interface"], found["neutron_external_interface"]) == ("eno1", "eno2")
    assert (found["kolla_internal_vip_address"], found["enable_haproxy"]) == ("198.18.0.10", False)
    assert found["node_custom_config"] == str(built["config"] / "config")
    assert found["ironic_dnsmasq_interface"] == "eno1"
    assert found["ironic_dnsmasq_dhcp_ranges"] == [{"range": "198.18.8.100,198.18.8.200", "routers": "198.18.8.1"}]
    assert found["ironic_cleaning_network"] == "provisioning"
    # openstack_deploy_globals of the inventory reaches globals.yml
    assert found["openstack_region_name"] == "RegionOne"


@pytest.mark.parametrize("host", GPU_HOSTS)
def test_each_gpu_worker_gets_its_two_gpus_and_cpu_sets_in_its_own_nova_conf(built, host):
    path = built["config"] / "config/nova" / host / "nova.conf"
    specs = [json.loads(value) for value in values(path, "pci", "device_spec")]
    assert specs == [dict(H100, address="0000:3b:00.0"), dict(H100, address="0000:d8:00.0")]
    assert values(path, "compute", "cpu_dedicated_set") == ["4-31,36-63"]
    assert values(path, "compute", "cpu_shared_set") == ["0-3,32-35"]
    dedicated = kolla.parse_cpu_spec("4-31,36-63", "dedicated")
    assert not set(dedicated) & set(kolla.parse_cpu_spec("0-3,32-35", "shared"))


def test_the_controller_has_no_host_file_and_the_alias_reaches_api_and_compute(built):
    nova = built["config"] / "config/nova"
    assert sorted(path.name for path in nova.iterdir() if path.is_dir()) == GPU_HOSTS
    for service in ("nova-api", "nova-compute"):
        aliases = [json.loads(value) for value in values(nova / f"{service}.conf", "pci", "alias")]
        assert aliases == [dict(H100, name="nvidia-h100", device_type="type-PCI")]


def test_the_scheduler_keeps_novas_filters_and_adds_pci_passthrough_and_numa_topology(built):
    (filters,) = values(built["config"] / "config/nova/nova-scheduler.conf", "filter_scheduler", "enabled_filters")
    assert filters.split(",") == NOVA_DEFAULTS + ["PciPassthroughFilter", "NUMATopologyFilter"]


def test_ironic_provisions_on_its_network_with_ipxe_and_magnum_defaults_to_flannel(built):
    ironic = built["config"] / "config/ironic.conf"
    assert values(ironic, "neutron", "provisioning_network") == ["provisioning"]
    assert values(ironic, "neutron", "cleaning_network") == ["provisioning"]
    assert values(ironic, "DEFAULT", "default_boot_interface") == ["ipxe"]
    assert values(ironic, "DEFAULT", "enabled_network_interfaces") == ["flat,neutron"]
    assert values(ironic, "dhcp", "dhcp_provider") == ["neutron"]
    magnum = built["config"] / "config/magnum.conf"
    assert values(magnum, "cluster_template", "kubernetes_default_network_driver") == ["flannel"]
    assert values(magnum, "cluster_template", "kubernetes_allowed_network_drivers") == ["flannel,calico"]


def test_the_inventory_puts_our_hosts_in_the_releases_groups_and_ansible_reads_it(built):
    listed = subprocess.run(
        ["ansible-inventory", "-i", str(built["config"] / "multinode"), "--list"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    for group in ("control", "network", "monitoring", "storage"):
        assert found[group]["hosts"] == ["ctl1"], group
    assert found["compute"]["hosts"] == GPU_HOSTS
    assert found["deployment"]["hosts"] == ["localhost"]
    # the release's service groups are kept as they are
    assert found["nova-compute"]["children"] == ["compute"]
    assert found["nova-compute-ironic"]["children"] == ["nova"]
    assert sorted(found["baremetal"]["children"]) == ["compute", "control", "monitoring", "network", "storage"]
    hostvars = found["_meta"]["hostvars"]
    assert hostvars["gpu2"] == {"ansible_host": "198.18.0.12", "ansible_user": "root"}
    assert "control01" not in hostvars


def test_passwords_are_generated_once_mode_0600_each_of_its_kind(built):
    path = built["config"] / "passwords.yml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == built["passwords"]  # the second run kept them
    secrets = yaml.safe_load(path.read_text())
    assert set(secrets) == set(yaml.safe_load(PASSWORDS_TEMPLATE))
    assert re.fullmatch(r"[A-Za-z0-9]{40}", secrets["database_password"])
    assert secrets["database_password"] != secrets["keystone_admin_password"]
    for key in ("rbd_secret_uuid", "gnocchi_project_id"):
        assert str(uuid.UUID(secrets[key])) == secrets[key]
    assert len(base64.urlsafe_b64decode(secrets["barbican_crypto_key"])) == 32
    assert re.fullmatch(r"[0-9a-f]{32}", secrets["designate_rndc_key"])
    assert re.fullmatch(r"[./A-Za-z0-9]{22}", secrets["prometheus_bcrypt_salt"])
    assert secrets["docker_registry_password"] is None
    assert secrets["nova_ssh_key"]["private_key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert secrets["nova_ssh_key"]["public_key"].startswith("ssh-rsa ")
    # generated by the kolla-ansible virtualenv's python, which has PyYAML and cryptography
    assert (built["venv"] / "bin/python.log").exists()


def test_no_password_reaches_the_output(built):
    secrets = yaml.safe_load((built["config"] / "passwords.yml").read_text())
    words = [value for value in secrets.values() if isinstance(value, str)]
    words += [secrets["nova_ssh_key"]["public_key"].split()[1][:40]]
    for run in (built["first"], built["second"]):
        output = run.output
        assert "Generate passwords.yml" in output
        for word in words:
            assert word not in output


def test_a_second_run_changes_nothing_and_runs_no_kolla_ansible_step(built):
    assert recap(built["first"])[0] > 0
    assert "globals.yml sets" not in built["first"].output  # every variable is known
    assert recap(built["second"]) == (0, 0), built["second"].output[-4000:]
    assert not (built["venv"] / "bin/calls.log").exists()


# --- a new release, a changed inventory, the steps ------------------------------------------------------------


def test_a_new_releases_keys_are_added_and_the_old_values_kept(tmp_path):
    venv = stand_in_venv(tmp_path)
    template = venv / "share/kolla-ansible/etc_examples/kolla/passwords.yml"
    passwords = tmp_path / "passwords.yml"
    passwords.write_text("database_password: kept-as-it-was\n")
    passwords.chmod(0o644)
    module_args = json.dumps({"path": str(passwords), "template": str(template), "ssh_key_bits": 2048})
    ran = subprocess.run(
        ["ansible", "localhost", "-c", "local", "-m", "platbench.lab.kolla_passwords", "-a", module_args],
        cwd=REPO,
        env=dict(ENV, ANSIBLE_PYTHON_INTERPRETER=sys.executable),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = yaml.safe_load(passwords.read_text())
    assert found["database_password"] == "kept-as-it-was"
    assert set(found) == set(yaml.safe_load(PASSWORDS_TEMPLATE))
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    assert "keystone_admin_password" in ran.stdout and found["keystone_admin_password"] not in ran.stdout


def test_overrides_the_inventory_no_longer_asks_for_are_removed_and_steps_run_in_order(tmp_path):
    venv = stand_in_venv(tmp_path)
    config = tmp_path / "etc-kolla"
    assert recap(deploy(tmp_path, config))[1] == 0
    (config / "config/nova/other.conf").write_text("[DEFAULT]\ndebug = true\n")  # not ours: left alone
    (config / "config/ironic").mkdir()
    for name in ("ironic-agent.kernel", "ironic-agent.initramfs"):
        (config / "config/ironic" / name).write_text("agent\n")
    run = deploy(
        tmp_path,
        config,
        openstack_deploy_pci_aliases=[],
        openstack_deploy_enable_magnum=False,
        openstack_deploy_steps=["deploy", "prechecks", "bootstrap-servers", "post-deploy"],
        openstack_deploy_globals={"enable_magnun": True, "nested_key_is_no_variable": 1},
    )
    assert recap(run)[1] == 0, run.output[-4000:]
    output = " ".join(run.output.split())
    for typo, hint in (("enable_magnun", " (did you mean enable_magnum?)"), ("nested_key_is_no_variable", "")):
        assert (
            f"globals.yml sets {typo}, which this kolla-ansible release does not define, so it has no effect{hint};"
            in output
        )
    assert not (config / "config/nova/nova-api.conf").exists() and not (config / "config/magnum.conf").exists()
    assert (config / "config/nova/other.conf").exists() and (config / "config/nova/gpu1/nova.conf").exists()
    (filters,) = values(config / "config/nova/nova-scheduler.conf", "filter_scheduler", "enabled_filters")
    assert filters.split(",") == NOVA_DEFAULTS + ["NUMATopologyFilter"]
    common = f"-i {config}/multinode --configdir {config} --passwords {config}/passwords.yml"
    calls = (venv / "bin/calls.log").read_text().splitlines()
    assert calls == [f"{step} {common}" for step in ("bootstrap-servers", "prechecks", "deploy", "post-deploy")]


def test_check_mode_writes_nothing(tmp_path):
    stand_in_venv(tmp_path)
    config = tmp_path / "etc-kolla"
    run = deploy(tmp_path, config, "--check", openstack_deploy_steps=["bootstrap-servers"])
    assert recap(run)[1] == 0, run.output[-4000:]
    assert not config.exists() and not (tmp_path / "venv/bin/calls.log").exists()


# --- bad input: stopped before anything is written ------------------------------------------------------------


@pytest.mark.parametrize(
    "variables, says",
    [
        (
            {"openstack_deploy_pci_aliases": [{"name": "nvidia-a100", "vendor_id": "10de", "product_id": "20b5"}]},
            "openstack_deploy_pci_aliases[0] (nvidia-a100) asks for 10de:20b5, which no compute host has",
        ),
        (
            {"openstack_deploy_cpu_shared_set": "0-5"},
            "openstack_deploy_cpu_dedicated_set and openstack_deploy_cpu_shared_set of gpu1 overlap on CPUs 4,5",
        ),
        (
            {"openstack_deploy_gpus": [{"address": "0000:3b:00.0"}]},
            "openstack_deploy_gpus[0] of gpu1 ({'address': '0000:3b:00.0'}) has no valid vendor_id or product_id",
        ),
        ({"openstack_deploy_magnum_network_driver": "weave"}, "openstack_deploy_magnum_network_driver is 'weave'"),
        ({"openstack_deploy_ironic_dhcp_ranges": []}, "openstack_deploy_ironic_dhcp_ranges is empty"),
        ({"openstack_deploy_steps": ["deploy", "upgrade"]}, "openstack_deploy_steps"),
        (
            {"openstack_deploy_steps": ["prechecks"]},
            "Ironic is enabled (openstack_deploy_enable_ironic) but {config}/config/ironic/ironic-agent.kernel and "
            "{config}/config/ironic/ironic-agent.initramfs do not exist",
        ),
        ({"openstack_deploy_kolla_groups": {"storage": ["nas1"]}}, "nas1 is in a kolla-ansible host group"),
    ],
    ids=[
        "alias-no-host-has",
        "cpu-sets-overlap",
        "gpu-without-ids",
        "magnum-driver",
        "no-dhcp-range",
        "step",
        "no-ironic-agent",
        "unknown-host",
    ],
)
def test_bad_inputs_stop_with_a_message_naming_the_setting_and_write_nothing(tmp_path, variables, says):
    stand_in_venv(tmp_path)
    config = tmp_path / "etc-kolla"
    run = deploy(tmp_path, config, **variables)
    assert run.rc != 0
    assert says.replace("{config}", str(config)) in run.output, run.output[-3000:]
    assert not config.exists()


# --- the Python that computes them -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, series", [("16.0.0", "2023.1"), ("19.4.0", "2024.2"), ("22.2.0", "2026.1"), ("23.0.0", "2026.2")]
)
def test_the_series_follows_the_kolla_ansible_major_version(version, series):
    assert kolla.openstack_series(version) == series


@pytest.mark.parametrize("version", ["15.6.0", "22", "latest", "22.2"])
def test_a_version_that_is_no_exact_known_release_names_the_setting(version):
    with pytest.raises(ValueError, match="openstack_deploy_kolla_version"):
        kolla.openstack_series(version)


def test_nova_cpu_specs_take_ranges_and_exclusions():
    assert kolla.parse_cpu_spec("4-7,^5, 10", "x") == [4, 6, 7, 10]
    assert kolla.parse_cpu_spec("", "x") == []
    with pytest.raises(ValueError, match="openstack_deploy_cpu_shared_set of gpu1: '7-4'"):
        kolla.parse_cpu_spec("7-4", "openstack_deploy_cpu_shared_set of gpu1")


def settings(**more):
    base = {
        "kolla_version": "22.2.0",
        "config_dir": "/etc/kolla",
        "control_group": "controllers",
        "compute_group": "computes",
        "control_hosts": ["ctl1"],
        "compute_hosts": ["gpu1"],
        "base_distro": "ubuntu",
        "internal_vip": "198.18.0.250",
        "external_vip": "",
        "enable_haproxy": True,
        "network_interface": "eth0",
        "neutron_external_interface": "eth1",
        "virt_type": "kvm",
        "enable_ironic": False,
        "enable_magnum": True,
        "magnum_network_driver": "flannel",
        "pci_aliases": [dict(H100, name="h100")],
        "scheduler_filters": NOVA_DEFAULTS,
        "globals": {},
        "ironic": {},
    }
    return {**base, **more}


def hosts(gpus=None, dedicated="", shared="", address="198.18.0.11"):
    return {
        "ctl1": {
            "gpus": [],
            "cpu_dedicated_set": "",
            "cpu_shared_set": "",
            "connection": {"ansible_host": "198.18.0.10"},
            "kolla_vars": {},
        },
        "gpu1": {
            "gpus": [H100, H100] if gpus is None else gpus,
            "cpu_dedicated_set": dedicated,
            "cpu_shared_set": shared,
            "connection": {"ansible_host": address},
            "kolla_vars": {"network_interface": "eno2"},
        },
    }


def test_the_inventorys_globals_have_the_last_word_mapping_by_mapping():
    layered = kolla.globals_yml(
        settings(globals={"nova_compute_virt_type": "qemu", "neutron_external_interface": "bond1", "extra": {"a": 1}})
    )
    assert layered["nova_compute_virt_type"] == "qemu" and layered["neutron_external_interface"] == "bond1"
    assert layered["enable_heat"] is True and layered["extra"] == {"a": 1}
    merged = kolla.merged({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"c": 3}, "l": [2]})
    assert merged == {"a": {"b": 1, "c": 3}, "l": [2]}


def test_a_clean_input_has_no_problem_and_gpus_without_addresses_give_one_spec_per_model():
    assert kolla.problems(settings(), hosts()) == []
    assert kolla.device_specs([H100, H100]) == ['{"product_id": "2330", "vendor_id": "10de"}']
    assert kolla.device_specs([{"vendor_id": "0x10DE", "product_id": "2330"}]) == [
        '{"product_id": "2330", "vendor_id": "10de"}'
    ]


@pytest.mark.parametrize(
    "changes, host_changes, says",
    [
        ({"globals": {"enable_heat": "no"}}, {}, "sets enable_heat to false while Magnum is enabled"),
        ({"internal_vip": "198.18.0.10"}, {}, "openstack_deploy_internal_vip 198.18.0.10 is the address of ctl1"),
        ({"internal_vip": "vip.example"}, {}, "openstack_deploy_internal_vip is 'vip.example'"),
        ({"pci_aliases": [dict(H100, name="h100")] * 2}, {}, "the alias name 'h100' is given twice"),
        ({"pci_aliases": [dict(H100, name="h100", device_type="type-GPU")]}, {}, "device_type must be one of"),
        ({"compute_hosts": []}, {}, "the inventory group computes (openstack_deploy_compute_group) has no host"),
        ({}, {"dedicated": "0-3", "shared": "2-5,^3"}, "overlap on CPUs 2"),
        ({}, {"shared": "a-b"}, "openstack_deploy_cpu_shared_set of gpu1: 'a-b' is not a CPU list"),
        (
            {"enable_ironic": True, "ironic": {"dhcp_ranges": [{"range": "198.18.8.200,198.18.8.100"}]}},
            {},
            "openstack_deploy_ironic_dhcp_ranges[0]: range '198.18.8.200,198.18.8.100' must be 'FIRST,LAST'",
        ),
    ],
)
def test_problems_name_the_setting(changes, host_changes, says):
    found = kolla.problems(settings(**changes), hosts(**host_changes))
    assert any(says in problem for problem in found), found


def test_override_files_refuse_what_kollas_templating_would_rewrite():
    with pytest.raises(ValueError, match="kolla-ansible's templating"):
        kolla.ini_text([("pci", [("alias", '{"name": "{{ x }}"}')])])
    assert kolla.ini_text([("a", [("k", True)]), ("empty", [])]).endswith("\n[a]\nk = true\n")


def test_the_release_inventory_must_have_kollas_host_groups_and_host_variables_no_blanks():
    with pytest.raises(ValueError, match=r"no \[deployment\] group"):
        kolla.multinode_inventory("[control]\n[network]\n[compute]\n[monitoring]\n[storage]\n", {}, {})
    data = hosts()
    data["ctl1"]["kolla_vars"] = {"api_interface": "eth 0"}
    with pytest.raises(ValueError, match="has a blank"):
        kolla.multinode_inventory(RELEASE_INVENTORY, {"control": ["ctl1"]}, data)
    text = kolla.multinode_inventory(RELEASE_INVENTORY, {"compute": ["gpu1"]}, hosts())
    assert "\n[compute]\ngpu1 ansible_host=198.18.0.11 network_interface=eno2\n" in text
    assert "# service layout" not in text and os.linesep.join(["[nova:children]", "control"]) in text


def test_the_filters_answer_bad_arguments_with_the_filters_name():
    with pytest.raises(AnsibleFilterError, match="kolla_globals: expected the role's settings"):
        kolla_filters.kolla_globals(["not", "settings"])
    with pytest.raises(AnsibleFilterError, match="kolla_problems: missing setting 'internal_vip'"):
        kolla_filters.kolla_problems({k: v for k, v in settings().items() if k != "internal_vip"}, hosts())
    with pytest.raises(AnsibleFilterError, match="kolla_host_settings: hosts must be a list"):
        kolla_filters.kolla_host_settings({}, "gpu1")
    with pytest.raises(AnsibleFilterError, match="kolla_host_settings: nas1 is in a kolla-ansible host group"):
        kolla_filters.kolla_host_settings({}, ["nas1"])
    with pytest.raises(AnsibleFilterError, match="kolla_config_overrides: .* kolla-ansible's templating"):
        kolla_filters.kolla_config_overrides(settings(pci_aliases=[dict(H100, name="{{ gpu }}")]), hosts())
    assert set(kolla_filters.FilterModule().filters()) == {
        "kolla_host_settings",
        "kolla_problems",
        "kolla_globals",
        "kolla_config_overrides",
        "kolla_multinode_inventory",
    }
