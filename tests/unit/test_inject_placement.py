"""An injected overhead (the experiment's ``inject: {cpu_quota: Q}``) where each cell runs: the process kind's CPU quota
cgroup (its shell line, the quota arithmetic, cgroup v1 and v2, the cgroup's name per cell; module_utils/cpu_quota.py
on cgroup trees of the test's own) and the container engines' own ``--cpus``; the teardown of a cgroup a stopped cell
left. The effect itself, measured: tests/integration/test_inject.py."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, instance_name
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.leftovers import leftover_problems
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options, split_line

V1 = {"version": "v1", "directory": "/sys/fs/cgroup/cpu"}
V2 = {"version": "v2", "directory": "/sys/fs/cgroup"}
HOST = {
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
    "gpu_count": 0,
    "gpus": [],
    "cpu_cgroup": V1,
}
OPTIONS = plan_options(
    host="runner-a",
    campaign="c1",
    engines={
        "docker": {"answers": True, "version": "24.0.5", "image_id": "sha256:" + "cd" * 32},
        "podman": {"answers": True, "version": "4.3.1", "image_id": "sha256:" + "cd" * 32},
    },
    sif={"sif": "/var/lib/platbench/sif/workload-cdcdcdcdcdcd.sif", "image_id": "sha256:" + "cd" * 32},
    apptainer_version="1.4.5",
)
INJECTED = "cpu_quota=0.95"
REPO = Path(__file__).resolve().parents[2]


def make_cell(platform, scaleup=1, cpu_config="pin", injected=INJECTED, workload="cnn_train", repeat=0):
    scenario = f"{platform}/{scaleup}/{cpu_config}/cpu"
    params = {"framework": "tensorflow", "steps": 3} if workload == "cnn_train" else {"duration": 1}
    labels = {
        **params,
        "platform": platform,
        "scaleup": scaleup,
        "cpu_config": cpu_config,
        "processor": "cpu",
        "workload": workload,
        "repeat": repeat,
        "host": "runner-a",
    }
    cell_id = f"{scenario}|r{repeat}"
    if injected is not None:
        labels["inject"] = injected
        cell_id = f"{scenario}|inject={injected}|r{repeat}"
    return {"id": cell_id, "scenario": scenario, "params": params, "labels": labels}


def command_words(plan):
    """The words of a cell's workload command, after the shell has made its cgroup and moved itself into it."""
    line = split_line(plan["process"]["command"])
    assert line["enter"] == cpu_quota.shell_enter(plan["process"]["cgroup"])
    assert line["leave"] == cpu_quota.shell_leave(plan["process"]["cgroup"])
    return shlex.split(line["workload"])


# A runner-host process cell's workload command, after its cgroup is made and entered: nice 0, then the normal
# policy (the shell stays, to remove the cgroup after); its deadline, and the clean environment env -i starts the
# workload's on.
RESET = ["renice", "-n", "0", "-p", "$$", ">/dev/null", "&&", "chrt", "--other", "0"]
STARTS = len(RESET)
DEADLINE = ["timeout", "--verbose", "--kill-after=10", "3600"]
CLEAN_ENV = ["-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"]


