# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The micro_vm kind: a throwaway Firecracker micro-VM per cell (platbench.lab.firecracker_vm), started by the
jailer, booted from the guest image's Firecracker variant (uncompressed kernel, raw root file system), the workload
inside it as the registry's ``inner`` kind (a process over SSH, on a tap of its own).

``pin``: the jailer's cpuset holds the plan's CPUs and each ``fc_vcpu N`` thread is pinned to the plan's Nth CPU;
``vnl``: a CPU quota on the jailer's cgroup. No GPU goes in (Firecracker passes no PCI device through). The host's
data files go in as the same read-only disk the libvirt guests get, mounted by its label.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import data_disk, firecracker
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    GUEST_PREFIX,
    Kind,
    Observed,
    PlacementError,
    kind_file,
)

# The jail's names of the read-only drives (IN_JAIL holds the kernel's, the initrd's and the root's).
WORKLOADS_DRIVE = "workloads.img"
DATA_DRIVE = "data.img"


def plan(ctx, plan):
    """plan["micro_vm"] (arguments of platbench.lab.firecracker_vm) and the process section, run in the VM."""
    if ctx.gpus or ctx.gpu_count:
        raise PlacementError(
            f"{ctx.where}: {ctx.platform.label} cannot run a gpu cell: Firecracker passes no GPU through; "
            f"leave {ctx.platform.label} out of the experiment's gpu cells"
        )
    image = ctx.opts["guest_image"] or {}
    variant = image.get("firecracker") or {}
    if not variant.get("kernel") or not variant.get("rootfs"):
        raise PlacementError(
            f"{ctx.where}: the guest image has no Firecracker kernel and root: {firecracker.IMAGE_FIX}"
        )
    try:
        data = data_disk.guest_disk(ctx.host_data_dir, ctx.opts["datasets_dir"]) if ctx.host_data_dir else None
    except data_disk.DataDiskError as exc:
        raise PlacementError(f"{ctx.where}: params.data_dir: {exc}") from None
    memory = int(ctx.opts["vm_memory_mb"])
    network = firecracker.guest_network(ctx.key)
    # Copied into the jail (the jailed Firecracker sees nothing else): the root writable, once per cell.
    files = [
        {"source": variant["kernel"], "name": firecracker.IN_JAIL["kernel"], "writable": False},
        {"source": variant["rootfs"], "name": firecracker.IN_JAIL["rootfs"], "writable": True},
    ]
    if variant.get("initrd"):
        files.append({"source": variant["initrd"], "name": firecracker.IN_JAIL["initrd"], "writable": False})
    read_only = []
    if image.get("workloads_disk"):
        files.append({"source": image["workloads_disk"], "name": WORKLOADS_DRIVE, "writable": False})
        read_only.append(("workloads", WORKLOADS_DRIVE))
    if data:
        files.append({"source": data["path"], "name": DATA_DRIVE, "writable": False})
        read_only.append(("data", DATA_DRIVE))
    try:
        config = firecracker.vm_config(
            ctx.threads, memory, network, initrd=bool(variant.get("initrd")), read_only_drives=read_only
        )
        vm_id = firecracker.jail_id(ctx.name)
    except firecracker.FirecrackerError as exc:
        raise PlacementError(f"{ctx.where}: {exc}") from None
    numa = plan.get("numa_node")
    plan["micro_vm"] = {
        "name": ctx.name,
        "id": vm_id,
        "config": config,
        "files": files,
        "network": network,
        "cpus": list(ctx.cpus),
        "cgroups": firecracker.cgroup_settings(ctx.cpus, ctx.quota, [numa] if numa not in (None, "") else ()),
        "ssh_key": image.get("ssh_key"),
        "host_key": image.get("host_key"),
        "data_disk": {name: data[name] for name in ("source", "path", "label")} if data else None,
        "data_mount": data_disk.GUEST_DATA_DIR if data else None,
        "inner": ctx.platform.inner,
        "inner_task_file": process.KIND.task_file,
    }
    plan["runtime"].update(
        guest_domain=ctx.name,
        guest_vcpus=ctx.threads,
        vcpu_pins_requested=ctx.cpuset or None,
        guest_memory_mb=memory,
        guest_data_disk=data["path"] if data else None,
        micro_vm_address=network["guest_address"],
    )
    # The vCPU threads are pinned on the host; in the VM the workload takes every vCPU.
    machine = process.Machine(host=ctx.name, prefix=GUEST_PREFIX, over_ssh=True, become=False, scratch=[ctx.cache])
    process.plan(ctx, plan, machine)


def observed(plan, results):
    """The process's outcome, and how the micro-VM ran: its Firecracker pid, its vCPU threads' pins, its boot time."""
    inner = process.observed(plan, results)
    vm = results.get("micro_vm") or {}
    if vm:
        inner.runtime.update(
            accelerator="kvm",
            guest_boot_to_ready_s=float(vm["boot_to_ready_s"]) if vm.get("boot_to_ready_s") else None,
            firecracker_version=vm.get("firecracker_version"),
            vcpu_thread_kind="fc_vcpu",
            vcpu_affinity=vm.get("vcpu_affinity"),
        )
    return Observed(output=inner.output, runtime=inner.runtime, error=inner.error)


KIND = Kind(
    name="micro_vm",
    machine="firecracker",
    summary="a throwaway Firecracker micro-VM per cell, jailed, the workload inside it as a process",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"micro_vm": "platform_run_micro_vm"},
    teardown=(kind_file(__file__, "teardown.yml"), "fence", "data_disks"),
    inner=("process",),
    fenced=True,
)
