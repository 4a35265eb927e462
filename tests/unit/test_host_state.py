"""The host's steal and throttling, read from fake /proc and /sys trees, and how the harness records them."""

import pytest
from test_workload_harness import restore_signal_handlers  # noqa: F401 - autouse: run_workload sets handlers
from workload_run import records_of

from workloads.common import host_state
from workloads.common.harness import Outcome, run_workload
from workloads.common.record import metric

UNAVAILABLE = host_state.UNAVAILABLE


def proc_stat(all_steal, cpus_steal, total_scale=1):
    """A /proc/stat whose aggregate and cpuN lines sum to 1000 * total_scale jiffies per CPU, ``steal`` of them stolen;
    guest and guest_nice (already inside user and nice) are large, to show they are not counted twice."""

    def line(name, steal, cpus):
        total = 1000 * total_scale * cpus
        user = total - steal - 100 * cpus
        return f"{name} {user} 0 {50 * cpus} {50 * cpus} 0 0 0 {steal} 999999 999999"

    lines = [line("cpu", all_steal, len(cpus_steal))]
    lines += [line(f"cpu{cpu}", steal, 1) for cpu, steal in enumerate(cpus_steal)]
    return "\n".join([*lines, "intr 12345 0 0", "ctxt 999", "btime 1700000000"]) + "\n"


def write_tree(root, stat=None, frequencies=None, throttles=None):
    """A fake root: /proc/stat, and per CPU cpufreq/{cur,max,cpuinfo_max} and thermal_throttle/{core,package}."""
    if stat is not None:
        (root / "proc").mkdir(parents=True, exist_ok=True)
        (root / "proc" / "stat").write_text(stat)
    for cpu in range(2):
        directory = root / "sys/devices/system/cpu" / f"cpu{cpu}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "topology").mkdir(exist_ok=True)
        (directory / "topology" / "physical_package_id").write_text("0\n")
        if frequencies is not None:
            (directory / "cpufreq").mkdir(exist_ok=True)
            for name, value in zip(
                ("scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq"), frequencies[cpu], strict=True
            ):
                (directory / "cpufreq" / name).write_text(f"{value}\n")
        if throttles is not None:
            (directory / "thermal_throttle").mkdir(exist_ok=True)
            core, package = throttles[cpu]
            (directory / "thermal_throttle" / "core_throttle_count").write_text(f"{core}\n")
            (directory / "thermal_throttle" / "package_throttle_count").write_text(f"{package}\n")
    (root / "sys/devices/system/cpu" / "cpufreq").mkdir(parents=True, exist_ok=True)  # not a CPU: ignored


