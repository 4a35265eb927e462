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
