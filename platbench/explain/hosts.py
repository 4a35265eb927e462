"""Which platforms the runner host can run now, and why not: the collection's own readiness (module_utils/
readiness.py, what ``platbench.lab.platform_status`` says at the end of site.yml), read for the rungs of a ladder
before any cell.

A runner the controller runs cells on itself (``ansible_connection: local``, the default lab) is read here, in this
process, with the module's own probes; another is read by the host_facts and platform_status modules, run there once
through ansible-runner.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

from ansible_collections.platbench.lab.plugins.module_utils import (
    apptainer,
    engines,
    firecracker,
    lxc,
    oci_bundle,
    platforms,
    readiness,
)

RUNNERS = "platbench_runners"
IMAGE = "platbench/workload:latest"
PREFIX = "/opt/platbench"
GUEST_IMAGE = "/var/lib/platbench/guest/current.json"
KUBECONFIG = "/etc/kubernetes/admin.conf"


def _run(argv):
    """(rc, stdout) of a probe's command, or None where it is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout


def _json_file(path):
    try:
        with open(path, encoding="utf-8") as stream:
            found = json.load(stream)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def local_facts():
    """The host_facts module's facts of this machine, read in this process."""
    from ansible_collections.platbench.lab.plugins.modules import host_facts

    online = host_facts.parse_cpu_list(host_facts.read_text("/sys/devices/system/cpu/online", "0"))
    allowed = sorted(os.sched_getaffinity(0))
    _model, flags = host_facts.cpu_info()
    kvm = host_facts.kvm_state(flags)
    qemu = host_facts.qemu_binary()
    return {
        "cpus_online": online,
        "cpus_allowed": allowed,
        "cpu_count": len(allowed),
        "gpu_count": len(host_facts.nvidia_gpus()),
        "kvm": kvm,
        "qemu_binary": qemu,
        "vm_accelerator": host_facts.vm_accelerator(kvm, qemu),
        "libvirt_daemon": host_facts.unix_socket_answers("/var/run/libvirt/libvirt-sock"),
        "systemd_pid1": host_facts.read_text("/proc/1/comm") == "systemd",
        "docker_engine": host_facts.docker_engine_answers("/var/run/docker.sock"),
        "cpu_cgroup": host_facts.cpu_cgroup(),
    }


def local_status(prefix=PREFIX, image=IMAGE):
    """Every platform's ``{"ready", "reason", "skip", ...}`` on this machine, as platform_status would say it. The
    cluster is not asked for its nodes (a kubeconfig says only that it may be one)."""
    found = {engine: engines.probe(_run, engine, image) for engine in platforms.ENGINES}
    version = None
    listed = _run(["apptainer", "--version"])
    if listed and listed[0] == 0:
        version = apptainer.parse_version(listed[1])
    sif = _json_file(apptainer.SIF_DESCRIPTION)
    if sif:
        sif["present"] = bool(sif.get("sif")) and os.path.isfile(str(sif["sif"]))
    return readiness.platform_status(
        local_facts(),
        prefix,
        os.path.exists(os.path.join(prefix, "venv", "bin", "python")),
        image,
        (found.get("docker") or {}).get("image_id"),
        GUEST_IMAGE,
        _json_file(GUEST_IMAGE),
        kubernetes={
            "kubeconfig": KUBECONFIG,
            "kubeconfig_present": os.path.exists(KUBECONFIG),
            "node": None,
            "nodes": [],
            "error": "" if not os.path.exists(KUBECONFIG) else "not asked before the campaign",
        },
        apptainer_version=version,
        sif=sif,
        engines_found=found,
        firecracker_found=firecracker.probe(firecracker.BINARY, firecracker.JAILER, firecracker.KVM),
        lxc_found=lxc.probe(shutil.which(lxc.EXECUTE)),
        oci_bundle_found=oci_bundle.probe(shutil.which(oci_bundle.RUNC)),
    )


def _remote_status(host, inventory):
    """platform_status's platforms of runner ``host``, read there by the collection's modules (one ad-hoc play)."""
    import ansible_runner

    from platbench.run import _ansible_environment, _inventory

    play = [
        {
            "hosts": host,
            "gather_facts": False,
            "become": True,
            "tasks": [
                {"platbench.lab.host_facts": {}},
                {
                    "platbench.lab.platform_status": {"facts": "{{ ansible_facts.platbench }}"},
                    "register": "platbench_status",
                },
            ],
        }
    ]
    with tempfile.TemporaryDirectory(prefix="platbench-explain-") as private:
        runner = ansible_runner.run(
            private_data_dir=private,
            inventory=_inventory(inventory),
            playbook=play,
            envvars=_ansible_environment(),
            quiet=True,
        )
        for event in runner.events:
            data = event.get("event_data", {})
            if event.get("event") == "runner_on_ok" and data.get("task_action", "").endswith("platform_status"):
                return (data.get("res") or {}).get("platforms") or {}
    return {}


def runner_of(inventory):
    """``(name, local)``: the inventory's first runner host and whether the controller runs its cells itself."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    hosts = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=hosts)
    runners = hosts.get_hosts(RUNNERS)
    if not runners:
        raise ValueError(f"{inventory}: no host in group {RUNNERS}: name the host the cells run on there")
    host = runners[0]
    values = variables.get_vars(host=host, include_hostvars=False)
    return host.name, values.get("ansible_connection") == "local" or host.name in ("localhost", "127.0.0.1")


def unready(labels, inventory):
    """``(runner, {label: why})``: the platforms of ``labels`` the inventory's first runner host cannot run now (an
    emulated guest counts: its figures would measure the emulator)."""
    runner, local = runner_of(inventory)
    status = local_status() if local else _remote_status(runner, inventory)
    found = {}
    for label in labels:
        entry = status.get(label)
        if entry is None:
            found[label] = "its readiness could not be read on the runner host"
        elif not entry.get("ready"):
            found[label] = entry.get("reason") or "not ready"
        elif entry.get("emulated"):
            found[label] = "its guests run under QEMU's emulator (no usable KVM): the figures would measure TCG"
    return runner, found
