"""workloads.micro_disk: dd, ioping and fio parsed from saved real output, what backs a directory, bad input,
and the workload run for real at a tiny size (dd and ioping of this machine; the lab test runs it per platform).

Saved outputs (tests/unit/data), all real, from this machine (ext4 on a virtio disk, kernel 6.18, coreutils 9.1,
ioping 1.3, fio 3.33): dd_*.txt is dd's stderr with LC_ALL=C; ioping_*.txt is `ioping -B` of each mode
(ioping_direct_overlay.txt on an overlay mount made for the purpose; ioping_default_per_request.txt is
`ioping -B -p 1 -c 10`, the workload's default mode, one raw line per request before the statistics);
fio_profiles.json is fio's JSON of the workload's own fio command line (measure.fio_argv, 32 MiB, 1 s per
profile).

mountinfo samples: mountinfo_host.txt is this machine's /proc/self/mountinfo (with an overlay mount added
for the purpose, one line left out); the handmade_mountinfo_*.txt files are written by hand following proc(5)'s
format, not saved from a system: a Docker container on overlay2 with a bind mount and a --tmpfs (container), a
VM guest on virtio-blk with virtiofs, 9p, nfs and an extra SCSI disk (guest), btrfs subvolumes (btrfs).
"""

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from workload_run import metric_values, only_record, records_of, run_module

from tests import skips
from workloads.common import tools
from workloads.common.harness import WorkloadFailed
from workloads.micro_disk import cli, measure, mounts
from workloads.micro_disk.parse import DdResult, parse_dd, parse_fio_json, parse_ioping_batch

DATA = Path(__file__).parent / "data"
MIB = 1024 * 1024


def saved(name):
    return (DATA / name).read_text()


# --- dd -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "copied", "seconds", "printed"),
    [
        ("dd_1mb.txt", 1048576, 0.00286201, 366.0),  # "366 MB/s"
        ("dd_100mb.txt", 104857600, 0.0649327, 1600.0),  # "1.6 GB/s"
        ("dd_kbps.txt", 100, 0.000502484, 0.199),  # "199 kB/s", no "(... MB, ... MiB)" below 1000 bytes
        ("dd_1byte.txt", 1, 0.000741956, 0.0013),  # "1 byte copied ... 1.3 kB/s"
    ],
)
def test_dd_summary_lines_give_dds_bytes_seconds_and_rate_in_mb_per_s(name, copied, seconds, printed):
    result = parse_dd(saved(name))
    assert (result.bytes, result.seconds) == (copied, seconds)
    assert result.printed_mb_per_s == pytest.approx(printed)
    assert result.mb_per_s == pytest.approx(copied / seconds / 1e6)
    assert result.summary.startswith(f"{copied} byte")


def test_dd_rate_keeps_the_precision_dds_printed_rate_rounds_away():
    assert parse_dd(saved("dd_100mb.txt")).mb_per_s == pytest.approx(1614.866, abs=1e-3)  # printed "1.6 GB/s"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dd: error writing 'f': No space left on device\n", "no summary line"),
        ("1048576 bytes (1.0 MB, 1.0 MiB) copied, 0.00286201 s, 366 kB/s", "does not match"),  # a misread unit
        ("1048576 bytes (1.0 MB, 1.0 MiB) copied, 0 s, Infinity B/s", "too fast to time"),
        ("1048576 Bytes (1,0 MB, 1,0 MiB) kopiert, 0,00286201 s, 366 MB/s", "LC_ALL=C"),
    ],
)
def test_dd_output_without_a_usable_summary_is_refused(text, expected):
    with pytest.raises(ValueError, match=expected):
        parse_dd(text)


