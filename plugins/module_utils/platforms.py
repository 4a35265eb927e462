# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The platform registry: every execution platform platbench knows, one entry each.

Everything that depends on which platforms exist reads this table: experiment validation
(``matrix.py``), readiness (``platform_status``), prechecks, the cell plan, ``site.yml``'s
summary, and the report's row order and baseline. Adding a platform starts here (README,
"Adding a platform").
"""

from __future__ import annotations

import re
from collections import namedtuple

# Requirements a host must meet before a platform is ready (checked by platform_status):
#   venv                  the bare-metal workload environment (<prefix>/venv/bin/python)
#   engine                the platform's container engine (its `engine`) answering on the host
#   image                 the current workload image in that engine (Podman: the same image id as Docker's)
#   runtime               the platform's OCI runtime (its `runtime`) registered with its engine
#   hypervisor            KVM or at least QEMU (TCG) on the host; without it the platform is skipped
#   libvirt               libvirtd answering
#   guest_image           the guest image description (platbench.lab.guest_image)
#   guest_container_image the guest image carries the current workload image
#   kubernetes            a kubeconfig, a cluster answering with it, the runner's node Ready with the workload image
#   apptainer             Apptainer installed on the host, at least apptainer.MINIMUM_VERSION
#   sif                   the SIF of the current workload image (platbench.lab.apptainer)
#   guest_sif             the guest image carries Apptainer and the SIF of the current workload image
#   lxc                   lxc-execute and the LXC container root of the current workload image (platbench.lab.lxc)
#   bundle_bases          runc and the bundle base of the platform's confinement, made from Docker's configuration of
#                         the current workload image (platbench.lab.oci_bundle)
#   firecracker           a usable /dev/kvm and the Firecracker and jailer binaries (platbench.lab.firecracker)
#   openstack_instance    the campaign's instances of the platform are in the inventory
#                         (platbench.lab.openstack_instances provisioned them)
REQUIREMENTS = (
    "venv",
    "engine",
    "image",
    "runtime",
    "hypervisor",
    "libvirt",
    "guest_image",
    "guest_container_image",
    "apptainer",
    "sif",
    "guest_sif",
    "kubernetes",
    "openstack_instance",
    "firecracker",
    "lxc",
    "bundle_bases",
)
# The kinds of placement (how a cell's workload is put on its platform) are declared, each once, by its module
# plugins/plugin_utils/placements/<kind>/ (KIND = Kind(...): its plan, results, task files, teardown and
# capabilities); that package refuses a platform here whose kind no folder declares.
# How a process kind starts the workload: the workload environment's python, or `apptainer exec` of the SIF.
LAUNCHERS = ("venv", "apptainer")
# The container engines of the container kind.
ENGINES = ("docker", "podman")
# Whose kernel the workload runs under (a fact of the platform's kind, which its declaration states too):
#   host         the runner host's own (a process, a chroot, a container, LXC, a pod of the runner's node)
#   libvirt      a libvirt guest of the runner host
#   firecracker  a Firecracker micro VM of the runner host
#   cloud        an instance the campaign provisioned in the cloud (not the runner host at all)
MACHINES = ("host", "libvirt", "firecracker", "cloud")
# Whose network namespace the workload is in: `host`, the machine's own (its instances share one loopback), or
# `own`, one of its own (a container's, a pod's, a guest's NIC).
NETWORKS = ("host", "own")
# The OCI runtimes a container platform may ask its engine for, besides the engine's default (runc):
#   runsc   gVisor: a user-space kernel between the workload and the host (platbench.lab.docker registers it)
RUNTIMES = ("runsc",)
# What confines an OCI bundle run by runc with no engine (a kind declared `confined`, module_utils/oci_bundle.py),
# besides Docker's namespaces, mounts and masked paths:
#   none    nothing more: no seccomp filter, every capability, no AppArmor profile
#   engine  Docker's seccomp profile, capability set and AppArmor profile, as it applies them to a container
CONFINEMENTS = ("none", "engine")
# What a `gpu` cell's workload sees of its GPUs:
#   host        the host's GPUs, numbered as the host's driver numbers them, checked by their host bus ids
#   own         only its own, numbered from 0, checked by their host bus ids
#   passthrough passed through into a guest: numbered from 0, bus ids the guest's own (only counted)
#   scheduled   a scheduler (device plugin, flavor) chooses them: only how many is known in advance
#   none        the platform hands over no GPU (Firecracker has no PCI passthrough): `gpu` cells cannot be placed
GPU_VIEWS = ("host", "own", "passthrough", "scheduled", "none")
# How `pin` gives the scenario its CPUs (vcpu_affinity: each vCPU thread's sched_setaffinity, in a jailer cpuset).
PINNINGS = ("taskset", "cpuset", "vcpupin", "cpu_manager", "flavor", "vcpu_affinity", "lxc_cgroup")
# Where micro_net's network peer runs, on platforms that can host one: a second process on the loopback,
# or a second container on a bridge network of the cell's own (plugins/plugin_utils/cells/peer.py).
PEERS = ("loopback", "bridge")
# What a cloud instance is, for the plan that provisions it (plugins/plugin_utils/openstack/openstack_plan.py).
INSTANCES = ("baremetal_node", "server", "coe_cluster")
# The inventory group every cloud instance whose workload runs as a venv process joins (besides its
# platform's group), so that one play installs the workload environment on all of them.
PROCESS_INSTANCES_GROUP = "platbench_process_instances"

_FIELDS = (
    "label",  # the `platform` label of cells and samples
    "description",  # what it is, one line
    "roles",  # the roles that build it, in order
    "host_group",  # the inventory group whose hosts build and run it (site.yml's play); None: a cloud instance
    "kind",  # how a cell is placed on it: a kind declared in plugins/plugin_utils/placements/
    "machine",  # MACHINES: whose kernel the workload runs under (as its kind declares)
    "network",  # NETWORKS: whose network namespace the workload is in (as its kind declares)
    "inner",  # a kind that holds another (a guest, an instance): the kind the workload runs as inside; else None
    "launcher",  # a process (outer or inner): LAUNCHERS; else None
    "engine",  # a container (outer or inner): ENGINES; else None
    "runtime",  # a container: RUNTIMES, the OCI runtime its engine runs it with; None for the engine's default
    "confinement",  # an OCI bundle run by runc (its kind declares `confined`): CONFINEMENTS; else None
    "gpu_view",  # GPU_VIEWS: what a `gpu` cell's workload sees of its GPUs
    "pinning",  # PINNINGS: how `pin` gives the scenario its CPUs
    "peer",  # PEERS: where micro_net's peer runs, or None (the platform cannot host one)
    "requires",  # REQUIREMENTS this host must meet for the platform to be ready
    "instance",  # cloud_instance: INSTANCES, what the cloud provisions; else None
    "baseline",  # the platform every other one is normalized to in the report
    "unbuilt",  # why this release does not build it, or None
    # platbench explain's ladder (platbench/explain/ladder.py): the platform this one is measured against, one
    # mechanism below it (None: no rung below it runs on the host, a cloud instance; bm: the ladder's foot).
    "rung_below",
    # Prose for people (README, `platbench.lab.platforms`); nothing compares it.
    "cpu_pinning",  # how `pin` gives the scenario its CPUs
    "cpu_vanilla",  # what `vnl` does
    "gpu_handover",  # how a `gpu` cell gets its GPUs
    "mechanism",  # what the platform adds to its rung_below, in a few words (explain's attribution line)
    "adds",  # the same in a sentence
    "cannot_isolate",  # what its step cannot tell apart
)


class Platform(namedtuple("Platform", _FIELDS)):
    """One registry entry; what follows from its fields is a property, never a second field."""

    __slots__ = ()

    @property
    def placement(self):
        """The kind's placement task file (roles/platform_run/tasks/<kind>.yml), or None when not built."""
        return None if self.unbuilt else self.kind

    @property
    def remote(self):
        """The workload runs on an instance the campaign provisioned, not on the runner host."""
        return self.machine == "cloud"

    @property
    def guest(self):
        """The workload runs in a libvirt guest of the runner host (emulated under TCG without KVM)."""
        return self.machine == "libvirt"

    @property
    def workload_kind(self):
        """The kind that runs the workload itself: the inner kind of a guest or an instance."""
        return self.inner or self.kind

    @property
    def group(self):
        """cloud_instance: the inventory group of the campaign's instances (add_host puts them there)."""
        return f"platbench_{self.label}" if self.remote else None

    @property
    def failed_group(self):
        """cloud_instance: the inventory group of the instances that did not come up, with the reason."""
        return f"platbench_{self.label}_failed" if self.remote else None

    @property
    def data_view(self):
        """How the workload reads the runner host's data files (a generated dataset, a ``params.data_dir``): ``host``
        (the directory at its own path: a process, or a bind or hostPath mount on the runner), ``disk`` (a read-only
        disk made of it, mounted in the guest: ``module_utils/data_disk.py``), or None (an instance the campaign
        provisioned holds no copy of them)."""
        if self.remote:
            return None
        return "disk" if self.machine in ("libvirt", "firecracker") else "host"

    @property
    def gpu_pool(self):
        """Which of the runner host's GPUs a `gpu` cell draws from: `host` (kept by the host's driver; a
        device plugin on the runner's node chooses among them too), `guests` (bound to vfio-pci, passed
        through), or None (the instance's flavor chooses: not the runner's GPUs at all)."""
        if self.remote or self.gpu_view == "none":
            return None
        return "guests" if self.gpu_view == "passthrough" else "host"


