"""The kvm_host role's GPU, IOMMU and kernel command line parts, which no development machine
can run (no GPU, no IOMMU, no /dev/kvm), applied for real to temp dirs with injected facts."""

from __future__ import annotations

import pytest
from playbook_run import REPO, run_playbook

PLAYBOOK = REPO / "tests/roles/kvm_host/apply.yml"

# Two GPUs of the same model, each with its HDMI audio function: one stays with the host, one goes to guests.
GPUS = [
    {
        "pci_address": "0000:3b:00.0",
        "device_id": "0x20b0",
        "driver": "nvidia",
        "iommu_group": None,
        "slot_functions": ["0000:3b:00.1"],
    },
    {
        "pci_address": "0000:d8:00.0",
        "device_id": "0x20b0",
        "driver": "nvidia",
        "iommu_group": None,
        "slot_functions": ["0000:d8:00.1"],
    },
]
ASSIGNMENT = {"0000:3b:00.0": "host", "0000:d8:00.0": "guests"}
VFIO_CONF = "softdep nouveau pre: vfio-pci\nsoftdep nvidia pre: vfio-pci\nsoftdep drm pre: vfio-pci\n"
RULES = "70-platbench-vfio-pci.rules"


def rule(address):
    return (
        f'ACTION=="add", SUBSYSTEM=="pci", KERNEL=="{address}", ATTR{{driver_override}}="vfio-pci", '
        "RUN+=\"/bin/sh -c 'echo %k > /sys/bus/pci/drivers_probe'\"\n"
    )


def host_vars(tmp_path, **extra):
    """A two-GPU Intel host whose firmware has an IOMMU the kernel does not use yet."""
    variables = {
        "kvm_host_install_packages": False,
        "kvm_host_start_daemon": False,
        "kvm_host_gpus": GPUS,
        "kvm_host_iommu": {"firmware_table": "DMAR", "enabled": False, "groups": 0},
        "kvm_host_cpu_vendor": "GenuineIntel",
        "kvm_host_cpus_allowed": [0, 1, 2, 3],
        "kvm_host_grub_dir": str(tmp_path / "grub.d"),
        "kvm_host_modprobe_dir": str(tmp_path / "modprobe.d"),
        "kvm_host_modules_load_dir": str(tmp_path / "modules-load.d"),
        "kvm_host_udev_rules_dir": str(tmp_path / "rules.d"),
        "platbench_gpu_assignment": ASSIGNMENT,
        "kvm_host_sysctl_file": str(tmp_path / "sysctl.conf"),
        "kvm_host_sysctl_reload": False,
        "kvm_host_boot_config_command": "",
        "kvm_host_initramfs_command": "",
    }
    variables.update(extra)
    return variables


def apply_role(tmp_path, variables, *options):
    return run_playbook(PLAYBOOK, tmp_path, variables, *options)


def written(out):
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def grub_line(params):
    return 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT %s"\n' % params


def without_comments(text):
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def test_check_mode_writes_nothing_and_shows_the_config(tmp_path):
    out = tmp_path / "out"
    run = apply_role(tmp_path, host_vars(out, kvm_host_isolated_cpus=[3, 2]), "--check", "--diff")
    assert run.recap()[1] == 0, run.output[-4000:]
    assert not out.exists()
    for line in (
        "+" + grub_line("intel_iommu=on iommu=pt isolcpus=2,3 nohz_full=2,3 rcu_nocbs=2,3").strip(),
        '+ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:d8:00.0", ATTR{driver_override}="vfio-pci"',
        "+softdep nouveau pre: vfio-pci",
        "+blacklist nouveau",
        "+options nouveau modeset=0",
        "+vfio_iommu_type1",
        "REBOOT NEEDED",
    ):
        assert line in run.output, line


def test_intel_passthrough_config_is_exact_and_idempotent(tmp_path):
    out = tmp_path / "out"
    variables = host_vars(out, kvm_host_isolated_cpus=[2, 3], kvm_host_hugepages=16, kvm_host_hugepages_at_boot=True)
    first = apply_role(tmp_path, variables)
    assert first.recap()[1] == 0, first.output[-4000:]
    assert first.recap()[0] > 0
    files = {name: without_comments(text) for name, text in written(out).items()}
    # Only the guests' GPU (and its audio function) leaves the host driver, though both are the same model.
    assert files == {
        "rules.d/" + RULES: rule("0000:d8:00.0") + rule("0000:d8:00.1"),
        "grub.d/platbench.cfg": grub_line(
            "intel_iommu=on iommu=pt isolcpus=2,3 nohz_full=2,3 rcu_nocbs=2,3 "
            "default_hugepagesz=2M hugepagesz=2M hugepages=16"
        ),
        "modprobe.d/platbench-vfio.conf": VFIO_CONF,
        "modprobe.d/platbench-blacklist-nouveau.conf": "blacklist nouveau\noptions nouveau modeset=0\n",
        "modules-load.d/platbench-vfio.conf": "vfio\nvfio_iommu_type1\nvfio_pci\n",
        "sysctl.conf": "vm.nr_hugepages=16\n",
    }
    # The parameters are not on this kernel's command line, so it asks for a reboot, without one.
    assert "REBOOT NEEDED" in first.output and "intel_iommu=on" in first.output.split("REBOOT NEEDED")[1]
    second = apply_role(tmp_path, variables)
    assert second.recap() == (0, 0), second.output[-4000:]


