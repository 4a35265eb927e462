# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The platform registry: every execution platform platbench knows, one entry each.

Everything that depends on which platforms exist reads this table: experiment validation
(``matrix.py``), readiness (``platform_status``), prechecks, the cell plan, ``site.yml``'s
summary, and the report's row order and baseline. Adding a platform starts here (README,
"Adding a platform").
"""

from __future__ import annotations

from collections import namedtuple

# Requirements a host must meet before a platform is ready (checked by platform_status):
#   venv                  the bare-metal workload environment (<prefix>/venv/bin/python)
#   engine                a Docker engine answering on the host
#   image                 the workload image built in that engine
#   hypervisor            KVM or at least QEMU (TCG) on the host; without it the platform is skipped
#   libvirt               libvirtd answering
#   guest_image           the guest image description (platbench.lab.guest_image)
#   guest_container_image the guest image carries the current workload image
#   kubernetes            a kubeconfig, a cluster answering with it, the runner's node Ready with the workload image
#   apptainer             Apptainer installed on the host, at least apptainer.MINIMUM_VERSION
#   sif                   the SIF of the current workload image (platbench.lab.apptainer)
#   guest_sif             the guest image carries Apptainer and the SIF of the current workload image
#   openstack_instance    the campaign's instances of the platform are in the inventory
#                         (platbench.lab.openstack_instances provisioned them)
REQUIREMENTS = (
    "venv",
    "engine",
    "image",
    "hypervisor",
    "libvirt",
    "guest_image",
    "guest_container_image",
    "apptainer",
    "sif",
    "guest_sif",
    "kubernetes",
    "openstack_instance",
)
# How a `gpu` cell's GPUs are handed over when the workload sees the host's own GPUs, numbered as
# the host's driver numbers them (bm's CUDA_VISIBLE_DEVICES, Apptainer's --nv binds them all);
# the other handovers show a container only its own GPUs, renumbered from 0.
HOST_GPU_VIEW = ("CUDA_VISIBLE_DEVICES", "--nv")

Platform = namedtuple(
    "Platform",
    (
        "label",  # the `platform` label of cells and samples
        "description",  # what it is, one line
        "roles",  # the roles that build it, in order
        "placement",  # the platform_run entry point (tasks/<placement>.yml) placing a cell on it; None: not built
        "unbuilt",  # why it is not built in this release (None when placement is set)
        "guest",  # runs inside a QEMU/KVM guest (emulated under TCG where the host has no usable KVM)
        "container",  # the workload runs in a Docker container (the workload image)
        "cpu_pinning",  # how `pin` gives the scenario its CPUs
        "cpu_vanilla",  # what `vnl` does
        "gpu_handover",  # how a `gpu` cell gets its GPUs
        "baseline",  # the platform every other one is normalized to in the report
        "requires",  # REQUIREMENTS this host must meet for the platform to be ready
        "remote",  # the workload runs on an instance the campaign provisioned, not on the runner host
    ),
)

NOT_BUILT = "not built by this release of platbench"

PLATFORMS = (
    Platform(
        "bm",
        "the host itself: a process from the bare-metal venv",
        ("platbench.lab.host_prep", "platbench.lab.workload_env"),
        "run_bm",
        None,
        guest=False,
        container=False,
        cpu_pinning="taskset",
        cpu_vanilla="none (the host scheduler)",
        gpu_handover="CUDA_VISIBLE_DEVICES",
        baseline=True,
        requires=("venv",),
        remote=False,
    ),
    Platform(
        "cn",
        "a Docker container on the host",
        ("platbench.lab.docker", "platbench.lab.workload_image"),
        "run_cn",
        None,
        guest=False,
        container=True,
        cpu_pinning="cpuset-cpus",
        cpu_vanilla="--cpus quota",
        gpu_handover="device_requests",
        baseline=False,
        requires=("engine", "image"),
        remote=False,
    ),
    Platform(
        "vm",
        "a throwaway libvirt guest per cell; the workload runs over SSH",
        ("platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "run_vm",
        None,
        guest=True,
        container=False,
        cpu_pinning="vcpupin",
        cpu_vanilla="none (the host scheduler)",
        gpu_handover="hostdev",
        baseline=False,
        requires=("hypervisor", "libvirt", "guest_image"),
        remote=False,
    ),
    Platform(
        "vmcn",
        "the guest's Docker engine running the workload image",
        ("platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "run_vmcn",
        None,
        guest=True,
        container=True,
        cpu_pinning="vcpupin + cpuset-cpus",
        cpu_vanilla="--cpus quota in the guest",
        gpu_handover="hostdev + device_requests",
        baseline=False,
        requires=("hypervisor", "libvirt", "guest_image", "guest_container_image"),
        remote=False,
    ),
    Platform(
        "vmsg",
        "Apptainer in a throwaway libvirt guest (the SIF on a read-only disk)",
        ("platbench.lab.apptainer", "platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "run_vmsg",
        None,
        guest=True,
        container=True,
        cpu_pinning="vcpupin + taskset",
        cpu_vanilla="--cpus quota in the guest",
        gpu_handover="hostdev + --nv",
        baseline=False,
        requires=("hypervisor", "libvirt", "guest_image", "guest_sif"),
        remote=False,
    ),
    Platform(
        "sg",
        "Apptainer on the host: the workload image as a SIF",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.apptainer"),
        "run_sg",
        None,
        guest=False,
        container=True,
        cpu_pinning="taskset",
        cpu_vanilla="--cpus quota",
        gpu_handover="--nv",
        baseline=False,
        requires=("apptainer", "sif"),
        remote=False,
    ),
    Platform(
        "k8s",
        "a Kubernetes Job pinned to the runner's node (kubeadm, flannel, NVIDIA device plugin)",
        ("platbench.lab.kubernetes",),
        "run_k8s",
        None,
        guest=False,
        container=True,
        cpu_pinning="static CPU manager, Guaranteed QoS",
        cpu_vanilla="CPU limit",
        gpu_handover="nvidia.com/gpu + RuntimeClass nvidia",
        baseline=False,
        requires=("kubernetes",),
        remote=False,
    ),
    Platform(
        "ironic",
        "an OpenStack bare-metal node the campaign deployed; the workload runs over SSH as on bm",
        ("platbench.lab.openstack_instances", "platbench.lab.host_prep", "platbench.lab.workload_env"),
        "run_ironic",
        None,
        guest=False,
        container=False,
        cpu_pinning="taskset",
        cpu_vanilla="none (the node's scheduler)",
        gpu_handover="CUDA_VISIBLE_DEVICES",
        baseline=False,
        requires=("openstack_instance",),
        remote=True,
    ),
    Platform(
        "nova",
        "an OpenStack Nova server per scenario; the workload runs over SSH",
        ("platbench.lab.openstack_instances", "platbench.lab.host_prep", "platbench.lab.workload_env"),
        "run_nova",
        None,
        guest=True,
        container=False,
        cpu_pinning="flavor hw:cpu_policy=dedicated",
        cpu_vanilla="shared vCPUs",
        gpu_handover="PCI alias",
        baseline=False,
        requires=("openstack_instance",),
        remote=True,
    ),
    Platform(
        "magnum",
        "a Kubernetes Job on an OpenStack Magnum cluster per scenario",
        ("platbench.lab.openstack_instances",),
        "run_magnum",
        None,
        guest=True,
        container=True,
        cpu_pinning="flavor hw:cpu_policy=dedicated + Guaranteed QoS",
        cpu_vanilla="CPU limit",
        gpu_handover="PCI alias + nvidia.com/gpu",
        baseline=False,
        requires=("openstack_instance",),
        remote=True,
    ),
)

LABELS = tuple(platform.label for platform in PLATFORMS)
BY_LABEL = {platform.label: platform for platform in PLATFORMS}
BASELINE = next(platform.label for platform in PLATFORMS if platform.baseline)
BUILT = tuple(platform.label for platform in PLATFORMS if platform.placement)
GUESTS = tuple(platform.label for platform in PLATFORMS if platform.guest)
BUILT_GUESTS = tuple(label for label in GUESTS if label in BUILT)
REMOTE = tuple(platform.label for platform in PLATFORMS if platform.remote)


class UnknownPlatform(ValueError):
    """A label that is no platform of the registry; the message lists the known ones."""


def get(label, where="platform"):
    """The registry entry of ``label``; ``where`` names the setting that gave it, for the error."""
    if label not in BY_LABEL:
        raise UnknownPlatform(f"{where}: unknown platform {label!r}; known: {', '.join(LABELS)}")
    return BY_LABEL[label]


def check_labels(labels, where="platforms"):
    """``labels`` as a list, or UnknownPlatform naming every label that is not in the registry."""
    if isinstance(labels, str) or not isinstance(labels, (list, tuple)):
        raise UnknownPlatform(f"{where}: must be a list of platform labels ({', '.join(LABELS)}), got {labels!r}")
    unknown = [label for label in labels if label not in BY_LABEL]
    if unknown:
        raise UnknownPlatform(
            f"{where}: unknown platform(s) {', '.join(map(repr, unknown))}; known: {', '.join(LABELS)}"
        )
    return list(labels)


def rank(label):
    """Report order: the registry's order, unknown labels last."""
    return LABELS.index(label) if label in BY_LABEL else len(LABELS)


def not_built_reason(label):
    """Why the platform cannot run in this release, or None when it can."""
    platform = get(label)
    if platform.placement:
        return None
    return f"{NOT_BUILT} ({platform.unbuilt}; it places workloads on: {', '.join(BUILT)})"


def as_dict(platform):
    """A registry entry as plain data (for Ansible)."""
    entry = platform._asdict()
    entry["roles"] = list(platform.roles)
    entry["requires"] = list(platform.requires)
    return entry


def in_words(labels, joiner=" and "):
    """'vm and vmcn'"""
    labels = list(labels)
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + joiner + labels[-1] if labels else "none"
