"""The nvidia_driver role, which no development machine can run for real (no GPU): its plan per distribution,
its files as the tools that read them parse them, its skip path in check mode here, and its bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.action.host_facts import gpu_facts
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import nvidia_driver
from playbook_run import run_playbook

from tests import skips

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles/nvidia_driver"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
DEBIAN_12 = {
    "os_family": "Debian",
    "distribution": "Debian",
    "distribution_major_version": "12",
    "distribution_release": "bookworm",
    "kernel": "6.1.0-26-amd64",
    "architecture": "x86_64",
}
UBUNTU_2404 = dict(DEBIAN_12, distribution="Ubuntu", distribution_version="24.04", kernel="6.8.0-45-generic")
ROCKY_9 = {
    "os_family": "RedHat",
    "distribution": "Rocky",
    "distribution_major_version": "9",
    "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    "architecture": "x86_64",
}
GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nouveau", "iommu_group": "30"},
    {"pci_address": "0000:d8:00.0", "device_id": "0x20b0", "driver": "nouveau", "iommu_group": "31"},
]


def apply(tmp_path, plays, variables, *options):
    """The plays on this machine, connected locally, with this interpreter."""
    variables = dict(variables, ansible_python_interpreter=sys.executable)
    return run_playbook(plays, tmp_path, variables, "-c", "local", *options, timeout=180)


# --- the plan, per distribution -------------------------------------------------------------------------------


def test_debian_from_nvidias_repository_pins_the_branch_and_builds_for_the_running_kernel():
    plan = nvidia_driver.driver_plan(DEBIAN_12, "580", "nvidia", False, CUDA + "/")
    assert plan["problems"] == []
    assert plan["installer"] == "apt"
    assert plan["cuda_repo_url"] == CUDA + "/debian12/x86_64/"
    assert plan["packages"] == [
        "nvidia-driver",
        "nvidia-kernel-dkms",
        "nvidia-smi",
        "libcuda1",
        "nvidia-persistenced",
        "firmware-misc-nonfree",
        "linux-headers-6.1.0-26-amd64",
    ]
    assert plan["debian_components"] == ["contrib", "non-free", "non-free-firmware"]
    assert "Package: src:nvidia-graphics-drivers\nPin: version 580.*\nPin-Priority: 990\n" in plan["apt_pin"]
    assert "Package: src:nvidia-persistenced\nPin: version 580.*" in plan["apt_pin"]
    assert plan["initramfs_command"] == ["update-initramfs", "-u"]


def test_debian_from_its_own_archive_has_no_nvidia_repository_and_the_open_modules_come_from_nvidia():
    own = nvidia_driver.driver_plan(DEBIAN_12, "535", "debian", False, CUDA)
    assert own["problems"] == [] and own["cuda_repo_url"] is None
    assert "Pin: version 535.*" in own["apt_pin"] and "src:nvidia-persistenced" not in own["apt_pin"]
    opened = nvidia_driver.driver_plan(dict(DEBIAN_12, architecture="aarch64"), "580", "nvidia", True, CUDA)
    assert "nvidia-kernel-open-dkms" in opened["packages"] and "nvidia-kernel-dkms" not in opened["packages"]
    assert opened["cuda_repo_url"] == CUDA + "/debian12/sbsa/"


@pytest.mark.parametrize(
    "open_modules, driver", [(False, "nvidia-driver-580-server"), (True, "nvidia-driver-580-server-open")]
)
def test_ubuntu_takes_the_archives_server_branch(open_modules, driver):
    plan = nvidia_driver.driver_plan(UBUNTU_2404, "580", "nvidia", open_modules, CUDA)
    assert plan["problems"] == [] and plan["apt_pin"] is None and plan["cuda_repo_url"] is None
    assert plan["packages"] == [driver, "nvidia-utils-580-server", "linux-headers-6.8.0-45-generic"]


@pytest.mark.parametrize(
    "facts, epel, epel_key",
    [
        (ROCKY_9, "epel-release", None),
        (
            dict(ROCKY_9, distribution="RedHat", distribution_major_version="8"),
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-8.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-8",
        ),
    ],
)
def test_el_installs_the_branchs_dkms_module_stream_with_epel(facts, epel, epel_key):
    plan = nvidia_driver.driver_plan(facts, "580", "nvidia", False, CUDA)
    major = facts["distribution_major_version"]
    assert plan["problems"] == [] and plan["installer"] == "dnf"
    assert plan["packages"][0] == "@nvidia-driver:580-dkms"
    assert "kernel-devel-" + facts["kernel"] in plan["packages"]
    assert plan["cuda_repo_gpgkey"] == f"{CUDA}/rhel{major}/x86_64/D42D0685.pub"
    assert (plan["epel_package"], plan["epel_gpgkey"]) == (epel, epel_key)
    assert plan["initramfs_command"] == ["dracut", "--force"]
    assert nvidia_driver.driver_plan(facts, "580", "nvidia", True, CUDA)["packages"][0] == "@nvidia-driver:580-open"


@pytest.mark.parametrize(
    "facts, branch, repo, open_modules, says",
    [
        (DEBIAN_12, "58x", "nvidia", False, "nvidia_driver_branch is '58x'"),
        (DEBIAN_12, "580.95", "nvidia", False, "nvidia_driver_branch is '580.95'"),
        (DEBIAN_12, "580", "debian", False, "Set nvidia_driver_branch: '535', or nvidia_driver_repo: nvidia"),
        (DEBIAN_12, "535", "debian", True, "set nvidia_driver_repo: nvidia, or nvidia_driver_open: false"),
        (dict(DEBIAN_12, distribution_major_version="11"), "580", "nvidia", False, "Debian 11 is not supported"),
        (dict(UBUNTU_2404, distribution_version="20.04"), "580", "nvidia", False, "Ubuntu 20.04 is not supported"),
        (dict(ROCKY_9, distribution_major_version="10"), "580", "nvidia", False, "EL 10 is not supported"),
        (dict(ROCKY_9, architecture="ppc64le"), "580", "nvidia", False, "no packages for architecture ppc64le"),
        ({"os_family": "Suse", "distribution": "SLES"}, "580", "nvidia", False, "this host is SLES (Suse)"),
    ],
)
def test_settings_the_host_cannot_use_are_named_with_the_fix(facts, branch, repo, open_modules, says):
    problems = nvidia_driver.driver_plan(facts, branch, repo, open_modules, CUDA)["problems"]
    assert any(says in problem for problem in problems), problems


def test_persistence_mode_is_switched_only_where_nvidia_smi_reports_it_off():
    query = "00000000:3B:00.0, Enabled\n00000000:D8:00.0, Disabled\n\n"
    assert nvidia_driver.persistence_off(query) == ["00000000:D8:00.0"]
    assert nvidia_driver.persistence_off("00000000:3B:00.0, Enabled\n") == []


# --- the files, as the tools that read them parse them ----------------------------------------------------------


@skips.requires(commands=["apt-cache"], by="apt (the suite runs on Debian, as the lab does)")
def test_apt_reads_the_branch_pin_without_a_complaint_and_would_complain_about_a_broken_one(tmp_path):
    def apt_says(text):
        (tmp_path / "pin").write_text(text)
        (tmp_path / "parts").mkdir(exist_ok=True)
        prefs = [
            "-o",
            f"Dir::Etc::Preferences={tmp_path / 'pin'}",
            "-o",
            f"Dir::Etc::PreferencesParts={tmp_path}/parts",
        ]
        return subprocess.run(["apt-cache", *prefs, "policy"], capture_output=True, text=True, timeout=60).stderr

    pin = nvidia_driver.apt_branch_pin(nvidia_driver.DEBIAN_DRIVER_SOURCES, "580")
    assert apt_says(pin) == ""
    assert "Pin-Priority: -1" in pin.split("\n\n")[1]  # every other version refused, after the branch's
    assert apt_says(pin.replace("Pin-Priority: 990", "Pin-Priority: x")) != ""


def test_nouveau_is_blacklisted_by_a_conf_file_that_rebuilds_the_initramfs():
    lines = [
        line for line in (ROLE / "files/platbench-blacklist-nouveau.conf").read_text().splitlines() if line[:1] != "#"
    ]
    assert lines == ["blacklist nouveau", "options nouveau modeset=0"]
    task = yaml.safe_load((ROLE / "tasks/driver.yml").read_text())[0]
    # modprobe reads only *.conf in /etc/modprobe.d; the initramfs loads modules before the root fs.
    assert task["ansible.builtin.copy"]["dest"].startswith("/etc/modprobe.d/")
    assert task["ansible.builtin.copy"]["dest"].endswith(".conf")
    assert task["notify"] == "Rebuild the initramfs"
    handler = yaml.safe_load((ROLE / "handlers/main.yml").read_text())[0]
    assert handler["name"] == "Rebuild the initramfs"


# --- the role, run here -------------------------------------------------------------------------------------------


def test_check_mode_here_skips_the_gpu_less_host_saying_why_and_changes_nothing(tmp_path):
    play = [{"name": "Driver", "hosts": "localhost", "gather_facts": True, "roles": ["platbench.lab.nvidia_driver"]}]
    run = apply(tmp_path, play, {}, "--check")
    assert run.rc == 0, run.output[-6000:]
    assert "skipped on localhost, which keeps no NVIDIA GPU for itself" in run.output
    assert "changed=0" in run.output and "Keep nouveau off the GPUs" not in run.output


def plan_for(tmp_path, facts, gpus, variables):
    """The role's plan and kept GPUs for a host with these facts and GPUs, as tasks/plan.yml decides them."""
    out = tmp_path / "plan.json"
    # What host_facts reports from the inventory's assignment (plugins/action/host_facts.py).
    kept = gpu_facts(variables.get("platbench_gpu_assignment") or {}, gpus, "localhost")
    play = [
        {
            "name": "Driver plan",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {"inject_facts": {"facts": dict(facts, platbench={"gpus": gpus, "systemd_pid1": True, **kept})}},
                {"ansible.builtin.include_role": {"name": "platbench.lab.nvidia_driver", "tasks_from": "plan"}},
                {
                    "ansible.builtin.copy": {
                        "content": "{{ {'plan': nvidia_driver_plan, 'gpus': nvidia_driver_host_gpus} | to_json }}",
                        "dest": str(out),
                    }
                },
            ],
        }
    ]
    run = apply(tmp_path, play, variables)
    return run, (json.loads(out.read_text()) if out.exists() else None)