def test_each_size_written_several_times_gives_the_combined_rate_the_mean_time_and_the_best(monkeypatch):
    seconds = iter([0.002, 0.001, 0.004, 0.5, 0.4, 0.6])  # 1 MiB three times, then 100 MiB three times
    written = []

    def fake_dd(scratch, size_mb, block_bytes):
        written.append(size_mb)
        copied, took = size_mb * MIB, next(seconds)
        return ["dd", f"{size_mb}"], DdResult(copied, took, copied / took / 1e6, 0.0, "summary")

    monkeypatch.setattr(measure, "dd_write", fake_dd)
    metadata = {}
    args = SimpleNamespace(dd_sizes_mb=[1, 100], dd_block_size=65536, dd_writes=3)
    metrics = {(m["metric"], m["labels"]["size_mb"]): m["value"] for m in cli._dd_metrics(args, None, metadata)}
    assert written == [1, 1, 1, 100, 100, 100]  # one size's writes in a row, then the next size
    assert metrics[("dd_write", 1)] == pytest.approx(3 * MIB / 0.007 / 1e6)  # bytes over seconds, not a mean of rates
    assert metrics[("dd_time", 1)] == pytest.approx(0.007 / 3)
    assert metrics[("dd_write_best", 1)] == pytest.approx(MIB / 0.001 / 1e6)
    assert metrics[("dd_write", 100)] == pytest.approx(300 * MIB / 1.5 / 1e6)
    assert metrics[("dd_write_best", 100)] == pytest.approx(100 * MIB / 0.4 / 1e6)
    assert [(run["size_mb"], run["write"], run["seconds"]) for run in metadata["dd"]] == [
        (1, 0, 0.002),
        (1, 1, 0.001),
        (1, 2, 0.004),
        (100, 0, 0.5),
        (100, 1, 0.4),
        (100, 2, 0.6),
    ]


# --- ioping ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "requests", "latency_us", "iops"),
    [
        ("ioping_default.txt", 9, 540.984, 1848),  # -c 10: the warm-up request is not in the statistics
        ("ioping_cached.txt", 8035198, 0.592, 1687908),
        ("ioping_direct.txt", 58465, 85.244, 11731),
        ("ioping_direct_overlay.txt", 25274, 78.760, 12697),
    ],
)
def test_ioping_raw_statistics_give_mean_latency_and_iops(name, requests, latency_us, iops):
    result = parse_ioping_batch(saved(name))
    assert (result.requests, result.iops) == (requests, iops)
    assert result.latency_us == pytest.approx(latency_us)
    assert result.min_ns <= result.avg_ns <= result.max_ns


def test_ioping_per_request_lines_give_the_median_request_beside_the_mean():
    result = parse_ioping_batch(saved("ioping_default_per_request.txt"))
    assert result.requests == len(result.request_ns) == 9
    # One request of 1.29 ms among eight of 0.19-0.34 ms: the mean is 405 us, the median request 311 us.
    assert result.latency_us == pytest.approx(405.499)
    assert result.median_latency_us == pytest.approx(310.791)
    assert min(result.request_ns) == result.min_ns and max(result.request_ns) == result.max_ns
    # Without -p 1 there are no per-request lines, and no median.
    assert parse_ioping_batch(saved("ioping_default.txt")).median_latency_us is None


def test_ioping_per_request_lines_that_miss_a_request_are_refused():
    lines = saved("ioping_default_per_request.txt").strip().splitlines()
    with pytest.raises(ValueError, match="8 raw lines before its statistics of 9 requests"):
        parse_ioping_batch("\n".join(lines[1:]))
    with pytest.raises(ValueError, match="one line per request"):
        parse_ioping_batch("\n".join([lines[-1], *lines[1:]]))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0 0 0 0 0 0 0 0 1 1000", "timed no request"),
        ("--- . (ext4 /dev/vda 252.0 GiB) ioping statistics ---", "no raw statistics"),
        ("", "no raw statistics"),
    ],
)
def test_ioping_output_without_statistics_is_refused(text, expected):
    with pytest.raises(ValueError, match=expected):
        parse_ioping_batch(text)


@pytest.mark.parametrize(
    ("mode", "argv"),
    [
        ("default", ["ioping", "-B", "-p", "1", "-c", "10", "/d"]),
        ("cached", ["ioping", "-B", "-C", "-R", "-w", "5", "/d"]),
        ("direct", ["ioping", "-B", "-D", "-R", "-w", "5", "/d"]),
    ],
)
def test_ioping_runs_as_the_study_ran_it(mode, argv):
    assert measure.ioping_argv(mode, "/d", 10, 5) == argv