NOT_BUILT = "not built by this release of platbench"


def _entry(label, description, roles, kind, **fields):
    defaults = {
        "machine": "host",
        "network": "own",
        "inner": None,
        "launcher": None,
        "engine": None,
        "runtime": None,
        "confinement": None,
        "peer": None,
        "instance": None,
    }
    defaults["host_group"] = None  # the campaign provisions a cloud instance (its group: add_host)
    defaults.update(baseline=False, unbuilt=None, rung_below=None, mechanism=None, adds=None, cannot_isolate=None)
    return Platform(label=label, description=description, roles=tuple(roles), kind=kind, **{**defaults, **fields})


PLATFORMS = (
    _entry(
        "bm",
        "the host itself: a process from the bare-metal venv",
        ("platbench.lab.host_prep", "platbench.lab.workload_env"),
        "process",
        network="host",
        host_group="platbench_hosts",
        launcher="venv",
        gpu_view="host",
        pinning="taskset",
        peer="loopback",
        requires=("venv",),
        baseline=True,
        cpu_pinning="taskset",
        cpu_vanilla="none (the host scheduler)",
        gpu_handover="CUDA_VISIBLE_DEVICES",
    ),
    _entry(
        "cr",
        "the workload image's root run by chroot on the host: the same bytes as cn, no namespaces, seccomp or engine",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.lxc"),
        "chroot",
        network="host",
        host_group="platbench_container_hosts",
        gpu_view="none",
        pinning="taskset",
        requires=("lxc",),
        cpu_pinning="taskset",
        cpu_vanilla="none (the host scheduler)",
        gpu_handover="none (the root has no driver libraries: gpu cells refused)",
        rung_below="bm",
        mechanism="image root",
        adds=(
            "the image's own Debian libraries, Python build and venv (chroot into the root exported from the image, "
            "taskset, a cgroup of its own as bm's): the same bytes as cn, nothing else of a container"
        ),
        cannot_isolate="which library of the image costs it (the root as a whole against the host's)",
    ),
    _entry(
        "ns",
        "the image's root as Docker's OCI bundle run by runc: its namespaces, no seccomp filter, every capability",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.lxc", "platbench.lab.oci_bundle"),
        "oci_bundle",
        host_group="platbench_container_hosts",
        confinement="none",
        gpu_view="none",
        pinning="cpuset",
        requires=("lxc", "bundle_bases"),
        cpu_pinning="the bundle's cpuset (runc)",
        cpu_vanilla="the bundle's CPU quota (runc)",
        gpu_handover="none (the root has no driver libraries: gpu cells refused)",
        rung_below="cr",
        mechanism="namespaces",
        adds=(
            "pid, mount, uts, ipc and network namespaces, pivot_root, Docker's mounts and masked paths, runc's own "
            "cgroup and cpuset in place of taskset: Docker's OCI bundle run by runc, with no seccomp filter and every"
            " capability"
        ),
        cannot_isolate="the namespaces one by one: runc makes them together",
    ),
    _entry(
        "sc",
        "the same bundle run by runc with Docker's seccomp profile and capability set: cn without dockerd and its shim",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.lxc", "platbench.lab.oci_bundle"),
        "oci_bundle",
        host_group="platbench_container_hosts",
        confinement="engine",
        gpu_view="none",
        pinning="cpuset",
        requires=("lxc", "bundle_bases"),
        cpu_pinning="the bundle's cpuset (runc)",
        cpu_vanilla="the bundle's CPU quota (runc)",
        gpu_handover="none (the root has no driver libraries: gpu cells refused)",
        rung_below="ns",
        mechanism="seccomp and capabilities",
        adds=(
            "Docker's default seccomp filter on every system call and its capability set (and its AppArmor profile "
            "where the host has AppArmor): the same bundle, confined as Docker confines it"
        ),
        cannot_isolate="the filter from the capabilities: Docker applies both",
    ),
    _entry(
        "cn",
        "a Docker container on the host",
        ("platbench.lab.docker", "platbench.lab.workload_image"),
        "container",
        host_group="platbench_container_hosts",
        engine="docker",
        gpu_view="own",
        pinning="cpuset",
        peer="bridge",
        requires=("engine", "image"),
        cpu_pinning="cpuset-cpus",
        cpu_vanilla="--cpus quota",
        gpu_handover="device_requests",
        rung_below="sc",
        mechanism="engine",
        adds=(
            "dockerd and containerd-shim starting the container, the image's overlay root in place of the exported "
            "root, the log driver taking its output"
        ),
        cannot_isolate="the overlay root from the engine's processes",
    ),
    _entry(
        "pd",
        "a rootful Podman container (runc) on the host, the same image as cn",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.podman"),
        "container",
        host_group="platbench_container_hosts",
        engine="podman",
        gpu_view="own",
        pinning="cpuset",
        requires=("engine", "image"),
        cpu_pinning="cpuset-cpus",
        cpu_vanilla="--cpus quota",
        gpu_handover="CDI nvidia.com/gpu",
        rung_below="sc",
        mechanism="engine (Podman)",
        adds=("podman and conmon starting the container with Podman's own seccomp profile, the overlay root"),
        cannot_isolate="Podman's profile from its engine",
    ),
    _entry(
        "gv",
        "a Docker container sandboxed by gVisor (runsc): its system calls served by a user-space kernel",
        ("platbench.lab.docker", "platbench.lab.workload_image"),
        "container",
        host_group="platbench_container_hosts",
        engine="docker",
        runtime="runsc",
        gpu_view="none",
        pinning="cpuset",
        requires=("engine", "image", "runtime"),
        cpu_pinning="cpuset-cpus (the sandbox's cgroup)",
        cpu_vanilla="--cpus quota",
        gpu_handover="none (Debian 12's runsc has no nvproxy)",
        rung_below="cn",
        mechanism="gVisor runtime",
        adds=(
            "runsc in place of runc: the system calls served by gVisor's user-space kernel (its platform: ptrace or "
            "systrap, in the cells' record)"
        ),
        cannot_isolate="gVisor's platform from its kernel: one runtime setting",
    ),
    _entry(
        "lx",
        "an LXC system container per cell (lxc-execute) of the workload image's root; the cell's cgroup keys pin it",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.lxc"),
        "lxc",
        host_group="platbench_container_hosts",
        gpu_view="none",
        pinning="lxc_cgroup",
        requires=("lxc",),
        cpu_pinning="lxc.cgroup cpuset.cpus",
        cpu_vanilla="lxc.cgroup CPU quota",
        gpu_handover="none (no device passed in: gpu cells refused)",
        rung_below="ns",
        mechanism="LXC",
        adds=("lxc-execute in place of runc: LXC's init, its cgroup keys, mounts and default confinement"),
        cannot_isolate="LXC's confinement from its start-up",
    ),
    _entry(
        "vm",
        "a throwaway libvirt guest per cell; the workload runs over SSH",
        ("platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "guest",
        machine="libvirt",
        host_group="platbench_vm_hosts",
        inner="process",
        launcher="venv",
        gpu_view="passthrough",
        pinning="vcpupin",
        requires=("hypervisor", "libvirt", "guest_image"),
        cpu_pinning="vcpupin",
        cpu_vanilla="none (the host scheduler)",
        gpu_handover="hostdev",
        rung_below="bm",
        mechanism="guest",
        adds=("a libvirt guest: its own kernel, vCPUs pinned one to one, virtio devices (KVM; emulated under TCG)"),
        cannot_isolate="pinning, huge pages and the virtio paths apart: the guest's settings are one rung here",
    ),
    _entry(
        "vmcn",
        "the guest's Docker engine running the workload image",
        ("platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "guest",
        machine="libvirt",
        host_group="platbench_vm_hosts",
        inner="container",
        engine="docker",
        gpu_view="passthrough",
        pinning="vcpupin",
        requires=("hypervisor", "libvirt", "guest_image", "guest_container_image"),
        cpu_pinning="vcpupin + cpuset-cpus",
        cpu_vanilla="--cpus quota in the guest",
        gpu_handover="hostdev + device_requests",
        rung_below="vm",
        mechanism="engine in the guest",
        adds=("the guest's Docker engine running the image"),
        cannot_isolate="the engine from the guest's kernel: the guest is below it",
    ),
    _entry(
        "vmsg",
        "Apptainer in a throwaway libvirt guest (the SIF on a read-only disk)",
        ("platbench.lab.apptainer", "platbench.lab.kvm_host", "platbench.lab.guest_image", "platbench.lab.vm"),
        "guest",
        machine="libvirt",
        host_group="platbench_vm_hosts",
        inner="process",
        launcher="apptainer",
        gpu_view="passthrough",
        pinning="vcpupin",
        requires=("hypervisor", "libvirt", "guest_image", "guest_sif"),
        cpu_pinning="vcpupin + taskset",
        cpu_vanilla="--cpus quota in the guest",
        gpu_handover="hostdev + --nv",
        rung_below="vm",
        mechanism="Apptainer in the guest",
        adds=("Apptainer in the guest running the SIF from a read-only disk"),
        cannot_isolate="the SIF's disk from Apptainer's start-up",
    ),
    _entry(
        "mvm",
        "a throwaway Firecracker micro-VM per cell, jailed, booted from the guest image; the workload over SSH",
        ("platbench.lab.firecracker", "platbench.lab.guest_image"),
        "micro_vm",
        machine="firecracker",
        host_group="platbench_mvm_hosts",
        inner="process",
        launcher="venv",
        gpu_view="none",
        pinning="vcpu_affinity",
        requires=("firecracker", "guest_image"),
        cpu_pinning="jailer cpuset + fc_vcpu thread affinity",
        cpu_vanilla="jailer cgroup CPU quota",
        gpu_handover="none (no PCI passthrough)",
        rung_below="bm",
        mechanism="micro-VM",
        adds=("a Firecracker micro-VM under the jailer: its kernel, vCPU threads pinned, virtio-mmio devices"),
        cannot_isolate="the jailer from the micro-VM",
    ),
    _entry(
        "sg",
        "Apptainer on the host: the workload image as a SIF",
        ("platbench.lab.docker", "platbench.lab.workload_image", "platbench.lab.apptainer"),
        "process",
        network="host",
        launcher="apptainer",
        host_group="platbench_apptainer_hosts",
        gpu_view="host",
        pinning="taskset",
        requires=("apptainer", "sif"),
        cpu_pinning="taskset",
        cpu_vanilla="--cpus quota",
        gpu_handover="--nv",
        rung_below="cr",
        mechanism="Apptainer",
        adds=("apptainer exec of the SIF: a squashfs root, Apptainer's mount namespace and starter, --containall"),
        cannot_isolate="the squashfs root from the starter",
    ),
    _entry(
        "k8s",
        "a Kubernetes Job pinned to the runner's node (kubeadm, flannel, NVIDIA device plugin)",
        ("platbench.lab.kubernetes",),
        "k8s_job",
        host_group="platbench_kubernetes_workers",
        gpu_view="scheduled",
        pinning="cpu_manager",
        requires=("kubernetes",),
        cpu_pinning="static CPU manager, Guaranteed QoS",
        cpu_vanilla="CPU limit",
        gpu_handover="nvidia.com/gpu + RuntimeClass nvidia",
        rung_below="cn",
        mechanism="Kubernetes",
        adds=("kubelet and containerd's CRI in place of dockerd, the static CPU manager, the pod's network"),
        cannot_isolate="the CPU manager from the runtime",
    ),
    _entry(
        "ironic",
        "an OpenStack bare-metal node the campaign deployed; the workload runs over SSH as on bm",
        ("platbench.lab.openstack_instances", "platbench.lab.host_prep", "platbench.lab.workload_env"),
        "cloud_instance",
        machine="cloud",
        inner="process",
        launcher="venv",
        instance="baremetal_node",
        gpu_view="scheduled",
        pinning="taskset",
        requires=("openstack_instance",),
        cpu_pinning="taskset",
        cpu_vanilla="none (the node's scheduler)",
        gpu_handover="CUDA_VISIBLE_DEVICES",
    ),
    _entry(
        "nova",
        "an OpenStack Nova server per scenario; the workload runs over SSH",
        ("platbench.lab.openstack_instances", "platbench.lab.host_prep", "platbench.lab.workload_env"),
        "cloud_instance",
        machine="cloud",
        inner="process",
        launcher="venv",
        instance="server",
        gpu_view="scheduled",
        pinning="flavor",
        requires=("openstack_instance",),
        cpu_pinning="flavor hw:cpu_policy=dedicated",
        cpu_vanilla="shared vCPUs",
        gpu_handover="PCI alias",
    ),
    _entry(
        "magnum",
        "a Kubernetes Job on an OpenStack Magnum cluster per scenario",
        ("platbench.lab.openstack_instances",),
        "cloud_instance",
        machine="cloud",
        inner="k8s_job",
        instance="coe_cluster",
        gpu_view="scheduled",
        pinning="flavor",
        requires=("openstack_instance",),
        cpu_pinning="flavor hw:cpu_policy=dedicated + Guaranteed QoS",
        cpu_vanilla="CPU limit",
        gpu_handover="PCI alias + nvidia.com/gpu",
    ),
)

LABELS = tuple(platform.label for platform in PLATFORMS)
BY_LABEL = {platform.label: platform for platform in PLATFORMS}
BASELINE = next(platform.label for platform in PLATFORMS if platform.baseline)
BUILT = tuple(platform.label for platform in PLATFORMS if platform.placement)
GUESTS = tuple(platform.label for platform in PLATFORMS if platform.guest)
BUILT_GUESTS = tuple(label for label in GUESTS if label in BUILT)
REMOTE = tuple(platform.label for platform in PLATFORMS if platform.remote)


def labels_where(**fields):
    """The labels whose entries have every given field value (``kind="container"``, ``remote=True``, ...)."""
    return tuple(p.label for p in PLATFORMS if all(getattr(p, name) == value for name, value in fields.items()))


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


PROPERTIES = ("placement", "remote", "guest", "workload_kind", "group", "failed_group", "gpu_pool", "data_view")


def as_dict(platform):
    """A registry entry as plain data (for Ansible), its properties included."""
    entry = platform._asdict()
    entry["roles"] = list(platform.roles)
    entry["requires"] = list(platform.requires)
    entry.update({name: getattr(platform, name) for name in PROPERTIES})
    return entry


def entry_problems(platform):
    """What is wrong with one registry entry (typed fields out of their sets, a kind without what it needs); its kind
    and inner kind are checked against their declarations by plugins/plugin_utils/placements (registry_problems)."""
    problems = []
    enums = {
        "gpu_view": GPU_VIEWS,
        "pinning": PINNINGS,
        "peer": PEERS + (None,),
        "launcher": LAUNCHERS + (None,),
        "engine": ENGINES + (None,),
        "runtime": RUNTIMES + (None,),
        "confinement": CONFINEMENTS + (None,),
        "instance": INSTANCES + (None,),
        "machine": MACHINES,
        "network": NETWORKS,
    }
    for field, allowed in enums.items():
        if getattr(platform, field) not in allowed:
            problems.append(f"{field} {getattr(platform, field)!r} is not one of {allowed}")
    # Whether it names a launcher or an engine follows from its workload's kind: placements.registry_problems.
    if platform.runtime is not None and (platform.engine != "docker" or "runtime" not in platform.requires):
        problems.append("a runtime is set only for a Docker container, which then requires it")
    if (platform.instance is None) == platform.remote:
        problems.append("an instance is set exactly for a platform whose machine is a cloud instance")
    if (platform.host_group is None) != platform.remote:
        problems.append("a host_group (an inventory group) is set exactly for a platform that is not a cloud instance")
    if platform.rung_below is not None and (platform.rung_below not in LABELS or not platform.mechanism):
        problems.append(
            f"rung_below {platform.rung_below!r} must be a platform of the registry, with the mechanism it adds"
        )
    unknown = set(platform.requires) - set(REQUIREMENTS)
    if unknown:
        problems.append(f"unknown requirements {sorted(unknown)}")
    return [f"platform {platform.label}: {problem}" for problem in problems]


def in_words(labels, joiner=" and "):
    """'vm and vmcn'"""
    labels = list(labels)
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + joiner + labels[-1] if labels else "none"


def workload_process_pattern(prefix):
    """The ``pgrep``/``pkill --full`` pattern of a workload run by the environment under ``prefix`` (the ``venv``
    requirement's ``<prefix>/venv/bin/python -m workloads.NAME``): the precheck's leftovers, a guest's stop."""
    return "^" + re.escape(f"{str(prefix).rstrip('/')}/venv/bin/python") + " -m workloads[.]"
