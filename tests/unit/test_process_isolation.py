"""Where a process cell runs on the runner host, now that the harness runs at SCHED_IDLE in a cgroup of its own
(plugins/module_utils/quiet.py): in a cgroup of the cell's own, at the normal policy and nice 0, in a clean
environment, an unpinned one over every CPU the host allows (placements/process/); or, in an experiment of
``isolation: none``, where the harness is. A guest's process cell is inside its guest: none of this."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_quota
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, instance_name
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.process import shell_command
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options, split_line

# Acts on the host where a live lab would see it or suffer from it: a real platbench-cell-* cgroup, which a lab cell's
# precheck refuses to start beside. `make test` runs it first, before the lab is up (marker `host`,
# docs/src/tests.md).
pytestmark = pytest.mark.host

V1 = {"version": "v1", "directory": "/sys/fs/cgroup/cpu"}
V2 = {"version": "v2", "directory": "/sys/fs/cgroup"}
HOST = {"cpu_cgroup": V2, "cpus_allowed": list(range(8)), "numa_nodes": {"0": list(range(8))}, "gpu_count": 0}
NO_CPU_CONTROLLER = {name: value for name, value in HOST.items() if name != "cpu_cgroup"}
OPTIONS = plan_options(
    host="runner-a",
    campaign="c1",
    sif={"sif": "/var/lib/platbench/sif/workload-cdcdcdcdcdcd.sif", "image_id": "sha256:" + "cd" * 32},
    apptainer_version="1.4.5",
    guest_image={"container_image_id": "sha256:" + "ab" * 32},
)
# The start of a runner-host process cell's workload command; then its deadline and `env -i` on this base. Without a
# cgroup the shell execs it; with one it stays, to remove the cgroup after.
RESET = "renice -n 0 -p $$ >/dev/null && chrt --other 0 timeout --verbose --kill-after=10 3600 env -i "
EXEC_RESET = RESET.replace("&& chrt", "&& exec chrt")
CLEAN_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8"


def make_cell(platform, cpu_config="pin", scaleup=1, **labels):
    scenario = f"{platform}/{scaleup}/{cpu_config}/cpu"
    params = {"framework": "tensorflow", "steps": 3}
    return {
        "id": f"{scenario}|r0",
        "scenario": scenario,
        "params": params,
        "labels": {
            **params,
            "platform": platform,
            "scaleup": scaleup,
            "cpu_config": cpu_config,
            "processor": "cpu",
            "workload": "cnn_train",
            "repeat": 0,
            "host": "runner-a",
            **labels,
        },
    }


def experiment(**fields):
    base = {
        "name": "placed",
        "workload": "cnn_train",
        "platforms": ["bm", "sg", "cn", "vm"],
        "scaleup": [1],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
    }
    return validate_experiment({**base, **fields})


def tail(plan):
    """The line's environment and argv after `env -i` and its base, as the shell quotes them."""
    variables = [f"{name}={value}" for name, value in sorted(plan["process"]["env"].items())]
    return shlex.join(variables + plan["process"]["argv"])


def cgroup_path(plan, directory):
    return f"{directory}/platbench-cell-{instance_name('c1', 'runner-a', plan['cell']).removeprefix('platbench-')}"


# -- a cgroup of its own, or a refusal ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "facts", [NO_CPU_CONTROLLER, {**NO_CPU_CONTROLLER, "cpu_cgroup": None}], ids=["absent", "null"]
)
@pytest.mark.parametrize("platform, cpu_config", [("bm", "pin"), ("bm", "vnl"), ("sg", "pin"), ("sg", "vnl")])
def test_a_runner_host_without_a_cpu_controller_refuses_its_process_cells_naming_isolation_none(
    platform, cpu_config, facts
):
    message = (
        f"cell {platform}/1/{cpu_config}/cpu|r0 on runner-a: a {platform} cell runs in a cgroup of its own, as a "
        "container does, and this host's facts (platbench.lab.host_facts: cpu_cgroup) found no cgroup cpu "
        "controller: mount it (cgroup v2 with cpu in /sys/fs/cgroup/cgroup.controllers, or v1's cpu mount), or set "
        "`isolation: none` in the experiment, which the report marks"
    )
    with pytest.raises(CellPlanError, match=f"^{re.escape(message)}$"):
        cell_plan(make_cell(platform, cpu_config), facts, OPTIONS)