def completed(returncode, stdout="", stderr=""):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def test_refused_direct_io_is_not_measured_with_the_reason(monkeypatch):
    # ioping's own message (err(3) format) when fcntl(O_DIRECT) fails: tmpfs or overlayfs on older kernels.
    refused = "ioping: fcntl(O_DIRECT) failed, please retry without option -D: Invalid argument\n"
    monkeypatch.setattr(tools, "run", lambda argv, timeout, **kw: completed(1, stderr=refused))
    argv, result = measure.ioping(measure.Scratch("/var/tmp/d", []), "direct", 10, 5, "overlay")
    assert argv[:3] == ["ioping", "-B", "-D"]
    assert isinstance(result, measure.NotMeasured)
    assert "refused by the overlay filesystem of /var/tmp/d" in result.reason and "fcntl(O_DIRECT)" in result.reason


def test_other_ioping_failures_fail_the_run(monkeypatch):
    monkeypatch.setattr(tools, "run", lambda argv, timeout, **kw: completed(1, stderr="ioping: request failed: EIO"))
    with pytest.raises(WorkloadFailed, match="ioping exited with 1: ioping -B -C -R -w 5 /d: ioping: request failed"):
        measure.ioping(measure.Scratch("/d", []), "cached", 10, 5, "ext4")
    # The default and cached modes do not use O_DIRECT: the same message there is a real failure.
    refused = "ioping: fcntl(O_DIRECT) failed, please retry without option -D: Invalid argument"
    monkeypatch.setattr(tools, "run", lambda argv, timeout, **kw: completed(1, stderr=refused))
    with pytest.raises(WorkloadFailed):
        measure.ioping(measure.Scratch("/d", []), "default", 10, 5, "ext4")


def test_a_mode_not_measured_leaves_the_others_and_says_why(monkeypatch):
    def fake_ioping(scratch, mode, count, deadline, filesystem):
        if mode == "direct":
            return ["ioping"], measure.NotMeasured("refused")
        name = "ioping_default_per_request.txt" if mode == "default" else f"ioping_{mode}.txt"
        return ["ioping"], parse_ioping_batch(saved(name))

    monkeypatch.setattr(measure, "ioping", fake_ioping)
    metadata = {"not_measured": {}}
    args = SimpleNamespace(ioping_count=10, ioping_deadline=5)
    metrics = cli._ioping_metrics(args, measure.Scratch("/d", []), "overlay", metadata)
    assert [(m["metric"], m["labels"]["ioping_mode"]) for m in metrics] == [
        ("ioping_latency", "default"),
        ("ioping_iops", "default"),
        ("ioping_latency_median", "default"),
        ("ioping_latency", "cached"),
        ("ioping_iops", "cached"),
    ]
    assert metadata["not_measured"] == {"ioping_direct": "refused"}
    assert set(metadata["ioping"]) == {"default", "cached"}


# --- fio ------------------------------------------------------------------------------------------------------


def test_fio_json_gives_bandwidth_iops_and_completion_latency_per_profile():
    results = parse_fio_json(saved("fio_profiles.json"))
    assert [(r.profile, r.direction) for r in results] == [
        ("seqread", "read"),
        ("seqwrite", "write"),
        ("randread", "read"),
        ("randwrite", "write"),
    ]
    seqread, _, randread, randwrite = results
    assert seqread.bandwidth_mb_per_s == pytest.approx(1998.684323)  # bw_bytes 1998684323
    assert seqread.iops == pytest.approx(1906.093906)
    assert seqread.clat_mean_us == pytest.approx(523.931957547)  # clat_ns mean 523931.957547
    assert (randread.iops, randwrite.io_bytes) == (pytest.approx(13226.773227), 48304128)


def test_fio_warnings_before_the_json_are_skipped_and_failed_jobs_refused():
    text = saved("fio_profiles.json")
    assert len(parse_fio_json("fio: note: both iodepth >= 1 and synchronous I/O engine are selected\n" + text)) == 4
    with pytest.raises(ValueError, match="fio job 'seqread' failed with error 22"):
        parse_fio_json(text.replace('"error" : 0', '"error" : 22', 1))
    with pytest.raises(ValueError, match="no JSON"):
        parse_fio_json("fio: pid=1, err=22/file:filesetup.c")


