"""The platform registry is the one place platforms are named, and everything agrees with it; a new platform of an
existing kind is a registry entry and nothing else (see test_platform_guard.py for the other half)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import experiment_spec
from plan_options import cell_plan, kind_spec, plan_options
from unbuilt import REASON, make_unbuilt

from platbench import report

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "platform_run"
PLACEMENTS = REPO / "plugins" / "plugin_utils" / "placements"
BUILT = [platform for platform in platforms.PLATFORMS if platform.placement]
SPECS = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def role_dir(fqcn):
    namespace, collection, name = fqcn.split(".")
    assert (namespace, collection) == ("platbench", "lab"), fqcn
    return REPO / "roles" / name


def test_labels_are_unique_and_one_platform_is_the_baseline():
    assert len(set(platforms.LABELS)) == len(platforms.LABELS)
    assert [p.label for p in platforms.PLATFORMS if p.baseline] == ["bm"] == [platforms.BASELINE]
    assert platforms.PLATFORMS[0].baseline  # the report lists the baseline first


@pytest.mark.parametrize("platform", platforms.PLATFORMS, ids=lambda p: p.label)
def test_every_entry_is_well_typed(platform):
    assert platforms.entry_problems(platform) == []


def test_a_badly_typed_entry_is_named():
    problems = platforms.entry_problems(platforms.BY_LABEL["vmcn"]._replace(engine=None, gpu_view="renumbered"))
    assert "platform vmcn: gpu_view 'renumbered' is not one of" in problems[0]
    # Whether a launcher or an engine is named follows from the workload's kind, as its declaration says.
    assert placements.registry_problems([platforms.BY_LABEL["vmcn"]._replace(engine=None)]) == [
        "platform vmcn: names no engine, but its workload's kind container is started by one (its declaration's "
        "started_by: 'engine')"
    ]
    assert placements.registry_problems([platforms.BY_LABEL["lx"]._replace(launcher="venv")]) == [
        "platform lx: names launcher, but its workload's kind lxc is not started by one (its declaration's "
        "started_by: None)"
    ]
    # The kind and its inner kind are the declarations' to check (placements.registry_problems).
    entry = platforms.BY_LABEL["vm"]._replace(inner="k8s_job", launcher=None)
    assert placements.registry_problems([entry]) == ["platform vm: a guest holds process or container, not 'k8s_job'"]


@pytest.mark.parametrize("platform", BUILT, ids=lambda p: p.label)
def test_every_built_platform_has_its_roles_and_its_kind(platform):
    for role in platform.roles:
        assert (role_dir(role) / "tasks" / "main.yml").is_file(), role
    assert platform.placement == platform.kind in placements.KINDS
    assert not platform.unbuilt


def test_every_kind_has_its_folder_with_its_task_files_and_plan_spec():
    assert set(placements.KINDS) >= {platform.kind for platform in platforms.PLATFORMS}
    for kind, declared in placements.KINDS.items():
        # Its declaration, its task files and its plan's spec in its own folder, nothing of it in platform_run.
        folder = PLACEMENTS / kind
        assert Path(declared.folder).resolve() == folder.resolve(), kind
        assert Path(declared.task_file).resolve() == folder / "tasks" / "place.yml"
        assert (folder / "tasks" / "teardown.yml").resolve() in {Path(entry).resolve() for entry in declared.teardown}
        assert (folder / "plan_spec.yml").is_file() and not (ROLE / "tasks" / f"{kind}.yml").exists()
        plan = kind_spec(kind)["options"]["platform_run_cell_plan"]
        assert plan["type"] == "dict" and plan["required"] is True
        assert set(plan["options"]) >= {"cell", "kind", "placement", "argv", "env", "cpuset", "gpus", "runtime"}
    # Entry points: the role's own (main, capabilities) and the instances placements that run a cell's several
    # instances of a kind (plugins/plugin_utils/placements/instances.py; pods: instances_k8s.py; a guest each:
    # instances_guest.py), no more: a kind's placement is its folder's.
    assert set(SPECS) == {"main", "capabilities", "instances", "k8s_instances", "guest_instances"}
    assert (ROLE / "tasks" / "instances.yml").is_file() and (ROLE / "tasks" / "k8s_instances.yml").is_file()
    assert (ROLE / "tasks" / "guest_instances.yml").is_file()


def test_every_platform_of_this_release_is_built():
    assert [p.label for p in platforms.PLATFORMS if not p.placement] == []


def test_a_platform_not_built_says_why(monkeypatch):
    # Every platform of this release is built; a new one starts unbuilt, with its reason.
    make_unbuilt(monkeypatch, "magnum")
    reason = platforms.not_built_reason("magnum")
    assert "not built by this release" in reason and REASON in reason
    assert platforms.not_built_reason("nova") is None


def test_cloud_instance_groups_come_from_the_registry():
    assert platforms.labels_where(kind="cloud_instance") == platforms.REMOTE
    assert {label: platforms.get(label).group for label in platforms.REMOTE} == {
        label: f"platbench_{label}" for label in platforms.REMOTE
    }


def readme_platform_rows():
    """The rows of the platforms table of the documentation site (docs/src/platforms.md), by label."""
    text = (REPO / "docs" / "src" / "platforms.md").read_text()
    section = text.split("# Platforms", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1): row for row in rows}


def test_the_readme_has_a_row_per_platform_naming_its_kind():
    rows = readme_platform_rows()
    assert list(rows) == list(platforms.LABELS)
    for platform in platforms.PLATFORMS:
        row = rows[platform.label]
        if platform.placement:
            assert f"`{platform.kind}`" in row, row
        else:
            assert "not built" in row, row


# One made-up platform of each kind, as a registry entry alone would add it.
NEW_PLATFORMS = {
    "process": {"kind": "process", "network": "host", "launcher": "venv", "gpu_view": "host", "pinning": "taskset"},
    "container": {"kind": "container", "engine": "podman", "gpu_view": "own", "pinning": "cpuset"},
    "guest": {
        "kind": "guest",
        "machine": "libvirt",
        "inner": "container",
        "engine": "docker",
        "gpu_view": "passthrough",
        "pinning": "vcpupin",
    },
    "k8s_job": {"kind": "k8s_job", "gpu_view": "scheduled", "pinning": "cpu_manager"},
    "cloud_instance": {
        "kind": "cloud_instance",
        "machine": "cloud",
        "inner": "process",
        "launcher": "venv",
        "instance": "server",
        "gpu_view": "scheduled",
        "pinning": "flavor",
    },
}


def add_platform(monkeypatch, label, **fields):
    entry = platforms._entry(
        label,
        "a new platform",
        ("platbench.lab.host_prep",),
        cpu_pinning="",
        cpu_vanilla="",
        gpu_handover="",
        **{"requires": (), "host_group": None if fields.get("machine") == "cloud" else "platbench_hosts"} | fields,
    )
    monkeypatch.setattr(platforms, "PLATFORMS", platforms.PLATFORMS + (entry,))
    monkeypatch.setattr(platforms, "BY_LABEL", {**platforms.BY_LABEL, label: entry})
    monkeypatch.setattr(platforms, "LABELS", platforms.LABELS + (label,))
    return entry


def validate(plan):
    """The plan against its kind's entry point, as include_role validates it."""
    options = kind_spec(plan["placement"])["options"]
    result = ArgumentSpecValidator(options).validate({"platform_run_cell_plan": plan})
    return result.error_messages


