# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Which platforms a host can run now and, for each one it cannot, why and what to do.

Each registry entry lists the requirements it needs (``platforms.REQUIREMENTS``); this module
checks them against what the host offers. Pure Python: the ``platbench.lab.platform_status``
module gathers the inputs and calls ``platform_status``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import (
    apptainer,
    engines,
    firecracker,
    lxc,
    oci_bundle,
    platforms,
)

APPTAINER_FIX = apptainer.INSTALL_FIX

KUBERNETES_ROLE = (
    "run site.yml with the host in platbench_kubernetes_control_plane or platbench_kubernetes_workers "
    "(role platbench.lab.kubernetes)"
)
GPU_RESOURCE = "nvidia.com/gpu"
# kubelet reports at most this many images in node.status.images (nodeStatusMaxImages' default).
NODE_IMAGES_REPORTED = 50


def _short(image_id):
    return (image_id or "none")[7:19] if str(image_id or "").startswith("sha256:") else str(image_id or "none")


def _count(value):
    """A node's allocatable count ("8", "7500m" CPUs, "2" GPUs) in whole units, rounded down."""
    text = str(value or "0").strip()
    try:
        return int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))
    except ValueError:
        return 0


def image_names(reference):
    """The names containerd lists ``reference`` under: ``platbench/workload:x`` is stored as
    ``docker.io/platbench/workload:x``, ``busybox`` as ``docker.io/library/busybox``."""
    names = {reference}
    first = reference.split("/", 1)[0]
    if "/" not in reference:
        names.add(f"docker.io/library/{reference}")
    elif "." not in first and ":" not in first and first != "localhost":
        names.add(f"docker.io/{reference}")
    return names


def k8s_node(nodes, name):
    """What the k8s platform needs from the Node object named ``name`` (None when the cluster has no such
    node): its name, whether it is Ready, its allocatable CPUs and GPUs, the image names its runtime holds."""
    node = next((n for n in nodes or [] if (n.get("metadata") or {}).get("name") == name), None)
    if node is None:
        return None
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    reported = status.get("images") or []
    return {
        "name": name,
        "ready": conditions.get("Ready") == "True",
        "allocatable_cpus": _count(allocatable.get("cpu")),
        "allocatable_gpus": _count(allocatable.get(GPU_RESOURCE)),
        "images": sorted({image_name for image in reported for image_name in image.get("names") or []}),
        # kubelet lists only the biggest images beyond its limit: a missing one may still be there.
        "images_complete": len(reported) < NODE_IMAGES_REPORTED,
    }


def _kubernetes_problem(host):
    cluster = host["kubernetes"]
    kubeconfig = cluster.get("kubeconfig") or "(none given)"
    if not cluster.get("kubeconfig_present"):
        return f"no kubeconfig at {kubeconfig}, so this host is no Kubernetes node: {KUBERNETES_ROLE}"
    if cluster.get("error"):
        return (
            f"the Kubernetes cluster does not answer with {kubeconfig} ({cluster['error']}): check kubelet and the "
            f"API server (systemctl status kubelet), or {KUBERNETES_ROLE}"
        )
    node, name = cluster.get("node_status"), cluster.get("node")
    if node is None:
        known = ", ".join(sorted((n.get("metadata") or {}).get("name", "?") for n in cluster.get("nodes") or []))
        return (
            f"the cluster has no node {name} (its nodes: {known or 'none'}): {KUBERNETES_ROLE} to join it, or set "
            "platform_run_k8s_node to its Kubernetes name"
        )
    if not node["ready"]:
        return f"Kubernetes node {name} is not Ready: check its kubelet and flannel (kubectl describe node {name})"
    wanted = image_names(host["image"])
    if node["images_complete"] and not wanted & set(node["images"]):
        return (
            f"image {host['image']} is not in the containerd of node {name}: run site.yml "
            "(role platbench.lab.kubernetes imports the workload image)"
        )
    return None


OPENSTACK_FIX = (
    "set openstack_instances_cloud (a clouds.yaml cloud name) so that playbooks/experiment.yml provisions the "
    "campaign's instances (role platbench.lab.openstack_instances)"
)