@pytest.mark.parametrize("platform", ["cn", "vm"])
def test_a_container_or_a_guest_on_that_host_is_still_planned(platform):
    # A container's engine makes its cgroup, and a guest's process is inside the guest.
    plan = cell_plan(make_cell(platform), NO_CPU_CONTROLLER, OPTIONS)
    assert "uncapped_cgroup" not in plan["runtime"] and "isolation" not in plan["runtime"]


@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_a_bm_cell_runs_in_an_uncapped_cgroup_of_its_own_at_the_normal_policy_in_a_clean_environment(cpu_config):
    plan = cell_plan(make_cell("bm", cpu_config), HOST, OPTIONS)
    cgroup = plan["process"]["cgroup"]
    assert cgroup == {
        "path": cgroup_path(plan, "/sys/fs/cgroup"),
        "version": "v2",
        "quota_us": cpu_quota.UNLIMITED,
        "period_us": 100000,
    }
    assert plan["runtime"]["uncapped_cgroup"] == {
        "cgroup": cgroup["path"],
        "applied_by": "cgroup v2 cpu.max=max 100000",
    }
    assert "isolation" not in plan["runtime"] and "inject" not in plan["runtime"]
    assert plan["process"]["normal_policy"] is True and plan["process"]["clean_env"] is True
    assert split_line(plan["process"]["command"]) == {
        "chdir": "/opt/platbench",
        "enter": cpu_quota.shell_enter(cgroup),
        "workload": f"{RESET}{CLEAN_ENV} {tail(plan)}",
        "leave": cpu_quota.shell_leave(cgroup),
    }
    assert_plan_matches_its_specs(plan)


# -- isolation: none -------------------------------------------------------------------------------------------------


def test_an_isolation_none_experiments_bm_cell_has_no_cgroup_and_says_so():
    cells = {cell["labels"]["platform"]: cell for cell in expand(experiment(isolation="none"))}
    assert {platform: cell["labels"]["isolation"] for platform, cell in cells.items()} == dict.fromkeys(cells, "none")
    # The host needs no cpu controller for it; the cell still gets the normal policy and a clean environment.
    plans = [cell_plan(cells["bm"], facts, OPTIONS) for facts in (HOST, NO_CPU_CONTROLLER)]
    for plan in plans:
        assert "cgroup" not in plan["process"] and "uncapped_cgroup" not in plan["runtime"]
        assert plan["runtime"]["isolation"] == "none"
        assert plan["process"]["normal_policy"] is True and plan["process"]["clean_env"] is True
        assert plan["process"]["command"] == f"cd /opt/platbench && {EXEC_RESET}{CLEAN_ENV} {tail(plan)}"
    sg = cell_plan(cells["sg"], NO_CPU_CONTROLLER, OPTIONS)
    assert "cgroup" not in sg["process"] and sg["runtime"]["isolation"] == "none"
    assert sg["process"]["command"] == f"cd / && {EXEC_RESET}{CLEAN_ENV} {tail(sg)}"
    for plan in [*plans, sg]:
        assert_plan_matches_its_specs(plan)


def test_the_default_isolation_is_a_cgroup_and_its_cells_carry_no_label_for_it():
    plan = experiment()
    assert plan["isolation"] == "cgroup"
    cells = expand(plan)
    assert cells and all("isolation" not in cell["labels"] for cell in cells)
    assert expand(experiment(isolation="cgroup")) == cells


@pytest.mark.parametrize("value", ["container", "None", None, True, ["none"]])
def test_an_unknown_isolation_is_refused_naming_the_field_and_the_allowed_values(value):
    problem = (
        f"isolation: unknown value {value!r}; allowed: cgroup (each process cell in a cgroup of its own, as a "
        "container: the default) or none (where the harness is; the report marks it)"
    )
    with pytest.raises(ExperimentError) as raised:
        experiment(isolation=value)
    assert str(raised.value) == f"experiment: invalid experiment:\n  - {problem}"


# -- cgroup v1 with cpuacct on a mount of its own --------------------------------------------------------------------


