"""What an earlier run left on a runner host, named by the precheck (plugins/plugin_utils/leftovers.py): the
results of network_path and cpu_fence in check mode and pgrep's lines, as the precheck registers them."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.platbench.lab.plugins.filter import platbench as filters
from ansible_collections.platbench.lab.plugins.plugin_utils.leftovers import leftover_problems

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
    assert problem.startswith("lab1 holds what an earlier run left, or a campaign running there now: ")
    assert (
        "the network paths of cells (namespace pb1a2b3c4d-0; bridge pb1a2b3c4dbr; link pb1a2b3c4dh0; 1 FORWARD rule); "
        "an idle_cores fence (every top-level cgroup kept on CPUs 0-1, recorded in /run/f.json); workload process 4242."
    ) in problem
    assert "Remove them with `ansible-playbook -i INVENTORY playbooks/teardown.yml`" in problem


def test_the_filter_takes_the_registered_results_as_the_precheck_hands_them():
    leftovers = filters.FilterModule().filters()["leftover_problems"]
    assert leftovers(*NOTHING, "lab1") == []
    with pytest.raises(AnsibleFilterError, match="expected the results of network_path and cpu_fence"):
        leftovers("not a result", FENCE, [], "lab1")
    [problem] = leftovers(NOTHING[0], FENCE, [], "lab1")
    assert "an idle_cores fence (every top-level cgroup kept on CPUs 0-1)" in problem