# -- the process kind: the cell's own cgroup -------------------------------------------------------------------------


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_an_injected_bm_cell_enters_its_cgroup_before_it_execs_the_workload(cpu_config):
    plan = cell_plan(make_cell("bm", cpu_config=cpu_config), HOST, OPTIONS)
    cgroup = plan["process"]["cgroup"]
    name = instance_name("c1", "runner-a", plan["cell"])
    assert cgroup == {
        "path": f"/sys/fs/cgroup/cpu/platbench-cell-{name.removeprefix('platbench-')}",
        "version": "v1",
        "quota_us": 95000,
        "period_us": 100000,
    }
    words = command_words(plan)
    # The shell makes the cgroup with its quota and moves itself into it, back to nice 0, then starts the workload at
    # the normal policy: what it starts is born in the cgroup. The deadline and the pinning stay as for every cell.
    assert words[:STARTS] == RESET
    assert cgroup["path"] + "/cpu.cfs_quota_us" in split_line(plan["process"]["command"])["enter"]
    assert words[STARTS : STARTS + 9] == [*DEADLINE, "env", *CLEAN_ENV]
    # vnl: every CPU the host allows (the harness may be kept on fewer, and its affinity would pass down).
    taskset = ["taskset", "--cpu-list", "7" if cpu_config == "pin" else "0-7"]
    assert plan["process"]["argv"] == taskset + ["/opt/platbench/venv/bin/python"] + plan["argv"]
    assert words[STARTS + 9 + len(plan["process"]["env"]) :] == plan["process"]["argv"]
    # `$$` is the shell's, unquoted; everything else as the plain cell's line quotes it.
    assert "echo $$ > " in plan["process"]["command"]
    assert plan["runtime"]["inject"] == {
        "cpu_quota": 0.95,
        "quota_cpus": 0.95,
        "applied_by": "cgroup v1 cpu.cfs_quota_us=95000 cpu.cfs_period_us=100000",
        "cgroup": cgroup["path"],
    }
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize("platform", ["bm", "sg"])
def test_a_cell_of_no_inject_experiment_runs_in_an_uncapped_cgroup_of_its_own_too(platform):
    # Every process cell on the runner host is in a cgroup of its own, as a container is: not only an inject
    # experiment's.
    plan = cell_plan(make_cell(platform, injected=None), HOST, OPTIONS)
    name = instance_name("c1", "runner-a", plan["cell"])
    cgroup = plan["process"]["cgroup"]
    assert cgroup == {
        "path": f"/sys/fs/cgroup/cpu/platbench-cell-{name.removeprefix('platbench-')}",
        "version": "v1",
        "quota_us": cpu_quota.UNLIMITED,
        "period_us": 100000,
    }
    assert "inject" not in plan["runtime"]
    assert plan["runtime"]["uncapped_cgroup"] == {
        "cgroup": cgroup["path"],
        "applied_by": "cgroup v1 cpu.cfs_quota_us=-1 cpu.cfs_period_us=100000",
    }
    words = command_words(plan)
    assert words[: STARTS + 9] == [
        *RESET,
        *DEADLINE,
        "env",
        *CLEAN_ENV,
    ]
    assert words[STARTS + 9 + len(plan["process"]["env"]) :] == plan["process"]["argv"]
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize("platform", ["bm", "sg"])
def test_an_uncapped_cell_of_an_inject_experiment_runs_in_a_cgroup_of_its_own_without_a_quota(platform):
    # Measured on this host (benchmarks/power.py, duet): a cell in a cgroup of its own under a quota it never
    # reaches ran 10-18% faster than its partner outside one; the cap must be the only difference.
    plan = cell_plan(make_cell(platform, injected="none"), HOST, OPTIONS)
    cgroup = plan["process"]["cgroup"]
    assert cgroup["quota_us"] == cpu_quota.UNLIMITED and "inject" not in plan["runtime"]
    assert plan["runtime"]["uncapped_cgroup"] == {
        "cgroup": cgroup["path"],
        "applied_by": cpu_quota.describe(cgroup["version"], cpu_quota.UNLIMITED),
    }
    assert "cgroup.procs" in plan["process"]["command"]
    assert cpu_quota.settings("v1", cpu_quota.UNLIMITED) == [
        ("cpu.cfs_period_us", "100000"),
        ("cpu.cfs_quota_us", "-1"),
    ]
    assert cpu_quota.settings("v2", cpu_quota.UNLIMITED) == [("cpu.max", "max 100000")]
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize(
    "fraction, cpus, quota", [(0.95, 1, 95000), (0.95, 2, 190000), (0.7, 1, 70000), (0.7, 2, 140000), (1, 2, 200000)]
)
def test_the_quota_is_the_fraction_of_the_cells_cpus_of_each_period(fraction, cpus, quota):
    assert cpu_quota.quota_us(fraction, cpus) == quota
    assert cpu_quota.quota_us(fraction, cpus, period_us=50000) == quota // 2
    plan = cell_plan(make_cell("bm", scaleup=cpus, injected=f"cpu_quota={fraction:g}"), HOST, OPTIONS)
    assert plan["process"]["cgroup"]["quota_us"] == quota and plan["process"]["cgroup"]["period_us"] == 100000
    assert plan["runtime"]["inject"]["quota_cpus"] == pytest.approx(fraction * cpus)
    plan = cell_plan(
        make_cell("bm", scaleup=cpus, injected=f"cpu_quota={fraction:g}"), {**HOST, "cpu_cgroup": V2}, OPTIONS
    )
    assert plan["process"]["cgroup"]["path"].startswith("/sys/fs/cgroup/platbench-cell-")
    assert plan["runtime"]["inject"]["applied_by"] == f"cgroup v2 cpu.max={quota} 100000"
    assert cpu_quota.settings("v2", quota) == [("cpu.max", f"{quota} 100000")]
    assert cpu_quota.settings("v1", quota) == [("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", str(quota))]