def test_fio_refused_direct_io_marks_every_profile_not_measured(monkeypatch, tmp_path):
    refused = "fio: looks like your file system does not support direct=1/buffered=0\n"
    monkeypatch.setattr(tools, "run", lambda argv, timeout, **kw: completed(1, stderr=refused))
    metadata = {"not_measured": {}}
    scratch = measure.Scratch(str(tmp_path), [])
    args = SimpleNamespace(fio_size_mb=8, fio_runtime=1)
    assert cli._fio_metrics(args, scratch, "tmpfs", metadata) == []
    assert set(metadata["not_measured"]) == {"fio_seqread", "fio_seqwrite", "fio_randread", "fio_randwrite"}
    assert "refused by the tmpfs filesystem" in metadata["not_measured"]["fio_seqread"]


def test_fio_runs_every_profile_with_direct_io_bounded_in_time():
    argv = measure.fio_argv("/d/platbench-fio.dat", 256, 5)
    assert {"--output-format=json", "--direct=1", "--runtime=5", "--time_based", "--size=256M"} <= set(argv)
    assert [part.split("=")[1] for part in argv if part.startswith("--name=")] == list(measure.FIO_PROFILES)
    assert argv.count("--stonewall") == 4  # one profile after the other


# --- what backs the directory ---------------------------------------------------------------------------------


def _link(path, target):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def _disk(sysfs, device_dir, disk, numbers, driver=None, partitions=()):
    """A disk in a sysfs tree of the test's own: /sys/devices/.../block/DISK[/PART], /sys/dev/block/MAJ:MIN,
    /sys/class/block/NAME, /sys/block/DISK and its device/driver link, as the kernel lays them out."""
    disk_dir = sysfs / device_dir / "block" / disk
    disk_dir.mkdir(parents=True)
    _link(sysfs / "block" / disk, disk_dir)
    _link(disk_dir / "device", sysfs / device_dir)
    if driver:
        (sysfs / "bus" / driver).mkdir(parents=True, exist_ok=True)
        _link(sysfs / device_dir / "driver", sysfs / "bus" / driver)
    for name in (disk, *partitions):
        node = disk_dir if name == disk else disk_dir / name
        node.mkdir(exist_ok=True)
        if name != disk:
            (node / "partition").write_text("1\n")
        _link(sysfs / "class" / "block" / name, node)
        _link(sysfs / "dev" / "block" / numbers[name], node)


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "sys"
    pci = "devices/pci0000:00/0000:00:02.0"
    _disk(root, f"{pci}/virtio1", "vda", {"vda": "254:0"}, "virtio/drivers/virtio_blk")  # this host's disk
    _disk(root, f"{pci}/virtio2", "vdb", {"vdb": "252:0", "vdb1": "252:1", "vdb15": "252:15"}, None, ["vdb1", "vdb15"])
    scsi = "devices/pci0000:00/0000:00:05.0/host0/target0:0:1/0:0:1:0"
    _disk(root, scsi, "sdb", {"sdb": "8:16", "sdb1": "8:17"}, "scsi/drivers/sd", ["sdb1"])
    nvme = "devices/pci0000:00/0000:00:06.0/nvme/nvme0"
    _disk(root, nvme, "nvme0n1", {"nvme0n1": "259:0", "nvme0n1p2": "259:2"}, None, ["nvme0n1p2"])
    return str(root)


# The mountinfo samples: this machine's, and the hand-made ones (the module's docstring).
HOST, CONTAINER = "mountinfo_host.txt", "handmade_mountinfo_container.txt"
GUEST, BTRFS = "handmade_mountinfo_guest.txt", "handmade_mountinfo_btrfs.txt"


def describe(sample, directory, sysfs, guest_disk="vdb"):
    text = saved(sample)
    if sample == GUEST:  # the guest's disk is vda; in the test's sysfs it is vdb (252:*)
        text = text.replace("/dev/vda", f"/dev/{guest_disk}")
    return mounts.describe_disk(directory, text, sysfs)


