# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the lab builds differs by CPU architecture (Ansible's ``architecture`` fact): the wheels' platform tags
and the Debian architecture debootstrap installs. Only the architectures named here are built; every other
one is refused with the list of those that are."""

from __future__ import annotations

import re

# Debian's name of each architecture the lab builds (debootstrap --arch, .deb file names).
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}

# The platform tags pip accepts for CPython 3.11 on Debian bookworm (glibc 2.36), newest first. x86_64 keeps
# the list every release used; manylinux2014 is the oldest tag with aarch64 wheels, and linux_aarch64 is what
# `pip wheel` gives a package built from source on the device (mlcommons-loadgen has no aarch64 wheel on PyPI).
WHEEL_PLATFORMS = {
    "x86_64": [
        "manylinux_2_28_x86_64",
        "manylinux_2_27_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
        "linux_x86_64",
    ],
    "aarch64": [
        "manylinux_2_28_aarch64",
        "manylinux_2_27_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "linux_aarch64",
    ],
}

# pip's words for a requirement it found no file for (with --only-binary=:all:, no wheel for these platforms).
_NO_DISTRIBUTION = re.compile(r"No matching distribution found for (\S+)")


class ArchitectureError(ValueError):
    """An architecture the lab does not build for."""


def _known(architecture, table, what):
    if architecture not in table:
        raise ArchitectureError(
            f"{what}: the lab builds for {', '.join(table)}; this host's architecture is {architecture or '?'} "
            "(Ansible's architecture fact)"
        )
    return table[architecture]


def debian_arch(architecture):
    """Debian's name (``amd64``, ``arm64``) of the architecture Ansible calls ``architecture``."""
    return _known(architecture, DEBIAN_ARCH, "debian_arch")


def wheel_platforms(architecture):
    """The pip platform tags of the wheels a host of ``architecture`` installs."""
    return list(_known(architecture, WHEEL_PLATFORMS, "wheel_platforms"))


def wheels_not_found(pip_output):
    """The requirements pip found no wheel for, in the order it named them (its output of a failed download)."""
    return list(dict.fromkeys(_NO_DISTRIBUTION.findall(pip_output or "")))


def wheelhouse_download_problem(pip_output, architecture, platforms):
    """Why a wheelhouse download failed, and what to do: for requirements without a wheel for ``platforms``, how
    to build one and hand it to pip; otherwise pip's own last lines."""
    missing = wheels_not_found(pip_output)
    tags = ", ".join(platforms)
    if not missing:
        tail = " ".join(line.strip() for line in (pip_output or "").strip().splitlines()[-3:])
        return f"pip download failed for {architecture} ({tags}): {tail or 'no output'}"
    return (
        f"No wheel for {architecture} ({tags}) of: {', '.join(missing)}. Build each on a host of that "
        f"architecture (pip wheel --no-deps '<requirement>' -w DIR, with a compiler and python3-dev), copy DIR to "
        "the controller and set PIP_FIND_LINKS=DIR for ansible-playbook; or list a requirement that has such a "
        "wheel in the inventory (platbench_workload_requirements)."
    )