@pytest.mark.parametrize("kind", list(NEW_PLATFORMS))
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_a_new_platform_of_each_kind_is_a_registry_entry_alone(monkeypatch, kind, cpu_config):
    entry = add_platform(monkeypatch, "zz", **NEW_PLATFORMS[kind])
    assert platforms.entry_problems(entry) == []
    cell = {
        "id": f"zz/2/{cpu_config}/cpu|r0",
        "scenario": f"zz/2/{cpu_config}/cpu",
        "params": {"framework": "tensorflow", "model": "tiny", "steps": 3},
        "labels": {
            "platform": "zz",
            "scaleup": 2,
            "cpu_config": cpu_config,
            "processor": "cpu",
            "workload": "cnn_train",
            "experiment": "e",
            "repeat": 0,
        },
    }
    options = plan_options(
        k8s_node="node1",
        guest_image={"container_image_id": "sha256:" + "b" * 64},
        engines={"podman": {"answers": True, "version": "4.3.1", "image_id": "sha256:" + "a" * 64}},
    )
    plan = cell_plan(
        cell, {"cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}, "cpus_allowed": [0, 1, 2, 3]}, options
    )
    assert plan["platform"] == "zz" and plan["placement"] == kind
    assert validate(plan) == []


def test_the_validation_catches_a_plan_its_kind_does_not_declare():
    plan = cell_plan(
        {
            "id": "bm/1/pin/cpu|r0",
            "params": {"framework": "tensorflow", "model": "tiny"},
            "labels": {
                "platform": "bm",
                "scaleup": 1,
                "cpu_config": "pin",
                "processor": "cpu",
                "workload": "cnn_train",
                "experiment": "e",
                "repeat": 0,
            },
        },
        {"cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"}, "cpus_allowed": [0, 1]},
        plan_options(),
    )
    assert validate(plan) == []
    assert validate({**plan, "container": {}})
    assert validate({**plan, "process": {**plan["process"], "become": "perhaps"}})


