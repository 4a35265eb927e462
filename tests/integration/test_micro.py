"""xu2017-micro at its tiny size on bm and cn, from the lab site.yml builds: every micro-benchmark measures on
both platforms with the tools the lab installed, and the report gives Diff% per component."""

from __future__ import annotations

import ipaddress
import subprocess
import sys

import pytest
from playbook_run import REPO, instance_leftovers, read_samples, run_lab_playbook

pytestmark = pytest.mark.lab

CAMPAIGN = "it-micro"
PEER_NETWORK = ipaddress.ip_network("198.18.0.0/15")


@pytest.fixture(scope="module")
def micro(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("micro")
    results = tmp / "results"
    runner = run_lab_playbook(
        "playbooks/experiment.yml",
        tmp,
        {
            "experiment": "xu2017-micro",
            "size": "tiny",
            "campaign": CAMPAIGN,
            "platbench_results_dir": str(results),
            "experiment_overrides": {"platforms": ["bm", "cn"]},
        },
    )
    assert runner.rc == 0, "%s\n%s" % (runner.failed_messages(), runner.output[-6000:])
    return {"dir": results / CAMPAIGN, "samples": read_samples(results / CAMPAIGN), "output": runner.output}


def measured(samples, metric, platform):
    return [s for s in samples if s["metric"] == metric and s["labels"]["platform"] == platform]


def test_no_cell_failed_and_hpcg_says_why_it_did_not_run(micro):
    assert [s for s in micro["samples"] if s["metric"] == "failed"] == []
    skipped = [s for s in micro["samples"] if s["metric"] == "skipped"]
    assert {(s["labels"]["platform"], s["labels"]["suite"]) for s in skipped} == {("bm", "hpcg"), ("cn", "hpcg")}
    assert all("micro_tools_hpcg" in s["metadata"]["reason"] for s in skipped), skipped[0]["metadata"]
    assert {s["labels"]["workload"] for s in micro["samples"]} == {"micro_cpu", "micro_mem", "micro_disk", "micro_net"}


@pytest.mark.parametrize("platform", ["bm", "cn"])
def test_every_component_is_measured_with_the_labs_tools(micro, platform):
    samples = micro["samples"]
    hpl = measured(samples, "hpl_gflops", platform)
    assert [s["labels"]["hpl_n"] for s in hpl] == [1000] and hpl[0]["value"] > 0
    assert "openblas" in str(hpl[0]["metadata"]["blas"]).lower(), hpl[0]["metadata"]["blas"]
    assert hpl[0]["metadata"]["tool_versions"]["hpcc"]
    assert [s["value"] > 0 for s in measured(samples, "hpl_gemm_ratio", platform)] == [True]
    assert measured(samples, "dgemm_gflops", platform)[0]["value"] > 0
    assert measured(samples, "stream_triad", platform)
    assert sorted(s["labels"]["working_set_mb"] for s in measured(samples, "mem_latency", platform)) == [1, 16]
    dd = measured(samples, "dd_write", platform)
    assert sorted(s["labels"]["size_mb"] for s in dd) == [1, 16] and all(s["value"] > 0 for s in dd)
    assert {s["labels"]["ioping_mode"] for s in measured(samples, "ioping_latency", platform)} >= {"default", "cached"}
    kind = dd[0]["metadata"]["disk"]["kind"]
    assert (kind == "overlayfs") == (platform == "cn"), dd[0]["metadata"]["disk"]
    throughput = measured(samples, "net_throughput", platform)
    assert [s["labels"]["streams"] for s in throughput] == [1] and throughput[0]["value"] > 0
    assert measured(samples, "net_rtt", platform)[0]["value"] > 0
    assert throughput[0]["metadata"]["tool_versions"]["iperf3"]


def test_containers_measure_the_network_over_a_bridge_of_their_own_which_is_removed(micro):
    peer = measured(micro["samples"], "net_throughput", "cn")[0]["metadata"]["peer"]
    assert ipaddress.ip_address(peer["address"]) in PEER_NETWORK
    # The peer, the holders and the cell's bridge, veths and namespaces: all gone.
    assert instance_leftovers(CAMPAIGN) == []
    bm_peer = measured(micro["samples"], "net_throughput", "bm")[0]["metadata"]["peer"]
    assert ipaddress.ip_address(bm_peer["address"]).is_loopback
    # Each platform's workload ran beside its peer as the cell's second instance, on the cell's CPUs.
    for platform in ("bm", "cn"):
        cell = measured(micro["samples"], "net_throughput", platform)[0]
        assert cell["labels"]["instance_role"] == "foreground", cell["labels"]
        ran = cell["metadata"]["instances_ran"]
        assert sorted((entry["role"], entry["index"]) for entry in ran) == [("foreground", 0), ("peer", 1)], ran


def test_the_report_gives_diff_percent_per_component(micro):
    done = subprocess.run(
        [sys.executable, "-m", "platbench", "report", str(micro["dir"])],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for component in ("cpu", "memory", "disk", "network"):
        assert f"Diff% against bm, component {component}" in done.stdout
        assert (micro["dir"] / f"diff_{component}.md").is_file()
