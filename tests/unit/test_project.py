"""Project-wide promises that no single module owns."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_workload_requirements_are_the_same_everywhere():
    """bm (workload_env), cn (workload_image) and the controller venv must get the same frameworks."""
    pinned = [
        line.strip()
        for line in (REPO / "requirements-workload.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    inventory = yaml.safe_load((REPO / "inventories/local/group_vars/all.yml").read_text())
    assert sorted(inventory["platbench_workload_requirements"]) == sorted(pinned)
    assert all("==" in spec for spec in pinned)


def test_every_role_validates_its_inputs_and_documents_itself():
    for role in sorted((REPO / "roles").iterdir()):
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]
        defaults_file = role / "defaults/main.yml"
        defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else {}
        documented = set(specs["main"]["options"])
        assert set(defaults) <= documented, (role.name, set(defaults) - documented)
        assert (role / "README.md").read_text().startswith("# platbench.lab." + role.name)
