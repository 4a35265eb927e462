"""Guests read the runner host's data files (a generated dataset, a params.data_dir) from a read-only ext4 disk made
of them once (platbench.lab.data_disk), attached to the domain and mounted by its label at /opt/platbench/data: the
cell's --data-dir there, bound read-only into vmcn's container and vmsg's Apptainer. A cell without data files gets
no data disk (its domain: test_gpu_domain_xml.py); the cloud instances, which hold no copy of the data, refuse them."""

from __future__ import annotations

import json
import os
import subprocess

import guest_domain
import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import data_disk, platforms
from ansible_collections.platbench.lab.plugins.modules import data_disk as module
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, dataset_dir
from plan_options import cell_plan, plan_options

GUEST_DIR = "/opt/platbench/data"
DATASET = {"generator": "mnist", "args": {"images": 60}}
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": [0, 1, 2, 3],
    "numa_nodes": {"0": [0, 1, 2, 3]},
    "gpus": [],
    "gpu_count": 0,
    "vm_accelerator": "kvm",
    "qemu_binary": "/usr/bin/qemu-system-x86_64",
}
GUEST_IMAGE = {
    "container_image_id": "sha256:" + "ab" * 32,
    "sif_disk": "/var/lib/platbench/guest/sif-workload-abababababab.img",
    "sif_image_id": "sha256:" + "ab" * 32,
    "apptainer_version": "1.4.5",
}
OPTIONS = plan_options(host="runner-a", campaign="c1", guest_image=GUEST_IMAGE, datasets_dir="/srv/datasets")
# e2fsprogs' tools, outside a user's PATH on Debian.
E2FS = "/usr/sbin"


def make_cell(platform, **params):
    scenario = f"{platform}/2/pin/cpu"
    labels = {"platform": platform, "scaleup": 2, "cpu_config": "pin", "processor": "cpu", "workload": "cnn_train"}
    return {"id": scenario + "|r0", "scenario": scenario, "params": {"steps": 3, **params}, "labels": labels}


# --- the plan -------------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["vm", "vmcn", "vmsg"])
def test_a_guest_cell_reads_the_dataset_from_its_read_only_disk(platform):
    plan = cell_plan(make_cell(platform), FACTS, {**OPTIONS, "dataset": DATASET})
    host_dir = dataset_dir("/srv/datasets", DATASET)
    disk = host_dir + ".pbdata.img"
    assert plan["data_dir"] == GUEST_DIR and plan["argv"][-2:] == ["--data-dir", GUEST_DIR]
    guest = plan["guest"]
    assert guest["data_disk"] == {"source": host_dir, "path": disk, "label": "pbdata"}
    data = {"path": disk, "format": "raw", "readonly": True, "label": "pbdata", "mount": GUEST_DIR}
    assert guest["extra_disks"][-1] == data and plan["runtime"]["guest_data_disk"] == disk
    if platform == "vmsg":  # after the SIF's disk, which the guest image's fstab mounts
        assert guest["extra_disks"][0] == {"path": GUEST_IMAGE["sif_disk"], "format": "raw", "readonly": True}
    # The workload's own command line in the guest: the guest's path, never the host's.
    inside = plan["container"]["command"] if platform == "vmcn" else plan["process"]["argv"]
    assert inside[-2:] == ["--data-dir", GUEST_DIR]
    assert host_dir not in json.dumps({key: plan[key] for key in ("argv", "process", "container") if key in plan})
    if platform == "vmcn":  # the guest's mount point bound read-only into the container, as cn binds the host's
        cache = OPTIONS["peak_cache_dir"]
        assert plan["container"]["volumes"] == [f"{GUEST_DIR}:{GUEST_DIR}:ro", f"{cache}:{cache}:rw"]
    if platform == "vmsg":
        argv = plan["process"]["argv"]
        assert argv[argv.index("--bind") + 1] == f"{GUEST_DIR}:{GUEST_DIR}:ro" and argv.count("--bind") == 1
    if platform == "vm":
        assert f"--data-dir {GUEST_DIR}" in plan["process"]["command"]


