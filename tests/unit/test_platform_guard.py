"""The guard: a platform is named only in the registry and in its own roles.

Everything else decides by the registry's typed fields (kind, engine, gpu_view, peer, requires, ...), so a new
platform is a registry entry and its role. Comments and documentation (docstrings, DOCUMENTATION/EXAMPLES/RETURN,
descriptions and messages) may name platforms; code, data and Jinja may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.module_utils import platforms

REPO = Path(__file__).resolve().parents[2]
REGISTRY = REPO / "plugins/module_utils/platforms.py"
SCANNED = ("plugins", "roles", "playbooks", "platbench")
# Words that are platform labels and also something else, where they are that something else: (path prefix, word).
NOT_A_PLATFORM = {
    # host_facts' `virt` fact: what the host itself is (bare metal, a VM, a container), as the record's metadata says.
    ("plugins/modules/host_facts.py", "vm"),
    # OpenStack's own service names, in platbench.lab.openstack_deploy (which deploys those services with
    # kolla-ansible) and its settings.
    ("roles/openstack_deploy/", "ironic"),
    ("roles/openstack_deploy/", "nova"),
    ("roles/openstack_deploy/", "magnum"),
    ("plugins/plugin_utils/openstack/kolla.py", "ironic"),
}
# YAML keys whose values are prose for people.
PROSE_KEYS = {"description", "short_description", "msg", "fail_msg", "success_msg", "name", "label", "summary"}
DOC_FILES = re.compile(r"^plugins/(filter|test|lookup)/[^/]+\.yml$")
JINJA_LITERAL = re.compile(r"""['"]([a-z0-9]+)['"]""")
# A platform's inventory group spelt out (platbench_nova, platbench_ironic_failed) names the platform too.
GROUP_NAME = re.compile(r"\bplatbench_([a-z0-9]+?)(?:_failed)?\b")


def group_labels(text):
    return [word for word in GROUP_NAME.findall(text) if word in platforms.BY_LABEL]


def own_roles(label):
    return {f"roles/{fqcn.split('.')[-1]}/" for fqcn in platforms.get(label).roles}


def allowed(path, label):
    exempt = any(path.startswith(prefix) and word == label for prefix, word in NOT_A_PLATFORM)
    return exempt or any(path.startswith(role) for role in own_roles(label))


def python_literals(text):
    """String literals of the code that equal a label; docstrings are documentation."""
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # Pieces of f-strings are text around values (f"{prefix}k8s"), not names on their own.
    pieces = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | pieces
    ]
    return [value for value in strings if value in platforms.BY_LABEL] + [
        label for value in strings for label in group_labels(value)
    ]


def yaml_literals(data, key=None):
    """Keys, values and quoted Jinja literals of the data that equal a label; prose keys are skipped."""
    found = []
    if isinstance(data, dict):
        for name, value in data.items():
            if str(name) in platforms.BY_LABEL:
                found.append(str(name))
            if str(name) not in PROSE_KEYS:
                found += yaml_literals(value, name)
    elif isinstance(data, list):
        for item in data:
            found += yaml_literals(item, key)
    elif isinstance(data, str):
        if data.strip() in platforms.BY_LABEL:
            found.append(data.strip())
        elif "{{" in data or "{%" in data or key in ("when", "that", "until", "changed_when", "failed_when"):
            found += [word for word in JINJA_LITERAL.findall(data) if word in platforms.BY_LABEL]
        found += group_labels(data)
    return found


def scanned_files():
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            relative = str(path.relative_to(REPO))
            code = path.suffix in (".py", ".yml", ".yaml", ".j2") and not DOC_FILES.match(relative)
            if path.is_file() and path != REGISTRY and code:
                yield relative, path


def labels_named(relative, path):
    text = path.read_text()
    if path.suffix == ".py":
        return python_literals(text)
    if path.suffix == ".j2":
        return [word for word in JINJA_LITERAL.findall(text) if word in platforms.BY_LABEL]
    return yaml_literals(yaml.safe_load(text))


def test_no_platform_is_named_outside_the_registry_and_its_own_roles():
    offenders = {}
    for relative, path in scanned_files():
        named = [label for label in labels_named(relative, path) if not allowed(relative, label)]
        if named:
            offenders[relative] = sorted(set(named))
    assert offenders == {}


@pytest.mark.parametrize(
    "text, found",
    [
        ('if platform.label == "vmsg":\n    pass\n', ["vmsg"]),
        ('PEERS = {"bm": 1}\n', ["bm"]),
        ('def f():\n    """Runs on bm and cn."""\n    return "cn"\n', ["cn"]),
        ("# bm only\nx = 1\n", []),
        ('GROUPS = "platbench_magnum"\n', ["magnum"]),
    ],
)
def test_the_python_scan_finds_names_and_leaves_docs(text, found):
    assert python_literals(text) == found


@pytest.mark.parametrize(
    "data, found",
    [
        ({"when": "'bm' in platform_run_plan.platforms"}, ["bm"]),
        ({"hosts": "platbench_nova:platbench_ironic_failed"}, ["nova", "ironic"]),
        ({"hosts": "platbench_process_instances"}, []),
        ({"groups": {"nova": ["a"]}}, ["nova"]),
        ({"x": ["vm", "vmcn"]}, ["vm", "vmcn"]),
        ({"x": "{{ 'vmsg' in platbench_platforms }}"}, ["vmsg"]),
        ({"name": "Run bm", "msg": "not on 'cn'"}, []),
    ],
)
def test_the_yaml_scan_finds_names_and_leaves_prose(data, found):
    assert yaml_literals(data) == found