@pytest.mark.parametrize(
    ("sample", "directory", "filesystem", "source", "device", "disk", "kind"),
    [
        # this machine: ext4 on virtio-blk; Docker's /var/lib/docker is a bind mount of the root on itself
        (HOST, "/var/tmp/platbench-disk", "ext4", "/dev/vda", "vda", "vda", "virtio-blk"),
        (HOST, "/var/lib/docker/volumes/x", "ext4", "/dev/vda", "vda", "vda", "bind-mount"),
        (HOST, "/tmp/ov/m/platbench-disk", "overlay", "overlay", None, None, "overlayfs"),
        (HOST, "/dev/shm/x", "tmpfs", "tmpfs", None, None, "tmpfs"),
        (HOST, "/tmp/ov/mx", "ext4", "/dev/vda", "vda", "vda", "virtio-blk"),  # not under /tmp/ov/m
        # a Docker container: its writable layer, a `-v` bind mount, a --tmpfs with a space in its path
        (CONTAINER, "/var/tmp/platbench-disk", "overlay", "overlay", None, None, "overlayfs"),
        (CONTAINER, "/scratch/disk", "ext4", "/dev/vda", "vda", "vda", "bind-mount"),
        (CONTAINER, "/run/platbench tmp/d", "tmpfs", "tmpfs", None, None, "tmpfs"),
        (CONTAINER, "/proc/1/x", "proc", "proc", None, None, "unknown"),
        (CONTAINER, "/proc/bus/x", "proc", "proc", None, None, "bind-mount"),  # Docker's masking
        # a VM guest: the root on a virtio-blk partition, an extra SCSI disk, host shares, nfs, a tmpfs /var/tmp
        (GUEST, "/home/platbench", "ext4", "/dev/vdb1", "vdb1", "vdb", "virtio-blk"),
        (GUEST, "/data/disk", "xfs", "/dev/sdb1", "sdb1", "sdb", "local-disk"),
        (GUEST, "/mnt/hostshare/d", "virtiofs", "hostshare", None, None, "network"),
        (GUEST, "/mnt/p9", "9p", "p9share", None, None, "network"),
        (GUEST, "/mnt/results/d", "nfs4", "198.18.0.1:/export/results", None, None, "network"),
        (GUEST, "/var/tmp/platbench-disk", "tmpfs", "tmpfs", None, None, "tmpfs"),
        # btrfs: an anonymous device number, found through the mount source; a subvolume is not a bind mount
        (BTRFS, "/var/tmp/d", "btrfs", "/dev/nvme0n1p2", "nvme0n1p2", "nvme0n1", "local-disk"),
        (BTRFS, "/srv/work/d", "btrfs", "/dev/nvme0n1p2", "nvme0n1p2", "nvme0n1", "bind-mount"),
    ],
)
def test_the_disk_says_what_backs_the_directory(sysfs, sample, directory, filesystem, source, device, disk, kind):
    described = describe(sample, directory, sysfs)
    assert described["dir"] == directory
    assert (described["filesystem"], described["mount_source"]) == (filesystem, source)
    assert (described["device"], described["disk"], described["kind"]) == (device, disk, kind)


def test_the_driver_is_read_from_sysfs_and_a_vd_disk_is_virtio_without_it(sysfs):
    assert describe(HOST, "/", sysfs)["driver"] == "virtio_blk"
    assert describe(GUEST, "/data", sysfs)["driver"] == "sd"
    guest_root = describe(GUEST, "/", sysfs)  # vdb has no driver link in the test's sysfs
    assert (guest_root["driver"], guest_root["kind"]) == (None, "virtio-blk")


def test_stacked_mounts_the_last_one_wins_and_paths_are_unescaped():
    parsed = mounts.parse_mountinfo(saved(HOST))
    assert mounts.mount_of("/dev/shm/x", parsed).mount_id == 30  # 25 and 30 are both on /dev/shm
    container = mounts.parse_mountinfo(saved(CONTAINER))
    assert mounts.mount_of("/run/platbench tmp", container).mount_point == "/run/platbench tmp"
    assert mounts.mount_of("/run/platbench", container).mount_point == "/"


def test_a_directory_without_any_mount_is_unknown(sysfs):
    assert mounts.describe_disk("/x", "", sysfs)["kind"] == "unknown"


def test_this_machines_directory_is_described(tmp_path):
    described = mounts.describe_this_disk(str(tmp_path))
    assert described["dir"] == os.path.realpath(tmp_path)
    assert described["kind"] in mounts.KINDS and described["filesystem"]