def test_a_v1_host_with_a_separate_cpuacct_mount_also_leaves_the_cpuacct_root():
    # The harness's CPU time is counted in its cpuacct cgroup: the cell's shell line must not stay in it.
    facts = {**HOST, "cpu_cgroup": V1, "cpuacct_cgroup": {"directory": "/sys/fs/cgroup/cpuacct"}}
    plan = cell_plan(make_cell("bm"), facts, OPTIONS)
    cgroup = plan["process"]["cgroup"]
    assert cgroup == {
        "path": cgroup_path(plan, "/sys/fs/cgroup/cpu"),
        "version": "v1",
        "quota_us": cpu_quota.UNLIMITED,
        "period_us": 100000,
        "leave": ["/sys/fs/cgroup/cpuacct/cgroup.procs"],
    }
    line = split_line(plan["process"]["command"])
    assert line["enter"].endswith(
        f" && echo $$ > {cgroup['path']}/cgroup.procs && echo $$ > /sys/fs/cgroup/cpuacct/cgroup.procs"
    )
    assert line["workload"] == f"{RESET}{CLEAN_ENV} {tail(plan)}"
    # An injected quota's cgroup leaves it too.
    injected = make_cell("bm", inject="cpu_quota=0.5")
    injected["id"] = "bm/1/pin/cpu|inject=cpu_quota=0.5|r0"
    capped = cell_plan(injected, facts, OPTIONS)["process"]["cgroup"]
    assert (capped["quota_us"], capped["leave"]) == (50000, ["/sys/fs/cgroup/cpuacct/cgroup.procs"])
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize(
    "cpu_cgroup, cpuacct_cgroup",
    [
        (V1, None),
        ({"version": "v1", "directory": "/sys/fs/cgroup/cpu,cpuacct"}, {"directory": "/sys/fs/cgroup/cpu,cpuacct"}),
        (V2, {"directory": "/sys/fs/cgroup/cpuacct"}),
    ],
    ids=["v1-no-cpuacct", "v1-shared-mount", "v2"],
)
def test_no_other_root_is_left_where_cpuacct_has_no_mount_of_its_own(cpu_cgroup, cpuacct_cgroup):
    facts = {**HOST, "cpu_cgroup": cpu_cgroup, "cpuacct_cgroup": cpuacct_cgroup}
    plan = cell_plan(make_cell("bm"), facts, OPTIONS)
    assert "leave" not in plan["process"]["cgroup"]
    assert split_line(plan["process"]["command"])["enter"].count("cgroup.procs") == 1


def test_the_shell_line_makes_and_enters_each_cgroup_then_resets_the_policy_and_the_environment():
    process = {
        "chdir": "/opt/x",
        "env": {"B": "2", "A": "a b"},
        "argv": ["python", "-m", "w"],
        "cgroup": {
            "path": "/cg/cpu/cell",
            "version": "v1",
            "quota_us": 50000,
            "period_us": 100000,
            "leave": ["/cg/cpuacct/cgroup.procs"],
        },
        "normal_policy": True,
        "clean_env": True,
    }
    assert split_line(shell_command(process)) == {
        "chdir": "/opt/x",
        "enter": "{ [ -d /cg/cpu/cell ] || mkdir /cg/cpu/cell; } && echo 100000 > /cg/cpu/cell/cpu.cfs_period_us && "
        "echo 50000 > /cg/cpu/cell/cpu.cfs_quota_us && echo $$ > /cg/cpu/cell/cgroup.procs && "
        "echo $$ > /cg/cpuacct/cgroup.procs",
        "workload": f"renice -n 0 -p $$ >/dev/null && chrt --other 0 env -i {CLEAN_ENV} 'A=a b' B=2 python -m w",
        "leave": cpu_quota.shell_leave(process["cgroup"]),
    }
    # cgroup v2: the cpu controller offered to the children first, where it is not; one file for the quota.
    v2 = {"path": "/cg/cell", "version": "v2", "quota_us": cpu_quota.UNLIMITED, "period_us": 100000}
    assert cpu_quota.shell_enter(v2) == (
        "{ grep -qw cpu /cg/cgroup.subtree_control || echo +cpu > /cg/cgroup.subtree_control; } && "
        "{ [ -d /cg/cell ] || mkdir /cg/cell; } && echo 'max 100000' > /cg/cell/cpu.max && "
        "echo $$ > /cg/cell/cgroup.procs"
    )


