"""The chroot kind (plugins/plugin_utils/placements/chroot/, platform cr), the kind kept in one folder: its plan is a
process of the runner host whose line makes a view of the image's root, runs the workload chrooted into it and takes
the view down; the line really does so here (a view of this machine's own root stands in for the image's, which the
lab tests run: tests/integration/test_lab.py); a duet runs it as a process side; its teardown, found by
playbooks/teardown.yml from the declaration, takes down the views a stopped run left."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import duet_pair, teardown
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import chroot
from plan_options import assert_plan_matches_its_specs, cell_plan
from test_kinds import OPTIONS, make_cell

from tests import skips

# Acts on the host where a live lab would see it or suffer from it: a view under the lab's own /run/platbench/chroot,
# with binds of /, /proc, /sys and /dev. `make test` runs it first, before the lab is up (marker `host`,
# docs/src/tests.md).
pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[2]
TEARDOWN = REPO / "playbooks" / "teardown.yml"
FACTS = {
    "cpus_allowed": [0, 1],
    "numa_nodes": {"0": [0, 1]},
    "gpu_count": 0,
    "gpus": [],
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
}


def plan(cpu_config="pin", **labels):
    cell = make_cell("cr", cpu_config)
    cell["labels"].update(labels)
    return cell_plan(cell, FACTS, OPTIONS)


def test_a_pinned_cell_is_the_workload_chrooted_into_a_view_of_its_own_under_taskset_in_its_own_cgroup():
    planned = plan()
    assert_plan_matches_its_specs(planned)
    assert planned["kind"] == "chroot" and planned["task_file"] == placements.KINDS["chroot"].task_file
    view = planned["chroot"]["view"]
    assert view == f"{chroot.VIEWS}/{planned['name']}" and planned["chroot"]["root"] == chroot.ROOT
    # place.yml takes a view the line left down with the line's own commands.
    down = planned["chroot"]["down"]
    assert down in planned["process"]["command"] and f"umount --recursive {view}" in down
    process = planned["process"]
    assert process["argv"][:5] == ["taskset", "--cpu-list", planned["cpuset"], "chroot", view]
    assert process["argv"][5:7] == [f"{chroot.PREFIX}/venv/bin/python", "-m"]
    assert process["become"] and process["normal_policy"] and process["clean_env"]
    assert process["cgroup"]["quota_us"] == -1  # a cgroup of its own, as bm's, with no quota
    command = process["command"]
    # The view first, then the workload's own line (which enters the cgroup), then the view goes.
    assert command.index(f"mount --bind {chroot.ROOT} {view}") < command.index("sh -c") < command.rindex("umount")
    assert "cgroup.procs" in command and command.endswith("exit $status")
    assert planned["runtime"]["launcher"] == "taskset chroot"


def test_an_unpinned_cell_gets_every_cpu_and_an_injected_quota_is_its_cgroup_s():
    vanilla = plan("vnl")
    assert vanilla["process"]["argv"][:4] == ["taskset", "--cpu-list", "0-1", "chroot"]
    assert vanilla["runtime"]["launcher"] == "chroot"
    capped = plan(inject="cpu_quota=0.5")
    assert capped["process"]["cgroup"]["quota_us"] == 50000
    assert capped["runtime"]["inject"]["cpu_quota"] == 0.5


def test_a_duet_runs_its_line_as_a_process_side():
    (side,) = duet_pair.sides([plan()])
    assert side["engine"] is None and side["run"]["command"] == plan()["process"]["command"]
    assert "cgroup" in side["run"]


@skips.needs_root("the view is made of bind mounts")
def test_the_line_makes_the_view_runs_in_it_with_the_cell_s_directories_and_takes_it_down(tmp_path):
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    cache.mkdir()
    (data / "sample").write_text("seen\n")
    token = secrets.token_hex(6)
    view, scratch = f"{chroot.VIEWS}/platbench-test-{token}", f"/tmp/platbench-view-{token}"
    mounts = [
        {"source": str(data), "target": str(data), "mode": "ro"},
        {"source": str(cache), "target": str(cache), "mode": "rw"},
    ]
    # This machine's own root stands in for the image's: the workload is a shell chrooted into the view.
    inside = (
        f"cat {data}/sample; touch {data}/written 2>/dev/null && echo data-writable; "
        f"touch {cache}/written && echo cache-written; test -r /proc/self/status && echo proc; "
        f"touch {scratch} && echo tmp; exit 3"
    )
    workload = f"exec chroot {view} /bin/sh -c {json.dumps(inside)}"
    done = subprocess.run(
        ["sh", "-c", chroot.line(view, mounts, workload, root="/")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr  # the workload's status, after the view went
    assert done.stdout.split() == ["seen", "cache-written", "proc", "tmp"], done.stdout
    assert (cache / "written").exists() and not (data / "written").exists()
    assert not Path(view).exists()
    assert view not in Path("/proc/mounts").read_text()
    assert not Path(scratch).exists()  # the view's /tmp was its own, and went with it


@skips.needs_root("a leftover view is a bind mount")
def test_the_kind_s_teardown_found_from_its_declaration_takes_down_a_leftover_view(tmp_path, playbook):
    views, source = tmp_path / "views", tmp_path / "root"
    source.mkdir()
    left = views / f"platbench-{secrets.token_hex(6)}"
    left.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(source), str(left)], check=True, timeout=30)
    try:
        inventory = tmp_path / "hosts.yml"
        hosts = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
        inventory.write_text(yaml.safe_dump({"all": {"children": {"platbench_container_hosts": {"hosts": hosts}}}}))
        plays = [
            {
                "name": "The teardown play of kinds kept in their own folders, on a container host",
                "hosts": "platbench_container_hosts",
                "gather_facts": False,
                "vars": {"teardown_chroot_views": str(views)},
                "tasks": [
                    {
                        "ansible.builtin.include_tasks": "{{ item }}",
                        "loop": f"{{{{ group_names | platbench.lab.kind_teardown('{TEARDOWN}') }}}}",
                    }
                ],
            }
        ]
        run = playbook(plays, inventory=inventory)
        assert run.rc == 0, run.output[-4000:]
        assert not left.exists() and str(left) not in Path("/proc/mounts").read_text()
    finally:
        subprocess.run(["umount", str(left)], capture_output=True, timeout=30)


def test_teardown_yml_runs_the_kinds_own_teardown_files_from_the_declarations():
    own = Path(chroot.HERE) / "tasks" / "teardown.yml"
    # The process kind's own teardown stops a leftover workload first: a play of teardown.yml imports it, with the
    # other first kinds'; the last play runs the chroot kind's, from its declaration.
    assert placements.KINDS["chroot"].teardown[:2] == (placements.KINDS["process"].teardown[0], str(own))
    assert str(own) in teardown.own_files(["platbench_container_hosts"], str(TEARDOWN))
    assert teardown.own_files(["platbench_mvm_hosts"], str(TEARDOWN)) == []
    last = yaml.safe_load(TEARDOWN.read_text())[-1]
    assert "platbench_container_hosts" in last["hosts"] and "kind_teardown" in last["tasks"][0]["loop"]
