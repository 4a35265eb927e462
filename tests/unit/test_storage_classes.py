"""Storage classes: the device and rotational flag behind a class's directory, read from fake mountinfo and sysfs
trees; the prechecks' messages; and where a cell's dataset goes (its class's directory) and what its record says."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import storage
from ansible_collections.platbench.lab.plugins.modules import storage_classes as module
from ansible_collections.platbench.lab.plugins.plugin_utils.cells.cellplan import CellPlanError, dataset_dir
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import (
    ExperimentError,
    validate_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.matrix import expand
from plan_options import assert_plan_matches_its_specs, cell_plan, plan_options

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683656k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
60 27 8:17 / /mnt/hdd rw,relatime - xfs /dev/sdb1 rw
61 27 259:1 / /mnt/nvme rw,relatime - ext4 /dev/nvme0n1p1 rw
62 61 0:40 / /mnt/nvme/scratch rw,relatime - tmpfs tmpfs rw
63 27 8:33 / /mnt/with\\040space rw,relatime - ext4 /dev/sdc1 rw
"""


def fake_sys(root, disks):
    """A /sys with ``disks``: name -> (MAJOR:MINOR, rotational, {partition: M:m})."""
    (root / "sys/dev/block").mkdir(parents=True)
    for name, (number, rotational, partitions) in disks.items():
        node = root / "sys/devices/virtual" / name
        (node / "queue").mkdir(parents=True)
        (root / "sys/block").mkdir(exist_ok=True)
        (root / "sys/block" / name).symlink_to(node)
        (node / "queue/rotational").write_text(f"{rotational}\n")
        (root / "sys/dev/block" / number).symlink_to(node)
        for part, part_number in partitions.items():
            (node / part).mkdir()
            (node / part / "partition").write_text("1\n")
            (root / "sys/dev/block" / part_number).symlink_to(node / part)
    return str(root / "sys")


@pytest.fixture
def sys_root(tmp_path):
    return fake_sys(
        tmp_path / "host",
        {
            "vda": ("254:0", 1, {}),
            "sdb": ("8:16", 1, {"sdb1": "8:17"}),
            "nvme0n1": ("259:0", 0, {"nvme0n1p1": "259:1"}),
            "sdc": ("8:32", 0, {"sdc1": "8:33"}),
        },
    )


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/mnt/hdd/platbench", {"device": "sdb", "partition": "sdb1", "rotational": True, "fstype": "xfs"}),
        ("/mnt/nvme/platbench", {"device": "nvme0n1", "partition": "nvme0n1p1", "rotational": False}),
        ("/mnt/nvme/scratch/data", {"device": None, "rotational": None, "fstype": "tmpfs"}),
        ("/var/lib/platbench", {"device": "vda", "partition": None, "rotational": True, "mount_point": "/"}),
        ("/mnt/with space/d", {"device": "sdc", "rotational": False, "mount_point": "/mnt/with space"}),
    ],
    ids=["hdd-partition", "nvme-partition", "tmpfs-inside-nvme", "root-disk", "escaped-mount-point"],
)
def test_the_device_behind_a_path_and_its_rotational_flag(sys_root, path, expected):
    info = storage.backing("c", path, path, MOUNTINFO, sys_root)
    assert info["exists"] and {key: info[key] for key in expected} == expected


def described(name, path, sys_root):
    return storage.backing(name, path, path, MOUNTINFO, sys_root)


def test_a_tmpfs_says_it_has_no_device_and_a_disk_says_whether_it_spins(sys_root):
    assert described("fast", "/dev/shm/platbench-data", sys_root)["medium"] == "memory (tmpfs): no block device"
    assert described("hdd", "/mnt/hdd/x", sys_root)["medium"] == "/dev/sdb (rotational)"
    assert described("ssd", "/mnt/nvme/x", sys_root)["medium"] == "/dev/nvme0n1 (non-rotational)"
    runtime = storage.runtime(described("ssd", "/mnt/nvme/x", sys_root))
    assert runtime == {
        "storage_class": "ssd",
        "storage_path": "/mnt/nvme/x",
        "storage_device": "nvme0n1",
        "storage_rotational": False,
        "storage_fstype": "ext4",
        "storage_medium": "/dev/nvme0n1 (non-rotational)",
    }


def test_a_missing_directory_is_described_as_missing(tmp_path):
    info = storage.describe("hdd", str(tmp_path / "nowhere"), str(tmp_path / "proc"), str(tmp_path / "sys"))
    assert not info["exists"] and info["device"] is None