@pytest.mark.parametrize("platform", ["vm", "vmcn", "vmsg"])
def test_a_guest_cell_without_data_files_gets_no_data_disk(platform):
    plan = cell_plan(make_cell(platform), FACTS, OPTIONS)
    assert plan["guest"]["data_disk"] is None and plan["data_dir"] is None and "--data-dir" not in plan["argv"]
    assert all("mount" not in disk for disk in plan["guest"]["extra_disks"])
    assert plan["runtime"]["guest_data_disk"] is None


def test_an_own_data_dir_gets_a_disk_named_after_it_and_its_path():
    plan = cell_plan(make_cell("vm", data_dir="/srv/imagenet/"), FACTS, OPTIONS)
    disk = plan["guest"]["data_disk"]
    assert disk["source"] == "/srv/imagenet" and plan["argv"][-2:] == ["--data-dir", GUEST_DIR]
    assert disk["path"].startswith("/srv/datasets/imagenet-") and disk["path"].endswith(".pbdata.img")
    assert disk["path"] != data_disk.disk_path("/other/imagenet", "/srv/datasets")
    # The runner's own platforms read the directory where it is.
    cn = cell_plan(make_cell("cn", data_dir="/srv/imagenet"), FACTS, OPTIONS)
    assert cn["argv"][-2:] == ["--data-dir", "/srv/imagenet"] and cn["container"]["volumes"][0].startswith("/srv/")


@pytest.mark.parametrize(
    "platform, data_dir, message",
    [
        ("vm", "imagenet", r"cell vm/2/pin/cpu\|r0 on runner-a: params.data_dir: .* absolute path"),
        ("nova", "/srv/imagenet", r"nova runs on an instance that has no copy of the runner's data files"),
    ],
)
def test_data_a_platform_cannot_reach_stops_the_plan(platform, data_dir, message):
    with pytest.raises(CellPlanError, match=message):
        cell_plan(make_cell(platform, data_dir=data_dir), FACTS, OPTIONS)


def test_the_registry_says_how_each_platform_reads_data():
    views = {platform.label: platform.data_view for platform in platforms.PLATFORMS}
    assert views == {
        **dict.fromkeys(("bm", "cr", "ns", "sc", "cn", "pd", "gv", "lx", "sg", "k8s"), "host"),
        **dict.fromkeys(("vm", "vmcn", "vmsg", "mvm"), "disk"),
        **dict.fromkeys(("ironic", "nova", "magnum"), None),
    }


def test_the_disk_is_sized_from_the_data_with_headroom():
    size, inodes = data_disk.disk_size(10 * data_disk.MIB, 1000)
    assert inodes == 1164 and size % data_disk.MIB == 0
    assert 10 * data_disk.MIB * 1.1 + 16 * data_disk.MIB <= size <= 28 * data_disk.MIB


# --- the domain (check mode, libvirt's test driver) ------------------------------------------------


def small_dataset(directory):
    (directory / "train").mkdir(parents=True)
    (directory / "train/0.bin").write_bytes(b"\x01" * 5000)
    (directory / "labels.txt").write_text("0\n")
    return directory


@pytest.mark.parametrize("platform", ["vm", "vmcn", "vmsg"])
def test_the_guest_domain_has_the_data_disk_read_only(playbook, tmp_path, platform):
    datasets = tmp_path / "datasets"
    host_dir = small_dataset(datasets / os.path.basename(dataset_dir(str(datasets), DATASET)))
    options = {**OPTIONS, "dataset": DATASET, "datasets_dir": str(datasets)}
    domain, run = guest_domain.render(playbook, tmp_path, platform, "cpu", FACTS, options)
    disks = {disk.find("./source").get("file"): disk for disk in domain.findall("./devices/disk")}
    data = disks[f"{host_dir}.pbdata.img"]
    assert data.find("./readonly") is not None and data.find("./driver").get("type") == "raw"
    # After the workloads disk (vdb) and vmcn's Docker store or vmsg's SIF disk (vdc).
    assert data.find("./target").attrib == {"dev": "vdc" if platform == "vm" else "vdd", "bus": "virtio"}
    # Only the root's overlay and vmcn's Docker store are writable.
    writable = [path for path, disk in disks.items() if disk.find("./readonly") is None]
    assert writable == [path for path in disks if path.endswith(("/root.qcow2", "/docker.qcow2"))]
    made = run.results("Make the disk the guest reads the data from, unless it is made and current")
    assert made and made[0]["reason"] == "missing" and not (datasets / f"{host_dir.name}.pbdata.img").exists()


