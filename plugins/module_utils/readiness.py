# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Which platforms a host can run now and, for each one it cannot, why and what to do.

Each registry entry lists the requirements it needs (``platforms.REQUIREMENTS``); this module
checks them against what the host offers. Pure Python: the ``platbench.lab.platform_status``
module gathers the inputs and calls ``platform_status``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import apptainer, platforms

APPTAINER_FIX = "run site.yml (role platbench.lab.apptainer)"


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
    elif requirement in ("apptainer", "sif", "guest_sif"):
        return _apptainer_problem(requirement, host)
    else:
        raise ValueError(f"unknown requirement {requirement!r}; known: {', '.join(platforms.REQUIREMENTS)}")
    return None


def _version_problem(version, where, fix):
    if not version:
        return f"Apptainer is not installed {where}: {fix}"
    if apptainer.too_old(version, apptainer.MINIMUM_VERSION):
        return (
            f"Apptainer {version} {where} is older than {apptainer.MINIMUM_VERSION}, the first with the --cpus "
            f"resource limit the sg and vmsg platforms use: {fix} to upgrade it"
        )
    return None


def _stale_problem(built_from, what, host, fix):
    if not host["image_id"]:
        return (
            f"{what} cannot be checked against the workload image {host['image']}, which is not in the Docker engine: "
            "run site.yml (role platbench.lab.workload_image)"
        )
    if built_from != host["image_id"]:
        return f"{what} built from image {_short(built_from)}, not the current {_short(host['image_id'])}: {fix}"
    return None


def _apptainer_problem(requirement, host):
    sif = host["sif"]
    if requirement == "apptainer":
        return _version_problem(host["apptainer_version"], "on this host", APPTAINER_FIX)
    if requirement == "sif":
        if not sif.get("image_id"):
            return f"no SIF of the workload image is described at {host['sif_description']}: {APPTAINER_FIX}"
        if not sif.get("present"):
            return f"SIF {sif.get('sif')} is missing: {APPTAINER_FIX}"
        return _stale_problem(sif["image_id"], f"SIF {sif.get('sif')}", host, APPTAINER_FIX)
    guest = host["guest_image"]
    fix = "run site.yml (roles platbench.lab.apptainer, then platbench.lab.guest_image)"
    problem = _version_problem(guest.get("apptainer_version"), "in the guest image", fix)
    if problem:
        return problem
    if not guest.get("sif_image_id"):
        return f"the guest image carries no SIF of the workload image: {fix}"
    return _stale_problem(guest["sif_image_id"], "the guest's SIF", host, fix)


def platform_status(
    facts,
    prefix,
    venv_present,
    image,
    image_id,
    guest_image_path,
    guest_image,
    apptainer_version=None,
    sif=None,
    sif_description=apptainer.SIF_DESCRIPTION,
):
    """For every registry platform: ``ready``, ``reason`` ('' when ready), ``skip`` (the host cannot
    run it at all, so an experiment skips it instead of failing), and for the guest platforms
    this host's QEMU runs the
    ``accelerator`` (kvm, tcg or None) and ``emulated`` (guests run under QEMU's emulator).

    ``apptainer_version`` is the host's Apptainer (None: not installed); ``sif`` the SIF description
    (``sif_description``, written by platbench.lab.apptainer) with ``present``: whether its SIF file exists."""
    host = {
        "facts": facts or {},
        "prefix": prefix,
        "venv_present": bool(venv_present),
        "image": image,
        "image_id": image_id or None,
        "guest_image_path": guest_image_path,
        "guest_image": guest_image or {},
        "apptainer_version": apptainer_version or None,
        "sif": sif or {},
        "sif_description": sif_description,
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