def test_a_debian_gpu_host_gets_the_pinned_driver_and_a_host_giving_all_its_gpus_to_guests_gets_none(tmp_path):
    run, found = plan_for(tmp_path, DEBIAN_12, GPUS, {"platbench_gpu_assignment": {"0000:d8:00.0": "guests"}})
    assert run.rc == 0, run.output[-6000:]
    assert found["gpus"] == ["0000:3b:00.0"]
    assert found["plan"]["cuda_repo_url"] == CUDA + "/debian12/x86_64/"
    assert "nvidia-driver" in found["plan"]["packages"] and "Pin: version 580.*" in found["plan"]["apt_pin"]
    every_gpu_to_guests = {gpu["pci_address"]: "guests" for gpu in GPUS}
    # Settings Debian cannot use do not matter on a host that gets no driver.
    run, found = plan_for(
        tmp_path, DEBIAN_12, GPUS, {"platbench_gpu_assignment": every_gpu_to_guests, "nvidia_driver_repo": "debian"}
    )
    assert run.rc == 0, run.output[-6000:]
    assert found["gpus"] == []


def test_a_gpu_host_with_a_branch_its_repository_lacks_stops_before_anything_changes(tmp_path):
    run, found = plan_for(tmp_path, DEBIAN_12, GPUS, {"nvidia_driver_repo": "debian", "nvidia_driver_branch": "580"})
    assert run.rc != 0 and found is None
    assert "Debian 12's archive packages only driver branch 535" in run.output


