"""What the lab's runner hosts offer a finding, and what a finding needs that they lack.

A host the controller runs cells on itself (``ansible_connection: local``, the default lab) is read here, as the
collection's host_facts module reads it (/proc, /sys, /dev/kvm, the PCI bus); other runner hosts are read by that
module, run once on all of them through ansible-runner. A finding is expressible where one runner host has the cores,
GPUs, KVM, Apptainer and Firecracker it needs, and the inventory has the hosts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import NamedTuple

RUNNERS = "platbench_runners"
# The tools a finding may need that the lab builds only where the inventory asks: the variable that asks, and why.
TOOLS = {"hpcg": ("micro_tools_hpcg", "HPCG (the lab builds it where the inventory sets micro_tools_hpcg: true)")}


class Host(NamedTuple):
    """One runner host's offer: ``cores`` (CPUs it may use), ``gpus``, ``kvm`` (usable hardware virtualization),
    ``apptainer`` and ``firecracker`` (the binaries present; None: not known)."""

    name: str
    cores: int
    gpus: int
    kvm: bool
    apptainer: bool | None
    firecracker: bool | None
    tools: frozenset = frozenset()


class Lab(NamedTuple):
    hosts: list

    def missing(self, needs):
        """What ``needs`` asks that no runner host (or the inventory) offers, in words; [] when it is expressible."""
        lacking = []
        if needs.get("hosts", 1) > len(self.hosts):
            lacking.append(f"{needs.get('hosts', 1)} hosts (the inventory has {len(self.hosts)})")

        def best(field):
            values = [getattr(host, field) for host in self.hosts]
            return max((value for value in values if value is not None), default=0)

        if needs.get("cores") and best("cores") < needs["cores"]:
            lacking.append(f"{needs['cores']} cores on a host (at most {best('cores')} here)")
        if needs.get("gpus") and best("gpus") < needs["gpus"]:
            lacking.append(f"{needs['gpus']} GPU{'s' if needs['gpus'] > 1 else ''} on a host ({best('gpus')} here)")
        for field, words in (("kvm", "KVM"), ("apptainer", "Apptainer"), ("firecracker", "Firecracker")):
            if needs.get(field) and not any(getattr(host, field) for host in self.hosts):
                lacking.append(words)
        for tool in needs.get("tools") or []:
            if not any(tool in host.tools for host in self.hosts):
                lacking.append(TOOLS[tool][1])
        return lacking

    def describe(self):
        return "; ".join(
            f"{host.name}: {host.cores} cores, {host.gpus} GPUs, KVM {'yes' if host.kvm else 'no'}"
            for host in self.hosts
        )


def _tools(values):
    """The optional tools the inventory has the lab build on a host (its variables ``values``)."""
    return frozenset(tool for tool, (variable, _) in TOOLS.items() if values.get(variable) in (True, "true", "yes"))


def _local(name, tools=frozenset()):
    from ansible_collections.platbench.lab.plugins.modules import host_facts

    flags = host_facts.cpu_info()[1]
    kvm = host_facts.kvm_state(flags)
    return Host(
        name,
        len(os.sched_getaffinity(0)),
        len(host_facts.nvidia_gpus()),
        host_facts.vm_accelerator(kvm, host_facts.qemu_binary()) == "kvm",
        shutil.which("apptainer") is not None,
        shutil.which("firecracker") is not None,
        tools,
    )


def _remote(names, inventory, tools):
    """The Hosts ``names`` as the host_facts module reads them there (one ad-hoc run on all of them)."""
    import ansible_runner

    from platbench.run import _ansible_environment, _inventory

    found = {}
    with tempfile.TemporaryDirectory(prefix="platbench-lab-") as private:
        runner = ansible_runner.run(
            private_data_dir=private,
            inventory=_inventory(inventory),
            host_pattern=",".join(names),
            module="platbench.lab.host_facts",
            envvars=_ansible_environment(),
            quiet=True,
        )
        for event in runner.events:
            data = event.get("event_data", {})
            if event.get("event") == "runner_on_ok" and data.get("host") in names:
                facts = (data.get("res") or {}).get("ansible_facts", {}).get("platbench", {})
                found[data["host"]] = Host(
                    data["host"],
                    int(facts.get("cpu_count") or 0),
                    int(facts.get("gpu_count") or 0),
                    facts.get("vm_accelerator") == "kvm",
                    None,
                    None,
                    tools.get(data["host"], frozenset()),
                )
    return [found.get(name, Host(name, 0, 0, False, None, None)) for name in names]


def probe(inventory):
    """The ``Lab`` of ``inventory``'s runner hosts (group platbench_runners); ValueError when it has none."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    hosts = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=hosts)
    local, remote, tools = [], [], {}
    for host in hosts.get_hosts(RUNNERS):
        values = variables.get_vars(host=host, include_hostvars=False)
        is_local = values.get("ansible_connection") == "local" or host.name in ("localhost", "127.0.0.1")
        (local if is_local else remote).append(host.name)
        tools[host.name] = _tools(values)
    if not local and not remote:
        raise ValueError(
            f"--inventory {inventory}: no host in its group {RUNNERS}, so nothing could run a cell; give the lab's "
            "inventory (default inventories/local), whose runner hosts playbooks/site.yml built"
        )
    found = [_local(name, tools[name]) for name in local]
    if remote:
        found += _remote(remote, inventory, tools)
    return Lab(found)
