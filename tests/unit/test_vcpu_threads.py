"""vcpu_threads: QEMU's vCPU threads as the host sees them, read from a fake /proc tree."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils.vcpus import VcpuError, qemu_pid, summarize, vcpu_threads
from ansible_collections.platbench.lab.plugins.modules import vcpu_threads as module

PID = 4242


def fake_proc(root, threads):
    """threads: {tid: (comm, Cpus_allowed_list)}"""
    for tid, (comm, allowed) in threads.items():
        task = root / str(PID) / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "comm").write_text(comm + "\n")
        (task / "status").write_text(
            f"Name:\t{comm}\nState:\tS (sleeping)\nCpus_allowed:\tff\n"
            f"Cpus_allowed_list:\t{allowed}\nvoluntary_ctxt_switches:\t5\n"
        )
    return root


@pytest.fixture
def proc(tmp_path):
    return fake_proc(
        tmp_path / "proc",
        {
            PID: ("qemu-system-x86", "0-7"),
            4243: ("qemu-system-x86", "0-7"),
            4250: ("CPU 1/KVM", "7"),
            4249: ("CPU 0/KVM", "6"),
            4251: ("IO mon_iothread", "0-7"),
            4260: ("CPU 10/KVM", "5"),
        },
    )


def test_only_vcpu_threads_are_read_in_vcpu_order(proc):
    threads = vcpu_threads(PID, str(proc))
    assert [(t["vcpu"], t["kind"], t["tid"], t["cpus"]) for t in threads] == [
        ("0", "KVM", 4249, "6"),
        ("1", "KVM", 4250, "7"),
        ("10", "KVM", 4260, "5"),
    ]
    assert summarize(threads) == {"vcpu_thread_kind": "KVM", "vcpu_affinity": {"0": "6", "1": "7", "10": "5"}}


def test_emulated_threads_and_no_threads(tmp_path):
    proc = fake_proc(tmp_path / "proc", {5001: ("CPU 0/TCG", "0-1"), 5002: ("CPU 1/TCG", "0-1")})
    assert summarize(vcpu_threads(PID, str(proc))) == {
        "vcpu_thread_kind": "TCG",
        "vcpu_affinity": {"0": "0-1", "1": "0-1"},
    }
    assert summarize([]) == {"vcpu_thread_kind": None, "vcpu_affinity": {}}


def test_a_missing_process_or_pid_file_is_named(tmp_path):
    with pytest.raises(VcpuError, match=r"cannot list the threads of QEMU process 4242"):
        vcpu_threads(PID, str(tmp_path))
    with pytest.raises(VcpuError, match=r"cannot read the QEMU pid file .*none.pid .*is the domain running\?"):
        qemu_pid(str(tmp_path / "none.pid"))
    (tmp_path / "bad.pid").write_text("qemu\n")
    with pytest.raises(VcpuError, match="holds 'qemu', not a process id"):
        qemu_pid(str(tmp_path / "bad.pid"))


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_reads_the_pid_file_and_proc(tmp_path, proc, capsys):
    (tmp_path / "guest.pid").write_text(f"{PID}\n")
    result = run_module(capsys, {"domain": "platbench-x", "pid_file": str(tmp_path / "guest.pid"), "proc": str(proc)})
    assert result["pid"] == PID and not result["changed"]
    assert result["vcpu_thread_kind"] == "KVM" and result["vcpu_affinity"] == {"0": "6", "1": "7", "10": "5"}


def test_the_module_fails_naming_the_guest(tmp_path, capsys):
    result = run_module(capsys, {"domain": "platbench-x", "pid_file": str(tmp_path / "gone.pid")})
    assert result["failed"] and result["msg"].startswith("guest platbench-x: cannot read the QEMU pid file")
