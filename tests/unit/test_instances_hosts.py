"""A distributed cell's ranks spread over several runner hosts (instances.hosts, network: host): the experiment's
checks, which runner runs the cell, each rank's host, CPUs, command line (ssh for another host), stop line, rendezvous
environment, the prechecks; and the remote process's start and stop lines run for real here, without ssh.

What is not verified here: a live run across hosts (this machine is one host). Addresses are 198.18.0.0/15's."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pytest
from ansible_collections.platbench.lab.plugins.filter.runners import runner_ssh_checks as ssh_checks_filter
from ansible_collections.platbench.lab.plugins.module_utils import remote_instance
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.runplan import cells_to_run, plan_problems
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import instances_hosts
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

from platbench.campaign import EXIT_OK, RECORD_ACTION, Campaign

CPU_FACTS = {"gpu_count": 0, "gpus": [], "docker_engine": True}
FACTS_A = {
    **CPU_FACTS,
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(8)),
    "numa_nodes": {"0": list(range(8))},
}
FACTS_B = {
    **CPU_FACTS,
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
}
FACTS_C = {
    **CPU_FACTS,
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(16)),
    "numa_nodes": {"0": list(range(16))},
}
# Three runners as Ansible's hostvars show them: an underlay address (and the interface holding it), an ansible_host
# and a port, only the facts' default IPv4 address.
HOSTVARS = {
    "runner-a": {
        "platbench_underlay_address": "198.18.0.11",
        "ansible_host": "198.18.1.11",
        "ansible_facts": {
            "platbench": FACTS_A,
            "interfaces": ["lo", "eth1"],
            "eth1": {"device": "eth1", "ipv4": {"address": "198.18.0.11"}},
        },
    },
    "runner-b": {
        "ansible_host": "198.18.0.12",
        "ansible_port": 2222,
        "platbench_reserved_cpus": [3],
        "ansible_facts": {"platbench": FACTS_B, "interfaces": ["eth0"], "eth0": {"ipv4": {"address": "198.18.9.9"}}},
    },
    "runner-c": {
        "ansible_facts": {"platbench": FACTS_C, "default_ipv4": {"address": "198.18.0.13", "interface": "ens3"}},
    },
}
NAMES = ["runner-a", "runner-b", "runner-c"]
RUNNERS = instances_hosts.runner_hosts(NAMES, HOSTVARS, "root", "/root/.ssh/runners")
OPTIONS = plan_options(host="runner-a", campaign="c1", runners=RUNNERS)
READY = platform_status(
    FACTS_A,
    "/opt/platbench",
    True,
    "img",
    "sha256:1",
    "/g.json",
    {},
    engines_found={"docker": {"answers": True, "version": "26.1.5", "image_id": "sha256:1"}},
)


def cells_of(hosts=2, count=3):
    """The cells of an experiment of bm and cn ranks (torch, tensorflow) over the hosts' network."""
    return expand(
        validated(
            platforms=["bm", "cn"],
            scaleup=[2],
            instances={"count": count, "hosts": hosts},
            network=["host"],
            params={"model": "tiny", "steps": 5, "framework": ["torch", "tensorflow"]},
        )
    )


def one(cells, platform, framework):
    return next(
        cell
        for cell in cells
        if cell["labels"]["platform"] == platform and cell["params"].get("framework") == framework
    )


def remote_line(argv):
    """The shell line an ssh argv runs on the other host (after ``--``), and its destination."""
    at = argv.index("--")
    assert argv[at + 1 :] == [argv[-1]], "one shell line after --"
    return argv[at - 1], argv[-1]