def test_amd_host_gets_amd_iommu_and_the_gpus_of_the_override(tmp_path):
    out = tmp_path / "out"
    gpus = GPUS + [{"pci_address": "0000:af:00.0", "device_id": "0x2330", "driver": None, "iommu_group": "7"}]
    run = apply_role(
        tmp_path,
        host_vars(
            out,
            kvm_host_cpu_vendor="AuthenticAMD",
            kvm_host_gpus=gpus,
            kvm_host_iommu={"firmware_table": "IVRS", "enabled": True, "groups": 40},
            kvm_host_passthrough_gpus=["0000:af:00.0", "0000:3b:00.0"],
        ),
    )
    assert run.recap()[1] == 0, run.output[-4000:]
    files = written(out)
    assert without_comments(files["grub.d/platbench.cfg"]) == grub_line("amd_iommu=on iommu=pt")
    assert without_comments(files["rules.d/" + RULES]) == rule("0000:3b:00.0") + rule("0000:3b:00.1") + rule(
        "0000:af:00.0"
    )


def test_no_passthrough_keeps_isolated_cpus_and_removes_the_vfio_binding(tmp_path):
    out = tmp_path / "out"
    stale = out / "modprobe.d/platbench-vfio.conf"
    stale.parent.mkdir(parents=True)
    stale.write_text(VFIO_CONF)
    run = apply_role(
        tmp_path,
        host_vars(
            out, kvm_host_gpu_passthrough="never", kvm_host_isolated_cpus=[3], kvm_host_fail_when_reboot_needed=True
        ),
    )
    assert run.recap()[1] == 1
    assert "REBOOT NEEDED" in run.output and "isolcpus=3" in run.output
    assert written(out) == {
        "grub.d/platbench.cfg": "# Managed by platbench.lab.kvm_host: kernel parameters for "
        "benchmark guests.\n" + grub_line("isolcpus=3 nohz_full=3 rcu_nocbs=3")
    }


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            {
                "kvm_host_gpu_passthrough": "always",
                "kvm_host_iommu": {"firmware_table": None, "enabled": False, "groups": 0},
            },
            ["IOMMU is off in the BIOS/UEFI", "Intel VT-d", "kvm_host_gpu_passthrough=always"],
        ),
        (
            {"kvm_host_passthrough_gpus": ["0000:3b:00.0", "0000:5e:00.0"]},
            [
                "kvm_host_passthrough_gpus names 0000:5e:00.0, which is not an NVIDIA GPU function of localhost",
                "its NVIDIA GPUs are 0000:3b:00.0, 0000:d8:00.0",
            ],
        ),
        (
            {"platbench_gpu_assignment": {"d8:00.0": "guests"}},
            ["platbench_gpu_assignment on localhost: 'd8:00.0' has no PCI domain", "as '0000:d8:00.0'"],
        ),
        (
            {"platbench_gpu_assignment": {"0000:d8:00.1": "guests"}},
            ["0000:d8:00.1, which is not an NVIDIA GPU function of localhost"],
        ),
        (
            {"platbench_gpu_assignment": {}, "kvm_host_gpu_passthrough": "always"},
            [
                "kvm_host_gpu_passthrough is 'always' but platbench_gpu_assignment assigns none of localhost's GPUs",
                "{'0000:d8:00.0': guests}",
            ],
        ),
        ({"kvm_host_isolated_cpus": [3, 9]}, ["kvm_host_isolated_cpus lists CPUs 9,", "its CPUs are 0, 1, 2, 3"]),
        ({"kvm_host_isolated_cpus": [0, 1, 2, 3]}, ["leave at least one to the host"]),
        ({"kvm_host_hugepages": 10_000_000}, ["kvm_host_hugepages=10000000", "lower kvm_host_hugepages"]),
        (
            {"kvm_host_gpu_passthrough": "maybe"},
            ["Validation of arguments failed", "kvm_host_gpu_passthrough", "maybe"],
        ),
    ],
)
def test_bad_input_fails_before_anything_is_written(tmp_path, extra, expected):
    out = tmp_path / "out"
    run = apply_role(tmp_path, host_vars(out, **extra))
    assert run.recap()[1] == 1, run.output[-4000:]
    message = " ".join(run.output.split())
    for text in expected:
        assert text in message, run.output[-4000:]
    assert not out.exists()


def test_auto_without_a_gpu_for_guests_takes_none_and_says_which_stay(tmp_path):
    out = tmp_path / "out"
    stale = out / "rules.d" / RULES
    stale.parent.mkdir(parents=True)
    stale.write_text(rule("0000:d8:00.0"))
    run = apply_role(tmp_path, host_vars(out, platbench_gpu_assignment={"0000:d8:00.0": "host"}))
    assert run.recap()[1] == 0, run.output[-4000:]
    # No binding files, no IOMMU parameters: nothing to change, and the old binding is gone.
    assert written(out) == {}
    message = " ".join(run.output.split())
    assert (
        "GPUs of localhost - bound to vfio-pci for vm/vmcn guests: none; left with the host driver for bm/cn: "
        "0000:3b:00.0, 0000:d8:00.0 (platbench_gpu_assignment, kvm_host_gpu_passthrough=auto)" in message
    )