def test_a_real_directory_is_resolved_through_its_links_and_the_machine_mountinfo(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(MOUNTINFO)
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    info = storage.describe("disk", str(tmp_path / "link"), str(tmp_path / "proc"), str(tmp_path / "nosys"))
    # tmp_path lies below / in the fake mountinfo; no sysfs: the device cannot be told, and the record says so.
    assert info["exists"] and info["mount_point"] == "/" and info["medium"] == "ext4: no block device"


def test_a_relative_path_is_refused():
    with pytest.raises(storage.StorageError, match="must be absolute"):
        storage.describe("hdd", "data/hdd")


def test_the_prechecks_name_the_unknown_class_and_the_missing_directory():
    classes = {"ssd": "/mnt/nvme/platbench", "hdd": "/mnt/hdd/platbench"}
    described = {"ssd": {"exists": True}, "hdd": {"exists": False}}
    problems = storage.classes_problems(["ssd", "hdd", "tape"], classes, described, "runner-a")
    assert problems == [
        "storage class 'hdd' is /mnt/hdd/platbench on runner-a, which does not exist (or is not a directory) there: "
        "create it on the device the class stands for, or point platbench_storage_classes.hdd at one that exists.",
        "storage class 'tape' is not named by platbench_storage_classes on runner-a (it names hdd, ssd): add "
        "tape: /a/directory to platbench_storage_classes in the inventory's group_vars, or drop 'tape' from the "
        "experiment's storage.",
    ]
    assert "(it names none)" in storage.classes_problems(["ssd"], {}, {}, "runner-a")[0]


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_describes_the_wanted_classes_and_returns_the_problems(tmp_path, capsys):
    (tmp_path / "fast").mkdir()
    classes = {"fast": str(tmp_path / "fast"), "disk": str(tmp_path / "disk"), "unused": "/nowhere"}
    result = run_module(capsys, {"classes": classes, "wanted": ["fast", "disk", "tape"], "host": "runner-a"})
    assert not result["changed"] and sorted(result["storage"]) == ["disk", "fast"]
    assert result["storage"]["fast"]["exists"] and result["storage"]["fast"]["medium"]
    failing = [problem.split(" is ")[0] for problem in result["problems"]]
    assert failing == ["storage class 'disk'", "storage class 'tape'"]


def experiment(**fields):
    base = {
        "name": "ic",
        "workload": "cnn_train",
        "platforms": ["bm", "vm"],
        "scaleup": [2],
        "cpu_config": ["pin"],
        "processor": ["cpu"],
        "repeats": 1,
        "dataset": {"generator": "imagenet", "args": {"images": 64}},
    }
    return validate_experiment({**base, **fields})


def test_storage_is_a_dimension_named_in_the_cell_ids_and_labels():
    cells = expand(experiment(storage=["ssd", "hdd"]))
    assert [(cell["labels"]["storage"], cell["id"]) for cell in cells] == [
        ("ssd", "bm/2/pin/cpu|storage=ssd|r0"),
        ("ssd", "vm/2/pin/cpu|storage=ssd|r0"),
        ("hdd", "bm/2/pin/cpu|storage=hdd|r0"),
        ("hdd", "vm/2/pin/cpu|storage=hdd|r0"),
    ]
    # Without storage, cells keep the ids they always had (a campaign resumes).
    assert [cell["id"] for cell in expand(experiment())] == ["bm/2/pin/cpu|r0", "vm/2/pin/cpu|r0"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"storage": ["ssd", "ssd"]}, "storage: ['ssd', 'ssd'] lists a class twice"),
        ({"storage": ["SSD drive"]}, "must name one or more storage classes of the inventory"),
        ({"storage": []}, "must name one or more storage classes"),
        ({"storage": "ssd", "dataset": None}, "storage: chooses where the generated dataset is written"),
    ],
)
def test_bad_storage_fields_are_refused(fields, message):
    with pytest.raises(ExperimentError, match=message.replace("[", r"\[").replace("]", r"\]")):
        experiment(**fields)


DESCRIBED = {
    "ssd": {"class": "ssd", "path": "/mnt/nvme/pb", "exists": True, "device": "nvme0n1", "rotational": False,
            "fstype": "ext4", "medium": "/dev/nvme0n1 (non-rotational)"},
    "hdd": {"class": "hdd", "path": "/mnt/hdd/pb", "exists": True, "device": "sdb", "rotational": True,
            "fstype": "xfs", "medium": "/dev/sdb (rotational)"},
}  # fmt: skip
FACTS = {
    "cpu_cgroup": {"version": "v2", "directory": "/sys/fs/cgroup"},
    "cpus_allowed": list(range(4)),
    "numa_nodes": {"0": list(range(4))},
    "gpu_count": 0,
    "gpus": [],
}
GUEST = {"kernel": "/k", "initrd": "/i", "cmdline": "c", "rootfs": "/r", "container_image_id": "sha256:1"}


@pytest.mark.parametrize("platform", ["bm", "vm"])
def test_a_cell_reads_its_dataset_from_its_storage_class_and_records_the_device(platform):
    plan = experiment(platforms=[platform], storage=["ssd", "hdd"])
    options = plan_options(dataset=plan["dataset"], storage=DESCRIBED, guest_image=GUEST)
    for cell in expand(plan):
        name = cell["labels"]["storage"]
        made = cell_plan(cell, FACTS, options)
        expected_dir = dataset_dir(DESCRIBED[name]["path"], plan["dataset"])
        if platform == "vm":  # the guest's data disk is made of the class's directory, and kept beside it
            assert made["guest"]["data_disk"]["source"] == expected_dir
            assert made["guest"]["data_disk"]["path"].startswith(DESCRIBED[name]["path"] + "/")
        else:
            assert made["data_dir"] == expected_dir
        runtime = made["runtime"]
        assert (runtime["storage_class"], runtime["storage_device"], runtime["storage_rotational"]) == (
            name,
            DESCRIBED[name]["device"],
            DESCRIBED[name]["rotational"],
        )
        assert_plan_matches_its_specs(made)


def test_a_cell_of_a_class_the_host_does_not_describe_is_refused():
    plan = experiment(platforms=["bm"], storage=["ssd"])
    with pytest.raises(CellPlanError, match="storage class 'ssd' is not described on this host"):
        cell_plan(expand(plan)[0], FACTS, plan_options(dataset=plan["dataset"], storage={}))
