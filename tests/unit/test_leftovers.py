"""What an earlier run left on a runner host, named by the precheck (plugins/plugin_utils/cells/leftovers.py): the
results of network_path and cpu_fence in check mode and pgrep's lines, as the precheck registers them."""

import json
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter import cells as filters
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.leftovers import leftover_problems
from playbook_run import REPO

# Acts on the host where a live lab would see it or suffer from it: asserts that the host has no cells' links or
# namespaces. `make test` runs it first, before the lab is up (marker `host`, docs/src/tests.md).
pytestmark = pytest.mark.host

PATHS = {
    "changed": True,
    "commands": [
        ["ip", "-n", "pb1a2b3c4d-0", "link", "del", "pb1a2b3c4dv0"],
        ["ip", "netns", "del", "pb1a2b3c4d-0"],
        ["ip", "link", "del", "pb1a2b3c4dh0"],
        ["ip", "link", "del", "pb1a2b3c4dbr"],
        ["iptables", "-D", "FORWARD", "-i", "pb1a2b3c4dbr", "-m", "comment", "--comment", "pb1a2b3c4d", "-j", "ACCEPT"],
    ],
    "removed_tags": ["pb1a2b3c4d"],
}
FENCE = {"changed": True, "fence": {"cgroup": "v2", "cpus": "0-1", "groups": {"system.slice": ""}}}
NOTHING = ({"changed": False, "commands": [], "removed_tags": []}, {"changed": False, "fence": None}, [])


def test_nothing_left_is_no_problem():
    assert leftover_problems(*NOTHING, "lab1") == []


def test_every_leftover_is_named_with_what_removes_it():
    [problem] = leftover_problems(
        PATHS, FENCE, ["4242 /opt/platbench/venv/bin/python -m workloads.cnn_train --steps 9"], "lab1", "/run/f.json"
    )
    lines = problem.splitlines()
    assert lines[:4] == [
        "lab1 holds what an earlier run left, or a campaign running there now:",
        "  the network paths of cells: namespace pb1a2b3c4d-0; bridge pb1a2b3c4dbr; link pb1a2b3c4dh0; 1 FORWARD rule;",
        "  an idle_cores fence: every top-level cgroup kept on CPUs 0-1 (/run/f.json);",
        "  workload process 4242.",
    ]
    assert lines[4].startswith("Measuring beside them would distort the cells: remove them with `ansible-playbook -i ")
    assert "playbooks/teardown.yml`" in lines[4] and len(lines) == 5  # platbench run shows a failed task's 5 lines


def test_many_names_are_counted_past_the_first_few():
    processes = [f"{pid} python -m workloads.cnn_train" for pid in range(100, 107)]
    [problem] = leftover_problems(NOTHING[0], NOTHING[1], processes, "lab1")
    assert "  workload processes 100, 101, 102, 103 and 3 more." in problem.splitlines()


def test_the_filter_takes_the_registered_results_as_the_precheck_hands_them():
    leftovers = filters.FilterModule().filters()["leftover_problems"]
    assert leftovers(*NOTHING, "lab1") == []
    with pytest.raises(AnsibleFilterError, match="expected the results of network_path and cpu_fence"):
        leftovers("not a result", FENCE, [], "lab1")
    [problem] = leftovers(NOTHING[0], FENCE, [], "lab1")
    assert "  an idle_cores fence: every top-level cgroup kept on CPUs 0-1." in problem.splitlines()


# -- the module that reads them (plugins/modules/leftovers.py), on this host ---------------------------------------

SLEEPER = "import time\ntime.sleep(120)\n"


def test_the_module_reads_all_four_in_one_run_and_changes_nothing(tmp_path, playbook):
    # A workload process of a fake environment (PREFIX/venv/bin/python -m workloads.NAME), a cell's cgroup in a fake
    # v1 cpu hierarchy, and a fence's state file; the host's own network namespaces hold no cell's path.
    prefix, root = tmp_path / "prefix", tmp_path / "cgroup"
    (prefix / "venv" / "bin").mkdir(parents=True)
    (prefix / "venv" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "__init__.py").write_text("")
    (tmp_path / "workloads" / "sleeper.py").write_text(SLEEPER)
    cell = root / "cpu" / "platbench-cell-0123456789ab"
    cell.mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "cpu" / "someone-else").mkdir()
    fence_file = tmp_path / "cpu_fence.json"
    fence_file.write_text(json.dumps({"version": 1, "cpus": "1", "cgroup": "v1", "groups": {}}))
    args = {"prefix": str(prefix), "cgroup_root": str(root), "fence_state_file": str(fence_file)}
    plays = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}", "platform_run_prefix": str(prefix)},
            # Teardown's pattern (its variables, the workload_process_pattern filter) finds what the module finds.
            "vars_files": [str(REPO / "playbooks/vars/teardown.yml")],
            "tasks": [
                {"name": "Read", "platbench.lab.leftovers": args, "register": "left"},
                {
                    "name": "Find them as teardown does",
                    "ansible.builtin.command": {"argv": ["pgrep", "--full", "{{ teardown_workload_pattern }}"]},
                    "changed_when": False,
                },
            ],
        }
    ]
    workload = subprocess.Popen([str(prefix / "venv" / "bin" / "python"), "-m", "workloads.sleeper"], cwd=tmp_path)
    try:
        run = playbook(plays)
    finally:
        workload.kill()
        workload.wait(timeout=30)
    assert run.rc == 0, run.output[-3000:]
    left, found = [e["event_data"]["res"] for e in run.events if e.get("event") == "runner_on_ok"]
    assert found["stdout"].split() == [str(workload.pid)]
    assert left["changed"] is False
    assert left["cgroups"] == [str(cell)]
    assert left["fence"]["fence"]["cpus"] == "1"
    assert [line.split(None, 1)[0] for line in left["processes"]] == [str(workload.pid)]
    assert left["paths"]["removed_tags"] == [] and left["paths"]["commands"] == []
    assert cell.is_dir() and fence_file.is_file()  # read, not removed
    [problem] = leftover_problems(left["paths"], left["fence"], left["processes"], "lab1", cgroups=left["cgroups"])
    assert f"workload process {workload.pid}" in problem and "platbench-cell-0123456789ab" in problem
