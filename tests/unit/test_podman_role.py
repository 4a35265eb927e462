"""platbench.lab.podman (platform pd) without a GPU or a Docker image: bad inputs, the containers.conf drop-in it
writes (runc, an open-files limit the host allows) and the CDI command line it runs on GPU hosts, against a
stand-in nvidia-ctk. The lab tests run the role for real (tests/integration/test_lab.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import tomllib
from ansible_collections.platbench.lab.plugins.module_utils import quiet
from playbook_run import REPO, run_playbook

# Acts on the host where a live lab would see it or suffer from it: applies the podman role for real: its drop-in and
# launcher, which the lab's pd cells use. `make test` runs it first, before the lab is up (marker `host`,
# docs/src/tests.md).
pytestmark = pytest.mark.host

PLAYBOOK = REPO / "tests/roles/podman/apply.yml"


def hard_limit(option):
    limit = subprocess.run(["bash", "-c", f"ulimit -H{option}"], capture_output=True, text=True, check=True)
    return None if limit.stdout.strip() == "unlimited" else int(limit.stdout)


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({"podman_image_transfer": "scp"}, "value of podman_image_transfer must be one of: docker-daemon, archive"),
        ({"podman_runtime": "youki"}, "value of podman_runtime must be one of: runc, crun"),
        ({"podman_nofile_limit": "many"}, "podman_nofile_limit"),
    ],
)
def test_bad_inputs_are_refused_before_anything_runs(tmp_path, extra, expected):
    run = run_playbook(PLAYBOOK, tmp_path, {"podman_image": "platbench/workload:latest", **extra})
    assert run.rc != 0 and expected in run.output, run.output[-3000:]


def test_the_drop_in_sets_runc_and_a_limit_the_host_allows_and_a_second_run_changes_nothing(tmp_path):
    conf_dir = tmp_path / "containers.conf.d"
    variables = {
        "podman_image": "platbench/workload:latest",
        "podman_test_tasks": "configure",
        "podman_containers_conf_dir": str(conf_dir),
        # More than any host allows: the host's hard limits win.
        "podman_nofile_limit": 1 << 40,
        "podman_nproc_limit": 1 << 40,
    }
    launcher = Path(quiet.PODMAN_LAUNCHER)
    # The drop-in's two tasks change; the launcher's directory and file too where no earlier run of the role (or the
    # lab's) installed them: a fresh host.
    installs = (not launcher.parent.is_dir()) + (not launcher.is_file())
    first = run_playbook(PLAYBOOK, tmp_path, variables)
    assert first.recap() == (2 + installs, 0), first.output[-3000:]
    assert launcher.read_text().endswith('exec chrt --other 0 podman "$@"\n')
    conf = tomllib.loads((conf_dir / "50-platbench.conf").read_text())
    nofile, nproc = hard_limit("n") or 1 << 40, hard_limit("u") or 1 << 40
    assert conf == {
        "containers": {"default_ulimits": [f"nofile={nofile}:{nofile}", f"nproc={nproc}:{nproc}"]},
        "engine": {"runtime": "runc"},
    }
    assert run_playbook(PLAYBOOK, tmp_path, variables).recap() == (0, 0)

    smaller = run_playbook(PLAYBOOK, tmp_path, {**variables, "podman_nofile_limit": 1024})
    assert smaller.recap() == (1, 0)
    assert 'default_ulimits = ["nofile=1024:1024", "nproc=' in (conf_dir / "50-platbench.conf").read_text()


def test_gpu_hosts_get_the_cdi_spec_from_nvidia_ctk_once(tmp_path):
    # A stand-in nvidia-ctk that writes its command line where the spec goes.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "nvidia-ctk"
    stub.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && { echo "NVIDIA Container Toolkit CLI version 1.17.8"; exit 0; }\n'
        'for arg; do case "$arg" in --output=*) echo "$*" > "${arg#--output=}";; esac; done\n'
    )
    stub.chmod(0o755)
    spec = tmp_path / "cdi/nvidia.yaml"
    spec.parent.mkdir()
    variables = {
        "podman_image": "platbench/workload:latest",
        "podman_test_tasks": "cdi",
        "podman_cdi_spec": str(spec),
        "podman_test_path": f"{bin_dir}:{os.environ['PATH']}",
    }
    first = run_playbook(PLAYBOOK, tmp_path, variables)
    assert first.recap() == (1, 0), first.output[-3000:]
    assert spec.read_text().split() == ["cdi", "generate", f"--output={spec}"]
    assert run_playbook(PLAYBOOK, tmp_path, variables).recap() == (0, 0)  # the spec is there: not rewritten


def test_without_nvidia_ctk_the_cdi_step_says_what_to_apply(tmp_path):
    variables = {
        "podman_image": "platbench/workload:latest",
        "podman_test_tasks": "cdi",
        "podman_cdi_spec": str(tmp_path / "nvidia.yaml"),
    }
    run = run_playbook(PLAYBOOK, tmp_path, variables)
    assert run.rc != 0
    assert "nvidia-ctk is not installed. Apply platbench.lab.docker first" in run.output, run.output[-3000:]