def _real_cgroup(quota_us):
    """A cell's cgroup in this host's cpu hierarchy, not made yet; the test is skipped without root only."""
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    found = cpu_quota.hierarchy()
    assert found, "this host has no cgroup cpu controller (cgroup v1's cpu mount or v2's cpu in cgroup.controllers)"
    path = os.path.join(found["directory"], cpu_quota.PREFIX + secrets.token_hex(6))
    return {"path": path, "version": found["version"], "quota_us": quota_us, "period_us": cpu_quota.PERIOD_US}


def test_the_line_runs_the_workload_in_the_cells_cgroup_then_kills_what_it_left_and_removes_it(tmp_path):
    # Real cgroups: the workload reads its own cgroup and quota, leaves a child behind, and fails with status 3.
    cgroup = _real_cgroup(50000)
    quota_file = "cpu.max" if cgroup["version"] == "v2" else "cpu.cfs_quota_us"
    name = os.path.basename(cgroup["path"])
    script = (
        f"grep -c {name} /proc/self/cgroup; cat {cgroup['path']}/{quota_file}; "
        f"sleep 60 & echo $! > {tmp_path}/child; exit 3"
    )
    process = {"chdir": str(tmp_path), "env": {}, "argv": ["sh", "-c", script], "cgroup": cgroup}
    try:
        done = subprocess.run(["sh", "-c", shell_command(process)], capture_output=True, text=True, timeout=30)
        assert done.returncode == 3, done.stderr
        inside, quota = done.stdout.split()
        assert int(inside) >= 1 and quota == "50000"
        child = int((tmp_path / "child").read_text())
        assert not os.path.exists(f"/proc/{child}") or "Z" in _state(child), "the workload's child outlived the cell"
        assert not os.path.isdir(cgroup["path"]) and done.stderr == ""
    finally:
        cpu_quota.remove(cgroup["path"])


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "Z"


def test_a_cgroup_the_line_cannot_make_stops_it_before_the_workload_saying_where(tmp_path):
    # A hierarchy that is not there (the host's changed since its facts were gathered): nothing is made in its place.
    cgroup = {**_real_cgroup(cpu_quota.UNLIMITED), "path": "/sys/fs/cgroup/no-such-hierarchy/platbench-cell-0"}
    process = {"chdir": str(tmp_path), "env": {}, "argv": ["touch", str(tmp_path / "ran")], "cgroup": cgroup}
    done = subprocess.run(["sh", "-c", shell_command(process)], capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and not (tmp_path / "ran").exists()
    assert f"platbench: the workload did not start: cannot enter {tmp_path} or make the cell's cgroup" in done.stderr
    assert not os.path.exists(os.path.dirname(cgroup["path"]))


# -- the CPUs of an unpinned cell ------------------------------------------------------------------------------------


@pytest.mark.parametrize("reserved", [[], [0]], ids=["no-reserved", "reserved"])
def test_an_unpinned_bm_cell_gets_taskset_over_every_cpu_the_host_allows(reserved):
    # A harness kept on spare CPUs (platform_run_reserved_cpus) passes its affinity down: the vnl cell gets every
    # allowed CPU back, the reserved ones included, and the scheduler decides.
    facts = {**HOST, "cpus_allowed": [0, 1, 2, 5, 6, 7, 9], "numa_nodes": {"0": [0, 1, 2, 5, 6, 7, 9]}}
    plan = cell_plan(make_cell("bm", "vnl", scaleup=2), facts, {**OPTIONS, "reserved_cpus": reserved})
    assert plan["cpus"] == [] and plan["cpuset"] == ""
    assert plan["process"]["argv"] == [
        "taskset",
        "--cpu-list",
        "0-2,5-7,9",
        "/opt/platbench/venv/bin/python",
        *plan["argv"],
    ]
    assert plan["runtime"]["launcher"] == "process"
    assert split_line(plan["process"]["command"])["workload"].endswith(
        " taskset --cpu-list 0-2,5-7,9 /opt/platbench/venv/bin/python " + (shlex.join(plan["argv"]))
    )
    # A pinned cell keeps its own CPUs alone.
    pinned = cell_plan(make_cell("bm", "pin", scaleup=2), facts, {**OPTIONS, "reserved_cpus": reserved})
    assert pinned["process"]["argv"][:3] == ["taskset", "--cpu-list", pinned["cpuset"]]
    assert pinned["process"]["argv"].count("taskset") == 1


def test_an_unpinned_sg_cell_gets_taskset_over_every_cpu_the_host_allows_and_keeps_apptainers_quota():
    # Apptainer's --cpus is a quota of time, not of where: the harness's affinity would pass through apptainer too.
    facts = {**HOST, "cpus_allowed": [0, 1, 2, 5, 6, 7, 9], "numa_nodes": {"0": [0, 1, 2, 5, 6, 7, 9]}}
    plan = cell_plan(make_cell("sg", "vnl", scaleup=2), facts, {**OPTIONS, "reserved_cpus": [0]})
    argv = plan["process"]["argv"]
    assert argv[:4] == ["taskset", "--cpu-list", "0-2,5-7,9", "apptainer"]
    assert argv.count("taskset") == 1 and "--cpus" in argv
    # Pinned, Apptainer's own taskset keeps the cell's CPUs alone.
    pinned = cell_plan(make_cell("sg", "pin", scaleup=2), facts, {**OPTIONS, "reserved_cpus": [0]})
    assert pinned["process"]["argv"][:4] == ["taskset", "--cpu-list", pinned["cpuset"], "apptainer"]
    assert pinned["process"]["argv"].count("taskset") == 1


# -- a guest's process cell ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["vm", "vmsg", "mvm"])
@pytest.mark.parametrize("cpu_config", ["pin", "vnl"])
def test_a_guests_process_cell_gets_neither_a_cgroup_nor_chrt(platform, cpu_config):
    options = {
        **OPTIONS,
        "guest_image": {
            "container_image_id": "sha256:" + "ab" * 32,
            "sif_disk": "/var/lib/platbench/guest/sif-abababababab.img",
            "sif_image_id": "sha256:" + "ab" * 32,
            "apptainer_version": "1.4.5",
            "firecracker": {"kernel": "/var/lib/platbench/guest/r.vmlinux", "rootfs": "/var/lib/platbench/guest/r.raw"},
        },
    }
    plan = cell_plan(make_cell(platform, cpu_config), HOST, options)
    process = plan["process"]
    assert process["host"] == plan["name"]  # over SSH
    assert not {"cgroup", "normal_policy", "clean_env"} & set(process)
    assert "uncapped_cgroup" not in plan["runtime"] and "isolation" not in plan["runtime"]
    # No taskset over the runner host's CPUs: in a guest the vCPUs are pinned on the host instead.
    if platform == "vmsg":
        assert process["argv"][:4] == (
            ["taskset", "--cpu-list", "0", "apptainer"]
            if cpu_config == "pin"
            else [
                "apptainer",
                "exec",
                "--cleanenv",
                "--containall",
            ]
        )
    else:
        assert process["argv"] == ["/opt/platbench/venv/bin/python", *plan["argv"]]
    variables = [f"{name}={value}" for name, value in sorted(process["env"].items())]
    assert process["command"] == (
        f"cd {shlex.quote(process['chdir'])} && exec timeout --verbose --kill-after=10 3600 env "
        + shlex.join(variables + process["argv"])
    )


# -- where systemd is PID 1: a transient scope -----------------------------------------------------------------------

SYSTEMD_HOST = {**HOST, "systemd_pid1": True}


def scope_unit(plan):
    return f"platbench-cell-{instance_name('c1', 'runner-a', plan['cell']).removeprefix('platbench-')}.scope"


@pytest.mark.parametrize("platform", ["bm", "sg"])
def test_on_a_systemd_host_a_process_cell_runs_in_a_transient_scope_instead_of_a_cgroup_of_platbenchs(platform):
    plan = cell_plan(make_cell(platform, "vnl" if platform == "sg" else "pin"), SYSTEMD_HOST, OPTIONS)
    # systemd owns the tree: no cgroupfs group to make (the process kind's place.yml skips its tasks), a scope in
    # system.slice.
    assert "cgroup" not in plan["process"]
    assert plan["process"]["scope"] == {
        "unit": scope_unit(plan),
        "slice": "system.slice",
        "properties": ["CPUAccounting=yes", "CPUWeight=100"],
    }
    assert plan["runtime"]["uncapped_cgroup"] == {
        "cgroup": f"system.slice/{scope_unit(plan)}",
        "applied_by": "systemd scope CPUAccounting=yes CPUWeight=100",
    }
    words = shlex.split(plan["process"]["command"])
    scope = words.index("systemd-run")
    # Nice 0 in the shell, then systemd-run execs the policy reset, the deadline and the clean environment.
    nice = ["renice", "-n", "0", "-p", "$$", ">/dev/null"]
    assert words[:scope] == ["cd", plan["process"]["chdir"], "&&", *nice, "&&", "exec"]
    assert words[scope : words.index("--") + 1] == [
        "systemd-run",
        "--scope",
        "--quiet",
        "--collect",
        f"--unit={scope_unit(plan)}",
        "--slice=system.slice",
        "--property=CPUAccounting=yes",
        "--property=CPUWeight=100",
        "--",
    ]
    assert words[words.index("--") + 1 :][:4] == ["chrt", "--other", "0", "timeout"]
    assert "cgroup.procs" not in plan["process"]["command"]
    assert_plan_matches_its_specs(plan)


@pytest.mark.parametrize("fraction, threads, quota", [(0.95, 1, "95%"), (0.5, 2, "100%"), (0.333, 1, "33.3%")])
def test_on_a_systemd_host_an_injected_quota_is_the_scopes_cpu_quota_over_the_same_period(fraction, threads, quota):
    plan = cell_plan(make_cell("bm", "pin", scaleup=threads, inject=f"cpu_quota={fraction}"), SYSTEMD_HOST, OPTIONS)
    properties = ["CPUAccounting=yes", "CPUWeight=100", f"CPUQuota={quota}"]
    assert plan["process"]["scope"]["properties"] == properties
    assert plan["runtime"]["inject"]["applied_by"] == "systemd scope " + " ".join(properties)
    assert plan["runtime"]["inject"]["cgroup"] == f"system.slice/{scope_unit(plan)}"
    assert "uncapped_cgroup" not in plan["runtime"] and "cgroup" not in plan["process"]
    assert_plan_matches_its_specs(plan)


def test_on_a_systemd_host_isolation_none_makes_no_scope():
    cells = {cell["labels"]["platform"]: cell for cell in expand(experiment(isolation="none"))}
    plan = cell_plan(cells["bm"], SYSTEMD_HOST, OPTIONS)
    assert "scope" not in plan["process"] and "systemd-run" not in plan["process"]["command"]


def test_the_scope_line_runs_the_workload_through_systemd_run(tmp_path):
    # A stand-in systemd-run that keeps its arguments and execs what follows `--`, as the real one does once the
    # scope holds it: the line is a working shell line, and the workload gets systemd-run's pid (exec all the way).
    fake = tmp_path / "bin" / "systemd-run"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\nprintf "%s\\n" $$ "$@" > "$SCOPE_ARGS"\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n'
    )
    fake.chmod(0o755)
    scope = {"unit": "platbench-cell-0123456789ab.scope", "slice": "system.slice", "properties": ["CPUWeight=100"]}
    process = {
        "chdir": str(tmp_path),
        "env": {"A": "1"},
        "argv": ["sh", "-c", 'echo "$$ $A $PWD"'],
        "scope": scope,
        "normal_policy": True,
        "clean_env": True,
    }
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin:/usr/sbin:/sbin", "SCOPE_ARGS": str(tmp_path / "args")}
    done = subprocess.run(["sh", "-c", shell_command(process)], env=env, capture_output=True, text=True, check=True)
    pid, *args = (tmp_path / "args").read_text().splitlines()
    assert args[:7] == [
        "--scope",
        "--quiet",
        "--collect",
        "--unit=platbench-cell-0123456789ab.scope",
        "--slice=system.slice",
        "--property=CPUWeight=100",
        "--",
    ]
    assert done.stdout.split() == [pid, "1", str(tmp_path)]
