# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The names that say what was built from which inputs, so that unchanged inputs rebuild nothing.

Each is a short SHA-1 of its inputs, computed exactly as the releases before 0.9.0 did in Jinja (whose
``sort`` ignores case, and whose ``truncate`` cut the hex digest), so that a lab built by an older release
keeps its images and wheelhouses: ``tests/unit/test_identities.py`` pins today's values.
"""

from __future__ import annotations

import hashlib
import json

BASE_TAG_CHARS = 8
WHEELHOUSE_CHARS = 12
ROOTFS_CHARS = 12
# The guest root file system's inputs, in the order they are hashed; bump ``format`` (its caller's) when what
# debootstrap writes into the guest changes.
ROOTFS_INPUTS = ("format", "suite", "packages", "requirements", "size_gb", "public_key", "ca")
NVIDIA_INPUTS = ("driver_repo", "components", "packages", "driver_source", "driver_branch", "container_repo")
CUDA_INPUTS = ("cuda_repo", "cuda_keyring")


def _sorted(items):
    """Jinja's ``sort``: case-insensitive, stable."""
    return sorted((str(item) for item in items or ()), key=str.lower)


def _digest(text, chars):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:chars]


def base_image_tag(suite, packages):
    """``<suite>-<8 hex>``: the tag of the debootstrapped base image holding ``packages``."""
    return f"{suite}-{_digest(','.join(_sorted(packages)), BASE_TAG_CHARS)}"


def wheelhouse_name(requirements, python_version, architecture="x86_64"):
    """The directory of one wheelhouse: 12 hex of its requirement list and the Python it serves, followed by the
    architecture (``-aarch64``) for every architecture but x86_64, whose wheelhouses keep their names."""
    name = _digest(" ".join(_sorted(requirements)) + str(python_version), WHEELHOUSE_CHARS)
    return name if architecture == "x86_64" else f"{name}-{architecture}"


def guest_rootfs_id(inputs, nvidia=None, apptainer_deb=None):
    """12 hex of the guest root file system's inputs. Compatibility rules, so that a guest keeps its name when
    nothing it holds changed: ``nvidia`` (a GPU guest's driver inputs) is hashed only for a GPU guest, the CUDA
    repository and keyring only when the driver comes from NVIDIA's repository, ``apptainer_deb`` (the checksum
    of the .deb a vmsg guest carries) only for a guest carrying Apptainer."""
    missing = [name for name in ROOTFS_INPUTS if name not in inputs]
    if missing:
        raise ValueError(f"guest_rootfs_id: missing input(s) {', '.join(missing)}")
    doc = {name: inputs[name] for name in ROOTFS_INPUTS}
    doc["packages"] = _sorted(doc["packages"])
    doc["requirements"] = _sorted(doc["requirements"])
    if nvidia is not None:
        driver = {name: nvidia[name] for name in NVIDIA_INPUTS}
        driver["packages"] = _sorted(driver["packages"])
        driver["driver_branch"] = str(driver["driver_branch"])
        if driver["driver_repo"] == "nvidia":
            driver.update({name: nvidia[name] for name in CUDA_INPUTS})
        doc["nvidia"] = driver
    if apptainer_deb is not None:
        doc["apptainer_deb"] = apptainer_deb
    return _digest(json.dumps(doc), ROOTFS_CHARS)
