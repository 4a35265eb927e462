"""The docker role's GPU part, which no development machine can run, checked by what it renders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.action.host_facts import gpu_facts
from playbook_run import run_playbook

from tests import skips

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "roles/docker/templates/daemon.json.j2"


def render_daemon_json(tmp_path, **extra):
    dest = tmp_path / "daemon.json"
    variables = {
        "docker_daemon_options": {"log-driver": "json-file"},
        "docker_nvidia_default_runtime": False,
        "docker_with_gvisor": False,
        "docker_gvisor_platform": "ptrace",
        "docker_gvisor_args": ["--network=none"],
    }
    variables.update(extra)
    subprocess.run(
        [
            "ansible",
            "localhost",
            "-c",
            "local",
            "-m",
            "ansible.builtin.template",
            "-a",
            "src=%s dest=%s" % (TEMPLATE, dest),
            "-e",
            json.dumps(variables),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
    )
    return json.loads(dest.read_text())


@pytest.mark.parametrize(
    "with_gpu, default_runtime, expected",
    [
        (False, False, {"log-driver": "json-file"}),
        (
            True,
            False,
            {"log-driver": "json-file", "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}},
        ),
        (
            True,
            True,
            {
                "log-driver": "json-file",
                "default-runtime": "nvidia",
                "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}},
            },
        ),
    ],
)
def test_daemon_json_registers_the_nvidia_runtime_only_on_gpu_hosts(tmp_path, with_gpu, default_runtime, expected):
    assert (
        render_daemon_json(tmp_path, docker_with_nvidia=with_gpu, docker_nvidia_default_runtime=default_runtime)
        == expected
    )


def test_daemon_json_registers_gvisor_runsc_with_its_platform_and_arguments(tmp_path):
    rendered = render_daemon_json(
        tmp_path, docker_with_nvidia=True, docker_with_gvisor=True, docker_gvisor_platform="kvm"
    )
    assert rendered["runtimes"] == {
        "nvidia": {"path": "nvidia-container-runtime", "args": []},
        "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=kvm", "--network=none"]},
    }


GPUS = [
    {"pci_address": "0000:3b:00.0", "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "30"},
    {"pci_address": "0000:d8:00.0", "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "31"},
]


def toolkit_wanted(tmp_path, gpus, assignment, toolkit="auto"):
    """docker_with_nvidia as the role's precheck decides it for a Debian host with these GPUs."""
    out = tmp_path / "out.json"
    plays = [
        {
            "name": "Docker precheck",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {
                    "inject_facts": {
                        "facts": {
                            "os_family": "Debian",
                            "distribution": "Debian",
                            "platbench": {"gpus": gpus, **gpu_facts(assignment, gpus, "localhost")},
                        }
                    }
                },
                {"ansible.builtin.include_role": {"name": "platbench.lab.docker", "tasks_from": "precheck"}},
                {"ansible.builtin.copy": {"content": "{{ docker_with_nvidia | to_json }}", "dest": str(out)}},
            ],
        }
    ]
    variables = {
        "platbench_gpu_assignment": assignment,
        "docker_nvidia_toolkit": toolkit,
        "ansible_python_interpreter": sys.executable,
    }
    run = run_playbook(plays, tmp_path, variables, timeout=120)
    assert run.rc == 0, run.output[-6000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    "gpus, assignment, toolkit, expected",
    [
        (GPUS, {}, "auto", True),  # both GPUs stay with the host
        (GPUS, {"0000:d8:00.0": "guests"}, "auto", True),  # one stays: its containers need the toolkit
        (GPUS, {"0000:3b:00.0": "guests", "0000:d8:00.0": "guests"}, "auto", False),  # all to vfio
        ([], {}, "auto", False),
        ([], {}, "always", True),
        (GPUS, {}, "never", False),
    ],
)
def test_auto_installs_the_toolkit_only_when_the_host_keeps_a_gpu(tmp_path, gpus, assignment, toolkit, expected):
    assert toolkit_wanted(tmp_path, gpus, assignment, toolkit) is expected


def run_nvidia_part(tmp_path, variables):
    """roles/docker/tasks/nvidia.yml in check mode on this machine (no NVIDIA driver), as a Debian host."""
    facts = {
        "os_family": "Debian",
        "distribution": "Debian",
        "platbench": {"gpus": GPUS, "systemd_pid1": True, **gpu_facts({}, GPUS, "localhost")},
    }
    plays = [
        {
            "name": "Docker NVIDIA part",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {"inject_facts": {"facts": facts}},
                {"ansible.builtin.include_role": {"name": "platbench.lab.docker", "tasks_from": "nvidia"}},
            ],
        }
    ]
    variables = dict(variables, ansible_python_interpreter=sys.executable)
    return run_playbook(plays, tmp_path, variables, "--check", timeout=120)


@skips.needs_no_gpu("its NVIDIA driver may answer")
def test_toolkit_with_an_externally_managed_driver_stops_when_the_driver_does_not_answer(tmp_path):
    run = run_nvidia_part(tmp_path, {"docker_nvidia_install_driver": False})
    assert run.rc != 0
    assert "its NVIDIA driver does not answer" in run.output, run.output[-3000:]
    assert "Run platbench.lab.nvidia_driver" in run.output
    # Stopped before the toolkit's repository was touched.
    assert "Add NVIDIA's container toolkit apt repository" not in run.output


def test_toolkit_installs_the_driver_first_through_the_driver_role(tmp_path):
    # A driver setting no host can use stops the driver role, hence the toolkit, before anything changes.
    run = run_nvidia_part(tmp_path, {"nvidia_driver_branch": "latest"})
    assert run.rc != 0
    assert "platbench.lab.nvidia_driver: nvidia_driver_branch is 'latest'" in run.output, run.output[-3000:]
    assert "Add NVIDIA's container toolkit apt repository" not in run.output
