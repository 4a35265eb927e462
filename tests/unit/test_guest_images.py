"""Pruning the guest image directory: the current image's files, the bases running overlays read, files of other
names and young scratch directories stay; images of earlier builds and old scratch directories go."""

from __future__ import annotations

import json
import os
import struct

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import guest_images
from ansible_collections.platbench.lab.plugins.modules import guest_image_prune as module

NOW = 1_800_000_000.0
HOUR = 3600


def overlay(path, backing):
    """A qcow2 header (QEMU's docs/interop/qcow2.txt) naming ``backing``, as `qemu-img create -b` writes it."""
    name = backing.encode()
    header = b"QFI\xfb" + struct.pack(">IQI", 3, 104, len(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.ljust(104, b"\0") + name)


def image_dir(tmp_path):
    guest = tmp_path / "guest"
    guest.mkdir()
    for name in [
        "rootfs-aaaaaaaaaaaa.qcow2",
        "rootfs-aaaaaaaaaaaa.kernel",
        "rootfs-aaaaaaaaaaaa.initrd",
        "rootfs-aaaaaaaaaaaa.json",
        "rootfs-aaaaaaaaaaaa.vmlinux",
        "rootfs-aaaaaaaaaaaa.raw",
        "rootfs-bbbbbbbbbbbb.qcow2",
        "rootfs-bbbbbbbbbbbb.kernel",
        "rootfs-cccccccccccc.qcow2",
        "docker-111111111111.qcow2",
        "docker-222222222222.qcow2",
        "docker-222222222222.qcow2.part",
        "sif-workload-333333333333.img",
        "current.json",
        "workloads.img",
        "notes.txt",
    ]:
        (guest / name).write_bytes(b"x" * 4096)
    for name, age in [("platbench-docker-old1", 7 * HOUR), ("platbench-guest-young", HOUR), ("mine-old", 9 * HOUR)]:
        (guest / name).mkdir()
        (guest / name / "docker.raw").write_bytes(b"y" * 8192)
        os.utime(guest / name, (NOW - age, NOW - age))
    return guest


def test_the_current_image_in_use_bases_other_names_and_young_scratch_stay(tmp_path):
    guest = image_dir(tmp_path)
    vms = tmp_path / "vms"
    overlay(vms / "cell-1" / "root.qcow2", str(guest / "rootfs-cccccccccccc.qcow2"))
    overlay(vms / "cell-1" / "docker.qcow2", "../../guest/docker-222222222222.qcow2")  # relative to the overlay
    (vms / "cell-2").mkdir()
    (vms / "cell-2" / "console.log").write_text("boot\n")
    keep = [str(guest / "rootfs-aaaaaaaaaaaa.qcow2"), str(guest / "docker-111111111111.qcow2")]
    bases = guest_images.bases_in_use([str(vms)])
    assert bases == {str(guest / "rootfs-cccccccccccc.qcow2"), str(guest / "docker-222222222222.qcow2")}
    assert guest_images.stale_entries(str(guest), keep, bases, NOW, 6 * HOUR) == [
        "platbench-docker-old1",
        "rootfs-bbbbbbbbbbbb.kernel",
        "rootfs-bbbbbbbbbbbb.qcow2",
        "sif-workload-333333333333.img",
    ]


def test_prune_removes_them_and_says_what_they_held_and_a_dry_run_removes_nothing(tmp_path):
    guest = image_dir(tmp_path)
    keep = [str(guest / "rootfs-aaaaaaaaaaaa.qcow2")]
    names, freed = guest_images.prune(str(guest), keep, [], 6 * HOUR, dry_run=True, now=NOW)
    assert len(names) == 8 and freed >= 7 * 4096 + 8192
    assert (guest / "docker-111111111111.qcow2").exists()
    assert guest_images.prune(str(guest), keep, [], 6 * HOUR, now=NOW) == (names, freed)
    assert sorted(os.listdir(guest)) == [
        "current.json",
        "mine-old",
        "notes.txt",
        "platbench-guest-young",
        "rootfs-aaaaaaaaaaaa.initrd",
        "rootfs-aaaaaaaaaaaa.json",
        "rootfs-aaaaaaaaaaaa.kernel",
        "rootfs-aaaaaaaaaaaa.qcow2",
        "rootfs-aaaaaaaaaaaa.raw",
        "rootfs-aaaaaaaaaaaa.vmlinux",
        "workloads.img",
    ]
    assert guest_images.prune(str(guest), keep, [], 6 * HOUR, now=NOW) == ([], 0)


def test_a_kept_path_outside_the_directory_keeps_nothing_inside_it(tmp_path):
    guest = image_dir(tmp_path)
    elsewhere = str(tmp_path / "other" / "rootfs-aaaaaaaaaaaa.qcow2")
    assert "rootfs-aaaaaaaaaaaa.qcow2" in guest_images.stale_entries(str(guest), [elsewhere], set(), NOW, 6 * HOUR)


def test_files_that_are_not_qcow2_or_have_no_backing_file_name_none(tmp_path):
    (tmp_path / "raw.qcow2").write_bytes(b"not an image")
    (tmp_path / "short.qcow2").write_bytes(b"QFI")
    standalone = tmp_path / "standalone.qcow2"
    standalone.write_bytes((b"QFI\xfb" + struct.pack(">IQI", 3, 0, 0)).ljust(104, b"\0"))
    for name in ["raw.qcow2", "short.qcow2", "standalone.qcow2", "missing.qcow2"]:
        assert guest_images.qcow2_backing_file(str(tmp_path / name)) is None


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_in_check_mode_lists_and_keeps_then_removes_then_changes_nothing(tmp_path, capsys):
    guest = image_dir(tmp_path)
    keep = [str(guest / "rootfs-aaaaaaaaaaaa.qcow2")]
    args = {"path": str(guest), "keep": keep, "state_dirs": [str(tmp_path / "no")]}
    listed = run_module(capsys, {**args, "_ansible_check_mode": True})
    assert listed["changed"] and "docker-111111111111.qcow2" in listed["removed"]
    assert (guest / "docker-111111111111.qcow2").exists()
    removed = run_module(capsys, args)
    assert removed["removed"] == listed["removed"] and removed["freed_bytes"] == listed["freed_bytes"]
    assert not (guest / "docker-111111111111.qcow2").exists()
    assert not run_module(capsys, args)["changed"]


def test_the_module_names_a_missing_directory_and_the_variable_behind_it(tmp_path, capsys):
    result = run_module(capsys, {"path": str(tmp_path / "absent"), "keep": []})
    assert result["failed"] and "guest_image_dir" in result["msg"] and "absent" in result["msg"]
