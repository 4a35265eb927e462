"""platbench.lab.firecracker (platform mvm) without the network or KVM: bad inputs, an install from a release tarball
on the controller (stand-in binaries, checked by their pinned SHA-256) that a second run leaves alone, a tarball with
another checksum refused, and a host without a KVM device stopped with what to do."""

from __future__ import annotations

import hashlib
import io
import os
import platform
import tarfile

import pytest
import yaml
from playbook_run import REPO, run_playbook

PLAYBOOK = REPO / "tests/roles/firecracker/apply.yml"
VERSION = "v1.10.1"
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())


def release(tmp_path):
    """A tarball laid out as Firecracker's releases are, with stand-in binaries; its SHA-256."""
    path = tmp_path / f"firecracker-{VERSION}-{ARCH}.tgz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("firecracker", "jailer"):
            data = f"#!/bin/sh\necho {name} {VERSION}\n".encode()
            info = tarfile.TarInfo(f"release-{VERSION}-{ARCH}/{name}-{VERSION}-{ARCH}")
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def variables(tmp_path, archive, checksum, **extra):
    return {
        "firecracker_release_archive": str(archive),
        "firecracker_sha256": {"x86_64": "", "aarch64": "", ARCH: checksum},
        "firecracker_prefix": str(tmp_path / "prefix"),
        "firecracker_download_dir": str(tmp_path / "cache"),
        "firecracker_chroot_base": str(tmp_path / "jail"),
        # An existing system user: the test makes no account on the machine.
        "firecracker_user": "nobody",
        "firecracker_group": "nogroup",
        "firecracker_kvm_device": "/dev/null",  # a character device standing in for /dev/kvm
        **extra,
    }


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({"firecracker_version": "1.10"}, "firecracker_version must be a release tag such as v1.10.1"),
        ({"firecracker_sha256": {ARCH: "abc"}}, "64 lower-case hex digits"),
        ({"firecracker_require_kvm": "maybe"}, "firecracker_require_kvm"),
    ],
)
def test_bad_inputs_are_refused_before_anything_runs(tmp_path, extra, expected):
    archive, checksum = release(tmp_path)
    run = run_playbook(PLAYBOOK, tmp_path, {**variables(tmp_path, archive, checksum), **extra})
    assert run.rc != 0 and expected in run.output, run.output[-3000:]
    assert not (tmp_path / "prefix").exists()


def test_a_release_from_the_controller_is_installed_once(tmp_path):
    archive, checksum = release(tmp_path)
    settings = variables(tmp_path, archive, checksum)
    first = run_playbook(PLAYBOOK, tmp_path, settings)
    assert first.rc == 0, first.output[-3000:]
    for name in ("firecracker", "jailer"):
        binary = tmp_path / "prefix" / "bin" / name
        assert os.access(binary, os.X_OK) and f"echo {name} {VERSION}" in binary.read_text()
    assert (tmp_path / "jail").is_dir()
    assert run_playbook(PLAYBOOK, tmp_path, settings).recap() == (0, 0)


def test_a_tarball_with_another_checksum_is_refused(tmp_path):
    archive, _checksum = release(tmp_path)
    run = run_playbook(PLAYBOOK, tmp_path, variables(tmp_path, archive, "0" * 64))
    assert run.rc != 0 and "not the pinned " + "0" * 64 in run.output, run.output[-3000:]
    assert not (tmp_path / "prefix" / "bin" / "firecracker").exists()


def test_a_host_without_kvm_is_stopped_with_what_to_do(tmp_path):
    archive, checksum = release(tmp_path)
    run = run_playbook(PLAYBOOK, tmp_path, variables(tmp_path, archive, checksum, firecracker_kvm_device="/none/kvm"))
    assert run.rc != 0 and "/none/kvm is missing: Firecracker needs KVM" in run.output, run.output[-3000:]
    assert "firecracker_require_kvm: false" in run.output


def trusted(value):
    """``value`` with its strings marked as templates Ansible may render, as it marks a role's own files."""
    from ansible.template import trust_as_template

    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return trust_as_template(value) if isinstance(value, str) else value


def role_checksum(architecture, **overrides):
    """The checksum argument get_url gets (vars/main.yml's firecracker_checksum), rendered from the role's defaults
    and vars as Ansible would for a host of ``architecture``: no download, no playbook."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    role = REPO / "roles/firecracker"
    variables = {
        **trusted(yaml.safe_load((role / "defaults/main.yml").read_text())),
        **overrides,
        **trusted(yaml.safe_load((role / "vars/main.yml").read_text())),
        "ansible_facts": {"architecture": architecture},
    }
    return Templar(loader=DataLoader(), variables=variables).template(trusted("{{ firecracker_checksum }}"))


@pytest.mark.parametrize("architecture, arch", [("x86_64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64")])
def test_the_pinned_release_is_checked_by_the_checksum_the_role_pins(architecture, arch):
    checksum = role_checksum(architecture)
    assert checksum.startswith("sha256:") and len(checksum) == len("sha256:") + 64
    assert (
        checksum
        == "sha256:"
        + {
            "x86_64": "36112969952b0e34fadcfca769d48a55dc22cbba99af17e02bd0e24fc35adc77",
            "aarch64": "9e3641071de140979afaac0c52fdc107baeba398bdb5709c12f77ee469207fcd",
        }[arch]
    )


def test_another_release_is_checked_by_the_given_checksum_or_else_its_published_file():
    given = "ab" * 32
    assert role_checksum("x86_64", firecracker_version="v1.11.0", firecracker_sha256={"x86_64": given}) == (
        f"sha256:{given}"
    )
    assert role_checksum("x86_64", firecracker_version="v1.11.0") == (
        "sha256:https://github.com/firecracker-microvm/firecracker/releases/download/v1.11.0/"
        "firecracker-v1.11.0-x86_64.tgz.sha256.txt"
    )
