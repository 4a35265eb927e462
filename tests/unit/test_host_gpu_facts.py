"""host_facts' answer to "which GPUs stay with the host, which go to guests" (the action plugin), computed once
so that roles read ansible_facts.platbench.host_gpus / guest_gpus instead of re-deriving it."""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.action.host_facts import gpu_facts

GPUS = [
    {"pci_address": "0000:3b:00.0", "driver": "nvidia"},
    {"pci_address": "0000:d8:00.0", "driver": "vfio-pci"},
]


def test_gpus_not_named_stay_with_the_host():
    assert gpu_facts({}, GPUS, "lab1") == {
        "host_gpus": ["0000:3b:00.0", "0000:d8:00.0"],
        "guest_gpus": [],
        "gpu_assignment_problems": [],
    }
    assert gpu_facts({}, [], "lab1") == {"host_gpus": [], "guest_gpus": [], "gpu_assignment_problems": []}


def test_the_assignment_splits_them():
    facts = gpu_facts({"0000:D8:00.0": "guests", "0000:3b:00.0": "host"}, GPUS, "lab1")
    assert facts["host_gpus"] == ["0000:3b:00.0"] and facts["guest_gpus"] == ["0000:d8:00.0"]


def test_a_bad_entry_is_reported_and_its_gpu_stays_with_the_host():
    facts = gpu_facts({"d8:00.0": "guests", "0000:3b:00.0": "elsewhere"}, GPUS, "lab1")
    assert facts["host_gpus"] == ["0000:3b:00.0", "0000:d8:00.0"] and facts["guest_gpus"] == []
    problems = " ".join(facts["gpu_assignment_problems"])
    assert "'d8:00.0' has no PCI domain; write it in full, as '0000:d8:00.0'" in problems
    assert "assigns 0000:3b:00.0 to 'elsewhere'" in problems
