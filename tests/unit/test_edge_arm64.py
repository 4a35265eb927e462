"""The edge profile (Samani 2022's 4-core arm64 device): what the lab builds per architecture, and a check-mode
run against inventories/examples/edge-arm64 with aarch64 facts injected, as no arm64 machine is at hand.

The check-mode run applies the wheelhouse role itself (its pip download only says what it would run) and reads
the workload image's debootstrap architecture from the role's own defaults, with the injected facts; the parts
that do not build on arm64 (the KVM host, the guest image, Apptainer's .deb) must refuse it by their prechecks."""

from __future__ import annotations

import sys

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter.architectures import (
    debian_arch,
    wheel_platforms,
    wheelhouse_download_problem,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import load_experiment
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.lab.identities import wheelhouse_name
from playbook_run import REPO, run_playbook

EDGE_INVENTORY = REPO / "inventories/examples/edge-arm64"
EXPERIMENTS = REPO / "experiments"
# The tags every release before the edge profile downloaded for: x86_64 hosts keep them, and their wheelhouses.
X86_64_TAGS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]
AARCH64_TAGS = [
    "manylinux_2_28_aarch64",
    "manylinux_2_27_aarch64",
    "manylinux_2_17_aarch64",
    "manylinux2014_aarch64",
    "linux_aarch64",
]
# What the ARM facts of a Raspberry Pi running Debian 12 arm64 say (setup's names).
PI_FACTS = {
    "architecture": "aarch64",
    "userspace_architecture": "aarch64",
    "os_family": "Debian",
    "distribution": "Debian",
    "distribution_major_version": "12",
    "distribution_release": "bookworm",
    "processor_vcpus": 4,
    "processor_nproc": 4,
}


def test_x86_64_keeps_its_tags_and_aarch64_gets_its_own():
    assert wheel_platforms("x86_64") == X86_64_TAGS
    assert wheel_platforms("aarch64") == AARCH64_TAGS
    assert (debian_arch("x86_64"), debian_arch("aarch64")) == ("amd64", "arm64")


@pytest.mark.parametrize("arch_filter", [wheel_platforms, debian_arch])
def test_an_architecture_the_lab_does_not_build_is_refused_naming_those_it_does(arch_filter):
    with pytest.raises(AnsibleFilterError, match=r"builds for x86_64, aarch64; this host's architecture is armv7l"):
        arch_filter("armv7l")


def test_an_aarch64_wheelhouse_lives_beside_the_x86_64_one_whose_name_is_unchanged():
    requirements = ["numpy==2.4.6", "torch==2.13.0"]
    x86 = wheelhouse_name(requirements, "3.11")
    assert wheelhouse_name(requirements, "3.11", "x86_64") == x86
    assert wheelhouse_name(requirements, "3.11", "aarch64") == f"{x86}-aarch64"


def test_a_download_without_an_aarch64_wheel_names_the_requirement_and_how_to_supply_one():
    pip_output = (
        "ERROR: Could not find a version that satisfies the requirement mlcommons-loadgen==6.0.17 "
        "(from versions: none)\nERROR: No matching distribution found for mlcommons-loadgen==6.0.17\n"
    )
    message = wheelhouse_download_problem(pip_output, "aarch64", AARCH64_TAGS)
    assert message.startswith("No wheel for aarch64 (manylinux_2_28_aarch64, ")
    assert "of: mlcommons-loadgen==6.0.17." in message
    assert "PIP_FIND_LINKS=DIR" in message
    # Any other failure passes pip's own last lines on.
    other = wheelhouse_download_problem("ERROR: HTTP error 503 while getting https://…\n", "x86_64", X86_64_TAGS)
    assert other.startswith("pip download failed for x86_64 (") and other.endswith(
        "HTTP error 503 while getting https://…"
    )


def refused(name, role, tasks_from="precheck", **variables):
    """A block that applies a role's precheck and keeps its message in a fact when it refuses the host."""
    return {
        "name": f"Apply {role}'s precheck",
        "block": [
            {
                "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
                "vars": variables,
            },
            {"ansible.builtin.set_fact": {name: "accepted"}},
        ],
        "rescue": [{"ansible.builtin.set_fact": {name: "{{ ansible_failed_result.msg }}"}}],
    }


