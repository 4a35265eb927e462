"""platbench explain on the lab site.yml builds: cn's ladder (bm, the image's root by chroot, Docker's bundle by runc
without and with its seccomp profile and capabilities, Docker) runs every rung for real, with a known answer: 20% of
the timed steps left out of the throughput from the namespaces' rung up, which is then the step explain blames, at
about 0.8. It writes the attribution, the waterfall and explanation.json."""

from __future__ import annotations

import json

import pytest
from playbook_run import platbench_command, read_samples
from test_lab import parse_cpuset

# Asserts a measured effect: it runs with nothing beside it (tests/suite.py, `quiet`).
pytestmark = [pytest.mark.lab, pytest.mark.quiet]

RUNGS = ("bm", "cr", "ns", "sc", "cn")


@pytest.fixture(scope="module")
def explained(lab, tmp_path_factory):
    results = tmp_path_factory.mktemp("explain") / "results"
    done = platbench_command(
        "explain",
        "cn",
        "--inject",
        "ns:discard=0.2",
        # A 20% step shows in the first rounds: stop after them (±50%), each side timing 3 s.
        "--precision",
        "0.5",
        "--max-time",
        "8m",
        "--set",
        "params.auto_seconds=3",
        "--campaign",
        "explain-test",
        "--results-dir",
        str(results),
    )
    return {"directory": results / "explain-test", "output": done.stdout}


def test_every_rung_ran_real_cells_in_pairs_with_the_rung_below_it(explained):
    samples = read_samples(explained["directory"])
    assert [s for s in samples if s["metric"] == "failed"] == []
    throughput = [s for s in samples if s["metric"] == "throughput"]
    assert {s["labels"]["platform"] for s in throughput} == set(RUNGS)
    assert all(s["labels"]["schedule"] == "duet" and s["value"] > 0 for s in throughput)
    assert len({s["labels"]["repeat"] for s in throughput}) >= 3
    # The bundles' rungs ran under runc, without and with Docker's confinement, with cn's image, on the cpuset asked.
    for sample in throughput:
        meta = sample["metadata"]
        if sample["labels"]["platform"] in ("ns", "sc"):
            assert meta["launcher"] == "runc" and meta["oci_cgroup"].endswith(meta["container_name"])
            confinement = {"ns": "none", "sc": "engine"}[sample["labels"]["platform"]]
            assert meta["oci_confinement"] == confinement and meta["oci_root"] == "/var/lib/platbench/lxc/rootfs"
            assert parse_cpuset(meta["cpuset"]) == parse_cpuset(meta["cpuset_requested"])
        elif sample["labels"]["platform"] == "cr":
            assert meta["launcher"] == "taskset chroot"
    image_ids = {s["metadata"].get("image_id") for s in throughput if s["labels"]["platform"] in ("ns", "sc", "cn")}
    assert len(image_ids) == 1 and None not in image_ids


def test_the_step_onto_the_injected_rung_is_blamed_and_reads_about_0_8(explained):
    data = json.loads((explained["directory"] / "explanation.json").read_text())
    steps = {step["platform"]: step for step in data["steps"]}
    assert list(steps) == ["cr", "ns", "sc", "cn"]
    assert data["largest"]["platform"] == "ns"
    low, high = steps["ns"]["estimate"]["interval"]
    assert 0.70 < steps["ns"]["estimate"]["ratio"] < 0.90 and low < 0.8 * 1.05 and high > 0.8 * 0.95
    assert data["direct"]["ratio"] < 0.90 and data["injected"] == {"platform": "ns", "discard": 0.2}
    assert "largest step: namespaces (ns over cr" in explained["output"]


def test_the_report_holds_the_attribution_and_the_waterfall(explained):
    directory = explained["directory"]
    assert "cn/bm " in explained["output"] and " = image root " in explained["output"]
    page = (directory / "report.html").read_text(encoding="utf-8")
    assert "Why cn costs what it costs" in page and (directory / "waterfall.png").is_file()
    assert "product of the steps" in (directory / "report.md").read_text(encoding="utf-8")
