# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The guest kind: a throwaway libvirt guest per cell (platbench.lab.vm), the workload inside it as the
registry's ``inner`` kind (a process over SSH, or a container in the guest's own engine).

``pin`` pins each vCPU (and the emulator threads) one to one to a host CPU; inside, the workload then
takes every vCPU. GPUs go in by PCI passthrough and are numbered from 0 in the guest. The host's data files (a
generated dataset, a ``params.data_dir``) go in as a read-only disk made of them, which the guest mounts by its
label at ``data_disk.GUEST_DATA_DIR``: the workload's --data-dir, bound read-only into a container or Apptainer.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import apptainer, data_disk
from ansible_collections.platbench.lab.plugins.plugin_utils.cells import sizing
from ansible_collections.platbench.lab.plugins.plugin_utils.placements import container, process
from ansible_collections.platbench.lab.plugins.plugin_utils.placements.common import (
    GUEST_PREFIX,
    Kind,
    Observed,
    PlacementError,
    kind_file,
)

# The kinds a guest holds, by their declared names.
INNER = {module.KIND.name: module for module in (process, container)}
# An emulated guest (QEMU TCG, no KVM) runs oneDNN's kernels no higher than SSE4.1: the AVX2 code its JIT emits for
# PyTorch's LSTMs (sr's RNN-T) crashed under TCG (SIGSEGV in vmcn, a lost guest in vm), while the same cell ran with
# this set. Emulated cells are functional only (left out of the ratios), so their speed is not what changes.
EMULATED_ENV = {"ONEDNN_MAX_CPU_ISA": "SSE41"}


def plan(ctx, plan):
    """plan["guest"] (arguments of platbench.lab.vm) and the inner kind's section, run in the guest."""
    image = ctx.opts["guest_image"] or {}
    apptainer_inside = ctx.platform.launcher == "apptainer"
    if apptainer_inside and not image.get("sif_disk"):
        raise PlacementError(f"{ctx.where}: the guest image has no SIF disk: {apptainer.GUEST_FIX}")
    memory = int(ctx.opts["vm_memory_mb"])
    # Made once per data directory (tasks/place.yml, platbench.lab.data_disk), attached read-only to every guest.
    try:
        data = data_disk.guest_disk(ctx.host_data_dir, ctx.opts["datasets_dir"]) if ctx.host_data_dir else None
    except data_disk.DataDiskError as exc:
        raise PlacementError(f"{ctx.where}: params.data_dir: {exc}") from None
    # Apptainer inside: the SIF's read-only disk, mounted at apptainer.GUEST_SIF_DIR by the guest image's fstab.
    sif = [{"path": image.get("sif_disk"), "format": "raw", "readonly": True}] if apptainer_inside else []
    numa = numa_layout(ctx, ctx.cpus, memory)
    setup = set_up(ctx.cell["labels"].get(GUEST_SETUP), ctx.opts["vm_hugepages"])
    plan["guest"] = {
        "name": ctx.name,
        "vcpus": ctx.threads,
        # Floating: the vCPUs may run on any of the cell's CPUs (<vcpu cpuset>), not one each (<vcpupin>).
        "cpu_pins": [] if setup["floating"] else ctx.cpus,
        "vcpu_cpuset": ctx.cpus if setup["floating"] else [],
        "emulator_cpus": ctx.cpus,
        "numa": numa,
        "memory_mb": memory,
        "hugepages": setup["hugepages"],
        "devices": setup["devices"],
        "with_container_disk": INNER[ctx.platform.inner].KIND.engine_run,
        "hostdevs": list(ctx.gpus),
        "extra_disks": sif + ([_attached(data)] if data else []),
        "data_disk": {name: data[name] for name in ("source", "path", "label")} if data else None,
        "inner": ctx.platform.inner,
        "inner_task_file": INNER[ctx.platform.inner].KIND.task_file,
        "boot_task_file": kind_file(__file__, "boot.yml"),
    }
    if ctx.cell["labels"].get(GUEST_SETUP):
        plan["runtime"].update(
            guest_setup=ctx.cell["labels"][GUEST_SETUP],
            guest_devices=setup["devices"],
            guest_hugepages=setup["hugepages"],
            guest_vcpus_floating=setup["floating"],
        )
    plan["runtime"].update(
        guest_domain=ctx.name,
        guest_vcpus=ctx.threads,
        vcpu_pins_requested=ctx.cpuset or None,
        emulator_pins_requested=ctx.cpuset or None,
        guest_memory_mb=memory,
        guest_data_disk=data["path"] if data else None,
        guest_numa_nodeset=numa["nodeset"] if numa else None,
    )
    if ctx.cell["labels"].get("emulated"):
        ctx.extra_env.update(EMULATED_ENV)
        plan["runtime"]["emulated_env"] = dict(EMULATED_ENV)
    # The guest's vCPUs are pinned on the host; in the guest the workload takes them all.
    in_guest = ",".join(str(vcpu) for vcpu in range(ctx.threads)) if ctx.pinned else ""
    if INNER[ctx.platform.inner].KIND.engine_run:
        image_id = image.get("container_image_id")
        inside = container.EngineHost(
            host=ctx.name,
            image=image_id,
            image_id=image_id,
            cpuset=in_guest,
            # The guest's own directories: the data disk's mount point (read-only) and the GEMM peak cache.
            mounts=ctx.mounts,
            device_ids=list(range(len(ctx.gpus))),
            in_guest=True,
        )
        container.plan(ctx, plan, inside)
    else:
        machine = process.Machine(
            host=ctx.name,
            prefix=GUEST_PREFIX,
            over_ssh=True,
            become=False,
            # The data disk's mount point (Apptainer inside); the cache lives and dies with the throwaway guest: a
            # scratch directory, not a bind.
            binds=ctx.data_mounts if apptainer_inside else [],
            scratch=[ctx.cache],
            sif=apptainer.GUEST_SIF_PATH if apptainer_inside else None,
            sif_image_id=image.get("sif_image_id"),
            apptainer_version=image.get("apptainer_version"),
            apptainer_cpuset=in_guest,
        )
        process.plan(ctx, plan, machine)


