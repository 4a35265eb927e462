#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Start or remove one jailed Firecracker micro-VM (the mvm platform)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: firecracker_vm
short_description: Start or remove one jailed Firecracker micro-VM of a cell
description:
  - C(state=started) copies the kernel, the initrd and the disks into the jail, writes the VM configuration file
    (checked against the fields Firecracker's API documents), makes the cell's tap with the host's end of its /30,
    starts the jailer (the cell's cgroup settings, the jailer user) which execs Firecracker with C(--config-file),
    pins each C(fc_vcpu N) thread to the Nth of O(cpus), and waits until the guest's SSH port answers.
  - C(state=absent) stops the VM's Firecracker, removes its tap, its jail and its cgroups. Removing what is gone is
    no change.
  - C(state=absent) with O(cleanup_all) removes what every stopped cell left on the host (C(playbooks/teardown.yml)) -
    each jail under O(chroot_base) with its Firecracker and cgroups, each Firecracker process and jailer cgroup of a
    cell's micro-VM (id C(platbench-<hex>)) whose jail is gone, and each cell's tap (C(pbfc) and 8 hex digits).
  - Fails before anything is made where the host cannot run a micro-VM (no usable /dev/kvm, no Firecracker), saying
    why and which role to run.
version_added: "0.12.0"
author: platbench developers (@platbench)
options:
  id:
    description: The jailer's id (the plan's C(micro_vm.id)). Required unless O(cleanup_all).
    type: str
  state:
    description: Start the VM, or remove it and everything made for it.
    type: str
    choices: [started, absent]
    default: started
  config:
    description: The VM configuration (the plan's C(micro_vm.config)); paths are the jail's.
    type: dict
  files:
    description: C(source) on the host, C(name) in the jail, C(writable) (copied for the VM to write) of each file.
    type: list
    elements: dict
    default: []
  network:
    description: The cell's tap (C(tap), C(host_address), C(prefix)), from the plan.
    type: dict
  cgroups:
    description: The jailer's C(--cgroup) settings, in cgroup v2 names where the host has v2.
    type: list
    elements: str
    default: []
  cpus:
    description: Host CPUs the vCPU threads are pinned to, one each in order; empty for none.
    type: list
    elements: int
    default: []
  user:
    description: The user (and its group) the jailer drops to; made by platbench.lab.firecracker.
    type: str
    default: platbench-fc
  binary:
    description: The Firecracker binary.
    type: path
    default: /usr/local/bin/firecracker
  jailer:
    description: The jailer binary.
    type: path
    default: /usr/local/bin/jailer
  chroot_base:
    description: The jailer's chroot base directory.
    type: path
    default: /srv/platbench-jailer
  kvm_device:
    description: The KVM device.
    type: path
    default: /dev/kvm
  boot_timeout:
    description: Seconds to wait for the vCPU threads and the guest's SSH port.
    type: int
    default: 180
  cleanup_all:
    description: With O(state=absent), remove every cell's micro-VM on the host instead of O(id)'s.
    type: bool
    default: false
  cgroup_root:
    description: Where the cgroup hierarchies are mounted (the jailer's cgroups are below it).
    type: path
    default: /sys/fs/cgroup
attributes:
  check_mode:
    description: Checks the configuration and the host, starts nothing.
    support: partial
    details: >-
      Check mode checks the configuration and the host and returns the jailer's command line; nothing starts. With
      O(cleanup_all) it returns what it would remove, and removes nothing.
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Start the cell's micro-VM
  platbench.lab.firecracker_vm:
    id: "{{ platform_run_cell_plan.micro_vm.id }}"
    config: "{{ platform_run_cell_plan.micro_vm.config }}"
    files: "{{ platform_run_cell_plan.micro_vm.files }}"
    network: "{{ platform_run_cell_plan.micro_vm.network }}"
    cgroups: "{{ platform_run_cell_plan.micro_vm.cgroups }}"
    cpus: "{{ platform_run_cell_plan.micro_vm.cpus }}"
  register: platform_run_micro_vm

- name: Remove what stopped cells' micro-VMs left (teardown)
  platbench.lab.firecracker_vm:
    state: absent
    cleanup_all: true
"""

RETURN = r"""
pid:
  description: Firecracker's process id.
  returned: state=started
  type: int
argv:
  description: The jailer's command line as run.
  returned: state=started
  type: list
  elements: str
vcpu_affinity:
  description: vCPU number to the host CPUs its thread may run on, read back after pinning.
  returned: state=started
  type: dict
boot_to_ready_s:
  description: Seconds from the jailer's start to the guest's SSH port answering.
  returned: state=started
  type: float
firecracker_version:
  description: What C(firecracker --version) says.
  returned: state=started
  type: str
removed:
  description: >-
    What was removed, or with check mode would be: C(micro_vms) (ids), C(processes) (pids), C(jails), C(cgroups) and
    C(taps).
  returned: state=absent
  type: dict
  sample:
    micro_vms: [platbench-3f2a9c01b2c4]
    processes: [4242]
    jails: [/srv/platbench-jailer/firecracker/platbench-3f2a9c01b2c4]
    cgroups: [/sys/fs/cgroup/firecracker/platbench-3f2a9c01b2c4]
    taps: [pbfc3f2a9c01]
"""

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import firecracker

# What state=absent removes, by kind (its `removed` return value).
REMOVED = ("micro_vms", "processes", "jails", "cgroups", "taps")


def _jail_dir(vm_id, params):
    return os.path.dirname(firecracker.jail_root(vm_id, params["chroot_base"], params["binary"]))


def _console_tail(path, lines=20):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).strip()
    except OSError:
        return ""


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _gone(pid):
    """The process has ended: no longer in /proc, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _stage(module, root, files, user):
    os.makedirs(root, mode=0o755, exist_ok=True)
    for item in files:
        target = os.path.join(root, item["name"])
        if item.get("writable"):
            # The guest writes its root: a copy of its own each cell (a reflink where the file system has them).
            module.run_command(["cp", "--reflink=auto", "--sparse=always", item["source"], target], check_rc=True)
        else:
            try:
                os.link(item["source"], target)  # read-only and on the same file system: no copy at all
            except OSError:
                shutil.copyfile(item["source"], target)
        os.chown(target, user.pw_uid, user.pw_gid)
        os.chmod(target, 0o600 if item.get("writable") else 0o400)


def _tap(module, network, user):
    tap = network["tap"]
    module.run_command(["ip", "link", "del", tap])  # a tap a failed cell left
    for argv in (
        ["ip", "tuntap", "add", "dev", tap, "mode", "tap", "user", str(user.pw_uid)],
        ["ip", "addr", "add", f"{network['host_address']}/{network['prefix']}", "dev", tap],
        ["ip", "link", "set", tap, "up"],
    ):
        module.run_command(argv, check_rc=True)


def _wait_for_threads(pid, count, deadline, console):
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            raise firecracker.FirecrackerError(f"Firecracker ended before its vCPUs started: {_console_tail(console)}")
        threads = firecracker.read_vcpu_threads(pid)
        if len(threads) == count:
            return threads
        time.sleep(0.05)
    raise firecracker.FirecrackerError(f"Firecracker did not start {count} vCPU threads in time")


def _wait_for_ssh(address, deadline, pid, console):
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            raise firecracker.FirecrackerError(f"the micro-VM ended while booting: {_console_tail(console)}")
        try:
            with socket.create_connection((address, 22), timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise firecracker.FirecrackerError(
        f"the guest's SSH port at {address} did not answer in time; its console: {_console_tail(console)}"
    )


def start(module, params):
    problem = firecracker.host_problem(firecracker.probe(params["binary"], params["jailer"], params["kvm_device"]))
    if problem:
        module.fail_json(msg=f"micro-VM {params['id']}: this host cannot run it: {problem}")
    config = firecracker.check_config(params["config"])
    try:
        user = pwd.getpwnam(params["user"])
    except KeyError:
        module.fail_json(msg=f"no user {params['user']} for the jailer to drop to: {firecracker.ROLE_FIX}")
    cgroup_version = 2 if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else 1
    argv = firecracker.jailer_argv(
        params["id"],
        user.pw_uid,
        user.pw_gid,
        params["cgroups"],
        cgroup_version,
        params["jailer"],
        params["binary"],
        params["chroot_base"],
    )
    if module.check_mode:
        module.exit_json(changed=True, argv=argv)
    root = firecracker.jail_root(params["id"], params["chroot_base"], params["binary"])
    jail = os.path.dirname(root)
    if os.path.exists(jail):
        # The jailer refuses an id whose jail is there.
        stop(module, params["id"], params, params["network"].get("tap"))
    _stage(module, root, params["files"], user)
    with open(os.path.join(root, firecracker.IN_JAIL["config"]), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    os.chown(os.path.join(root, firecracker.IN_JAIL["config"]), user.pw_uid, user.pw_gid)
    _tap(module, params["network"], user)
    console = os.path.join(jail, "console.log")
    begun = time.monotonic()
    deadline = begun + params["boot_timeout"]
    with open(console, "wb") as log:
        # The jailer execs Firecracker: the child's pid is Firecracker's. Its own session, so that the cell's
        # connection ending never signals it; state=absent stops it.
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    with open(os.path.join(jail, "firecracker.pid"), "w", encoding="utf-8") as handle:
        handle.write(f"{child.pid}\n")
    threads = _wait_for_threads(child.pid, config["machine-config"]["vcpu_count"], deadline, console)
    if params["cpus"]:
        firecracker.apply_pins(firecracker.pin_plan(threads, params["cpus"]))
    affinity = {
        str(vcpu): ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(tid))) for vcpu, tid in threads.items()
    }
    _wait_for_ssh(params["network"]["guest_address"], deadline, child.pid, console)
    ready = time.monotonic() - begun
    _rc, version, _err = module.run_command([params["binary"], "--version"])
    module.exit_json(
        changed=True,
        pid=child.pid,
        argv=argv,
        vcpu_affinity=affinity,
        boot_to_ready_s=round(ready, 3),
        firecracker_version=(version.splitlines() or [""])[0].strip(),
        console=console,
    )


def _pids_of(vm_id, params, running):
    """The Firecracker processes of ``vm_id``: the one its jail's pid file names (if it still runs Firecracker: a pid
    reused since is left alone) and any other started with its --id (``running``: firecracker.vm_processes)."""
    pids = set(running.get(vm_id, ()))
    pid_file = os.path.join(_jail_dir(vm_id, params), "firecracker.pid")
    if os.path.exists(pid_file):
        with open(pid_file, encoding="utf-8") as handle:
            pid = int(handle.read().strip() or 0)
        if pid and _comm(pid) == os.path.basename(params["binary"])[:15]:
            pids.add(pid)
    return sorted(pids)


def stop(module, vm_id, params, tap=None, running=None, check=False):
    """Stop micro-VM ``vm_id`` and remove its tap, jail and cgroups; what was there, by kind (REMOVED)."""
    removed = {kind: [] for kind in REMOVED}
    running = firecracker.vm_processes(params["binary"]) if running is None else running
    removed["processes"] = _pids_of(vm_id, params, running)
    if tap and os.path.exists(f"/sys/class/net/{tap}"):
        removed["taps"].append(tap)
    jail = _jail_dir(vm_id, params)
    if os.path.exists(jail):
        removed["jails"].append(jail)
    # After Firecracker has ended: a cgroup that still holds a process cannot be removed.
    removed["cgroups"] = firecracker.cgroup_dirs(vm_id, params["cgroup_root"], params["binary"])
    if any(removed.values()):
        removed["micro_vms"].append(vm_id)
    if check:
        return removed
    for pid in removed["processes"]:
        os.kill(pid, signal.SIGKILL)
    for pid in removed["processes"]:
        for _ in range(100):
            if _gone(pid):
                break
            time.sleep(0.05)
    for name in removed["taps"]:
        module.run_command(["ip", "link", "del", name], check_rc=True)
    if removed["jails"]:
        shutil.rmtree(jail)
    for cgroup in list(removed["cgroups"]):
        try:
            os.rmdir(cgroup)
        except OSError:
            removed["cgroups"].remove(cgroup)  # still emptying: the next run's teardown removes it
    return removed


def cleanup_all(module, params):
    """Remove every cell's micro-VM on the host (see DOCUMENTATION); what was there, by kind."""
    running = firecracker.vm_processes(params["binary"])
    ids = set(firecracker.jail_ids(params["chroot_base"], params["binary"]))
    ids |= {vm_id for vm_id in running if firecracker.CELL_VM_ID.match(vm_id)}
    ids |= set(firecracker.cell_cgroup_ids(params["cgroup_root"], params["binary"]))
    removed = {kind: [] for kind in REMOVED}
    for vm_id in sorted(ids):
        for kind, items in stop(module, vm_id, params, running=running, check=module.check_mode).items():
            removed[kind] += items
    # Every cell's tap, once no micro-VM is left to hold one (a tap whose jail is gone, too).
    for tap in firecracker.cell_taps():
        if not module.check_mode:
            module.run_command(["ip", "link", "del", tap], check_rc=True)
        removed["taps"].append(tap)
    return removed


def main():
    module = AnsibleModule(
        argument_spec={
            "id": {"type": "str"},
            "state": {"type": "str", "choices": ["started", "absent"], "default": "started"},
            "config": {"type": "dict"},
            "files": {"type": "list", "elements": "dict", "default": []},
            "network": {"type": "dict"},
            "cgroups": {"type": "list", "elements": "str", "default": []},
            "cpus": {"type": "list", "elements": "int", "default": []},
            "user": {"type": "str", "default": "platbench-fc"},
            "binary": {"type": "path", "default": firecracker.BINARY},
            "jailer": {"type": "path", "default": firecracker.JAILER},
            "chroot_base": {"type": "path", "default": firecracker.CHROOT_BASE},
            "kvm_device": {"type": "path", "default": firecracker.KVM},
            "boot_timeout": {"type": "int", "default": 180},
            "cleanup_all": {"type": "bool", "default": False},
            "cgroup_root": {"type": "path", "default": "/sys/fs/cgroup"},
        },
        required_if=[("state", "started", ("id", "config", "network")), ("cleanup_all", False, ("id",))],
        supports_check_mode=True,
    )
    params = module.params
    what = "the cells' micro-VMs" if params["cleanup_all"] else f"micro-VM {params['id']}"
    try:
        if params["state"] == "absent":
            if params["cleanup_all"]:
                removed = cleanup_all(module, params)
            else:
                tap = (params.get("network") or {}).get("tap")
                removed = stop(module, params["id"], params, tap, check=module.check_mode)
            module.exit_json(changed=any(removed.values()), removed=removed)
        if params["cleanup_all"]:
            module.fail_json(msg="cleanup_all removes micro-VMs: use it with state=absent, not state=started")
        start(module, params)
    except (firecracker.FirecrackerError, OSError) as exc:
        module.fail_json(msg=f"{what}: {exc}")


if __name__ == "__main__":
    main()
