"""The build identities keep the names earlier releases gave (a second site.yml after an upgrade rebuilds nothing):
values pinned from a lab built by 0.8.0, and the roles' defaults render them through the filters."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils.lab.identities import base_image_tag, wheelhouse_name
from playbook_run import REPO

SETTINGS = yaml.safe_load((REPO / "inventories/local/group_vars/all.yml").read_text())
IMAGE_DEFAULTS = yaml.safe_load((REPO / "roles/workload_image/defaults/main.yml").read_text())


def test_the_base_image_keeps_the_tag_0_8_0_gave_it():
    packages = IMAGE_DEFAULTS["workload_image_base_packages"] + IMAGE_DEFAULTS["workload_image_micro_packages"]
    assert base_image_tag("bookworm", packages) == "bookworm-ae976df2"  # docker images, a lab built by 0.8.0
    assert base_image_tag("bookworm", reversed(packages)) == "bookworm-ae976df2"  # the order does not matter


# The workload requirements of 0.8.0; the list has grown since (mlcommons-loadgen), which names a new wheelhouse.
REQUIREMENTS_0_8_0 = ["numpy==2.4.6", "numba==0.68.1", "tensorflow-cpu==2.21.0", "torch==2.13.0", "Pillow==13.0.0"]


def test_the_wheelhouse_keeps_the_directory_0_8_0_gave_it():
    # ~/.cache/platbench/wheelhouse/505550bfeb08 of a lab built by 0.8.0: Pillow sorts among the lowercase names.
    assert wheelhouse_name(REQUIREMENTS_0_8_0, "3.11") == "505550bfeb08"
    assert wheelhouse_name(REQUIREMENTS_0_8_0, "3.12") != "505550bfeb08"
    # A changed list is a new wheelhouse: the old one lacks the new wheels.
    assert wheelhouse_name(SETTINGS["platbench_workload_requirements"], "3.11") != "505550bfeb08"


# The expressions the roles held before 0.9.0, rendered by Ansible, against the filters that replace them.
PACKAGES = ["python3", "Procps", "iperf3", "ca-certificates"]
REQUIREMENTS = ["torch==2.13.0", "Pillow==13.0.0", "numpy==2.4.6"]


@pytest.mark.parametrize(
    "before, now",
    [
        (
            "bookworm-{{ packages | sort | join(',') | hash('sha1') | truncate(8, true, '') }}",
            "{{ packages | platbench.lab.base_image_tag('bookworm') }}",
        ),
        (
            "{{ (requirements | sort | join(' ') ~ '3.11') | hash('sha1') | truncate(12, true, '') }}",
            "{{ requirements | platbench.lab.wheelhouse_name('3.11') }}",
        ),
    ],
)
def test_the_filters_render_what_the_jinja_they_replace_rendered(before, now):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables={"packages": PACKAGES, "requirements": REQUIREMENTS})
    assert templar.template(trust_as_template(now)) == templar.template(trust_as_template(before))


ROOTFS_INPUTS = {
    "format": 2,
    "suite": "bookworm",
    "packages": ["openssh-server", "Python3", "docker.io"],
    "requirements": ["torch==2.13.0", "Pillow==13.0.0"],
    "size_gb": 20,
    "public_key": "ssh-ed25519 AAAA platbench",
    "ca": [],
}
NVIDIA = {
    "driver_repo": "nvidia",
    "components": ["main"],
    "packages": ["nvidia-driver", "Cuda-drivers"],
    "driver_source": "repo",
    "driver_branch": 580,
    "container_repo": "https://nvidia.github.io/libnvidia-container/stable",
    "cuda_repo": "https://developer.download.nvidia.com/compute/cuda/repos",
    "cuda_keyring": "cuda-keyring_1.1-1_all.deb",
}
# rootfs_id.yml before 0.9.0: the compatibility rules in Jinja.
ROOTFS_BEFORE = """{{ ({'format': i.format, 'suite': i.suite, 'packages': i.packages | sort,
     'requirements': i.requirements | sort, 'size_gb': i.size_gb, 'public_key': i.public_key, 'ca': i.ca}
   | combine({'nvidia': {'driver_repo': n.driver_repo, 'components': n.components, 'packages': n.packages | sort,
                         'driver_source': n.driver_source, 'driver_branch': n.driver_branch | string,
                         'container_repo': n.container_repo}
              | combine({'cuda_repo': n.cuda_repo, 'cuda_keyring': n.cuda_keyring}
                        if n.driver_repo == 'nvidia' else {})} if gpu else {}))
   | combine({'apptainer_deb': deb} if apptainer else {})
   | to_json | hash('sha1') | truncate(12, true, '') }}"""
ROOTFS_NOW = "{{ i | platbench.lab.guest_rootfs_id(n if gpu else none, deb if apptainer else none) }}"


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("apptainer", [False, True])
@pytest.mark.parametrize("driver_repo", ["nvidia", "debian"])
def test_the_guest_rootfs_id_is_what_the_jinja_it_replaces_computed(gpu, apptainer, driver_repo):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    variables = {
        "i": ROOTFS_INPUTS,
        "n": {**NVIDIA, "driver_repo": driver_repo},
        "deb": "0f" * 20,
        "gpu": gpu,
        "apptainer": apptainer,
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    now = templar.template(trust_as_template(ROOTFS_NOW))
    assert now == templar.template(trust_as_template(ROOTFS_BEFORE)) and len(now) == 12
