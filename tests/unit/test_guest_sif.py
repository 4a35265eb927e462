"""vmsg's side of the guest image, run for real against temp dirs: the SIF disk and the description,
and the root file system's name, which only a guest carrying Apptainer changes."""

from __future__ import annotations

import json
import re
import subprocess

from playbook_run import run_playbook

IMAGE = "sha256:" + "cd" * 32
KEYPAIR = {"public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAtest"}
ROOTFS_VARS = {"guest_image_keypair": KEYPAIR, "guest_image_gpu": False, "guest_image_requirements": ["frameworks"]}


def run_tasks(tmp_path, tasks, variables):
    plays = [
        {
            "name": "Run guest_image tasks",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}", **variables},
            "tasks": tasks,
        }
    ]
    run = run_playbook(plays, tmp_path)
    changed, failed = run.recap()
    assert failed == 0, run.output[-5000:]
    return changed


def include(tasks_from):
    return {
        "name": f"Include {tasks_from}",
        "ansible.builtin.include_role": {"name": "platbench.lab.guest_image", "tasks_from": tasks_from},
    }


def dump(names, path):
    return {
        "name": "Dump",
        "ansible.builtin.copy": {
            "content": "{{ {%s} | to_json }}" % ", ".join(f"'{name}': {name}" for name in names),
            "dest": str(path),
            "mode": "0644",
        },
    }


def describe_sif(tmp_path, with_apptainer):
    guest_dir = tmp_path / "guest"
    guest_dir.mkdir(exist_ok=True)
    sif = tmp_path / "workload-cdcdcdcdcdcd.sif"
    sif.write_bytes(b"SIF image bytes")
    description = tmp_path / "current.json"
    description.write_text(json.dumps({"image": "platbench/workload:t", "image_id": IMAGE, "sif": str(sif)}))
    variables = {
        "guest_image_dir": str(guest_dir),
        "guest_image_sif_description": str(description),
        "guest_image_sif_disk_gb": 1,
        "guest_image_with_apptainer": with_apptainer,
        "guest_image_description": {"rootfs_id": "r1", "apptainer_version": "1.4.5" if with_apptainer else None},
    }
    changed = run_tasks(
        tmp_path, [include("sif_disk"), dump(["guest_image_description"], tmp_path / "out.json")], variables
    )
    return changed, json.loads((tmp_path / "out.json").read_text())["guest_image_description"], guest_dir


def test_a_guest_with_apptainer_gets_the_sif_on_its_own_disk_once(tmp_path):
    changed, description, guest_dir = describe_sif(tmp_path, True)
    disk = guest_dir / "sif-workload-cdcdcdcdcdcd.img"
    assert description == {
        "rootfs_id": "r1",
        "apptainer_version": "1.4.5",
        "sif_image_id": IMAGE,
        "sif_disk": str(disk),
    }
    assert disk.is_file() and [p.name for p in guest_dir.iterdir()] == [disk.name]  # no scratch left
    # The disk holds the SIF as /workload.sif under the label the guest's fstab mounts.
    listing = subprocess.run(["debugfs", "-R", "ls -l /", str(disk)], capture_output=True, text=True, check=True)
    assert "workload.sif" in listing.stdout
    label = subprocess.run(["dumpe2fs", "-h", str(disk)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Filesystem volume name:\s+pbsif", label)
    # A second run finds the disk of this image and builds nothing (only the dump is rewritten).
    assert describe_sif(tmp_path, True)[0] == 0 and changed >= 1


def test_a_guest_without_apptainer_says_it_has_no_sif(tmp_path):
    _, description, guest_dir = describe_sif(tmp_path, False)
    assert description == {"rootfs_id": "r1", "apptainer_version": None, "sif_image_id": None, "sif_disk": None}
    assert list(guest_dir.iterdir()) == []


def test_only_a_guest_carrying_apptainer_gets_another_root_file_system(tmp_path):
    def rootfs_id(**extra):
        out = tmp_path / "id.json"
        run_tasks(
            tmp_path,
            [include("rootfs_id"), dump(["guest_image_rootfs_id"], out)],
            {
                "guest_image_keypair": KEYPAIR,
                "guest_image_gpu": False,
                "guest_image_requirements": ["frameworks"],
                **extra,
            },
        )
        return json.loads(out.read_text())["guest_image_rootfs_id"]

    deb = {"stat": {"exists": True, "checksum": "ab" * 32}}
    plain = rootfs_id()
    assert rootfs_id(guest_image_with_apptainer=False, guest_image_apptainer_deb_stat=deb) == plain
    with_apptainer = rootfs_id(guest_image_with_apptainer=True, guest_image_apptainer_deb_stat=deb)
    assert with_apptainer != plain
    other_deb = {"stat": {"exists": True, "checksum": "ef" * 32}}
    assert rootfs_id(guest_image_with_apptainer=True, guest_image_apptainer_deb_stat=other_deb) not in (
        plain,
        with_apptainer,
    )