# --- the command line and bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--dd-sizes-mb", "1,x"], "comma-separated positive sizes in MiB"),
        (["--dd-sizes-mb", "0"], "comma-separated positive sizes in MiB"),
        (["--dd-sizes-mb", "1,1"], "each value once"),
        (["--dd-block-size", "64q"], "block size like 64k"),
        (["--dd-block-size", "0k"], "block size like 64k"),
        (["--dd-block-size", "3", "--dd-sizes-mb", "1,2"], "1, 2 MiB is not a whole number of --dd-block-size"),
        (["--ioping-count", "0"], "positive integer"),
        (["--fio-runtime", "-1"], "positive integer"),
        (["--labels-json", '{"workload": "other"}'], "must not contradict"),
    ],
)
def test_malformed_options_are_usage_errors(capsys, argv, expected):
    with pytest.raises(SystemExit) as stopped:
        cli.parse_args(["--check-args", *argv])
    assert stopped.value.code == 2 and expected in capsys.readouterr().err


def test_defaults_are_the_studys_and_check_args_runs_nothing(tmp_path):
    args = cli.parse_args([])
    assert (args.dir, args.dd_sizes_mb, args.dd_block_size) == ("/var/tmp/platbench-disk", [1, 100, 512, 1024], 65536)
    assert (args.ioping_count, args.ioping_deadline, args.fio, args.fio_runtime, args.fio_size_mb) == (
        10,
        5,
        False,
        5,
        256,
    )
    assert cli.main(["--check-args", "--dir", str(tmp_path / "d"), "--threads", "64", "--fio"]) == 0
    assert not (tmp_path / "d").exists()


def test_the_run_needs_room_for_its_largest_file_one_at_a_time():
    args = cli.parse_args(["--dd-sizes-mb", "1,100"])
    assert cli.needed_bytes(args) == 100 * MIB
    assert cli.needed_bytes(cli.parse_args(["--dd-sizes-mb", "1"])) == 64 * MIB  # ioping -R's working set
    assert cli.needed_bytes(cli.parse_args(["--dd-sizes-mb", "1", "--fio", "--fio-size-mb", "300"])) == 300 * MIB


def failed_run(capsys, *argv):
    code = cli.main(["--threads", "1", *map(str, argv)])
    (record,) = records_of(capsys.readouterr().out)
    assert (code, record["status"], record["metrics"]) == (1, "failed", [])
    return record


@pytest.fixture
def tools_found(monkeypatch):
    """dd and ioping found on PATH whether this host has them or not: the tests that use it check --dir and a failed
    run's cleanup, which come after the tools are found (a fresh host runs the unit tests before site.yml installs
    ioping)."""
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")


def test_a_dir_that_cannot_be_created_fails_before_anything_is_written(in_process, tools_found, capsys):
    record = failed_run(capsys, "--dir", "/proc/platbench-disk/d")
    assert record["error"].startswith("--dir /proc/platbench-disk/d cannot be created")
    assert "give --dir a directory on the platform's own disk that this user may write" in record["error"]
    assert record["metadata"]["tool_versions"].keys() == {"dd", "ioping"}


def test_a_dir_that_is_a_file_fails(in_process, tools_found, capsys, tmp_path):
    (tmp_path / "f").write_text("")
    assert "exists and is not a directory" in failed_run(capsys, "--dir", tmp_path / "f")["error"]