def shell_words(line):
    """A shell line's words, its operators (``&&``, ``;``) apart."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def inner_command(line):
    """The workload's argv inside a remote process line: setsid's sh -c, after its echo of the pid."""
    words = shell_words(line)
    inner = shell_words(words[words.index("-c") + 1])
    assert inner[:3] == ["echo", "$$", ">"] and inner[4:6] == ["&&", "exec"]
    return words, inner[3], inner[6:]


# -- the runner hosts ----------------------------------------------------------------------------------------------


def test_each_runner_host_s_address_ssh_and_facts_come_from_its_inventory_variables_then_its_facts():
    a, b, c = RUNNERS
    assert (a["address"], a["interface"], a["port"]) == ("198.18.0.11", "eth1", None)  # underlay before ansible_host
    assert (b["address"], b["interface"], b["port"], b["reserved_cpus"]) == ("198.18.0.12", None, 2222, [3])
    assert (c["address"], c["interface"]) == ("198.18.0.13", "ens3")  # the facts' default IPv4
    assert all(r["user"] == "root" and r["key"] == "/root/.ssh/runners" for r in RUNNERS)
    assert [r["facts"] for r in RUNNERS] == [FACTS_A, FACTS_B, FACTS_C]
    bare = instances_hosts.runner_hosts(["runner-x"], {"runner-x": {}})
    assert bare == [
        {
            "name": "runner-x",
            "address": None,
            "interface": None,
            "user": None,
            "port": None,
            "key": None,
            "reserved_cpus": [],
            "facts": None,
        }
    ]


# -- the experiment ------------------------------------------------------------------------------------------------


def validated(**fields):
    base = {
        "name": "spread",
        "workload": "cnn_train",
        "platforms": ["bm"],
        "scaleup": [1],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
        "mode": "distributed",
        "params": {"model": "tiny"},
    }
    return validate_experiment({**base, **fields})


def refusal(**fields):
    with pytest.raises(ExperimentError) as refused:
        validated(**fields)
    return str(refused.value)


def test_hosts_defaults_to_one_and_a_spread_cell_carries_it():
    plan = validated(instances={"count": 2}, network=["host"])
    assert plan["instances"]["hosts"] == 1
    assert "hosts" not in expand(plan)[0]["instances"]
    spread = validated(instances={"count": 3, "hosts": 3}, network=["host"])
    assert expand(spread)[0]["instances"]["hosts"] == 3


def test_more_hosts_than_ranks_is_refused():
    message = refusal(instances={"count": 2, "hosts": 3}, network=["host"])
    assert "instances.hosts: 3 hosts for 2 ranks" in message and "set hosts to 2 at most" in message
    assert "a whole number from 1" in refusal(instances={"count": 2, "hosts": 0}, network=["host"])
    assert "a whole number from 1" in refusal(instances={"count": 2, "hosts": "2"}, network=["host"])


@pytest.mark.parametrize("path", ["loopback", "bridge", "overlay"])
def test_a_path_built_on_one_host_is_refused_for_ranks_on_several(path):
    message = refusal(instances={"count": 2, "hosts": 2}, network=[path])
    assert f"network: {path} cannot join ranks on 2 hosts (instances.hosts)" in message
    assert "built on one host and does not leave it" in message
    assert "use network: [host]" in message and "k8s pods over the cluster's overlay" in message


def test_hosts_is_refused_for_a_shared_cell():
    message = refusal(
        mode="shared", instances={"hosts": 2}, background={"workload": "cnn_train", "params": {"model": "alexnet"}}
    )
    assert "instances.hosts: 2: a shared cell's two jobs share one host" in message


# -- which runner runs the cell ----------------------------------------------------------------------------------


def test_the_home_host_runs_a_spread_cell_and_the_other_runners_leave_it_out():
    cells = cells_of()
    plan = {"name": "spread", "cells": cells}
    home = cells_to_run(plan, READY, "runner-a", runners=RUNNERS)
    assert [cell["id"] for cell in home["cells"]] == [cell["id"] for cell in cells]
    for other in ("runner-b", "runner-c"):
        assert cells_to_run(plan, READY, other, done=[cells[0]["id"]], runners=RUNNERS) == {
            "cells": [],
            "done": 0,
            "units": [],
        }
    # A cell on one host stays every runner's own.
    single = {"name": "spread", "cells": [{**cells[0], "instances": {**cells[0]["instances"], "hosts": 1}}]}
    assert len(cells_to_run(single, READY, "runner-b", runners=RUNNERS)["cells"]) == 1


def test_platbench_run_counts_the_cell_on_its_home_host_only():
    cells = cells_of()
    plan = {"name": "spread", "cells": cells}
    campaign = Campaign("spread", planned=cells)

    def ok(host, res, action=None):
        return {"event": "runner_on_ok", "event_data": {"host": host, "res": res, "task_action": action}}

    for host in ("runner-a", "runner-b"):
        campaign.feed(
            ok(host, {"ansible_facts": {"platform_run_selection": cells_to_run(plan, READY, host, runners=RUNNERS)}})
        )
    for cell in cells:
        res = {"platbench_cell": {"id": cell["id"]}, "platbench_status": "ok"}
        campaign.feed(ok("runner-a", res, RECORD_ACTION))
    campaign.feed({"event": "playbook_on_stats"})
    code, lines = campaign.outcome(0)
    assert code == EXIT_OK and campaign.unrecorded() == []
    assert lines[0] == f"campaign spread: {len(cells)} ok, 0 failed, 0 skipped of {len(cells)} cells run"


# -- the plan on the home host -------------------------------------------------------------------------------------


def test_a_bm_torch_cell_places_each_rank_on_its_host_with_that_host_s_cpus():
    cell = one(cells_of(), "bm", "torch")
    plan = cell_plan(cell, FACTS_A, OPTIONS)
    assert_plan_matches_its_specs(plan)
    spread = plan["instances"]
    assert spread["hosts"] == 2 and spread["network"]["built"] is False and spread["network"]["measure"] is None
    # rank i on runner i % 2: 0 and 2 on the home host, 1 on runner-b
    assert [m["host"] for m in spread["members"]] == ["runner-a", "runner-b", "runner-a"]
    # the home host pins 2 ranks x 2 CPUs of its 8, the highest first; runner-b 2 of its own, CPU 3 reserved there
    assert [m["cpuset"] for m in spread["members"]] == ["6,7", "1,2", "4,5"]
    assert plan["cpuset"] == "4,5,6,7"
    assert plan["runtime"]["instance_hosts"] == ["runner-a", "runner-b", "runner-a"]
    assert plan["runtime"]["path_addresses"] == ["198.18.0.11", "198.18.0.12", "198.18.0.11"]
    chief, worker, local = spread["rounds"][0]
    port = str(spread["network"]["port"])
    # local ranks as on one host: taskset, the venv's python, the environment given to the process
    assert chief["argv"][:4] == ["taskset", "--cpu-list", "6,7", "/opt/platbench/venv/bin/python"]
    assert chief["stop"] is None and "ssh" not in chief["argv"]
    assert chief["env"]["MASTER_ADDR"] == "198.18.0.11" and chief["env"]["MASTER_PORT"] == port
    assert (chief["env"]["RANK"], chief["env"]["WORLD_SIZE"]) == ("0", "3")
    assert chief["env"]["GLOO_SOCKET_IFNAME"] == "eth1"  # the home host's facts show the interface
    assert local["argv"][:3] == ["taskset", "--cpu-list", "4,5"] and local["env"]["RANK"] == "2"
    # the rank on runner-b: an ssh client running one line there
    assert worker["argv"][:8] == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-p",
        "2222",
        "-i",
    ]
    destination, line = remote_line(worker["argv"])
    assert destination == "root@198.18.0.12" and worker["argv"][8] == "/root/.ssh/runners"
    assert worker["env"] == {} and worker["chdir"] is None and worker["host"] == "runner-b"
    words, pidfile, command = inner_command(line)
    name = f"{plan['name']}-1"
    assert pidfile == f"/run/platbench/{name}.pid"
    assert words[:3] == ["mkdir", "-p", "/run/platbench"] and words[4:6] == ["cd", "/opt/platbench"]
    assert words[7:11] == ["{", "setsid", "--wait", "sh"]
    assert command[0] == "env"
    env = dict(word.split("=", 1) for word in command[1:] if "=" in word and not word.startswith("-"))
    assert env["MASTER_ADDR"] == "198.18.0.11" and env["RANK"] == "1" and env["MASTER_PORT"] == port
    assert "GLOO_SOCKET_IFNAME" not in env  # runner-b's facts do not show which interface holds 198.18.0.12
    assert env["OMP_NUM_THREADS"] == "2"
    workload = command[command.index("taskset") :]
    assert workload[:4] == ["taskset", "--cpu-list", "1,2", "/opt/platbench/venv/bin/python"]
    assert workload[4:6] == ["-m", "workloads.cnn_train"]
    assert json.loads(workload[workload.index("--labels-json") + 1]) == {"instance_index": 1, "instance_role": "worker"}
    # its stop: another ssh line to the same host that ends the process group named in the pid file
    stop_destination, stop_line = remote_line(worker["stop"])
    assert stop_destination == destination and worker["stop"][:9] == worker["argv"][:9]
    assert stop_line == remote_instance.process_stop_line(name, spread["grace"])
    assert f"cat {pidfile}" in stop_line and "kill -s TERM" in stop_line and "kill -s KILL" in stop_line
    assert worker["stop_timeout"] == remote_instance.stop_timeout(spread["grace"])


def test_a_cn_tensorflow_cell_runs_host_network_containers_the_remote_one_over_ssh():
    cell = one(cells_of(), "cn", "tensorflow")
    plan = cell_plan(cell, FACTS_A, OPTIONS)
    assert_plan_matches_its_specs(plan)
    chief, worker, local = plan["instances"]["rounds"][0]
    port = plan["instances"]["network"]["port"]
    workers = [f"198.18.0.11:{port}", f"198.18.0.12:{port + 1}", f"198.18.0.11:{port + 2}"]
    assert chief["argv"][:2] == ["docker", "run"] and chief["argv"][chief["argv"].index("--network") + 1] == "host"
    assert chief["argv"][chief["argv"].index("--cpuset-cpus") + 1] == "6,7"
    assert chief["stop"] == ["docker", "rm", "--force", f"{plan['name']}-0"]
    tf_config = next(arg for arg in chief["argv"] if arg.startswith("TF_CONFIG="))
    assert json.loads(tf_config.split("=", 1)[1]) == {
        "cluster": {"worker": workers},
        "task": {"type": "worker", "index": 0},
    }
    destination, line = remote_line(worker["argv"])
    assert destination == "root@198.18.0.12"
    run = shlex.split(line)
    assert run[:5] == ["docker", "run", "--rm", "--name", f"{plan['name']}-1"]
    assert run[run.index("--network") + 1] == "host" and run[run.index("--cpuset-cpus") + 1] == "1,2"
    remote_config = json.loads(next(arg for arg in run if arg.startswith("TF_CONFIG=")).split("=", 1)[1])
    assert remote_config == {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 1}}
    assert run[run.index("platbench/workload:latest") + 1 :][:3] == ["python", "-m", "workloads.cnn_train"]
    stop_destination, stop_line = remote_line(worker["stop"])
    assert stop_destination == destination and shlex.split(stop_line) == ["docker", "rm", "--force", run[4]]
    assert local["argv"][local["argv"].index("--cpuset-cpus") + 1] == "4,5" and local["stop"][:2] == ["docker", "rm"]


def test_three_hosts_one_rank_each():
    plan = cell_plan(one(cells_of(hosts=3), "bm", "torch"), FACTS_A, OPTIONS)
    members = plan["instances"]["members"]
    assert [(m["host"], m["cpuset"]) for m in members] == [
        ("runner-a", "6,7"),
        ("runner-b", "1,2"),
        ("runner-c", "14,15"),
    ]
    third = plan["instances"]["rounds"][0][2]
    destination, line = remote_line(third["argv"])
    assert destination == "root@198.18.0.13" and "-p" not in third["argv"]
    env = inner_command(line)[2]
    assert "GLOO_SOCKET_IFNAME=ens3" in env and "MASTER_ADDR=198.18.0.11" in env


def test_the_host_path_on_one_host_meets_at_its_address_without_ssh():
    plan = cell_plan(one(cells_of(hosts=1, count=2), "bm", "torch"), FACTS_A, OPTIONS)
    ranks = plan["instances"]["rounds"][0]
    assert [rank["argv"][0] for rank in ranks] == ["taskset", "taskset"]
    assert {rank["env"]["MASTER_ADDR"] for rank in ranks} == {"198.18.0.11"}
    assert plan["instances"]["network"]["built"] is False


def test_a_spread_cell_is_refused_on_a_host_that_is_not_its_home_or_without_the_runners_facts():
    cell = one(cells_of(), "bm", "torch")
    with pytest.raises(CellPlanError, match="the cell's home is runner-a, the first host of platbench_runners"):
        cell_plan(cell, FACTS_B, {**OPTIONS, "host": "runner-b"})
    blind = [RUNNERS[0], {**RUNNERS[1], "facts": None}]
    with pytest.raises(CellPlanError, match="runner host runner-b holds ranks of the cell, but its facts were not"):
        cell_plan(cell, FACTS_A, {**OPTIONS, "runners": blind})
    with pytest.raises(CellPlanError, match="instances.hosts 2 asks for 2 runner hosts, but platbench_runners has 1"):
        cell_plan(cell, FACTS_A, {**OPTIONS, "runners": RUNNERS[:1]})
    crowded = [RUNNERS[0], {**RUNNERS[1], "reserved_cpus": [0, 1, 2]}]
    with pytest.raises(CellPlanError, match="on runner host runner-b, 1 pinned instance"):
        cell_plan(cell, FACTS_A, {**OPTIONS, "runners": crowded})


# -- before any cell -----------------------------------------------------------------------------------------------


def test_the_prechecks_refuse_more_hosts_than_runners_and_gpu_cells():
    cells = cells_of()
    plan = {"name": "spread", "cells": cells}
    found = plan_problems(plan, READY, FACTS_A, "runner-a", runners=RUNNERS[:1])["problems"]
    assert any(
        "over 2 runner hosts (instances.hosts), but group platbench_runners has 1 (runner-a)" in p for p in found
    )
    assert plan_problems(plan, READY, FACTS_A, "runner-a", runners=RUNNERS)["problems"] == []
    gpu = {"name": "spread", "cells": [{**cells[0], "labels": {**cells[0]["labels"], "processor": "gpu"}}]}
    found = instances_hosts.plan_problems("spread", gpu["cells"], RUNNERS, "runner-a")
    assert found and "gpu cells whose ranks spread over several runner hosts" in found[0]
    crowded = [RUNNERS[0], {**RUNNERS[1], "reserved_cpus": [0, 1, 2]}]
    assert instances_hosts.plan_problems("spread", cells, crowded, "runner-b") == [
        "Experiment 'spread' pins 1 rank(s) x scale-up 2 = 2 CPUs of a cell on runner host runner-b, which offers 1 "
        "(platbench_reserved_cpus left out): lower 'scaleup' in experiments/spread.yml, or let the instances share "
        "their CPUs (instances: {cpus: shared})."
    ]
    no_address = [RUNNERS[0], {**RUNNERS[1], "address": None}]
    found = instances_hosts.plan_problems("spread", cells, no_address, "runner-a")
    assert found == [
        "Experiment 'spread' runs ranks on runner host runner-b, which has no address: set platbench_underlay_address "
        "(or ansible_host) for it in the inventory."
    ]


def test_the_home_host_checks_its_ssh_logins_to_the_other_members_and_says_what_to_set_up():
    plan = {"name": "spread", "cells": cells_of()}
    checks = ssh_checks_filter(plan, RUNNERS, "runner-a")
    assert checks == [
        {
            "host": "runner-b",
            "address": "198.18.0.12",
            "argv": [
                *("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", "2222", "-i", "/root/.ssh/runners"),
                *("root@198.18.0.12", "--", "true"),
            ],
        }
    ]
    assert ssh_checks_filter(plan, RUNNERS, "runner-b") == []  # not the home host: nothing to check
    assert ssh_checks_filter({"cells": [{**plan["cells"][0], "instances": {"count": 2}}]}, RUNNERS, "runner-a") == []
    results = [
        {"item": checks[0], "rc": 255, "stderr": "root@198.18.0.12: Permission denied (publickey)."},
        {"item": checks[0], "rc": 0},
    ]
    (message,) = instances_hosts.ssh_problems(results, "runner-a")
    assert "must log in to runner-b (198.18.0.12) over SSH without a password" in message
    assert "Permission denied (publickey)." in message and "authorized_keys" in message
    assert "platform_run_runner_ssh_user and platform_run_runner_ssh_key" in message


# -- the ssh lines -------------------------------------------------------------------------------------------------


def test_ssh_argv_and_targets():
    where = remote_instance.target("198.18.0.20", None, None, None, "r")
    assert remote_instance.ssh_argv(where, "true") == [
        *("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "198.18.0.20", "--", "true")
    ]
    for address in (None, "", "-oProxyCommand=x", "198.18.0.1 x"):
        with pytest.raises(remote_instance.RemoteInstanceError, match="no usable address"):
            remote_instance.target(address, name="r")
    with pytest.raises(remote_instance.RemoteInstanceError, match="is no TCP port"):
        remote_instance.target("198.18.0.20", port="22x")
    with pytest.raises(remote_instance.RemoteInstanceError, match="cannot name a pid file"):
        remote_instance.pid_file("../x")


def _wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_remote_process_lines_start_and_stop_a_process_group_here(tmp_path):
    """The lines an ssh client would hand the other host, run by sh here: the workload in a session of its own with
    its environment and directory, its process group's id in the pid file; the stop line ends the group and removes
    the file."""
    runtime, workdir = tmp_path / "run", tmp_path / "work"
    workdir.mkdir()
    stand_in = [sys.executable, "-c", "import os, time; open('env', 'w').write(os.environ['PB_T']); time.sleep(60)"]
    line = remote_instance.process_line("pb-0", stand_in, {"PB_T": "a b'c"}, str(workdir), runtime_dir=str(runtime))
    pidfile = runtime / "pb-0.pid"
    started = subprocess.Popen(["sh", "-c", line], start_new_session=True)
    try:
        assert _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() and (workdir / "env").exists())
        pgid = int(pidfile.read_text())
        assert os.getpgid(pgid) == pgid and os.getsid(pgid) == pgid  # a session and group of its own
        assert pgid != started.pid and _group_alive(pgid)
        assert (workdir / "env").read_text() == "a b'c"  # quoted through both shells
        stop = remote_instance.process_stop_line("pb-0", grace=2, runtime_dir=str(runtime))
        finished = subprocess.run(["sh", "-c", stop], timeout=20, check=False)
        assert finished.returncode == 0
        assert _wait_for(lambda: not _group_alive(pgid))
        assert not pidfile.exists()
        assert started.wait(timeout=10) != 0  # the login shell hands back the workload's end (killed)
        # the stop line again, with nothing left to stop, does nothing
        assert subprocess.run(["sh", "-c", stop], timeout=20, check=False).returncode == 0
    finally:
        if started.poll() is None:
            os.killpg(started.pid, 9)
            started.wait(timeout=10)


def test_a_remote_process_that_ends_by_itself_leaves_no_pid_file(tmp_path):
    runtime = tmp_path / "run"
    line = remote_instance.process_line("pb-1", [sys.executable, "-c", "raise SystemExit(3)"], runtime_dir=str(runtime))
    assert subprocess.run(["sh", "-c", line], timeout=30, check=False).returncode == 3
    assert runtime.is_dir() and not (runtime / "pb-1.pid").exists()


def test_a_stop_line_that_hangs_is_given_up_after_its_stop_timeout():
    """A remote stop line whose host no longer answers must not keep the supervisor from returning."""
    from ansible_collections.platbench.lab.plugins.module_utils.supervisor import run_rounds

    hangs = {
        "name": "pb-hang",
        "role": "chief",
        "index": 0,
        "argv": [sys.executable, "-c", "pass"],
        "stop": [sys.executable, "-c", "import time; time.sleep(60)"],
        "stop_timeout": 1,
    }
    began = time.monotonic()
    results, error = run_rounds([[hangs]], timeout=30, grace=0.5)
    assert error is None and results[0]["rc"] == 0
    assert time.monotonic() - began < 15
