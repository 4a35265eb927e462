#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Read, from /proc on the KVM host, the vCPU threads of a libvirt domain's QEMU process."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vcpu_threads
short_description: Read the vCPU threads of a libvirt guest as the host sees them
description:
  - Finds the QEMU process of a running libvirt domain from the pid file libvirt writes, and reads, for each of
    its vCPU threads (named C(CPU N/KVM) or C(CPU N/TCG) by QEMU), what runs it and the host CPUs it may run on
    (C(Cpus_allowed_list) in C(/proc/PID/task/TID/status)).
  - "This is the host's own view of vCPU pinning (C(<vcpupin>)) and of the accelerator. It changes nothing."
version_added: "0.4.0"
author: platbench developers (@platbench)
options:
  domain:
    description: The libvirt domain's name.
    type: str
    required: true
  pid_file:
    description: The pid file of the domain's QEMU process; default C(/run/libvirt/qemu/DOMAIN.pid).
    type: path
  proc:
    description: Where the proc filesystem is mounted.
    type: path
    default: /proc
attributes:
  check_mode:
    description: Reads the same state as in a real run; the module never changes the host.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Read the vCPU threads' affinity on the host
  platbench.lab.vcpu_threads:
    domain: platbench-0123456789ab
  register: vcpus

- name: Show them
  ansible.builtin.debug:
    msg: "{{ vcpus.vcpu_thread_kind }} {{ vcpus.vcpu_affinity }}"
"""

RETURN = r"""
pid:
  description: The QEMU process id.
  returned: success
  type: int
threads:
  description: One entry per vCPU thread, by vCPU number, with C(vcpu), C(kind) (C(KVM) or C(TCG)), C(tid), C(cpus).
  returned: success
  type: list
  elements: dict
vcpu_thread_kind:
  description: What runs the vCPU threads (C(KVM), C(TCG), several joined by commas, null when none was found).
  returned: success
  type: str
vcpu_affinity:
  description: vCPU number to the host CPUs its thread may run on.
  sample: {"0": "2", "1": "3"}
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils.vcpus import VcpuError, qemu_pid, summarize, vcpu_threads


def main():
    module = AnsibleModule(
        argument_spec={
            "domain": {"type": "str", "required": True},
            "pid_file": {"type": "path"},
            "proc": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    pid_file = module.params["pid_file"] or f"/run/libvirt/qemu/{module.params['domain']}.pid"
    try:
        pid = qemu_pid(pid_file)
        threads = vcpu_threads(pid, module.params["proc"])
    except VcpuError as exc:
        module.fail_json(msg=f"guest {module.params['domain']}: {exc}")
    module.exit_json(changed=False, pid=pid, threads=threads, **summarize(threads))


if __name__ == "__main__":
    main()
