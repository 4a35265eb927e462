"""idle_cores: none on bm through the lab: the fence is up while the cell runs and gone after it, also after a
failed cell. A top-level cpuset group of our own, narrowed to CPU 0, shows it: widened to every core during the
cell, back to 0 after."""

from __future__ import annotations

import os
import threading
import time

import pytest
from ansible_collections.platbench.lab.plugins.module_utils import cpu_fence
from playbook_run import read_samples, run_lab_playbook, workload_processes

pytestmark = pytest.mark.lab

STATE_FILE = "/run/platbench/cpu_fence.json"
GROUP = "platbench-it-fence"


@pytest.fixture
def narrowed_group():
    """A top-level cpuset group on CPU 0 alone, removed after the test."""
    _, directory = cpu_fence.hierarchy()
    group = os.path.join(directory, GROUP)
    os.makedirs(group, exist_ok=True)
    cpus = os.path.join(group, "cpuset.cpus")
    if os.path.exists(os.path.join(group, "cpuset.mems")):
        with open(os.path.join(group, "cpuset.mems"), "w") as stream:
            stream.write("0")
    with open(cpus, "w") as stream:
        stream.write("0")
    yield cpus
    os.rmdir(group)


def read(path):
    with open(path, encoding="utf-8") as stream:
        return stream.read().strip()


def watch(cpus_file, seen, stop):
    """What the group's cpuset and the fence's state file were while the playbook ran."""
    while not stop.is_set():
        if os.path.exists(STATE_FILE):
            seen.add(read(cpus_file))
        time.sleep(0.05)


# The failed cell: a million steps stopped by a 2 s cell timeout, however fast the host (a few steps would finish
# within 2 s on a fast one, and the cell would not fail). The timeout kills the workload's process group before the
# fence comes down: nothing of it runs on afterwards.
@pytest.mark.parametrize(
    "timeout, steps, metric", [(3600, 4, "throughput"), (2, 1_000_000, "failed")], ids=["ok", "failed"]
)
def test_the_fence_is_up_during_a_bm_cell_and_gone_after(lab, tmp_path, narrowed_group, timeout, steps, metric):
    every_core = cpu_fence.format_cpus(sorted(os.sched_getaffinity(0)))
    seen, stop = set(), threading.Event()
    watcher = threading.Thread(target=watch, args=(narrowed_group, seen, stop), daemon=True)
    watcher.start()
    try:
        runner = run_lab_playbook(
            "playbooks/experiment.yml",
            tmp_path,
            {
                "experiment": "smoke",
                "campaign": f"it-idle-{metric}",
                "platbench_results_dir": str(tmp_path / "results"),
                "platform_run_cell_timeout": timeout,
                "experiment_overrides": {
                    "platforms": ["bm"],
                    "scaleup": [len(os.sched_getaffinity(0))],
                    "cpu_config": ["vnl"],
                    "repeats": 1,
                    "idle_cores": "none",
                    "params": {"warmup_steps": 1, "steps": steps, "batch_size": 8},
                },
            },
        )
    finally:
        stop.set()
        watcher.join()
    assert runner.rc == 0, runner.failed_messages()
    [sample, *_] = read_samples(tmp_path / "results" / f"it-idle-{metric}")
    assert sample["metric"] == metric and sample["labels"]["idle_cores"] == "none"
    assert sample["metadata"]["fence"].endswith("groups") and GROUP in sample["metadata"]["fence_changed_groups"]
    assert cpu_fence.parse_cpus(every_core) in [cpu_fence.parse_cpus(cpus) for cpus in seen]
    # Gone after the cell: the group is back on CPU 0 and no state is left.
    assert read(narrowed_group) == "0" and not os.path.exists(STATE_FILE)
    # The failed cell was stopped by its timeout, and its workload with it.
    if metric == "failed":
        assert sample["metadata"]["error"].startswith("stopped by the cell timeout (2 s)"), sample["metadata"]["error"]
    assert not workload_processes(), workload_processes()
