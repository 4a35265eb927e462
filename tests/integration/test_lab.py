"""End to end on this machine: site.yml builds bm, cn and pd, the smoke experiment runs on the three."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records import harness_marks
from playbook_run import REPO, read_samples, run_lab_playbook, workload_processes

from tests import skips

pytestmark = pytest.mark.lab

# The smoke experiment, cut to one repeat of a few steps: 3 platforms x 2 scale-ups x 2 CPU configs
# (vm and vmcn have tests of their own in test_vm.py).
SMOKE_OVERRIDES = {
    "platforms": ["bm", "cn", "pd"],
    "repeats": 1,
    "params": {"warmup_steps": 2, "steps": 8, "batch_size": 16},
}
CAMPAIGN = "it-smoke"
# The container platforms and their engines: cn and pd run the same image.
ENGINES = {"cn": "docker", "pd": "podman"}


def parse_cpuset(text):
    cpus = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


GUEST_DIR = "/var/lib/platbench/guest"
# What an earlier build of other inputs left: a workload image under another tag in Docker and Podman, a guest
# image of another id and a scratch directory of a killed build. site.yml removes them (images are GB each).
EARLIER_TAG = "platbench/workload:000000000e47"
EARLIER_GUEST = ["rootfs-000000000e47.qcow2", "rootfs-000000000e47.kernel", "docker-000000000e47.qcow2"]
KILLED_SCRATCH = "platbench-docker-e47killed"
REMOVALS = {"Remove the earlier builds", "Remove the earlier builds from Podman", "Remove the images of earlier builds"}


def plant_earlier_builds():
    empty = subprocess.run(["tar", "-cf", "-", "-T", "/dev/null"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "import", "-", EARLIER_TAG], input=empty, capture_output=True, check=True)
    subprocess.run(["podman", "pull", "-q", f"docker-daemon:{EARLIER_TAG}"], capture_output=True, check=True)
    for name in EARLIER_GUEST:
        with open(os.path.join(GUEST_DIR, name), "wb") as handle:
            handle.write(b"earlier build")
    scratch = os.path.join(GUEST_DIR, KILLED_SCRATCH)
    os.makedirs(scratch, exist_ok=True)
    os.utime(scratch, (0, 0))


def image_present(engine, tag):
    return subprocess.run([engine, "image", "inspect", tag], capture_output=True).returncode == 0


def test_a_second_site_run_changes_nothing_but_removing_earlier_builds(lab, tmp_path):
    with open(os.path.join(GUEST_DIR, "current.json")) as handle:
        current = json.load(handle)
    plant_earlier_builds()
    second = run_lab_playbook("site.yml", tmp_path)
    assert second.rc == 0, second.failed_messages()
    changed = {
        event["event_data"]["task"]
        for event in second.events
        if event.get("event") == "runner_on_ok" and event["event_data"]["res"].get("changed")
    }
    assert changed == REMOVALS, "second site.yml run changed more than the removals:\n%s" % second.output[-4000:]
    assert not image_present("docker", EARLIER_TAG) and not image_present("podman", EARLIER_TAG)
    assert image_present("docker", "platbench/workload:latest") and image_present("podman", "platbench/workload:latest")
    left = set(os.listdir(GUEST_DIR))
    assert left.isdisjoint([*EARLIER_GUEST, KILLED_SCRATCH])
    assert {os.path.basename(current[key]) for key in ("rootfs", "kernel", "initrd", "container_disk")} <= left


@pytest.fixture(scope="module")
def smoke(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smoke")
    results = tmp / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp,
        {
            "experiment": "smoke",
            "campaign": CAMPAIGN,
            "platbench_results_dir": str(results),
            "experiment_overrides": SMOKE_OVERRIDES,
        },
    )
    assert runner.rc == 0, "%s\n%s" % (runner.failed_messages(), runner.output[-6000:])
    return {"tmp": tmp, "dir": results / CAMPAIGN, "samples": read_samples(results / CAMPAIGN)}


def by_metric(samples, metric):
    return [s for s in samples if s["metric"] == metric]


def test_every_cell_of_every_platform_is_measured(smoke):
    samples = smoke["samples"]
    assert by_metric(samples, "failed") == []
    cells = {s["labels"]["cell"] for s in by_metric(samples, "throughput")}
    assert len(cells) == 12
    scenarios = {s["labels"]["scenario"] for s in by_metric(samples, "throughput")}
    assert scenarios == {"%s/%d/%s/cpu" % (p, n, c) for p in ("bm", "cn", "pd") for n in (1, 2) for c in ("pin", "vnl")}
    for sample in by_metric(samples, "throughput") + by_metric(samples, "elapsed"):
        assert sample["value"] > 0
        labels = sample["labels"]
        for key in (
            "experiment",
            "platform",
            "scaleup",
            "cpu_config",
            "processor",
            "workload",
            "framework",
            "model",
            "batch_size",
            "data",
            "mode",
            "repeat",
        ):
            assert key in labels, key
        assert labels["experiment"] == "smoke" and labels["model"] == "tiny" and labels["batch_size"] == 16
        for key in ("host", "kernel", "cpu_model", "cpuset", "virt", "framework_version"):
            assert sample["metadata"].get(key) not in (None, ""), key
    assert by_metric(samples, "throughput")[0]["unit"] == "images/sec"


def test_container_samples_ran_in_a_pinned_container(smoke):
    allowed = set(os.sched_getaffinity(0))
    images = {
        s["metadata"]["image_id"]
        for s in by_metric(smoke["samples"], "throughput")
        if s["labels"]["platform"] in ENGINES
    }
    assert len(images) == 1  # Podman holds Docker's image, id kept
    for sample in by_metric(smoke["samples"], "throughput"):
        labels, meta = sample["labels"], sample["metadata"]
        scaleup = labels["scaleup"]
        container = labels["platform"] in ENGINES
        if container:
            # Seen from inside: a container of that engine, and the engine confirms no network and the same image.
            engine = ENGINES[labels["platform"]]
            assert meta["virt"] == engine and meta["launcher"] == engine and meta[f"{engine}_version"]
            assert re.fullmatch(r"[0-9a-f]{64}", meta["container_id"])
            assert meta["engine_network_mode"] == "none"
            assert meta["image_id"].startswith("sha256:")
        else:
            assert meta["virt"] not in ENGINES.values() and not meta.get("container_id")
        if labels["cpu_config"] == "pin":
            seen = parse_cpuset(meta["cpuset"])
            assert len(seen) == scaleup and seen == parse_cpuset(meta["cpuset_requested"])
            if container:
                assert parse_cpuset(meta["engine_cpuset_cpus"]) == seen
        else:
            assert parse_cpuset(meta["cpuset"]) == allowed
            if container:
                assert meta["cgroup_cpu_quota"] == pytest.approx(scaleup)
                assert int(meta["engine_nano_cpus"]) == scaleup * 10**9


def test_run_json_and_report(smoke):
    run = json.loads((smoke["dir"] / "run.json").read_text())
    assert run["campaign"] == CAMPAIGN and run["experiment"]["name"] == "smoke"
    report = subprocess.run(
        [sys.executable, "-m", "platbench", "report", str(smoke["dir"])],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # The answer first (cn/bm and pd/bm per row; one round: no interval yet), then the table, whose rows start with
    # their platform.
    assert report.startswith("Answer: throughput, each platform against bm (95% interval, "), report
    answers = [line for line in report.splitlines() if line.startswith("cn/bm throughput (")]
    # The campaign ran through ansible-playbook itself, not `platbench run`: nothing placed the harness, and every
    # answer line says so (plugins/plugin_utils/records/harness_marks.py).
    not_quiet = f"; harness not isolated: {harness_marks.NOT_THROUGH_PLATBENCH}"
    assert len(answers) == 4 and all(
        line.endswith(f"undecided: no interval (fewer than 2 rounds on a side){not_quiet}") for line in answers
    ), answers
    rows = [line for line in report.splitlines() if re.match(r"\s*(bm|cn)\s", line)]
    assert len(rows) == 8, report
    assert any(line.lstrip().startswith("cn") and re.search(r"\d\.\d+", line) for line in rows)


def test_rerun_resumes_without_measuring_again(smoke):
    before = len(smoke["samples"])
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        smoke["tmp"] / "again",
        {
            "experiment": "smoke",
            "campaign": CAMPAIGN,
            "platbench_results_dir": str(smoke["dir"].parent),
            "experiment_overrides": SMOKE_OVERRIDES,
        },
    )
    assert runner.rc == 0, runner.failed_messages()
    assert len(read_samples(smoke["dir"])) == before
    assert "0 cells to run, 12 already measured" in runner.output


def test_failed_cell_is_recorded_and_the_campaign_goes_on(lab, tmp_path):
    # Bad parameters no longer reach a host (the plan checks them), so the cells fail at run time: a million steps
    # outlast a 2 s cell timeout by far on any host. The timeout stops each cell for good: the bm workload's process
    # group is killed where it ran, cn's container removed, before the next cell starts.
    results = tmp_path / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp_path,
        {
            "experiment": "smoke",
            "campaign": "it-fail",
            "platbench_results_dir": str(results),
            "platform_run_cell_timeout": 2,
            "experiment_overrides": {
                "platforms": ["bm", "cn"],
                "scaleup": [1],
                "cpu_config": ["pin"],
                "repeats": 1,
                "params": {"steps": 1_000_000},
            },
        },
    )
    assert runner.rc == 0, runner.failed_messages()
    samples = read_samples(results / "it-fail")
    assert sorted(s["labels"]["platform"] for s in samples) == ["bm", "cn"]  # in the round's shuffled order
    for sample in samples:
        assert sample["metric"] == "failed"
        error = sample["metadata"]["error"]
        assert error.startswith("stopped by the cell timeout (2 s)") and "platform_run_cell_timeout" in error, error
    # bm's record reads the stop from the exit status of its deadline (coreutils' timeout), cn's from the task.
    (bm_error,) = [s["metadata"]["error"] for s in samples if s["labels"]["platform"] == "bm"]
    assert "got SIGTERM" in bm_error or "killed" in bm_error
    # The run says which cells failed, after the recap.
    assert re.search(r"cells ok: 0, failed: 2", runner.output), runner.output[-3000:]
    # Nothing of either cell runs on: no workload process on the host, no container of the campaign.
    assert not workload_processes(), workload_processes()
    assert not subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=org.platbench.campaign=it-fail"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.mark.parametrize(
    "extravars, expected",
    [
        ({"experiment": "no-such-experiment"}, r"smoke"),
        ({"experiment": "smoke", "experiment_overrides": {"platforms": ["bm", "mainframe"]}}, r"mainframe.*bm"),
        ({"experiment": "smoke", "experiment_overrides": {"scaleup": [64]}}, r"scale-up 64.*offers \d+ CPUs"),
        (
            {"experiment": "smoke", "experiment_overrides": {"platforms": ["bm", "sg"]}},
            r"platform sg.*Apptainer is not installed on this host.*platbench\.lab\.apptainer",
        ),
        # The OpenStack platforms provision on the cloud named; one clouds.yaml does not have stops them all.
        (
            {
                "experiment": "smoke",
                "experiment_overrides": {"platforms": ["bm", "nova"]},
                "openstack_instances_cloud": "no-such-cloud",
                "openstack_instances_image_name": "debian-12",
            },
            r"openstack_instances_cloud: there is no cloud 'no-such-cloud'",
        ),
        # An address in the GPU assignment that is no NVIDIA GPU of the host stops even a CPU-only plan.
        (
            {"experiment": "smoke", "platbench_gpu_assignment": {"0000:00:1f.0": "guests"}},
            r"platbench_gpu_assignment names 0000:00:1f.0, which is not an NVIDIA GPU function of localhost",
        ),
        ({"experiment": "smoke", "experiment_overrides": {"processor": ["gpu"]}}, r"'gpu' scenarios.*no NVIDIA GPU"),
        ({"experiment": "smoke", "experiment_overrides": {"repeats": 0}}, r"repeats: 0 must be an integer >= 1"),
        (
            {"experiment": "xu2017-micro-gpu", "experiment_overrides": {"processor": ["cpu"]}},
            r"micro_gpu is a GPU benchmark and this experiment's processor is only cpu",
        ),
        (
            {"experiment": "xu2017-micro", "experiment_overrides": {"workload": ["micro_net"], "platforms": ["vm"]}},
            r"micro_net needs a peer.*supported on bm, cn",
        ),
        (
            {"experiment": "smoke", "experiment_overrides": {"params": {"model": "resnet9000"}}},
            r"smoke.yml.*params.model: 'resnet9000'.*invalid choice.*'tiny'",
        ),
        (
            {"experiment": "smoke", "experiment_overrides": {"params": {"batch_size": 0}}},
            r"params.batch_size: 0 .*positive integer",
        ),
        (
            {"experiment": "smoke", "experiment_overrides": {"mode": "shared"}},
            r"background: a shared cell needs the job that runs beside it",
        ),
    ],
)
def test_bad_input_stops_before_any_cell_runs(tmp_path, extravars, expected):
    skips.unless_root("reaching the host's prechecks needs root")
    if "gpu" in str(extravars):
        skips.unless_no_gpu("a GPU scenario is valid here")
    results = tmp_path / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml", tmp_path, dict(extravars, campaign="it-bad", platbench_results_dir=str(results))
    )
    assert runner.rc != 0
    assert re.search(expected, " ".join(runner.failed_messages()), re.S), runner.failed_messages()
    assert not (results / "it-bad").exists()


@pytest.mark.parametrize(
    "experiment, overrides, metric",
    [
        # A generated dataset, mounted read-only into the container, read by a PyTorch workload.
        ("chopra2022-mnist-cnn", {"repeats": 1, "dataset": {"args": {"images": 600}}}, "user_time"),
        # 2 DDP ranks (torchrun) over loopback inside one instance, on the host and in a container. lin2018-distributed
        # (ranks on instances of their own, over a bridge and an overlay): tests/integration/test_lab_instances.py.
        (
            "lin2018-single",
            {
                "repeats": 1,
                "params": {
                    "framework": "torch",
                    "model": "tiny",
                    "variable_update": "distributed",
                    "launch_local": 2,
                    "threads": 1,
                    "steps": 6,
                    "warmup_steps": 1,
                    "image_size": 32,
                    "batch_size": 8,
                },
            },
            "step_time_p50",
        ),
    ],
)
def test_study_experiments_run_on_both_platforms(lab, tmp_path, experiment, overrides, metric):
    results = tmp_path / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp_path,
        {
            "experiment": experiment,
            "campaign": "it-study",
            "platbench_results_dir": str(results),
            "experiment_overrides": {**overrides, "platforms": ["bm", "cn"], "scaleup": [2]},
        },
    )
    assert runner.rc == 0, runner.failed_messages()
    samples = read_samples(results / "it-study")
    assert by_metric(samples, "failed") == []
    seen = {(s["labels"]["platform"], s["metadata"]["virt"] == "docker") for s in by_metric(samples, metric)}
    assert seen == {("bm", False), ("cn", True)}


def test_the_sandboxes_gv_and_lx_and_the_chroot_run_cells_and_record_their_runtime_cpuset_and_quota(lab, tmp_path):
    """gVisor (gv: Docker with runsc), LXC (lx: lxc-execute), the image's root by chroot (cr, the kind kept in a
    folder of its own) and Docker's bundle run by runc without and with its confinement (ns, sc), pinned and vanilla,
    one cell each, for real."""
    results = tmp_path / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp_path,
        {
            "experiment": "smoke",
            "campaign": "it-sandboxes",
            "platbench_results_dir": str(results),
            "experiment_overrides": {**SMOKE_OVERRIDES, "platforms": ["gv", "lx", "cr", "ns", "sc"], "scaleup": [1]},
        },
    )
    assert runner.rc == 0, "%s\n%s" % (runner.failed_messages(), runner.output[-6000:])
    samples = read_samples(results / "it-sandboxes")
    assert by_metric(samples, "failed") == []
    throughput = by_metric(samples, "throughput")
    assert {(s["labels"]["platform"], s["labels"]["cpu_config"]) for s in throughput} == {
        (platform, config) for platform in ("gv", "lx", "cr", "ns", "sc") for config in ("pin", "vnl")
    }
    for sample in throughput:
        labels, meta = sample["labels"], sample["metadata"]
        assert sample["value"] > 0
        pinned = labels["cpu_config"] == "pin"
        if labels["platform"] == "gv":
            # Docker ran it in runsc, which recorded how gVisor intercepts system calls; gVisor numbers its own CPUs,
            # so the cpuset is the engine's (Docker's HostConfig), not what the workload saw.
            assert meta["oci_runtime"] == meta["engine_runtime"] == "runsc" and meta["gvisor_platform"] == "ptrace"
            assert meta["engine_network_mode"] == "none"
            if pinned:
                assert parse_cpuset(meta["engine_cpuset_cpus"]) == parse_cpuset(meta["cpuset_requested"])
            else:
                assert int(meta["engine_nano_cpus"]) == 10**9
        elif labels["platform"] in ("ns", "sc"):
            # runc ran Docker's bundle of the image: in its own namespaces (the workload is a container to itself),
            # with Docker's seccomp filter on sc only; the cpuset or the quota is the container's own cgroup's.
            assert meta["launcher"] == "runc" and meta["oci_root"] == "/var/lib/platbench/lxc/rootfs"
            assert meta["oci_confinement"] == {"ns": "none", "sc": "engine"}[labels["platform"]]
            assert (meta["oci_seccomp"] is None) == (labels["platform"] == "ns")
            if pinned:
                assert parse_cpuset(meta["cpuset"]) == parse_cpuset(meta["cpuset_requested"])
            else:
                assert meta["cpu_quota_requested"] == 1.0 and meta["cgroup_cpu_quota"] == pytest.approx(1.0)
        elif labels["platform"] == "cr":
            # The image's root, chrooted with no namespace: the workload saw the host's hostname and no container, ran
            # in a cgroup of its own, and pinned by taskset where asked.
            assert meta["launcher"] == ("taskset chroot" if pinned else "chroot")
            assert meta["chroot_root"] == "/var/lib/platbench/lxc/rootfs"
            assert meta["virt"] not in ("docker", "podman", "lxc", "container-other")
            assert meta["container_id"] is None and meta["uncapped_cgroup"]["cgroup"]
            if pinned:
                assert parse_cpuset(meta["cpuset"]) == parse_cpuset(meta["cpuset_requested"])
        else:
            # lxc-execute started it with the cell's cgroup keys: the cpuset the workload saw is the one asked for.
            assert meta["launcher"] == "lxc-execute" and meta["lxc_name"]
            keys = "\n".join(meta["lxc_cgroup"])
            assert "memory.limit_in_bytes=" in keys or "memory.max=" in keys
            if pinned:
                assert parse_cpuset(meta["cpuset"]) == parse_cpuset(meta["cpuset_requested"])
                assert "cpuset.cpus=" in keys
            else:
                assert meta["cpu_quota_requested"] == 1.0
                assert "cpu.cfs_quota_us=100000" in keys or "cpu.max=100000 100000" in keys