def test_a_quota_below_the_kernels_minimum_is_refused():
    with pytest.raises(cpu_quota.QuotaError, match="below the kernel's minimum of 1000 us"):
        cpu_quota.quota_us(0.005, 1)
    with pytest.raises(CellPlanError, match="inject: .*below the kernel's minimum"):
        cell_plan(make_cell("bm", injected="cpu_quota=0.005"), HOST, OPTIONS)


def test_each_cell_has_a_cgroup_of_its_own():
    paths = set()
    for campaign, host, repeat in [("c1", "runner-a", 0), ("c1", "runner-a", 1), ("c2", "runner-a", 0), ("c1", "b", 0)]:
        cell = make_cell("bm", repeat=repeat)
        cell["labels"]["host"] = host
        path = cell_plan(cell, HOST, {**OPTIONS, "campaign": campaign, "host": host})["process"]["cgroup"]["path"]
        name = path.rsplit("/", 1)[1]
        assert cpu_quota.NAME.match(name)
        assert name == cpu_quota.cgroup_name(instance_name(campaign, host, cell["id"]))
        paths.add(path)
    assert len(paths) == 4
    # The same cell planned again gets the same cgroup (a resumed campaign, the teardown of a stopped one).
    again = cell_plan(make_cell("bm"), HOST, OPTIONS)["process"]["cgroup"]["path"]
    assert again == cell_plan(make_cell("bm"), HOST, OPTIONS)["process"]["cgroup"]["path"]


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_an_injected_sg_cell_runs_apptainer_in_the_cells_cgroup_without_apptainers_own_quota(cpu_config):
    plan = cell_plan(make_cell("sg", scaleup=2, cpu_config=cpu_config), HOST, OPTIONS)
    argv = plan["process"]["argv"]
    # Apptainer's --cpus would move the workload into a cgroup of its own, out of the cell's.
    assert "--cpus" not in argv and "apptainer" in argv
    assert (argv[:3] == ["taskset", "--cpu-list", "6,7"]) == (cpu_config == "pin")
    assert plan["process"]["cgroup"]["quota_us"] == 190000
    assert "echo $$ > " in plan["process"]["command"]
    assert plan["runtime"]["cpu_quota_requested"] is None
    assert_plan_matches_its_specs(plan)


def test_an_injected_cell_on_a_host_without_the_cpu_controller_says_what_to_do():
    facts = {key: value for key, value in HOST.items() if key != "cpu_cgroup"}
    for host in (facts, {**facts, "cpu_cgroup": None}):
        with pytest.raises(CellPlanError, match="inject: cpu_quota needs the cgroup cpu controller .* drop inject"):
            cell_plan(make_cell("bm"), host, OPTIONS)
        # A cell without injection needs it too, for its cgroup of its own (tests/unit/test_process_isolation.py).
        with pytest.raises(CellPlanError, match="a bm cell runs in a cgroup of its own, .* `isolation: none`"):
            cell_plan(make_cell("bm", injected="none"), host, OPTIONS)


# -- the container kind: the engine's own quota ---------------------------------------------------------------------


