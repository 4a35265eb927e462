# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Which platforms a host can run now and, for each one it cannot, why and what to do.

Each registry entry lists the requirements it needs (``platforms.REQUIREMENTS``); this module
checks them against what the host offers. Pure Python: the ``platbench.lab.platform_status``
module gathers the inputs and calls ``platform_status``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms


def _short(image_id):
    return (image_id or "none")[7:19] if str(image_id or "").startswith("sha256:") else str(image_id or "none")


def requirement_problem(requirement, host):
    """Why ``host`` (see ``platform_status``) does not meet ``requirement``, or None."""
    facts, guest = host["facts"], host["guest_image"]
    if requirement == "venv":
        if not host["venv_present"]:
            return f"no workload environment at {host['prefix']}/venv: run site.yml (role platbench.lab.workload_env)"
    elif requirement == "engine":
        if not facts.get("docker_engine"):
            return "no Docker engine answers on this host: run site.yml (role platbench.lab.docker) or start dockerd"
    elif requirement == "image":
        if not host["image_id"]:
            return f"image {host['image']} is not built: run site.yml (role platbench.lab.workload_image)"
    elif requirement == "hypervisor":
        if not facts.get("vm_accelerator"):
            return "neither KVM nor QEMU on this host: run site.yml (role platbench.lab.kvm_host)"
    elif requirement == "libvirt":
        if not facts.get("libvirt_daemon"):
            return "libvirtd does not answer: run site.yml (role platbench.lab.kvm_host) or start libvirtd"
    elif requirement == "guest_image":
        if not guest:
            return f"no guest image at {host['guest_image_path']}: run site.yml (role platbench.lab.guest_image)"
    elif requirement == "guest_container_image":
        if "container_image_id" not in (guest or {}):
            return "the guest image carries no container image: run site.yml with the Docker engine up"
        if guest["container_image_id"] != host["image_id"]:
            return (
                f"the guest carries workload image {_short(guest['container_image_id'])}, not the current "
                f"{_short(host['image_id'])}: run site.yml to refresh it"
            )
    else:
        raise ValueError(f"unknown requirement {requirement!r}; known: {', '.join(platforms.REQUIREMENTS)}")
    return None


def platform_status(facts, prefix, venv_present, image, image_id, guest_image_path, guest_image):
    """For every registry platform: ``ready``, ``reason`` ('' when ready), ``skip`` (the host cannot
    run it at all, so an experiment skips it instead of failing), and for the guest platforms
    this host's QEMU runs the
    ``accelerator`` (kvm, tcg or None) and ``emulated`` (guests run under QEMU's emulator)."""
    host = {
        "facts": facts or {},
        "prefix": prefix,
        "venv_present": bool(venv_present),
        "image": image,
        "image_id": image_id or None,
        "guest_image_path": guest_image_path,
        "guest_image": guest_image or {},
    }
    accelerator = host["facts"].get("vm_accelerator") or None
    status = {}
    for platform in platforms.PLATFORMS:
        if not platform.placement:
            entry = {"ready": False, "reason": platforms.not_built_reason(platform.label), "skip": False}
        else:
            problems = [problem for problem in (requirement_problem(req, host) for req in platform.requires) if problem]
            entry = {
                "ready": not problems,
                "reason": problems[0] if problems else "",
                "skip": "hypervisor" in platform.requires and not accelerator,
            }
        if "hypervisor" in platform.requires:  # guests this host's QEMU runs
            entry.update(accelerator=accelerator, emulated=accelerator == "tcg")
        status[platform.label] = entry
    return status


def summary(status, wanted):
    """One line per wanted platform: ready, or skipped with the reason."""
    return [
        f"{label}: ready" if status[label]["ready"] else f"{label}: skipped: {status[label]['reason']}"
        for label in wanted
    ]
