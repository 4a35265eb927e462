"""The domain XML of one guest cell, as platbench.lab.vm renders it when the cell goes through the guest kind
(plugins/plugin_utils/placements/guest/tasks/place.yml) in check mode: the plan from platbench.lab.cell_plan,
place.yml's mapping of it to the vm role's variables, the role's template. Nothing is written, libvirt's own
test driver answers in the process, and the run stops once a guest would have to boot."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from plan_options import sized
from playbook_run import REPO

PLAYBOOK = REPO / "tests/roles/platform_run/guest_check.yml"
RENDER = "Render the domain XML"


def guest_image(tmp_path):
    """A guest image description as platbench.lab.guest_image writes it (the files need not exist in check mode)."""
    image = tmp_path / "guest"
    description = {
        "kernel": f"{image}/vmlinuz",
        "initrd": f"{image}/initrd.img",
        "cmdline": "root=/dev/vda console=ttyS0",
        "rootfs": f"{image}/rootfs.qcow2",
        "rootfs_id": "r1",
        "container_disk": f"{image}/docker.qcow2",
        "workloads_disk": f"{image}/workloads.img",
        "ssh_key": f"{image}/id_ed25519",
        "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAtest",
    }
    path = tmp_path / "current.json"
    path.write_text(json.dumps(description))
    return path


def render(playbook, tmp_path, platform, processor, facts, options, params=None, labels=None):
    """The domain XML platbench.lab.vm rendered for the cell PLATFORM/2/pin/PROCESSOR (with ``params``) on a host
    with ``facts``, planned with ``options``, and the run's PlaybookRun."""
    scenario = f"{platform}/2/pin/{processor}"
    labels = {
        "platform": platform,
        "scaleup": 2,
        "cpu_config": "pin",
        "processor": processor,
        "workload": "w",
        **(labels or {}),
    }
    variables = {
        "host_facts": facts,
        # The cell as cells_to_run hands it to cell.yml: sized for the host.
        "cell": sized(
            {"id": scenario + "|r0", "scenario": scenario, "params": params or {}, "labels": labels}, facts, options
        ),
        "plan_options": options,
        "vm_image_description": str(guest_image(tmp_path)),
        "vm_state_dir": str(tmp_path / "vms"),
        # libvirt's own test driver, in the process: the system's libvirtd (if any) is never asked.
        "vm_libvirt_uri": "test:///default",
    }
    run = playbook(PLAYBOOK, variables, "--check")
    rendered = run.results(RENDER)
    assert len(rendered) == 1, run.failed_messages() or run.output[-5000:]
    # Nothing failed on the way: what stopped the run (libvirt, or a guest that cannot boot in check mode) came after.
    failed = [event for event in run.events if event.get("event") == "runner_on_failed"]
    render_event = next(event for event in run.events if event.get("event_data", {}).get("task") == RENDER)
    assert all(event["counter"] > render_event["counter"] for event in failed), run.failed_messages()
    assert not (tmp_path / "vms").exists()  # check mode wrote nothing
    return ET.fromstring(rendered[0]["ansible_facts"]["vm_domain_xml"]), run