@pytest.mark.parametrize("platform, engine", [("cn", "docker"), ("pd", "podman")])
@pytest.mark.parametrize("scaleup", [1, 2])
def test_an_injected_container_gets_the_engines_quota_beside_its_cpuset_or_in_place_of_vnls(platform, engine, scaleup):
    pinned = cell_plan(make_cell(platform, scaleup=scaleup, cpu_config="pin"), HOST, OPTIONS)
    cpuset = "7" if scaleup == 1 else "6,7"
    assert pinned["container"]["cpuset_cpus"] == cpuset
    assert pinned["container"]["cpus"] == pytest.approx(0.95 * scaleup)
    assert pinned["runtime"]["inject"] == {
        "cpu_quota": 0.95,
        "quota_cpus": pytest.approx(0.95 * scaleup),
        "applied_by": f"{engine} --cpus {0.95 * scaleup:g} with --cpuset-cpus {cpuset}",
    }
    vanilla = cell_plan(make_cell(platform, scaleup=scaleup, cpu_config="vnl"), HOST, OPTIONS)
    assert vanilla["container"]["cpuset_cpus"] is None
    assert vanilla["container"]["cpus"] == pytest.approx(0.95 * scaleup)  # not vnl's quota of scale-up CPUs
    assert vanilla["runtime"]["inject"]["applied_by"] == f"{engine} --cpus {0.95 * scaleup:g}"
    for plan in (pinned, vanilla):
        assert_plan_matches_its_specs(plan)
    plain = cell_plan(make_cell(platform, scaleup=scaleup, cpu_config="vnl", injected="none"), HOST, OPTIONS)
    assert plain["container"]["cpus"] == float(scaleup) and "inject" not in plain["runtime"]
    plain = cell_plan(make_cell(platform, scaleup=scaleup, cpu_config="pin", injected=None), HOST, OPTIONS)
    assert plain["container"]["cpus"] is None


# -- refused where it cannot be applied ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cell, message",
    [
        (make_cell("vm"), "inject: vm .*cannot take an injected overhead"),
        (make_cell("mvm"), "inject: mvm .*cannot take an injected overhead"),
        (make_cell("bm", workload="micro_net"), "inject: an overhead is injected into cells of one instance only"),
        (make_cell("bm", injected="cpu_shares=5"), "unknown injection"),
    ],
    ids=["guest", "micro-vm", "instances", "unknown-knob"],
)
def test_cells_an_injection_cannot_be_applied_to_are_refused(cell, message):
    with pytest.raises(CellPlanError, match=message):
        cell_plan(cell, HOST, {**OPTIONS, "guest_image": {"container_image_id": "sha256:" + "ab" * 32}})


# -- cgroup v1 and v2 on trees of the test's own ---------------------------------------------------------------------


def v2_tree(root, controllers="cpuset cpu io memory pids", subtree="cpuset cpu io memory pids"):
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(subtree + "\n")
    return root


def v1_tree(root, mount="cpu"):
    (root / mount).mkdir(parents=True)
    for name, value in (("cpu.cfs_quota_us", "-1"), ("cpu.cfs_period_us", "100000")):
        (root / mount / name).write_text(value + "\n")
    return root / mount


def test_the_cpu_controller_is_found_on_cgroup_v2_v1_and_a_hybrid_host(tmp_path):
    unified = v2_tree(tmp_path / "unified-host")
    assert cpu_quota.hierarchy(str(unified)) == {"version": "v2", "directory": str(unified)}
    # v1 with cpu and cpuacct mounted together, and a unified mount that offers no cpu (this lab's host).
    hybrid = tmp_path / "hybrid"
    shared = v1_tree(hybrid, "cpu,cpuacct")
    v2_tree(hybrid / "unified", controllers="", subtree="")
    assert cpu_quota.hierarchy(str(hybrid)) == {"version": "v1", "directory": str(shared)}
    legacy = tmp_path / "legacy"
    assert cpu_quota.hierarchy(str(legacy)) is None
    cpu = v1_tree(legacy)
    assert cpu_quota.hierarchy(str(legacy)) == {"version": "v1", "directory": str(cpu)}
    # A v2 root whose controllers lack cpu (it is bound to v1) is not where the quota goes.
    v2_tree(legacy, controllers="memory pids")
    assert cpu_quota.hierarchy(str(legacy))["version"] == "v1"
    # A hybrid host whose cpu controller is on the unified mount.
    moved = tmp_path / "moved"
    v2_tree(moved / "unified")
    assert cpu_quota.hierarchy(str(moved)) == {"version": "v2", "directory": str(moved / "unified")}


