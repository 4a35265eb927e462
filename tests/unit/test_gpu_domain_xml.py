"""The domain XML of a guest cell, rendered from the cell's plan on a host with injected GPU
facts: a GPU cell passes exactly the GPU assigned to guests through, a cpu cell none."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.cellplan import cell_plan
from plan_options import plan_options

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "tests/roles/vm/render_domain.yml"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "12"},
    {"pci_address": "0000:af:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "40"},
]
FACTS = {"cpus_allowed": [0, 1, 2, 3], "numa_nodes": {"0": [0, 1, 2, 3]}, "gpus": GPUS, "gpu_count": 2}
OPTIONS = plan_options(host="gpu1", campaign="c1", gpu_assignment={"0000:af:00.0": "guests"})


def render(tmp_path, platform, processor):
    scenario = f"{platform}/2/pin/{processor}"
    labels = {"platform": platform, "scaleup": 2, "cpu_config": "pin", "processor": processor, "workload": "w"}
    plan = cell_plan({"id": scenario + "|r0", "scenario": scenario, "params": {}, "labels": labels}, FACTS, OPTIONS)
    guest = plan["guest"]
    variables = {
        "vm_name": guest["name"],
        "vm_vcpus": guest["vcpus"],
        "vm_cpu_pins": guest["cpu_pins"],
        "vm_emulator_cpus": guest["emulator_cpus"],
        "vm_memory_mb": guest["memory_mb"],
        "vm_hugepages": guest["hugepages"],
        "vm_hostdevs": guest["hostdevs"],
        "vm_run_accelerator": "kvm",
        "vm_image": {"kernel": "/g/vmlinuz", "initrd": "/g/initrd.img", "cmdline": "root=/dev/vda"},
        "vm_dir": str(tmp_path / guest["name"]),
        "vm_all_disks": [],
        "vm_port": {"port": 2222},
        "vm_domain_xml": str(tmp_path / "domain.xml"),
    }
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps(variables))
    run = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", str(PLAYBOOK), "-e", f"@{vars_file}"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return ET.parse(tmp_path / "domain.xml").getroot()


@pytest.mark.parametrize("platform", ["vm", "vmcn"])
def test_a_gpu_guest_cell_passes_the_guest_gpu_through(tmp_path, platform):
    domain = render(tmp_path, platform, "gpu")
    hostdevs = domain.findall("./devices/hostdev")
    assert [(h.get("mode"), h.get("type"), h.get("managed")) for h in hostdevs] == [("subsystem", "pci", "yes")]
    assert hostdevs[0].find("./source/address").attrib == {
        "domain": "0x0000",
        "bus": "0xaf",
        "slot": "0x00",
        "function": "0x0",
    }
    assert [pin.get("cpuset") for pin in domain.findall("./cputune/vcpupin")] == ["2", "3"]


def test_a_cpu_guest_cell_gets_no_gpu(tmp_path):
    assert render(tmp_path, "vm", "cpu").findall("./devices/hostdev") == []
