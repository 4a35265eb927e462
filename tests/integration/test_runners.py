"""Two runner hosts on this machine, each on a CPU of its own: no collision, resume per host."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from playbook_run import read_samples, run_lab_playbook

pytestmark = pytest.mark.lab

CAMPAIGN = "it-runners"
HOSTS = ("runner-a", "runner-b")
OVERRIDES = {
    "platforms": ["bm"],
    "scaleup": [1],
    "cpu_config": ["pin", "vnl"],
    "repeats": 1,
    "params": {"warmup_steps": 1, "steps": 4, "batch_size": 8},
}


def inventory(path, cpus):
    """Both hosts are this machine; each reserves the CPU the other one pins to."""
    mine = dict(zip(HOSTS, cpus, strict=False))
    hosts = {
        host: {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "platbench_reserved_cpus": [cpu for other, cpu in mine.items() if other != host],
        }
        for host in HOSTS
    }
    path.write_text(yaml.safe_dump({"all": {"children": {"platbench_runners": {"hosts": hosts}}}}))
    return path, mine


@pytest.fixture(scope="module")
def two_runners(lab, tmp_path_factory):
    allowed = sorted(os.sched_getaffinity(0))
    assert len(allowed) >= 2, (
        f"two runner hosts need two CPUs, one each; this process may use {allowed} only: run the lab tests on a "
        "machine (or under a CPU affinity) with at least two CPUs"
    )
    tmp = tmp_path_factory.mktemp("runners")
    hosts_file, cpu_of = inventory(tmp / "hosts.yml", allowed[-2:][::-1])
    extravars = {
        "experiment": "smoke",
        "campaign": CAMPAIGN,
        "platbench_results_dir": str(tmp / "results"),
        "experiment_overrides": OVERRIDES,
    }

    def run(name):
        runner = run_lab_playbook("playbooks/experiment.yml", tmp / name, extravars, inventory=hosts_file)
        assert runner.rc == 0, "%s\n%s" % (runner.failed_messages(), runner.output[-6000:])
        return runner

    run("first")
    return {"dir": tmp / "results" / CAMPAIGN, "cpu_of": cpu_of, "run": run}


def by_host(samples, metric="throughput"):
    found = {}
    for sample in samples:
        if sample["metric"] == metric:
            found.setdefault(sample["labels"]["host"], []).append(sample)
    return found


def test_both_hosts_record_every_cell_without_collision(two_runners):
    samples = read_samples(two_runners["dir"])
    assert [s for s in samples if s["metric"] == "failed"] == []
    cells = {host: sorted(s["labels"]["cell"] for s in found) for host, found in by_host(samples).items()}
    assert cells == {host: ["bm/1/pin/cpu|r0", "bm/1/vnl/cpu|r0"] for host in HOSTS}
    assert all(s["metadata"]["host"] == s["labels"]["host"] for s in samples)


def test_each_host_pins_its_cells_to_its_own_cpu(two_runners):
    hosts = by_host(read_samples(two_runners["dir"]))
    assert sorted(hosts) == sorted(HOSTS)  # each host checked below, none passed over
    for host, found in hosts.items():
        [pinned] = [s for s in found if s["labels"]["cpu_config"] == "pin"]
        cpu = str(two_runners["cpu_of"][host])
        assert pinned["metadata"]["cpuset_requested"] == cpu
        assert pinned["metadata"]["cpuset"] == cpu  # as the workload saw it


def test_resume_reruns_only_the_cells_of_the_host_whose_samples_are_gone(two_runners):
    path = two_runners["dir"] / "samples.jsonl"
    kept = [
        line
        for line in path.read_text().splitlines()
        if line.strip() and json.loads(line)["labels"].get("host") != "runner-b"
    ]
    path.write_text("".join(line + "\n" for line in kept))
    before = by_host(read_samples(two_runners["dir"]))
    assert set(before) == {"runner-a"}

    runner = two_runners["run"]("again")
    text = runner.output
    assert f"Campaign {CAMPAIGN} on runner-a: 0 cells to run, 2 already measured" in " ".join(text.split())
    assert f"Campaign {CAMPAIGN} on runner-b: 2 cells to run, 0 already measured" in " ".join(text.split())
    after = by_host(read_samples(two_runners["dir"]))
    assert after["runner-a"] == before["runner-a"]  # host A measured nothing again
    assert sorted(s["labels"]["cell"] for s in after["runner-b"]) == ["bm/1/pin/cpu|r0", "bm/1/vnl/cpu|r0"]