# --- making the disk --------------------------------------------------------------------------------


def e2fs(tool, *args):
    return subprocess.run([f"{E2FS}/{tool}", *args], capture_output=True, text=True, check=True).stdout


def run_module(capsys, check_mode=False, **args):
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args), pytest.raises(SystemExit) as exited:
        module.main()
    result = json.loads(capsys.readouterr().out)
    return exited.value.code, result


def test_the_disk_is_made_once_and_then_left_alone(playbook, tmp_path):
    source = small_dataset(tmp_path / "datasets/mnist-0123456789")
    disk = tmp_path / "datasets/mnist-0123456789.pbdata.img"
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": [
                {"name": "Make the data disk", "platbench.lab.data_disk": {"src": str(source), "dest": str(disk)}}
            ],
        }
    ]
    first = playbook(play)
    assert first.recap() == (1, 0), first.output[-3000:]
    second = playbook(play)
    assert second.recap() == (0, 0), second.output[-3000:]
    assert second.results("Make the data disk")[0]["reason"] is None
    # A clean ext4 labelled pbdata without a journal, holding the tree as it is.
    e2fs("e2fsck", "-f", "-n", str(disk))
    header = e2fs("dumpe2fs", "-h", str(disk))
    assert "Filesystem volume name:   pbdata" in header and "has_journal" not in header
    assert e2fs("debugfs", "-R", "cat /train/0.bin", str(disk)) == "\x01" * 5000
    assert e2fs("debugfs", "-R", "cat /labels.txt", str(disk)) == "0\n"
    assert oct(disk.stat().st_mode & 0o777) == "0o644" and not list(disk.parent.glob("*.part"))


def test_data_changed_after_the_disk_was_made_makes_it_again(capsys, tmp_path):
    source = small_dataset(tmp_path / "data")
    disk = tmp_path / "disks/data.pbdata.img"
    assert run_module(capsys, src=str(source), dest=str(disk))[1]["reason"] == "missing"
    # The disk carries its data's newest time: a file dated in the future does not make every run rebuild it.
    future = disk.stat().st_mtime_ns + 3600 * 10**9
    os.utime(source / "labels.txt", ns=(future, future))
    assert run_module(capsys, src=str(source), dest=str(disk))[1]["changed"]
    assert not run_module(capsys, src=str(source), dest=str(disk))[1]["changed"]
    # A file added (its directory's time changes) makes it again, with the file in it.
    (source / "train/1.bin").write_bytes(b"\x02" * 10)
    os.utime(source / "train", ns=(future + 1, future + 1))
    rc, result = run_module(capsys, src=str(source), dest=str(disk))
    assert (
        result["changed"] and result["reason"] == f"the data changed after the disk was made (newest: {source}/train)"
    )
    assert e2fs("debugfs", "-R", "cat /train/1.bin", str(disk)) == "\x02" * 10
    assert not run_module(capsys, src=str(source), dest=str(disk))[1]["changed"]


def test_check_mode_says_why_and_writes_nothing(capsys, tmp_path):
    source = small_dataset(tmp_path / "data")
    rc, result = run_module(capsys, check_mode=True, src=str(source), dest=str(tmp_path / "d/x.pbdata.img"))
    assert rc == 0 and result["changed"] and result["reason"] == "missing" and result["entries"] == 4
    assert not (tmp_path / "d").exists()


def test_a_missing_data_directory_says_what_to_fix(capsys, tmp_path):
    rc, result = run_module(capsys, src=str(tmp_path / "nowhere"), dest=str(tmp_path / "x.pbdata.img"))
    assert rc == 1 and result["msg"].startswith(f"data directory {tmp_path}/nowhere does not exist on this host")
    assert "params.data_dir" in result["msg"]


def test_many_small_files_fit(capsys, tmp_path):
    """The sizing holds where inodes and directory entries, not bytes, fill the disk."""
    source = tmp_path / "many"
    for shard in range(4):
        (source / f"s{shard}").mkdir(parents=True)
        for index in range(500):
            (source / f"s{shard}/{index:05d}-a-longish-file-name.jpg").write_bytes(b"x" * (index % 7))
    rc, result = run_module(capsys, src=str(source), dest=str(tmp_path / "many.pbdata.img"))
    assert rc == 0 and result["changed"] and result["entries"] == 2005, result
