# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The host's view of a guest's vCPUs: QEMU's vCPU threads, what runs them and where they may run."""

from __future__ import annotations

import os
import re

# QEMU names each vCPU thread "CPU <n>/<accelerator>": "CPU 0/KVM", "CPU 1/TCG".
_VCPU_COMM = re.compile(r"^CPU (\d+)/(\S+)$")


class VcpuError(RuntimeError):
    """The domain's QEMU process cannot be found or read."""


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as stream:
        return stream.read()


def qemu_pid(pid_file):
    """The pid libvirt wrote for the domain's QEMU process."""
    try:
        text = _read(pid_file).strip()
    except OSError as exc:
        raise VcpuError(f"cannot read the QEMU pid file {pid_file} ({exc.strerror}): is the domain running?") from None
    if not text.isdigit():
        raise VcpuError(f"the QEMU pid file {pid_file} holds {text!r}, not a process id")
    return int(text)


def vcpu_threads(pid, proc="/proc"):
    """One entry per vCPU thread of process ``pid``, by vCPU number:
    ``{"vcpu": "0", "kind": "KVM", "tid": 1234, "cpus": "0-1"}`` (``cpus``: Cpus_allowed_list)."""
    task_dir = os.path.join(proc, str(pid), "task")
    try:
        tids = os.listdir(task_dir)
    except OSError as exc:
        raise VcpuError(f"cannot list the threads of QEMU process {pid} in {task_dir} ({exc.strerror})") from None
    threads = []
    for tid in tids:
        try:
            match = _VCPU_COMM.match(_read(os.path.join(task_dir, tid, "comm")).strip())
            if not match:
                continue
            status = _read(os.path.join(task_dir, tid, "status"))
        except OSError:
            continue  # the thread ended while we looked
        allowed = next(
            (line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list:")),
            None,
        )
        threads.append(
            {"vcpu": match.group(1), "kind": match.group(2), "tid": int(tid) if tid.isdigit() else tid, "cpus": allowed}
        )
    return sorted(threads, key=lambda thread: int(thread["vcpu"]))


def summarize(threads):
    """What goes into a sample: ``vcpu_thread_kind`` ('KVM', 'TCG', None when no thread was found)
    and ``vcpu_affinity`` (vCPU number -> allowed host CPUs)."""
    kinds = sorted({thread["kind"] for thread in threads})
    return {
        "vcpu_thread_kind": ",".join(kinds) or None,
        "vcpu_affinity": {thread["vcpu"]: thread["cpus"] for thread in threads},
    }