def test_matrix_and_report_read_the_registry():
    assert experiment_spec.validate_experiment(
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
    checked = []
    for path in REPO.glob("inventories/**/group_vars/all.yml"):
        wanted = (yaml.safe_load(path.read_text()) or {}).get("platbench_platforms")
        if wanted is not None:
            assert platforms.check_labels(wanted, str(path)) == wanted
            checked.append(path.relative_to(REPO).parts[1])
    # The local inventory and the examples name theirs: a loop over none would check nothing.
    assert "local" in checked and len(checked) >= 2, checked


def test_unknown_labels_are_named_with_the_known_ones():
    with pytest.raises(
        platforms.UnknownPlatform,
        match=r"platbench_platforms: unknown platform\(s\) 'docker'; "
        r"known: bm, cr, ns, sc, cn, pd, gv, lx, vm, vmcn, vmsg, mvm, sg",
    ):
        platforms.check_labels(["bm", "docker"], "platbench_platforms")
    with pytest.raises(platforms.UnknownPlatform, match="must be a list"):
        platforms.check_labels("bm", "platbench_platforms")


def test_in_words():
    assert platforms.in_words(["vm", "vmcn"]) == "vm and vmcn"
    assert platforms.in_words(["vm", "vmcn"], "/") == "vm/vmcn"
    assert platforms.in_words(["a", "b", "c"]) == "a, b and c"
    assert platforms.in_words(["a"]) == "a" and platforms.in_words([]) == "none"


# Roles of a registry entry that no lab play applies on the entry's own host group, and why (besides the roles a kind
# applies to each cell, placements.CELL_ROLES).
NOT_BUILT_ON_THE_HOST_GROUP = {
    ("vmsg", "platbench.lab.apptainer"): "the SIF is built on platbench_apptainer_hosts (sg's); the guest carries it",
    ("sg", "platbench.lab.docker"): "the SIF is built from the Docker image: Apptainer's hosts are container hosts too",
}


def _lab_plays():
    """(hosts of the play, the roles it applies by name, the host groups it takes the registry's roles of) of each
    play of the playbooks site.yml imports."""
    for entry in yaml.safe_load((REPO / "site.yml").read_text()):
        for play in yaml.safe_load((REPO / entry["ansible.builtin.import_playbook"]).read_text()):
            named = [role if isinstance(role, str) else role["role"] for role in play.get("roles", [])]
            from_registry = []
            for task in play.get("pre_tasks", []) + play.get("tasks", []):
                name = (task.get("ansible.builtin.include_role") or {}).get("name", "")
                if "{{" not in name:
                    named.append(name)
                from_registry += re.findall(r"platform_roles\(host_group='([a-z_]+)'", str(task.get("loop", "")))
            yield set(play["hosts"].split(":")), set(named) - {""}, from_registry


def test_each_platform_is_built_on_its_registry_host_group_by_a_play_of_site_yml():
    plays = list(_lab_plays())
    for hosts, _named, from_registry in plays:
        assert all(group in hosts for group in from_registry), (hosts, from_registry)
    for platform in BUILT:
        if platform.host_group is None:
            assert platform.remote, platform.label  # the campaign provisions it (its group: add_host)
            continue
        on_group = [play for play in plays if platform.host_group in play[0]]
        assert on_group, f"no play of site.yml runs on {platform.host_group}, {platform.label}'s host group"
        applied = {role for _hosts, named, _registry in on_group for role in named}
        by_registry = any(platform.host_group in registry for _hosts, _named, registry in on_group)
        missing = [
            role
            for role in platform.roles
            if role not in applied
            and role not in placements.CELL_ROLES
            and (platform.label, role) not in NOT_BUILT_ON_THE_HOST_GROUP
        ]
        assert by_registry or not missing, f"{platform.label}: {missing} applied by no play on {platform.host_group}"