def test_check_mode_against_the_edge_inventory_builds_for_arm64_and_refuses_the_x86_64_parts(tmp_path):
    plays = [
        {
            "name": "The edge device, with the facts of an arm64 Pi",
            "hosts": "edge1",
            "gather_facts": False,
            "tasks": [
                {"name": "Inject the Pi's facts", "inject_facts": {"facts": PI_FACTS}},
                {
                    "name": "Build the wheelhouse of the inventory's requirements",
                    "ansible.builtin.include_role": {"name": "platbench.lab.wheelhouse", "public": True},
                    "vars": {"wheelhouse_dir": str(tmp_path / "wheelhouse")},
                },
                {
                    "name": "Read the workload image's defaults",
                    "ansible.builtin.include_vars": {"file": str(REPO / "roles/workload_image/defaults/main.yml")},
                },
                refused("kvm_host_refusal", "platbench.lab.kvm_host"),
                refused("guest_image_refusal", "platbench.lab.guest_image"),
                refused("apptainer_refusal", "platbench.lab.apptainer", apptainer_source="deb"),
                {
                    "name": "Say what the roles would use",
                    "ansible.builtin.debug": {
                        "msg": {
                            "platforms": "{{ wheelhouse_platforms }}",
                            "path": "{{ wheelhouse_path }}",
                            "debootstrap_arch": "{{ workload_image_debootstrap_arch }}",
                            "kvm_host": "{{ kvm_host_refusal }}",
                            "guest_image": "{{ guest_image_refusal }}",
                            "apptainer": "{{ apptainer_refusal }}",
                        }
                    },
                },
            ],
        }
    ]
    # The inventory's host, reached locally: extra vars outrank its ansible_host, user and become.
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}
    run = run_playbook(plays, tmp_path, local, "--check", inventory=EDGE_INVENTORY, timeout=120)
    assert run.rc == 0, run.output[-6000:]

    download = run.results("Run pip download")
    assert len(download) == 1, run.output[-4000:]
    argv = download[0]["cmd"]
    assert [arg for arg in argv if arg.startswith("--platform=")] == [f"--platform={tag}" for tag in AARCH64_TAGS]
    # The inventory's aarch64 list: plain tensorflow (CPU-only on aarch64), not tensorflow-cpu (no aarch64 wheel).
    assert "tensorflow==2.21.0" in argv and "tensorflow-cpu==2.21.0" not in argv

    said = run.results("Say what the roles would use")[0]["msg"]
    assert said["platforms"] == AARCH64_TAGS
    assert said["path"].endswith("-aarch64")
    assert not (tmp_path / "wheelhouse").exists()  # check mode: nothing downloaded or written
    assert said["debootstrap_arch"] == "arm64"
    assert "platbench.lab.kvm_host runs x86_64 guests" in said["kvm_host"]
    assert "edge1 is aarch64" in said["kvm_host"]
    assert "builds x86_64 Debian guests" in said["guest_image"] and "on aarch64" in said["guest_image"]
    assert "the release .deb (amd64) on Debian" in said["apptainer"] and "Debian on aarch64" in said["apptainer"]


def test_the_image_passes_its_architecture_to_debootstrap():
    tasks = yaml.safe_load((REPO / "roles/workload_image/tasks/base.yml").read_text())
    block = next(task for task in tasks if task["name"].startswith("Build the base image"))["block"]
    debootstrap = next(task for task in block if task["name"] == "Bootstrap a minimal Debian root")
    assert "--arch={{ workload_image_debootstrap_arch }}" in debootstrap["ansible.builtin.command"]["argv"]


def test_the_edge_inventory_offers_bm_and_cn_with_no_reserved_core():
    hosts = yaml.safe_load((EDGE_INVENTORY / "hosts.yml").read_text())["all"]["children"]
    settings = yaml.safe_load((EDGE_INVENTORY / "group_vars/all.yml").read_text())
    assert settings["platbench_platforms"] == ["bm", "cn"]
    assert settings["platbench_reserved_cpus"] == []
    assert "platbench_vm_hosts" not in hosts and "platbench_apptainer_hosts" not in hosts
    assert hosts["platbench_runners"]["hosts"] == {"edge1": None}


def edge_cells(**overrides):
    experiment = load_experiment(EXPERIMENTS, "samani2022-edge", overrides=overrides or None, size="small")
    return experiment, expand(experiment)


def test_the_edge_experiment_plans_bm_and_cn_unpinned_at_a_fixed_scale_up():
    # scaleup is set to a number here so that this plan needs nothing beyond today's validator; the file's own
    # `all` is checked below.
    experiment, cells = edge_cells(scaleup=[4])
    assert experiment["platforms"] == ["bm", "cn"] and experiment["cpu_config"] == ["vnl"]
    assert {cell["labels"]["platform"] for cell in cells} == {"bm", "cn"}
    assert {cell["labels"]["cpu_config"] for cell in cells} == {"vnl"}
    assert {cell["params"]["framework"] for cell in cells} == {"torch"}
    assert experiment["repeats"] == 2 and experiment["params"]["requests"] == 32


def test_the_edge_experiment_gives_the_instance_every_core():
    # Needs relative scale-ups (`scaleup: [all]`) in the experiment validator.
    experiment, cells = edge_cells()
    assert experiment["scaleup"] == ["all"]
    assert {cell["labels"]["platform"] for cell in cells} == {"bm", "cn"}