def _openstack_instance_problem(host, label):
    if not (host.get("openstack_instances") or {}).get(label):
        return f"the inventory holds no {label} instance of this campaign: {OPENSTACK_FIX}"
    return None


def _venv_problem(host, _label):
    if not host["venv_present"]:
        return f"no workload environment at {host['prefix']}/venv: run site.yml (role platbench.lab.workload_env)"
    return None


def _hypervisor_problem(host, _label):
    if not host["facts"].get("vm_accelerator"):
        return "neither KVM nor QEMU on this host: run site.yml (role platbench.lab.kvm_host)"
    return None


def _libvirt_problem(host, _label):
    if not host["facts"].get("libvirt_daemon"):
        return "libvirtd does not answer: run site.yml (role platbench.lab.kvm_host) or start libvirtd"
    return None


def _guest_image_problem(host, _label):
    if not host["guest_image"]:
        return f"no guest image at {host['guest_image_path']}: run site.yml (role platbench.lab.guest_image)"
    return None


def _guest_container_image_problem(host, _label):
    guest = host["guest_image"]
    if "container_image_id" not in (guest or {}):
        return "the guest image carries no container image: run site.yml with the Docker engine up"
    if guest["container_image_id"] != host["image_id"]:
        return (
            f"the guest carries workload image {_short(guest['container_image_id'])}, not the current "
            f"{_short(host['image_id'])}: run site.yml to refresh it"
        )
    return None


# One check per requirement a registry platform may name (platforms.REQUIREMENTS): check(host, platform label) ->
# why the host does not meet it, or None. A new requirement is one entry here and one in the registry's list.
CHECKS = {
    "openstack_instance": _openstack_instance_problem,
    "venv": _venv_problem,
    "engine": lambda host, label: _engine_problem("engine", platforms.get(label).engine, host),
    "image": lambda host, label: _engine_problem("image", platforms.get(label).engine, host),
    "runtime": lambda host, label: _runtime_problem(platforms.get(label), host),
    "hypervisor": _hypervisor_problem,
    "libvirt": _libvirt_problem,
    "guest_image": _guest_image_problem,
    "guest_container_image": _guest_container_image_problem,
    "kubernetes": lambda host, _label: _kubernetes_problem(host),
    "apptainer": lambda host, _label: _apptainer_problem("apptainer", host),
    "sif": lambda host, _label: _apptainer_problem("sif", host),
    "guest_sif": lambda host, _label: _apptainer_problem("guest_sif", host),
    "firecracker": lambda host, _label: firecracker.host_problem(host["firecracker"]),
    "lxc": lambda host, _label: lxc.host_problem(host["lxc"], host["image_id"]),
    "bundle_bases": lambda host, label: oci_bundle.host_problem(
        host["bundle_bases"], host["image_id"], platforms.get(label).confinement
    ),
}


def requirement_problem(requirement, host, label=None):
    """Why ``host`` (see ``platform_status``) does not meet ``requirement`` for platform ``label``, or None."""
    check = CHECKS.get(requirement)
    if check is None:
        raise ValueError(f"unknown requirement {requirement!r}; known: {', '.join(platforms.REQUIREMENTS)}")
    return check(host, label)


def _runtime_problem(platform, host):
    """The platform's OCI runtime is not registered with its engine."""
    found = host["engines"].get(platform.engine) or {}
    if platform.runtime in (found.get("runtimes") or {}):
        return None
    name, role = engines.NAMES[platform.engine], engines.ROLES[platform.engine][0]
    return (
        f"{name} has no {platform.runtime} runtime (its runtimes: {', '.join(found.get('runtimes') or {}) or 'none'}): "
        f"run site.yml with {platform.label} in platbench_platforms (role {role} installs and registers it)"
    )


