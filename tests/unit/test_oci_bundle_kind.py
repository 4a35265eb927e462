"""The oci_bundle kind (plugins/plugin_utils/placements/oci_bundle/, platforms ns and sc) and its bundles
(plugins/module_utils/oci_bundle.py): the bases made from the OCI configuration Docker wrote for a container of the
workload image (tests/unit/data/docker-oci-config.json, captured from Docker 20.10 on the development host with
platbench.lab.oci_bundle's own steps) hold exactly the mechanisms their rung names; a cell's plan is a process of the
runner host whose line makes its bundle with the host's python3, runs runc and deletes both; the patch really applies.
The cells run for real in the lab tests (tests/integration/test_explain_lab.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import oci_bundle, platforms, readiness
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import duet_pair
from plan_options import assert_plan_matches_its_specs, cell_plan
from playbook_run import run_playbook
from test_kinds import OPTIONS, make_cell

DOCKER_CONFIG = json.loads((Path(__file__).parent / "data" / "docker-oci-config.json").read_text())
DOCKER_CAPABILITIES = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
}
FACTS = {
    "cpus_allowed": [0, 1],
    "numa_nodes": {"0": [0, 1]},
    "gpu_count": 0,
    "gpus": [],
    "cpu_cgroup": {"version": "v1", "directory": "/sys/fs/cgroup/cpu,cpuacct"},
}


def plan(platform="ns", cpu_config="pin", facts=FACTS, **labels):
    cell = make_cell(platform, cpu_config)
    cell["labels"].update(labels)
    return cell_plan(cell, facts, OPTIONS)


def patch_of(planned):
    """The patch the line hands APPLY, read back from the line."""
    words = shlex.split(planned["process"]["command"].split(" && python3 -c ", 1)[1].split(";", 1)[0])
    return json.loads(words[2])


# -- the bases: what each rung holds ----------------------------------------------------------------------------------


def test_the_engine_base_holds_docker_s_seccomp_capabilities_and_namespaces_and_none_holds_no_filter_and_every_cap():
    engine = oci_bundle.base_config(DOCKER_CONFIG, "engine", root="/var/lib/platbench/lxc/rootfs")
    none = oci_bundle.base_config(DOCKER_CONFIG, "none", root="/var/lib/platbench/lxc/rootfs")
    for base in (engine, none):
        # The same namespaces, root, mounts and masked paths on both rungs: only the confinement differs.
        assert sorted(oci_bundle.mechanisms(base)["namespaces"]) == sorted(oci_bundle.NAMESPACES)
        assert all("path" not in namespace for namespace in base["linux"]["namespaces"])
        assert base["root"] == {"path": "/var/lib/platbench/lxc/rootfs", "readonly": False}
        assert base["linux"]["maskedPaths"] == DOCKER_CONFIG["linux"]["maskedPaths"]
        assert "hooks" not in base and "cgroupsPath" not in base["linux"]
        assert set(base["linux"]["resources"]) <= {"devices"}  # the throwaway's CPU and memory settings are gone
        destinations = [mount["destination"] for mount in base["mounts"]]
        assert not set(destinations) & set(oci_bundle.ENGINE_FILES) and "/proc" in destinations
        assert all("/var/lib/docker" not in mount.get("source", "") for mount in base["mounts"])
        # The image's working directory and variables stay, as Docker set them.
        assert base["process"]["cwd"] == DOCKER_CONFIG["process"]["cwd"] == "/opt/platbench"
        assert base["process"]["env"] == DOCKER_CONFIG["process"]["env"] and base["process"]["terminal"] is False
    assert {key: value for key, value in engine.items() if key != "linux" and key != "process"} == {
        key: value for key, value in none.items() if key != "linux" and key != "process"
    }
    assert engine["linux"]["seccomp"] == DOCKER_CONFIG["linux"]["seccomp"] and "seccomp" not in none["linux"]
    assert engine["linux"]["seccomp"]["defaultAction"] == "SCMP_ACT_ERRNO"
    assert set(engine["process"]["capabilities"]["bounding"]) == DOCKER_CAPABILITIES
    assert none["process"]["capabilities"]["bounding"] == list(oci_bundle.CAPABILITIES)
    assert set(none["process"]["capabilities"]) == set(oci_bundle.CAPABILITY_SETS)
    seen = oci_bundle.mechanisms(engine)
    assert seen["seccomp"]["rules"] == len(DOCKER_CONFIG["linux"]["seccomp"]["syscalls"]) > 10
    assert seen["capabilities"]["bounding"] == 14 and oci_bundle.mechanisms(none)["seccomp"] is None
    # Every capability the host's root holds, and no more: runc cannot give a container one outside its bounding set
    # (this project's machines lack CAP_SYS_RESOURCE: bit 24 of 0x1fffeffffff).
    held = oci_bundle.capabilities_in("1fffeffffff")
    assert len(held) == 40 and "CAP_SYS_RESOURCE" not in held and held[-1] == "CAP_CHECKPOINT_RESTORE"
    assert oci_bundle.base_config(DOCKER_CONFIG, "none", bounding=held)["process"]["capabilities"]["effective"] == held
    assert oci_bundle.capabilities_in("3fffffffff")[-1] == "CAP_AUDIT_READ"  # an older kernel's last: 37


def test_a_configuration_that_is_not_a_cell_s_is_refused_naming_what_is_missing():
    shared = json.loads(json.dumps(DOCKER_CONFIG))
    shared["linux"]["namespaces"] = [n for n in shared["linux"]["namespaces"] if n["type"] != "network"]
    with pytest.raises(oci_bundle.BundleError, match="no network namespace"):
        oci_bundle.base_config(shared, "engine")
    with pytest.raises(oci_bundle.BundleError, match="no `linux` or `process` section"):
        oci_bundle.base_config({"ociVersion": "1.0.2"}, "engine")
    with pytest.raises(oci_bundle.BundleError, match="confinement 'some'"):
        oci_bundle.base_config(DOCKER_CONFIG, "some")


# -- a cell's plan --------------------------------------------------------------------------------------------------


def test_a_pinned_cell_runs_its_bundle_with_runc_on_its_cpuset_and_cn_s_argv_and_environment():
    planned = plan()
    assert_plan_matches_its_specs(planned)
    assert planned["kind"] == "oci_bundle" and planned["task_file"] == placements.KINDS["oci_bundle"].task_file
    section = planned["oci_bundle"]
    assert section["confinement"] == "none" and section["base"] == oci_bundle.BASES["none"]
    assert section["bundle"] == f"{oci_bundle.BUNDLES}/{planned['name']}"
    process = planned["process"]
    assert process["argv"] == [
        "taskset",
        "--cpu-list",
        planned["cpuset"],
        *oci_bundle.runc_argv("run", "--bundle", section["bundle"], planned["name"]),
    ]
    assert process["become"] and process["normal_policy"] and "cgroup" not in process  # runc makes the cgroup
    patch = patch_of(planned)
    # cn's argv and environment (test_cellplan: the container kind's), over the image's working directory.
    cn = cell_plan(make_cell("cn"), FACTS, OPTIONS)
    assert patch["set"]["process.args"] == cn["container"]["command"]
    assert patch["env"]["process.env"] == planned["env"]
    # cn's environment, but what the workload checks its GPUs against: none to hand over here, own GPUs there.
    differs = {
        name
        for name in {*planned["env"], *cn["container"]["env"]}
        if planned["env"].get(name) != cn["container"]["env"].get(name)
    }
    assert differs <= {"PLATBENCH_EXPECTED_GPUS"}
    assert patch["set"]["linux.resources.cpu"] == {"cpus": planned["cpuset"]}
    assert patch["set"]["linux.cgroupsPath"] == f"{oci_bundle.CGROUP_PARENT}/{planned['name']}"
    volumes = [f"{m['source']}:{m['destination']}:{m['options'][-1]}" for m in patch["extend"]["mounts"]]
    assert volumes == cn["container"]["volumes"]
    # The bundle first, then runc under the deadline at the normal policy, then the container and the bundle go.
    command = process["command"]
    assert command.index(f"mkdir -p {section['bundle']}") < command.index("sh -c") < command.rindex("delete --force")
    assert section["down"] in command and command.endswith("exit $status")
    assert planned["runtime"]["launcher"] == "runc" and planned["runtime"]["oci_confinement"] == "none"
    assert planned["runtime"]["oci_namespaces"] == ["pid", "network", "ipc", "uts", "mount"]
    assert planned["runtime"]["oci_seccomp"] is None and "bounding set" in planned["runtime"]["oci_capabilities"]
    assert planned["runtime"]["image_id"] == OPTIONS["engines"]["docker"]["image_id"]  # the same image as cn's


def test_sc_reads_the_engine_base_an_unpinned_cell_gets_a_quota_and_an_injected_quota_takes_its_place():
    sc = plan("sc")
    assert sc["oci_bundle"]["base"] == oci_bundle.BASES["engine"]
    assert (
        sc["runtime"]["oci_seccomp"] == "Docker's default profile"
        and sc["runtime"]["oci_capabilities"] == "Docker's set"
    )
    vanilla = plan("ns", "vnl")
    assert patch_of(vanilla)["set"]["linux.resources.cpu"] == {"quota": 100000, "period": 100000}
    assert vanilla["process"]["argv"][:3] == ["taskset", "--cpu-list", "0-1"]  # not the harness's spare CPUs
    capped = plan("ns", inject="cpu_quota=0.5")
    assert patch_of(capped)["set"]["linux.resources.cpu"]["quota"] == 50000
    assert capped["runtime"]["inject"]["cpu_quota"] == 0.5
    # Where systemd is PID 1 the container is a scope in system.slice, as Docker's systemd driver makes one.
    scoped = plan("ns", facts={**FACTS, "systemd_pid1": True})
    assert patch_of(scoped)["set"]["linux.cgroupsPath"] == f"system.slice:platbench-oci:{scoped['name']}"
    assert "--systemd-cgroup" in scoped["process"]["argv"]


def test_a_duet_runs_its_line_as_a_process_side():
    (side,) = duet_pair.sides([plan()])
    assert side["engine"] is None and side["run"] == {"command": plan()["process"]["command"]}


def test_apply_makes_the_cell_s_config_from_the_base(tmp_path):
    """APPLY runs as the line runs it, with this machine's python3, on a base made from Docker's configuration."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps(oci_bundle.base_config(DOCKER_CONFIG, "engine")))
    patch = oci_bundle.cell_patch(
        ["python", "-m", "workloads.cnn_train"],
        {"OMP_NUM_THREADS": "1", "PYTHONPATH": "/elsewhere"},
        [{"source": "/srv/data", "target": "/srv/data", "mode": "ro"}],
        cpus="1",
        cgroup="/platbench-oci/x",
    )
    out = tmp_path / "config.json"
    done = subprocess.run(
        ["python3", "-c", oci_bundle.APPLY, str(base), json.dumps(patch), str(out)], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    config = json.loads(out.read_text())
    assert config["process"]["args"] == ["python", "-m", "workloads.cnn_train"]
    env = config["process"]["env"]
    # Set by name: the image's PYTHONPATH is replaced, not shadowed by a second entry; its PATH stays.
    assert [entry for entry in env if entry.startswith("PYTHONPATH=")] == ["PYTHONPATH=/elsewhere"]
    assert "OMP_NUM_THREADS=1" in env and any(entry.startswith("PATH=/opt/platbench/venv/bin") for entry in env)
    assert config["mounts"][-1] == {
        "destination": "/srv/data",
        "type": "bind",
        "source": "/srv/data",
        "options": ["rbind", "rprivate", "ro"],
    }
    assert config["linux"]["resources"]["cpu"] == {"cpus": "1"} and config["linux"]["cgroupsPath"] == "/platbench-oci/x"
    assert config["linux"]["seccomp"] == DOCKER_CONFIG["linux"]["seccomp"]


def test_readiness_says_what_is_missing_and_which_role_makes_it(tmp_path):
    image = "sha256:" + "b" * 64
    for confinement, path in oci_bundle.BASES.items():
        Path(tmp_path / Path(path).name).write_text(json.dumps(oci_bundle.base_config(DOCKER_CONFIG, confinement)))
    (tmp_path / "bases.image-id").write_text(image + "\n")
    bases = {confinement: str(tmp_path / Path(path).name) for confinement, path in oci_bundle.BASES.items()}
    found = oci_bundle.probe("/usr/sbin/runc", image_id_file=str(tmp_path / "bases.image-id"), bases=bases)
    assert found["bases_image_id"] == image and found["bases"]["engine"]["seccomp"]["rules"] > 10
    assert oci_bundle.host_problem(found, image, "engine") is None
    assert "not the current workload image" in oci_bundle.host_problem(found, "sha256:" + "c" * 64, "none")
    assert "runc is not installed" in oci_bundle.host_problem({**found, "installed": False}, image, "none")
    missing = oci_bundle.probe("/usr/sbin/runc", image_id_file=str(tmp_path / "none"), bases={"none": "/nonexistent"})
    assert oci_bundle.ROLE in oci_bundle.host_problem(missing, image, "none")
    # The registry's ns and sc require the bases, which readiness checks with the platform's confinement.
    assert {platforms.get(label).confinement for label in ("ns", "sc")} == {"none", "engine"}
    assert all("bundle_bases" in platforms.get(label).requires for label in ("ns", "sc"))
    assert "bundle_bases" in readiness.CHECKS


def test_the_module_writes_both_bases_once_and_a_second_run_changes_nothing(tmp_path):
    """platbench.lab.oci_bundle_base, as the role runs it, on the captured configuration."""
    captured = tmp_path / "config.json"
    captured.write_text(json.dumps(DOCKER_CONFIG))
    dest = tmp_path / "oci"
    task = {
        "platbench.lab.oci_bundle_base": {
            "engine_config": str(captured),
            "image_id": "sha256:" + "d" * 64,
            "root": "/var/lib/platbench/lxc/rootfs",
            "dest": str(dest),
        },
        "register": "made",
    }
    shown = {"ansible.builtin.debug": {"var": "made"}}
    plays = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [task, shown],
        }
    ]
    checked = run_playbook(plays, tmp_path / "check", None, "--check")
    assert checked.rc == 0 and not dest.exists(), checked.output[-3000:]
    first = run_playbook(plays, tmp_path / "first")
    assert first.rc == 0 and first.recap() == (1, 0), first.output[-3000:]
    written = {path.name for path in dest.iterdir()}
    assert written == {"base-none.json", "base-engine.json", "bases.image-id"}
    engine = json.loads((dest / "base-engine.json").read_text())
    assert engine == oci_bundle.base_config(DOCKER_CONFIG, "engine")
    none = json.loads((dest / "base-none.json").read_text())
    assert none["process"]["capabilities"]["bounding"] == oci_bundle.bounding_set()
    found = oci_bundle.probe(
        "/usr/sbin/runc",
        image_id_file=str(dest / "bases.image-id"),
        bases={confinement: str(dest / Path(path).name) for confinement, path in oci_bundle.BASES.items()},
    )
    assert oci_bundle.host_problem(found, "sha256:" + "d" * 64, "none") is None
    again = run_playbook(plays, tmp_path / "again")
    assert again.rc == 0 and again.recap() == (0, 0), again.output[-3000:]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"ociVersion": "1.0.2"}))
    refused = run_playbook(
        [
            {
                **plays[0],
                "tasks": [
                    {
                        **task,
                        "platbench.lab.oci_bundle_base": {
                            **task["platbench.lab.oci_bundle_base"],
                            "engine_config": str(broken),
                        },
                    }
                ],
            }
        ],
        tmp_path / "refused",
    )
    assert refused.rc != 0 and "is it an OCI config.json?" in refused.output