@pytest.mark.parametrize(
    "variables, says",
    [
        ({"nvidia_driver_branch": "r580"}, "nvidia_driver_branch is 'r580'; it must be a driver branch number"),
        ({"nvidia_driver_repo": "ppa"}, "nvidia_driver_repo"),
        ({"nvidia_driver_reboot_allowed": "maybe"}, "nvidia_driver_reboot_allowed"),
    ],
)
def test_bad_inputs_stop_every_host_with_a_message_naming_the_variable(tmp_path, variables, says):
    play = [{"name": "Driver", "hosts": "localhost", "gather_facts": False, "roles": ["platbench.lab.nvidia_driver"]}]
    run = apply(tmp_path, play, variables, "--check")
    assert run.rc != 0
    assert says in run.output, run.output[-3000:]
    assert "Keep nouveau off the GPUs" not in run.output


def test_the_gpu_drivers_playbook_parses(playbook):
    check = playbook("playbooks/lab_gpu_drivers.yml", None, "--syntax-check", timeout=120)
    assert check.rc == 0, check.output


FAKE_NVIDIA_SMI = """#!/bin/sh
# Answers as a driver with two GPUs would; -pm calls are logged, and switch the GPU's mode on.
state="$(dirname "$0")/state"
case "$*" in
  -L) if [ -f "$state.broken" ]; then
        echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"; exit 9
      fi
      echo "GPU 0: NVIDIA A30"; echo "GPU 1: NVIDIA A30" ;;
  --query-gpu=*) cat "$state" ;;
  *-pm\\ 1) echo "$*" >> "$state.calls"; sed -i "s/^$2, Disabled/$2, Enabled/" "$state" ;;
  *) exit 2 ;;
esac
"""