def _engine_problem(requirement, engine, host):
    """The platform's container engine does not answer, or does not hold the current workload image."""
    name, (engine_role, image_role) = engines.NAMES[engine], engines.ROLES[engine]
    found = host["engines"].get(engine) or {}
    if requirement == "engine":
        if not found.get("answers"):
            start = " or start dockerd" if engine == "docker" else ""
            return f"no {name} engine answers on this host: run site.yml (role {engine_role}){start}"
        return None
    if not found.get("image_id"):
        return f"image {host['image']} is not built: run site.yml (role {image_role})"
    if found["image_id"] != host["image_id"]:
        return (
            f"{name} holds workload image {_short(found['image_id'])}, not the current {_short(host['image_id'])}: "
            f"run site.yml (role {image_role}) to refresh it"
        )
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
    fix = apptainer.GUEST_FIX
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
    kubernetes=None,
    openstack_instances=None,
    engines_found=None,
    firecracker_found=None,
    lxc_found=None,
    oci_bundle_found=None,
):
    """For every registry platform: ``ready``, ``reason`` ('' when ready), ``skip`` (the host cannot
    run it at all, so an experiment skips it instead of failing), and for the guest platforms
    this host's QEMU runs the
    ``accelerator`` (kvm, tcg or None) and ``emulated`` (guests run under QEMU's emulator).

    ``kubernetes``: ``kubeconfig``, ``kubeconfig_present``, ``node`` (the runner's node name), ``nodes``
    (the cluster's Node objects) and ``error`` (why they could not be read, '' otherwise). Platforms
    needing it also carry ``node``: the runner's node (``k8s_node``), or None. Without a kubeconfig
    the host is no Kubernetes node at all, so they are skipped (``skip``); a cluster that is there
    but broken fails the run instead.

    ``apptainer_version`` is the host's Apptainer (None: not installed); ``sif`` the SIF description
    (``sif_description``, written by platbench.lab.apptainer) with ``present``: whether its SIF file exists.

    ``engines_found``: per container engine, what ``engines.probe`` found (``answers``, ``version``, ``image_id``);
    the workload image's current id (``image_id``) is Docker's, where it is built.

    ``firecracker_found``: what ``firecracker.probe`` found (the binaries, whether /dev/kvm opens). Without a
    usable KVM or the binaries the micro-VM platforms are skipped (``skip``), with the reason and the role to run.

    ``lxc_found``: what ``lxc.probe`` found (lxc-execute, the container root's image id).

    ``oci_bundle_found``: what ``oci_bundle.probe`` found (runc, the bundle bases' image id and mechanisms).

    ``openstack_instances``: per OpenStack platform, the inventory hosts of the campaign's instances (up or
    failed: a failed one's cells are recorded as failed). Without any, the platform is skipped (``skip``):
    no cloud was given to provision on.
    """
    cluster = dict(kubernetes or {})
    cluster["node_status"] = k8s_node(cluster.get("nodes"), cluster.get("node"))
    host = {
        "facts": facts or {},
        "prefix": prefix,
        "venv_present": bool(venv_present),
        "image": image,
        "image_id": image_id or None,
        "guest_image_path": guest_image_path,
        "guest_image": guest_image or {},
        "kubernetes": cluster,
        "apptainer_version": apptainer_version or None,
        "sif": sif or {},
        "sif_description": sif_description,
        "openstack_instances": openstack_instances or {},
        "engines": engines_found or {},
        "firecracker": firecracker_found or {},
        "lxc": lxc_found or {},
        "bundle_bases": oci_bundle_found or {},
    }
    accelerator = host["facts"].get("vm_accelerator") or None
    status = {}
    for platform in platforms.PLATFORMS:
        if not platform.placement:
            entry = {"ready": False, "reason": platforms.not_built_reason(platform.label), "skip": False}
        else:
            problems = [
                problem
                for problem in (requirement_problem(req, host, platform.label) for req in platform.requires)
                if problem
            ]
            entry = {
                "ready": not problems,
                "reason": problems[0] if problems else "",
                "skip": "hypervisor" in platform.requires and not accelerator,
            }
        if platform.engine:
            entry["engine"] = platform.engine
        if "kubernetes" in platform.requires:
            node = cluster["node_status"]
            entry["node"] = {key: value for key, value in node.items() if key != "images"} if node else None
            entry["skip"] = entry["skip"] or not cluster.get("kubeconfig_present")
        if "openstack_instance" in platform.requires:
            entry["skip"] = not host["openstack_instances"].get(platform.label)
        if "firecracker" in platform.requires:
            entry["skip"] = bool(firecracker.host_problem(host["firecracker"]))
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
