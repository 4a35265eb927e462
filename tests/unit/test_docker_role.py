"""The docker role's GPU part, which no development machine can run, checked by what it renders."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "roles/docker/templates/daemon.json.j2"


def render_daemon_json(tmp_path, **extra):
    dest = tmp_path / "daemon.json"
    variables = {"docker_daemon_options": {"log-driver": "json-file"}, "docker_nvidia_default_runtime": False}
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