def load_and_persist(tmp_path, broken=False):
    """tasks/load.yml and tasks/persistence.yml after an install that changed nothing, against a fake nvidia-smi."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name, script in (("nvidia-smi", FAKE_NVIDIA_SMI), ("modprobe", "#!/bin/sh\nexit 1\n")):
            (bin_dir / name).write_text(script)
            (bin_dir / name).chmod(0o755)
        (bin_dir / "state").write_text("00000000:3B:00.0, Enabled\n00000000:D8:00.0, Disabled\n")
    (bin_dir / "state.broken").unlink(missing_ok=True)
    if broken:
        (bin_dir / "state.broken").write_text("")
    include = {"name": "platbench.lab.nvidia_driver"}
    play = [
        {
            "name": "Driver load and persistence",
            "hosts": "localhost",
            "gather_facts": False,
            "environment": {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"])},
            "tasks": [
                {
                    "inject_facts": {
                        "facts": dict(
                            DEBIAN_12,
                            platbench={"gpus": GPUS, "systemd_pid1": False, **gpu_facts({}, GPUS, "localhost")},
                        )
                    }
                },
                {"ansible.builtin.set_fact": {"nvidia_driver_packages": {"changed": False}}},
                {"ansible.builtin.include_role": dict(include, tasks_from="load")},
                {
                    "ansible.builtin.include_role": dict(include, tasks_from="persistence"),
                    "when": "nvidia_driver_ready | bool",
                },
            ],
        }
    ]
    run = apply(tmp_path, play, {})
    assert run.rc == 0, run.output[-6000:]
    calls = bin_dir / "state.calls"
    return run.output, (calls.read_text().splitlines() if calls.exists() else [])


def test_persistence_mode_is_turned_on_only_where_it_is_off_and_a_second_run_changes_nothing(tmp_path):
    out, calls = load_and_persist(tmp_path)
    assert calls == ["-i 00000000:D8:00.0 -pm 1"]
    assert "REBOOT PENDING" not in out and "changed=1" in out
    out, calls = load_and_persist(tmp_path)
    assert calls == ["-i 00000000:D8:00.0 -pm 1"] and "changed=0" in out


def test_a_driver_that_cannot_load_without_a_reboot_is_reported_pending_and_left_alone(tmp_path):
    out, calls = load_and_persist(tmp_path, broken=True)
    assert "REBOOT PENDING on localhost" in out
    assert "couldn't communicate with the NVIDIA driver" in out
    assert "nvidia_driver_reboot_allowed: true" in out
    assert calls == [] and "nvidia_driver : Reboot the host]" not in out
