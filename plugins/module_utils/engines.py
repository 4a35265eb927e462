# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The container engines of the container kind (the registry's ``engine``): how to ask each, from the host,
for its version and for the id of the workload image it holds.

Both answer on the command line the same way; Podman prints an image id without Docker's ``sha256:``
prefix, so ids are compared in Docker's form. Podman loads the workload image from Docker's
(platbench.lab.podman), which keeps its id: the same id in both means Podman runs the current image.
"""

from __future__ import annotations

NAMES = {"docker": "Docker", "podman": "Podman"}
# What the engine says when asked for its version; a failure means it does not answer.
VERSION_ARGV = {
    "docker": ["version", "--format", "{{.Server.Version}}"],
    "podman": ["version", "--format", "{{.Client.Version}}"],
}
IMAGE_ID_ARGV = ["image", "inspect", "--format", "{{.Id}}"]
# The role that installs each engine, and the one that puts the workload image there.
ROLES = {
    "docker": ("platbench.lab.docker", "platbench.lab.workload_image"),
    "podman": ("platbench.lab.podman", "platbench.lab.podman"),
}


def image_id(text):
    """An engine's image id in Docker's form (``sha256:<hex>``), or None."""
    text = (text or "").strip()
    if not text:
        return None
    return text if text.startswith("sha256:") else f"sha256:{text}"


def probe(run, engine, image):
    """``{"answers", "version", "image_id"}`` of ``engine`` on this host. ``run(argv)`` runs a command and returns
    ``(rc, stdout)``, or None when the engine's command is not installed."""
    version = run([engine] + VERSION_ARGV[engine])
    if version is None or version[0] != 0:
        return {"answers": False, "version": None, "image_id": None}
    found = run([engine] + IMAGE_ID_ARGV + [image])
    return {
        "answers": True,
        "version": version[1].strip() or None,
        "image_id": image_id(found[1]) if found and found[0] == 0 else None,
    }
