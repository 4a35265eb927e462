# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The container engines of the container kind (the registry's ``engine``): how to ask each, from the host,
for its version and for the id of the workload image it holds.

Both answer on the command line the same way; Podman prints an image id without Docker's ``sha256:``
prefix, so ids are compared in Docker's form. Podman loads the workload image from Docker's
(platbench.lab.podman), which keeps its id: the same id in both means Podman runs the current image.
"""

from __future__ import annotations

import json

NAMES = {"docker": "Docker", "podman": "Podman"}
# What the engine says when asked for its version; a failure means it does not answer.
VERSION_ARGV = {
    "docker": ["version", "--format", "{{.Server.Version}}"],
    "podman": ["version", "--format", "{{.Client.Version}}"],
}
IMAGE_ID_ARGV = ["image", "inspect", "--format", "{{.Id}}"]
# The OCI runtimes the engine has registered besides its default, with their arguments (gVisor's runsc, the NVIDIA
# runtime): Docker's daemon.json "runtimes". Podman's are its containers.conf's; no platform asks Podman for one.
RUNTIMES_ARGV = {"docker": ["info", "--format", "{{json .Runtimes}}"]}
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
    """``{"answers", "version", "image_id", "runtimes"}`` of ``engine`` on this host (``runtimes``: name -> its
    arguments, RUNTIMES_ARGV). ``run(argv)`` runs a command and returns ``(rc, stdout)``, or None when the engine's
    command is not installed."""
    version = run([engine] + VERSION_ARGV[engine])
    if version is None or version[0] != 0:
        return {"answers": False, "version": None, "image_id": None, "runtimes": {}}
    found = run([engine] + IMAGE_ID_ARGV + [image])
    listed = run([engine] + RUNTIMES_ARGV[engine]) if engine in RUNTIMES_ARGV else None
    return {
        "answers": True,
        "version": version[1].strip() or None,
        "image_id": image_id(found[1]) if found and found[0] == 0 else None,
        "runtimes": runtimes(listed[1]) if listed and listed[0] == 0 else {},
    }


def runtimes(text):
    """The engine's registered runtimes as name -> list of arguments, from its JSON listing (``docker info``'s
    ``Runtimes``: ``{"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace"]}}``)."""
    try:
        listed = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(listed, dict):
        return {}
    found = {}
    for name, entry in listed.items():
        entry = entry if isinstance(entry, dict) else {}
        found[name] = [str(arg) for arg in entry.get("runtimeArgs") or entry.get("args") or []]
    return found


def runtime_option(args, option, default=None):
    """The value of ``--option=VALUE`` (or ``--option VALUE``) among a runtime's arguments, or ``default``."""
    args = list(args or [])
    for index, arg in enumerate(args):
        if arg.startswith(f"--{option}="):
            return arg.split("=", 1)[1]
        if arg == f"--{option}" and index + 1 < len(args):
            return args[index + 1]
    return default