GUEST_SETUP = "guest_setup"  # the cell label of the experiment's guest_setup (matrix.GUEST_SETUP)
# Each set-up adds to the one before it (experiment_spec.GUEST_SETUPS): what the guest's domain then holds.
SETUPS = {
    "floating": {"floating": True, "hugepages": False, "devices": "emulated"},
    "pinned": {"floating": False, "hugepages": False, "devices": "emulated"},
    "hugepages": {"floating": False, "hugepages": True, "devices": "emulated"},
    "virtio": {"floating": False, "hugepages": True, "devices": "virtio"},
}


def set_up(setup, hugepages):
    """What a guest's domain holds for its cell's ``guest_setup`` label: floating vCPUs or not, huge pages, its disks'
    and NICs' devices (virtio, or emulated SATA and e1000); without the label, the lab's own: pinned vCPUs, huge pages
    where the role's ``vm_hugepages`` asks, virtio."""
    if setup is None:
        return {"floating": False, "hugepages": bool(hugepages), "devices": "virtio"}
    return dict(SETUPS[setup])


def numa_layout(ctx, pins, memory_mb):
    """A pinned guest's NUMA layout (sizing.guest_numa): its memory bound to the host nodes its vCPUs' CPUs lie
    in, and a guest NUMA cell per node, so that the guest sees the split it runs on. None where not pinned."""
    try:
        return sizing.guest_numa(pins, ctx.facts.get("numa_nodes"), memory_mb)
    except sizing.SizingError as exc:
        raise PlacementError(f"{ctx.where}: {exc} (ansible_facts.platbench.numa_nodes)") from None


def _attached(data):
    """The data disk as platbench.lab.vm attaches it (vm_extra_disks): read-only, mounted by its label."""
    return {name: data[name] for name in ("path", "format", "readonly", "label", "mount")}


def observed(plan, results):
    """The inner kind's outcome, and how the guest ran: its accelerator (KVM or TCG), the vCPU threads'
    affinity as the host sees it, its boot time, rootfs and SSH port."""
    inner = INNER[(plan.get("guest") or {}).get("inner", process.KIND.name)].observed(plan, results)
    guest, vcpus = results.get("guest") or {}, results.get("vcpus") or {}
    if guest:
        inner.runtime.update(
            accelerator=guest.get("accelerator"),
            guest_boot_to_ready_s=float(guest["boot_to_ready_s"]) if guest.get("boot_to_ready_s") else None,
            guest_rootfs=guest.get("rootfs_id"),
            ssh_port=guest.get("ssh_port"),
        )
    if vcpus:
        inner.runtime.update(vcpu_thread_kind=vcpus.get("vcpu_thread_kind"), vcpu_affinity=vcpus.get("vcpu_affinity"))
    return Observed(output=inner.output, runtime=inner.runtime, error=inner.error)


KIND = Kind(
    name="guest",
    machine="libvirt",
    summary="a throwaway libvirt guest per cell, the workload inside it as its inner kind",
    plan=plan,
    observed=observed,
    task_file=kind_file(__file__, "place.yml"),
    results={"guest": "vm_guest", "vcpus": "platform_run_vcpus"},
    teardown=(kind_file(__file__, "teardown.yml"), "data_disks"),
    inner=tuple(INNER),
    emulator=True,
    instances="guests",
    cell_roles=("platbench.lab.vm",),
)