def test_the_v1_quota_is_written_period_first_and_read_back(tmp_path):
    directory = v1_tree(tmp_path)
    path = str(directory / "platbench-cell-0123456789ab")
    assert cpu_quota.create(path, "v1", 95000, check=True) == (
        True,
        {"cgroup": path, "enabled_cpu": False, "applied": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "95000"}},
    )
    assert not (directory / "platbench-cell-0123456789ab").exists()  # check mode changes nothing
    changed, result = cpu_quota.create(path, "v1", 95000)
    assert changed and result["applied"] == {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "95000"}
    assert cpu_quota.create(path, "v1", 95000)[0] is False  # the same quota again: nothing to change
    assert cpu_quota.create(path, "v1", 70000)[1]["applied"]["cpu.cfs_quota_us"] == "70000"


def test_the_v2_quota_enables_the_cpu_controller_where_it_is_not(tmp_path):
    root = v2_tree(tmp_path, subtree="memory pids")
    path = str(root / "platbench-cell-0123456789ab")
    changed, result = cpu_quota.create(path, "v2", 190000)
    assert changed and result == {"cgroup": path, "enabled_cpu": True, "applied": {"cpu.max": "190000 100000"}}
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"  # what the kernel takes; it then lists cpu
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert cpu_quota.create(path, "v2", 190000) == (
        False,
        {"cgroup": path, "enabled_cpu": False, "applied": {"cpu.max": "190000 100000"}},
    )


def test_a_quota_that_does_not_read_back_is_an_error(tmp_path, monkeypatch):
    directory = v1_tree(tmp_path)
    path = str(directory / "platbench-cell-0123456789ab")
    written = cpu_quota._write
    monkeypatch.setattr(
        cpu_quota, "_write", lambda file, value: written(file, "-1" if file.endswith("quota_us") else value)
    )
    with pytest.raises(cpu_quota.QuotaError, match="did not take: cpu.cfs_quota_us reads '-1'"):
        cpu_quota.create(path, "v1", 95000)


def test_a_hierarchy_that_is_gone_is_named(tmp_path):
    with pytest.raises(cpu_quota.QuotaError, match="does not exist: .*gather the host's facts again"):
        cpu_quota.create(str(tmp_path / "cpu" / "platbench-cell-0123456789ab"), "v1", 95000)


def test_the_cells_cgroups_are_found_and_removed_and_only_theirs(tmp_path):
    directory = v1_tree(tmp_path)
    # A cell's cgroup, and one that a run of an earlier release left (its cells' cgroups were platbench-inject-*).
    cells = [directory / "platbench-cell-0123456789ab", directory / "platbench-inject-ba9876543210"]
    others = [directory / "docker", directory / "platbench-cell-mine", directory / "platbench-0123456789ab"]
    for path in cells + others:
        path.mkdir()
    assert cpu_quota.leftovers(str(tmp_path)) == [str(path) for path in cells]
    assert cpu_quota.remove(str(cells[0]), check=True) == (True, [])
    assert cells[0].exists()
    assert cpu_quota.remove(str(cells[0])) == (True, [])
    assert not cells[0].exists() and cpu_quota.remove(str(cells[0])) == (False, [])
    assert cpu_quota.leftovers(str(tmp_path)) == [str(cells[1])]
    assert cpu_quota.leftovers(str(tmp_path / "nowhere")) == []


def test_the_precheck_names_a_cgroup_left_behind():
    nothing = ({"changed": False, "commands": []}, {"changed": False, "fence": None}, [])
    assert leftover_problems(*nothing, "lab1", cgroups=[]) == []
    left = [f"/sys/fs/cgroup/cpu/platbench-cell-{index:012x}" for index in range(5)]
    [problem] = leftover_problems(*nothing, "lab1", cgroups=left)
    assert problem.splitlines()[1] == (
        "  the process cells' cgroups platbench-cell-000000000000, platbench-cell-000000000001, "
        "platbench-cell-000000000002, platbench-cell-000000000003 and 1 more (in /sys/fs/cgroup/cpu)."
    )


# -- teardown.yml removes what a stopped cell left -------------------------------------------------------------------