def test_too_little_free_space_fails_with_the_numbers_and_leaves_nothing(in_process, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_bavail=10 * MIB // 4096, f_frsize=4096))
    record = failed_run(capsys, "--dir", tmp_path / "new" / "disk", "--dd-sizes-mb", "1,100", "--fio")
    assert record["error"].startswith(f"--dir {tmp_path}/new/disk has 10 MiB free, and this run needs 256 MiB")
    assert "the largest dd write 100 MiB (--dd-sizes-mb)" in record["error"]
    assert "fio's 256 MiB file (--fio-size-mb)" in record["error"]
    assert list(tmp_path.iterdir()) == []  # the directories it made are gone too


def test_a_missing_tool_names_its_package_and_the_role(in_process, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "ioping" else f"/usr/bin/{name}")
    record = failed_run(capsys, "--dir", tmp_path / "d")
    assert record["error"].startswith("ioping is not installed on this platform: it comes from the package 'ioping'")
    assert "platbench.lab.micro_tools" in record["error"]
    assert not (tmp_path / "d").exists()


def test_a_tool_failing_midway_removes_its_files(in_process, tools_found, capsys, monkeypatch, tmp_path):
    def full_disk(argv, timeout, **kw):
        Path(argv[2].removeprefix("of=")).write_bytes(b"\0" * 4096)
        raise WorkloadFailed("dd exited with 1: dd: error writing: No space left on device")

    monkeypatch.setattr(tools, "run", full_disk)
    record = failed_run(capsys, "--dir", tmp_path / "d", "--dd-sizes-mb", "1")
    assert "No space left on device" in record["error"]
    assert record["metadata"]["disk"]["dir"] == str(tmp_path / "d")
    assert list(tmp_path.iterdir()) == []


# --- the workload, run for real at a tiny size ----------------------------------------------------------------

needs_tools = skips.needs_lab("dd", "ioping")


@needs_tools
def test_tiny_run_measures_dd_and_ioping_and_removes_its_files(tmp_path):
    directory = tmp_path / "platbench-disk"
    process, records = run_module(
        "micro_disk",
        *("--dir", directory, "--dd-sizes-mb", "1,2", "--dd-writes", 2, "--ioping-count", 3, "--ioping-deadline", 1),
        *("--threads", 1),
        *("--labels-json", '{"experiment": "unit", "repeat": 0}'),
        timeout=60,
    )
    record = only_record(process, records)
    assert (process.returncode, record["status"], record["error"]) == (0, "ok", None), process.stderr
    assert record["labels"] == {"experiment": "unit", "repeat": 0, "workload": "micro_disk", "threads": 1}
    entries = {(m["metric"], *m.get("labels", {}).values()): m for m in record["metrics"]}
    for size in (1, 2):
        assert entries[("dd_write", size)]["unit"] == "MB/s" and entries[("dd_time", size)]["unit"] == "s"
        assert entries[("dd_write", size)]["value"] == pytest.approx(
            size * MIB / entries[("dd_time", size)]["value"] / 1e6
        )
        assert entries[("dd_write_best", size)]["value"] >= entries[("dd_write", size)]["value"]
    metadata = record["metadata"]
    for mode in ("default", "cached", "direct"):
        if mode in metadata["not_measured"]:
            continue
        assert entries[("ioping_latency", mode)]["value"] > 0 and entries[("ioping_iops", mode)]["value"] > 0
    assert metadata["ioping"]["default"]["requests"] == 2  # -c 3: one warm-up request
    median = entries[("ioping_latency_median", "default")]["value"]
    assert metadata["ioping"]["default"]["min_us"] <= median <= metadata["ioping"]["default"]["max_us"]
    assert metadata["disk"]["dir"] == os.path.realpath(directory) and metadata["disk"]["kind"] in mounts.KINDS
    assert set(metadata["tool_versions"]) == {"dd", "ioping"} and all(metadata["tool_versions"].values())
    assert [(run["size_mb"], run["write"]) for run in metadata["dd"]] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert "elapsed" in metric_values(record)
    assert not directory.exists(), "the run made the directory, so it removes it with its files"


@skips.needs_lab("dd", "ioping", "fio")
def test_tiny_run_with_fio_measures_every_profile_in_an_existing_dir_and_keeps_it(tmp_path):
    process, records = run_module(
        "micro_disk",
        *("--dir", tmp_path, "--dd-sizes-mb", 1, "--ioping-count", 2, "--ioping-deadline", 1, "--threads", 1),
        *("--fio", "--fio-runtime", 1, "--fio-size-mb", 8),
        timeout=60,
    )
    record = only_record(process, records)
    assert (process.returncode, record["status"]) == (0, "ok"), process.stderr
    profiles = [m["labels"]["fio_profile"] for m in record["metrics"] if m["metric"] == "fio_bandwidth"]
    assert profiles == list(measure.FIO_PROFILES) or record["metadata"]["not_measured"]
    assert record["metadata"]["tool_versions"].keys() == {"dd", "ioping", "fio"}
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []
