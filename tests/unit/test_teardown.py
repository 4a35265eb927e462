"""Teardown per kind: every kind of the registry declares its teardown and playbooks/teardown.yml runs each one
(plugins/plugin_utils/cells/teardown.py), and the micro-VM part removes what a stopped micro-VM cell left.

Firecracker cannot run here (no KVM): the micro-VM test fakes what a stopped cell leaves - a process named
firecracker started with the jailer's --id, its jail with the pid file, a jail whose Firecracker has ended, an orphan
Firecracker whose jail is gone, the jailer's cgroups (in a cgroup tree of the test's own), the cell's tap (in a
network namespace of the test's own), an idle_cores fence and a data disk left half-made - and runs the real
teardown.yml (its micro-VM play, platbench.lab.firecracker_vm) against them."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence, firecracker
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import cellplan, teardown

from tests import skips

# Acts on the host where a live lab would see it or suffer from it: a host network namespace of a cell's network path.
# `make test` runs it first, before the lab is up (marker `host`, docs/src/tests.md).
pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[2]
PLACEMENTS = REPO / "plugins" / "plugin_utils" / "placements"
MICRO_VM_TASK = "Stop the micro-VMs that cells left, and remove their jails, cgroups and taps"


# -- every kind declares a teardown, and teardown.yml runs it -------------------------------------------------------


def test_every_kind_of_the_registry_declares_a_teardown_that_teardown_yml_runs():
    assert set(placements.TEARDOWN) == set(placements.KINDS)
    assert teardown.problems(str(REPO)) == []
    plays = {}
    for _, hosts, files in teardown.imported(str(REPO / teardown.PLAYBOOK)):
        plays.setdefault(hosts, []).extend(files)

    def own(kind):  # a kind's own teardown file, in its folder, as the playbook's import resolves it
        return str((PLACEMENTS / kind / "tasks" / "teardown.yml").resolve())

    # The micro-VM part runs where micro-VMs run, with the fence and data disks such a cell may leave.
    assert plays["platbench_mvm_hosts"] == [own("micro_vm"), "fence", "data_disks"]
    assert plays["platbench_runners"] == [own("process"), "fence", "instances", own("lxc"), own("k8s_job")]
    # The last play runs the kinds' own files no play imports (the chroot kind's), from the declarations.
    assert plays["platbench_runners:platbench_container_hosts:platbench_vm_hosts:platbench_mvm_hosts"] == [teardown.OWN]
    # The kinds the fence confines, and those that read a data disk, are the declarations', not a second list.
    assert {kind for kind, files in placements.TEARDOWN.items() if "fence" in files} == set(placements.FENCED)
    # The cells' micro-VM ids are their guest names: what cleanup_all takes for a cell's is what cells are named.
    assert firecracker.CELL_VM_ID.match(cellplan.NAME_PREFIX + "0123456789ab")


@pytest.fixture
def tree(tmp_path):
    """A copy of teardown.yml and its task files, to break."""
    for relative in (teardown.PLAYBOOK, teardown.TASKS_DIR):
        source, target = REPO / relative, tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    (tmp_path / "plugins").symlink_to(REPO / "plugins")  # the kinds' own files, which the playbook imports by path
    return tmp_path


def test_the_check_names_a_kind_without_a_teardown_and_a_teardown_never_run(tree):
    without = {kind: files for kind, files in placements.TEARDOWN.items() if kind != "micro_vm"}
    assert teardown.problems(str(tree), teardown=without) == [
        "kind micro_vm declares no teardown: write its tasks/teardown.yml in its folder "
        "(plugins/plugin_utils/placements/micro_vm/) and name it in its declaration's teardown"
    ]
    # teardown.yml without its micro-VM play and without the play of the kinds' own files: the micro-VM's, the
    # chroot's and the OCI bundle's own files are never run.
    playbook = tree / teardown.PLAYBOOK
    plays = [
        play
        for play in yaml.safe_load(playbook.read_text())
        if play["hosts"] != "platbench_mvm_hosts" and "kind_teardown" not in str(play["tasks"])
    ]
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    found = teardown.problems(str(tree))
    assert [line.split(" keeps")[0] for line in found] == ["kind chroot", "kind micro_vm", "kind oci_bundle"], found
    assert all("has the play that runs the kinds' own teardown files" in line for line in found), found
    # A declared file that does not exist; a fenced kind without the fence; a disk-reading kind without data disks.
    broken = {**placements.TEARDOWN, "process": ("process",), "guest": ("guest", "snapshots")}
    found = teardown.problems(str(REPO), teardown=broken)
    assert f"teardown snapshots is declared but {teardown.TASKS_DIR}/snapshots.yml does not exist: write it" in found
    assert any(line.startswith("kind process runs behind an idle_cores fence") for line in found), found
    assert any(line.startswith("kind guest reads the host's data from a data disk") for line in found), found


# -- the micro-VM part against what a stopped micro-VM cell leaves ---------------------------------------------------

FAKE_FIRECRACKER = "import time; print('ready', flush=True); time.sleep(600)"


def start_fake_firecracker(binary, vm_id):
    """A process named as the jailer's Firecracker is (its comm: the exec file's name), with the jailer's --id."""
    process = subprocess.Popen(
        [str(binary), "-c", FAKE_FIRECRACKER, "--id", vm_id, "--config-file", "vm-config.json", "--no-api"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as the module starts it: its own session, which the cell's end never signals
    )
    assert process.stdout.readline() == "ready\n"
    assert Path(f"/proc/{process.pid}/comm").read_text().strip() == "firecracker"
    threading.Thread(target=process.wait, daemon=True).start()  # as init reaps the orphans of a stopped run
    return process


def left_jail(chroot_base, vm_id, pid=None):
    """A micro-VM's jail as the module makes it: the files in root/, the console log and Firecracker's pid file."""
    root = Path(firecracker.jail_root(vm_id, str(chroot_base)))
    root.mkdir(parents=True)
    (root / firecracker.IN_JAIL["config"]).write_text(json.dumps({"machine-config": {"vcpu_count": 1}}))
    (root / firecracker.IN_JAIL["rootfs"]).write_bytes(b"\0" * 4096)
    (root.parent / "console.log").write_text("[    0.000000] Linux version\n")
    if pid is not None:
        (root.parent / "firecracker.pid").write_text(f"{pid}\n")
    return root.parent


def netns(name, *argv):
    subprocess.run(["ip", "netns", "exec", name, *argv], check=True, capture_output=True, timeout=30)


def links_in(name):
    shown = subprocess.run(["ip", "-n", name, "-j", "link"], check=True, capture_output=True, text=True, timeout=30)
    return {link["ifname"] for link in json.loads(shown.stdout)}


@skips.needs_root("a network namespace and a tap are made for the micro-VM's leftovers")
@skips.requires(commands=("ip",))
def test_teardown_removes_what_a_stopped_micro_vm_cell_left_and_only_that(tmp_path, playbook):
    tag = secrets.token_hex(6)
    cell_vm, orphan_vm, ended_vm = (f"{cellplan.NAME_PREFIX}{secrets.token_hex(6)}" for _ in range(3))
    foreign_vm = f"someone-else-{tag}"  # a Firecracker that is no cell's: left alone
    tap = firecracker.guest_network(tag)["tap"]
    namespace = f"fcteardown-{tag}"
    chroot_base, cgroups = tmp_path / "jailer", tmp_path / "cgroup"
    binary = tmp_path / "bin" / "firecracker"
    binary.parent.mkdir()
    binary.symlink_to(sys.executable)
    # The jailer's cgroups: v1 under cpuset for the cell's VM, v2 for the orphan; the foreign VM's is kept.
    for directory in (f"cpuset/firecracker/{cell_vm}", f"firecracker/{orphan_vm}", f"cpuset/firecracker/{foreign_vm}"):
        (cgroups / directory).mkdir(parents=True)
    # An idle_cores fence the cell left up, over a cpuset tree of the test's own (widened from CPU 0 to 0-3).
    fenced = tmp_path / "fence" / "cpuset" / "system.slice" / "cpuset.cpus"
    fenced.parent.mkdir(parents=True)
    (fenced.parent.parent / "cpuset.cpus").write_text("0-3\n")
    fenced.write_text("0\n")
    fence_state = tmp_path / "run" / "cpu_fence.json"
    cpu_fence.put_up("0-3", str(fence_state), str(tmp_path / "fence"))
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "a.pbdata.img.part").write_bytes(b"\0")
    (datasets / "b.pbdata.img").write_bytes(b"\0")  # a made disk is kept for the next campaign

    # Every module of the play runs in the test's namespace: its /sys/class/net and `ip` are the namespace's.
    interpreter = tmp_path / "python-in-netns"
    interpreter.write_text(f'#!/bin/sh\nexec ip netns exec {namespace} {sys.executable} "$@"\n')
    interpreter.chmod(0o755)
    local = {"ansible_connection": "local", "ansible_python_interpreter": str(interpreter)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"platbench_mvm_hosts": {"hosts": {"localhost": local}}}}}))
    variables = {
        "teardown_firecracker_binary": str(binary),
        "teardown_firecracker_chroot_base": str(chroot_base),
        "teardown_cgroup_root": str(cgroups),
        "teardown_fence_state_file": str(fence_state),
        "teardown_datasets_dir": str(datasets),
    }
    processes = []
    subprocess.run(["ip", "netns", "add", namespace], check=True, timeout=30)
    try:
        netns(namespace, "ip", "tuntap", "add", "dev", tap, "mode", "tap")
        netns(namespace, "ip", "tuntap", "add", "dev", "other0", "mode", "tap")  # no cell's tap: kept
        cell, orphan, foreign = (start_fake_firecracker(binary, vm) for vm in (cell_vm, orphan_vm, foreign_vm))
        processes += [cell, orphan, foreign]
        jails = [left_jail(chroot_base, cell_vm, cell.pid), left_jail(chroot_base, ended_vm)]

        first = playbook("playbooks/teardown.yml", variables, inventory=inventory)
        assert first.rc == 0, first.output[-4000:]
        (removed,) = [result["removed"] for result in first.results(MICRO_VM_TASK)]
        assert removed["micro_vms"] == sorted([cell_vm, orphan_vm, ended_vm])
        assert sorted(removed["processes"]) == sorted([cell.pid, orphan.pid]) and removed["taps"] == [tap]
        for process in (cell, orphan):
            assert process.wait(timeout=10) == -9
        assert foreign.poll() is None
        assert not any(jail.exists() for jail in jails) and list(chroot_base.glob("*/*")) == []
        assert sorted(str(path.relative_to(cgroups)) for path in cgroups.glob("**/firecracker/*")) == [
            f"cpuset/firecracker/{foreign_vm}"
        ]
        assert links_in(namespace) == {"lo", "other0"}
        assert fenced.read_text().strip() == "0" and not fence_state.exists()
        assert sorted(path.name for path in datasets.iterdir()) == ["b.pbdata.img"]
        assert f"Removed micro-VMs {', '.join(sorted([cell_vm, orphan_vm, ended_vm]))}" in first.output
        assert first.recap() == (3, 0)  # the micro-VMs, the fence, the half-made disk

        again = playbook("playbooks/teardown.yml", variables, inventory=inventory)
        assert again.rc == 0 and again.recap() == (0, 0), again.output[-4000:]
    finally:
        for process in processes:
            process.kill()
            process.wait()
        subprocess.run(["ip", "netns", "del", namespace], check=False, timeout=30)
    assert namespace not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
