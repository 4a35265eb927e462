"""Project-wide promises that no single module owns."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def pinned(requirements_file):
    return [
        line.strip()
        for line in (REPO / requirements_file).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


@pytest.mark.parametrize(
    "requirements_file, variable",
    [
        ("requirements-workload.txt", "platbench_workload_requirements"),
        ("requirements-workload-gpu.txt", "platbench_workload_requirements_gpu"),
    ],
)
def test_workload_requirements_are_the_same_everywhere(requirements_file, variable):
    """bm (workload_env), cn (workload_image), the guest and the controller venv (CPU list) must get
    the same frameworks; the GPU list is kept in a file of its own the same way."""
    inventory = yaml.safe_load((REPO / "inventories/local/group_vars/all.yml").read_text())
    assert sorted(inventory[variable]) == sorted(pinned(requirements_file))
    assert all("==" in spec for spec in pinned(requirements_file))


def test_every_role_validates_its_inputs_and_documents_itself():
    for role in sorted((REPO / "roles").iterdir()):
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
        defaults_file = role / "defaults/main.yml"
        defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else {}
        documented = set(specs["main"]["options"])
        assert set(defaults) <= documented, (role.name, set(defaults) - documented)
        assert (role / "README.md").read_text().startswith("# platbench.lab." + role.name)


def test_micro_benchmark_tools_are_the_same_on_hosts_in_images_and_in_guests():
    """bm runs the micro-benchmarks with the host's tools (micro_tools), cn/vmcn with the image's, vm with the
    guest's: the same Debian packages everywhere, or Diff% would compare different builds."""
    host = yaml.safe_load((REPO / "roles/micro_tools/vars/Debian.yml").read_text())["micro_tools_packages"]
    image = yaml.safe_load((REPO / "roles/workload_image/defaults/main.yml").read_text())
    guest = yaml.safe_load((REPO / "roles/guest_image/defaults/main.yml").read_text())
    assert sorted(image["workload_image_micro_packages"]) == sorted(host)
    assert sorted(guest["guest_image_micro_packages"]) == sorted(host)
    assert {"hpcc", "ioping", "fio", "iperf3"} <= set(host)
