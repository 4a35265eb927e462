"""The platform registry is the one place platforms are named, and everything agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import matrix
from unbuilt import REASON, make_unbuilt

from platbench import report

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "platform_run"
BUILT = [platform for platform in platforms.PLATFORMS if platform.placement]


def role_dir(fqcn):
    namespace, collection, name = fqcn.split(".")
    assert (namespace, collection) == ("platbench", "lab"), fqcn
    return REPO / "roles" / name


def test_labels_are_unique_and_one_platform_is_the_baseline():
    assert len(set(platforms.LABELS)) == len(platforms.LABELS)
    assert [p.label for p in platforms.PLATFORMS if p.baseline] == ["bm"] == [platforms.BASELINE]
    assert platforms.PLATFORMS[0].baseline  # the report lists the baseline first


@pytest.mark.parametrize("platform", BUILT, ids=lambda p: p.label)
def test_every_built_platform_has_its_roles_placement_file_and_argument_specs(platform):
    for role in platform.roles:
        assert (role_dir(role) / "tasks" / "main.yml").is_file(), role
    assert (ROLE / "tasks" / f"{platform.placement}.yml").is_file()
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    plan = specs[platform.placement]["options"]["platform_run_cell_plan"]
    assert plan["type"] == "dict" and plan["required"] is True
    assert set(plan["options"]) >= {"cell", "placement", "argv", "env", "cpuset", "gpus", "runtime", "timeout"}
    assert platform.placement == f"run_{platform.label}"
    assert not platform.unbuilt
    assert set(platform.requires) <= set(platforms.REQUIREMENTS)


def test_every_platform_of_this_release_is_built():
    assert [p.label for p in platforms.PLATFORMS if not p.placement] == []


def test_a_platform_not_built_says_why(monkeypatch):
    # Every platform of this release is built; a new one starts unbuilt, with its reason.
    make_unbuilt(monkeypatch, "magnum")
    reason = platforms.not_built_reason("magnum")
    assert "not built by this release" in reason and REASON in reason
    assert platforms.not_built_reason("nova") is None


def test_every_placement_entry_point_is_a_registry_platform():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    placements = {name for name in specs if name.startswith("run_")}
    assert placements == {p.placement for p in BUILT}
    assert {path.stem for path in (ROLE / "tasks").glob("run_*.yml")} == placements


def readme_platform_rows():
    text = (REPO / "README.md").read_text()
    section = text.split("## Platforms", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1): row for row in rows}


def test_the_readme_has_a_row_per_platform_saying_whether_it_is_built():
    rows = readme_platform_rows()
    assert list(rows) == list(platforms.LABELS)
    for platform in platforms.PLATFORMS:
        row = rows[platform.label]
        if platform.placement:
            assert f"run_{platform.label}.yml" in row, row
        else:
            assert "not built" in row, row


def yaml_files():
    for pattern in ("roles/**/*.yml", "playbooks/*.yml", "site.yml"):
        yield from sorted(REPO.glob(pattern))


def label_lists(text):
    """Flow lists ([vm, vmcn], ['bm', 'cn']) and block lists of platform labels in a file."""
    found = []
    for match in re.finditer(r"\[([^\[\]]*)\]", text):
        items = [item.strip().strip("'\"") for item in match.group(1).split(",") if item.strip()]
        if len(items) >= 2 and all(item in platforms.BY_LABEL for item in items):
            found.append(match.group(0))
    for block in re.finditer(r"(?:^[ \t]*- *['\"]?([a-z0-9]+)['\"]?[ \t]*\n){2,}", text, re.M):
        items = re.findall(r"- *['\"]?([a-z0-9]+)", block.group(0))
        if all(item in platforms.BY_LABEL for item in items):
            found.append(block.group(0))
    return found


def test_no_role_or_playbook_lists_platform_labels_by_hand():
    offenders = {str(path.relative_to(REPO)): label_lists(path.read_text()) for path in yaml_files()}
    assert {path: lists for path, lists in offenders.items() if lists} == {}


def test_the_literal_list_detector_finds_what_it_is_meant_to():
    assert label_lists("x: \"{{ p | intersect(['vm', 'vmcn']) }}\"") == ["['vm', 'vmcn']"]
    assert label_lists("a:\n  - bm\n  - cn\n")
    assert label_lists("x: [cpu, gpu]") == [] and label_lists("a:\n  - bm\n  - other\n") == []


def test_matrix_and_report_read_the_registry():
    assert matrix.validate_experiment(
        {
            "name": "x",
            "workload": "w",
            "platforms": list(platforms.LABELS),
            "scaleup": [1],
            "cpu_config": ["pin"],
            "processor": ["cpu"],
            "repeats": 1,
        }
    )["platforms"] == list(platforms.LABELS)
    assert report.BASELINE == platforms.BASELINE
    assert sorted(["vmcn", "magnum", "bm", "zz", "cn"], key=report._platform_rank) == [
        "bm",
        "cn",
        "vmcn",
        "magnum",
        "zz",
    ]


def test_the_inventories_name_only_registry_platforms():
    for path in REPO.glob("inventories/**/group_vars/all.yml"):
        wanted = (yaml.safe_load(path.read_text()) or {}).get("platbench_platforms")
        if wanted is not None:
            assert platforms.check_labels(wanted, str(path)) == wanted


def test_unknown_labels_are_named_with_the_known_ones():
    with pytest.raises(
        platforms.UnknownPlatform,
        match=r"platbench_platforms: unknown platform\(s\) 'docker'; "
        r"known: bm, cn, vm, vmcn, vmsg, sg",
    ):
        platforms.check_labels(["bm", "docker"], "platbench_platforms")
    with pytest.raises(platforms.UnknownPlatform, match="must be a list"):
        platforms.check_labels("bm", "platbench_platforms")


def test_in_words():
    assert platforms.in_words(["vm", "vmcn"]) == "vm and vmcn"
    assert platforms.in_words(["vm", "vmcn"], "/") == "vm/vmcn"
    assert platforms.in_words(["a", "b", "c"]) == "a, b and c"
    assert platforms.in_words(["a"]) == "a" and platforms.in_words([]) == "none"