def test_teardown_removes_the_cgroups_stopped_cells_left_and_only_those(tmp_path, playbook):
    """teardown.yml's process part (as its runner hosts' play imports it, with its settings) against a cgroup v1 tree
    of the test's own: the cells' cgroups go, a foreign group stays. teardown_cell_cgroups follows
    teardown_cell_networks, whose false (a campaign may be running here) leaves them."""
    root = tmp_path / "cgroup"
    directory = v1_tree(root)
    cells = [directory / "platbench-cell-0123456789ab", directory / "platbench-inject-ba9876543210"]
    foreign = directory / "platbench-cell-notacell"
    for path in [*cells, foreign]:
        path.mkdir()
    play = {
        "name": "The runner hosts' process teardown",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars_files": [str(REPO / "playbooks/vars/teardown.yml")],
        "vars": {"ansible_python_interpreter": sys.executable},
        "tasks": [{"ansible.builtin.import_tasks": str(placements.KINDS["process"].teardown[0])}],
    }
    # As -e, over the settings' own: no workload of this test's prefix runs, and the cgroup tree is the test's.
    variables = {"platform_run_prefix": str(tmp_path / "prefix"), "teardown_cgroup_root": str(root)}
    kept = playbook([play], {**variables, "teardown_cell_networks": False})
    assert kept.rc == 0 and kept.recap() == (0, 0), kept.output[-3000:]
    assert all(path.exists() for path in cells)

    first = playbook([play], variables)
    assert first.rc == 0 and first.recap() == (1, 0), first.output[-3000:]
    (removed,) = [result["removed"] for result in first.results("Remove the cgroups of process cells")]
    assert removed == [str(path) for path in cells]
    assert not any(path.exists() for path in cells) and foreign.exists()


# -- a spin: the workload's own, on every kind -----------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["bm", "sg", "cn", "pd", "vm"])
def test_a_spin_travels_in_the_workloads_environment_on_every_kind(platform):
    options = {**OPTIONS, "guest_image": {"container_image_id": "sha256:" + "ab" * 32}}
    plan = cell_plan(make_cell(platform, injected="spin=0.05"), HOST, options)
    assert plan["env"]["PLATBENCH_INJECT_SPIN"] == "0.05"
    assert plan["runtime"]["inject_spin_requested"] == {
        "fraction": 0.05,
        "applied_by": "the workload, after each step (PLATBENCH_INJECT_SPIN=0.05)",
    }
    assert "inject" not in plan["runtime"]  # no quota: the cell's CPUs are whole
    if plan.get("container"):
        assert plan["container"]["cpus"] is None
    plain = cell_plan(make_cell(platform, injected="none"), HOST, options)
    assert "PLATBENCH_INJECT_SPIN" not in plain["env"] and "inject_spin_requested" not in plain["runtime"]
    assert_plan_matches_its_specs(plan)


def test_a_discard_travels_in_the_workloads_environment_as_a_spin_does():
    options = {**OPTIONS, "guest_image": {"container_image_id": "sha256:" + "ab" * 32}}
    plan = cell_plan(make_cell("cn", injected="discard=0.05"), HOST, options)
    assert plan["env"]["PLATBENCH_INJECT_DISCARD"] == "0.05" and "PLATBENCH_INJECT_SPIN" not in plan["env"]
    assert plan["runtime"]["inject_discard_requested"] == {
        "fraction": 0.05,
        "applied_by": "the workload, leaving that share of its timed steps, spread evenly, out of its throughput "
        "(PLATBENCH_INJECT_DISCARD=0.05)",
    }
    assert "inject_spin_requested" not in plan["runtime"] and plan["container"]["cpus"] is None
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize("injected", ["none", "spin=0.05", "spin=0"])
def test_the_cells_of_a_spin_experiment_each_run_in_an_uncapped_cgroup_of_their_own(injected):
    # The injected and the plain cell must differ by the spin only: both in a cgroup of their own, neither capped.
    plan = cell_plan(make_cell("bm", injected=injected), HOST, OPTIONS)
    assert plan["process"]["cgroup"]["quota_us"] == cpu_quota.UNLIMITED
    assert "cgroup.procs" in plan["process"]["command"]