def test_steal_is_the_share_of_all_jiffies_and_of_the_runs_own_cpus(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write_tree(before, proc_stat(0, [0, 0]))
    # 2000 more jiffies in all, 100 stolen (5%): 90 on cpu1 (9% of its 1000), 10 on cpu0 (1%).
    write_tree(after, proc_stat(100, [10, 90], total_scale=2))
    state = host_state.host_state(host_state.snapshot(before), host_state.snapshot(after), cpus={1})
    assert state["steal_percent"] == pytest.approx(5.0)
    assert state["steal_percent_cpus"] == pytest.approx(9.0)
    assert state["throttle_events"] == UNAVAILABLE
    assert state["freq_ratio_min"] == state["freq_ratio_max"] == state["freq_limit_ratio"] == UNAVAILABLE


def test_throttle_counters_count_a_package_once_and_frequencies_give_ratios(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write_tree(before, proc_stat(0, [0, 0]), [(3_000_000, 3_500_000, 3_500_000)] * 2, [(5, 7), (0, 7)])
    # cpu0 throttled twice, cpu1 once; the package counter (shown by both CPUs) went from 7 to 10: 3 events.
    write_tree(
        after,
        proc_stat(0, [0, 0], total_scale=2),
        [(1_750_000, 2_800_000, 3_500_000), (3_500_000, 3_500_000, 3_500_000)],
        [(7, 10), (1, 10)],
    )
    state = host_state.host_state(host_state.snapshot(before), host_state.snapshot(after))
    assert state["throttle_events"] == 2 + 1 + 3
    assert (state["freq_ratio_min"], state["freq_ratio_max"], state["freq_limit_ratio"]) == (0.5, 1.0, 0.8)
    assert state["steal_percent"] == 0.0 and "steal_percent_cpus" not in state


def test_a_host_that_offers_nothing_says_so_rather_than_zero(tmp_path):
    write_tree(tmp_path)
    empty = host_state.snapshot(tmp_path)
    assert (empty.jiffies, empty.frequencies, empty.throttles) == (None, None, None)
    state = host_state.host_state(empty, empty)
    assert {name: state[name] for name in ("steal_percent", "throttle_events", "freq_ratio_min")} == {
        "steal_percent": UNAVAILABLE,
        "throttle_events": UNAVAILABLE,
        "freq_ratio_min": UNAVAILABLE,
    }
    # A kernel too old for the steal column offers no steal either.
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_text("cpu 1 2 3 4\ncpu0 1 2 3 4\n")
    assert host_state.read_jiffies(tmp_path) is None


def test_this_machines_own_proc_stat_is_read():
    jiffies = host_state.read_jiffies("/")
    assert jiffies is not None and jiffies["all"][0] > jiffies["all"][1] >= 0


@pytest.fixture
def fake_host(monkeypatch):
    """host_state.snapshot gives the next of a list of snapshots: 1% steal per reading, a throttle event each."""
    readings = []

    def snapshot(root="/"):
        index = len(readings)
        readings.append(index)
        return host_state.Snapshot(float(index), {"all": (1000 * index, 10 * index)}, None, {("core", 0): index})

    monkeypatch.setattr(host_state, "snapshot", snapshot)
    return readings


def run(capsys, body):
    code = run_workload("demo", {"model": "tiny"}, {}, body)
    (record,) = records_of(capsys.readouterr().out)
    return code, record


def test_the_harness_records_the_host_state_of_the_timed_part_the_body_marks(capsys, fake_host):
    def body(run):
        with run.timed_part(steps=20):
            pass
        return Outcome([metric("throughput", 10.0, "images/sec")])

    code, record = run(capsys, body)
    metadata = record["metadata"]
    assert code == 0 and metadata["timed_steps"] == 20 and metadata["timed_seconds"] >= 0
    # Readings: 0 before the body, 1 and 2 around the timed part (the one recorded), none after.
    assert metadata["host_state"] == {
        "window": "timed part",
        "seconds": 1.0,
        "steal_percent": 1.0,
        "throttle_events": 1,
        "freq_ratio_min": UNAVAILABLE,
        "freq_ratio_max": UNAVAILABLE,
        "freq_limit_ratio": UNAVAILABLE,
    }
    assert fake_host == [0, 1, 2]


def test_without_a_marked_timed_part_the_host_state_spans_the_whole_body(capsys, fake_host):
    code, record = run(capsys, lambda run: Outcome([metric("throughput", 10.0, "images/sec")]))
    metadata = record["metadata"]
    assert metadata["host_state"]["window"] == "whole run" and metadata["host_state"]["throttle_events"] == 1
    assert "timed_seconds" not in metadata and "timed_steps" not in metadata


def test_unreadable_counters_never_fail_the_run(capsys, monkeypatch):
    def broken(root="/"):
        raise PermissionError("no /proc here")

    monkeypatch.setattr(host_state, "snapshot", broken)
    code, record = run(capsys, lambda run: Outcome([metric("throughput", 10.0, "images/sec")]))
    assert (code, record["status"]) == (0, "ok")
    assert record["metadata"]["host_state"] == {
        "window": "whole run",
        "error": "the host's /proc/stat and /sys could not be read",
    }


def test_cnn_train_marks_only_its_timed_steps(capsys, fake_host):
    from workloads.cnn_train.training import run_steps

    marked = []

    def body(run):
        def timed_part(steps):
            marked.append(("timed", steps, len(losses)))
            return run.timed_part(steps)

        losses = []
        steps = run_steps(lambda: None, lambda batch: losses.append(1.0) or 1.0, 3, 5, timed_part)
        assert (len(steps.step_times), len(steps.losses)) == (5, 8)
        return Outcome([metric("throughput", 10.0, "images/sec")])

    code, record = run(capsys, body)
    # The timed part opens after the 3 warm-up steps, for the 5 timed ones.
    assert code == 0 and marked == [("timed", 5, 3)] and record["metadata"]["timed_steps"] == 5
