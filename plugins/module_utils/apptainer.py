# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Apptainer facts shared by readiness, the cell plan and the apptainer role's filters.

Pure Python: where the SIF lives, how its description reads, and which Apptainer is new enough.
"""

from __future__ import annotations

import re

# The sg/vmsg placement uses `--nv` (1.0) and `--cpus` for vnl: the cgroups resource limit
# flags of `apptainer exec` (--cpus, --memory, ...) arrived in Apptainer 1.1.0.
MINIMUM_VERSION = "1.1.0"
SIF_DIR = "/var/lib/platbench/sif"
SIF_DESCRIPTION = SIF_DIR + "/current.json"
# The guest image's SIF disk (label pbsif) is mounted read-only here (platbench.lab.guest_image).
GUEST_SIF_DIR = "/opt/platbench/sif"
GUEST_SIF_PATH = GUEST_SIF_DIR + "/workload.sif"
IMAGE_ID_CHARS = 12

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
# What a user runs when a host lacks Apptainer or its SIF.
INSTALL_FIX = "run site.yml with the host in platbench_apptainer_hosts (role platbench.lab.apptainer)"
# ... and when a guest image lacks them (vmsg): the guest image takes the host's .deb and SIF.
GUEST_FIX = (
    "run site.yml with the host in platbench_apptainer_hosts and platbench_vm_hosts "
    "(roles platbench.lab.apptainer, then platbench.lab.guest_image)"
)


def parse_version(text):
    """'apptainer version 1.4.5-1.el9' -> '1.4.5'; None when ``text`` holds no version."""
    match = _VERSION.search(str(text or ""))
    if not match:
        return None
    major, minor, patch = match.groups()
    return f"{major}.{minor}.{patch or 0}"


def version_tuple(version):
    parsed = parse_version(version)
    if parsed is None:
        raise ValueError(f"not an Apptainer version: {version!r}")
    return tuple(int(part) for part in parsed.split("."))


def too_old(installed, minimum=MINIMUM_VERSION):
    """True when ``installed`` is older than ``minimum`` (both version strings)."""
    return version_tuple(installed) < version_tuple(minimum)


def short_image_id(image_id):
    """'sha256:0123456789abcdef...' -> '0123456789ab'."""
    text = str(image_id or "")
    if not re.fullmatch(r"(sha256:)?[0-9a-f]{12,64}", text):
        raise ValueError(f"not an image id (sha256:<hex>): {image_id!r}")
    return text.removeprefix("sha256:")[:IMAGE_ID_CHARS]


def sif_path(image_id, sif_dir=SIF_DIR):
    """The SIF of an image, named after its id, so a new image gets a new SIF and an old one is kept."""
    return f"{str(sif_dir).rstrip('/')}/workload-{short_image_id(image_id)}.sif"
