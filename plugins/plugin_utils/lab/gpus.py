# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Which of a host's NVIDIA GPUs stay with the host driver and which go to guests.

The inventory says it per host in ``platbench_gpu_assignment``: a mapping of PCI address
(``0000:3b:00.0``) to ``host`` (bm and cn cells use it through the NVIDIA driver) or ``guests``
(``platbench.lab.kvm_host`` binds it to vfio-pci for vm and vmcn cells). A GPU not named stays
with the host. ``gpus`` everywhere is ``ansible_facts.platbench.gpus`` from
``platbench.lab.host_facts``: dicts with ``pci_address``, ``device_id``, ``driver``,
``iommu_group`` and ``slot_functions``.
"""

from __future__ import annotations

import re

ROLES = ("host", "guests")
SETTING = "platbench_gpu_assignment"
VFIO_DRIVER = "vfio-pci"
# domain:bus:slot.function, as sysfs and `lspci -D` write it.
FULL_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# bus:slot.function, as plain `lspci` writes it: the domain is missing.
SHORT_ADDRESS = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
EXAMPLE = "0000:3b:00.0"


class GpuAssignmentError(ValueError):
    """The GPU assignment cannot be used on this host; the message says what to change."""


def _addresses(gpus):
    return sorted(str(gpu.get("pci_address", "")).lower() for gpu in gpus or ())


def _found(gpus):
    return ", ".join(_addresses(gpus)) or "none"


def _address_problem(address, gpus, host, source):
    """Why ``address`` cannot name one of the host's GPUs, or None when it can."""
    text = str(address).strip().lower()
    if SHORT_ADDRESS.match(text):
        # Suggest the host's own GPU with that bus:slot.function when there is one.
        full = next((known for known in _addresses(gpus) if known.endswith(":" + text)), "0000:" + text)
        return (
            f"{source} on {host}: '{address}' has no PCI domain; write it in full, as '{full}' "
            "(`lspci -D` lists the full addresses)."
        )
    if not FULL_ADDRESS.match(text):
        return (
            f"{source} on {host}: '{address}' is not a PCI address; write it as domain:bus:slot.function, "
            f"e.g. '{EXAMPLE}' (`lspci -D` lists them)."
        )
    if text not in _addresses(gpus):
        return (
            f"{source} names {text}, which is not an NVIDIA GPU function of {host}; its NVIDIA GPUs are "
            f"{_found(gpus)}. Name only these (`lspci -D -d 10de:` lists them)."
        )
    return None


def assignment_problems(assignment, gpus, host="this host", source=SETTING):
    """Every reason ``assignment`` cannot be used on ``host``, as messages (empty when it can).

    ``assignment`` is a mapping of PCI address to ``host`` or ``guests``; a list of PCI
    addresses (``kvm_host_passthrough_gpus``) is read as every one of them assigned to guests.
    """
    if assignment is None:
        return []
    if isinstance(assignment, (list, tuple)):
        assignment = dict.fromkeys(assignment, "guests")
    if not isinstance(assignment, dict):
        return [
            f"{source} on {host} must map PCI addresses to host or guests "
            f"(e.g. {{'{EXAMPLE}': guests}}), got {type(assignment).__name__}."
        ]
    problems = []
    for address, role in assignment.items():
        problem = _address_problem(address, gpus, host, source)
        if problem:
            problems.append(problem)
        if role not in ROLES:
            problems.append(
                f"{source} on {host} assigns {address} to {role!r}; assign each GPU to 'host' (bm and cn cells) "
                "or 'guests' (vm and vmcn cells)."
            )
    return problems


def checked_assignment(assignment, gpus, host="this host", source=SETTING):
    """``assignment`` with lower-case addresses, or GpuAssignmentError with every problem."""
    problems = assignment_problems(assignment, gpus, host, source)
    if problems:
        raise GpuAssignmentError(" ".join(problems))
    return {str(address).strip().lower(): role for address, role in (assignment or {}).items()}


def gpus_assigned_to(assignment, role, gpus, host="this host"):
    """The sorted PCI addresses of the host's GPUs assigned to ``role``: for ``guests`` those
    the assignment gives to guests, for ``host`` every other GPU of ``gpus``."""
    if role not in ROLES:
        raise GpuAssignmentError(f"the role must be 'host' or 'guests', got {role!r}")
    to_guests = {
        address for address, assigned in checked_assignment(assignment, gpus, host).items() if assigned == "guests"
    }
    return [address for address in _addresses(gpus) if (address in to_guests) == (role == "guests")]


def drivers(gpus):
    """PCI address -> the kernel driver bound to it now (None when none)."""
    return {str(gpu["pci_address"]).lower(): gpu.get("driver") for gpu in gpus or ()}


def host_pool(assignment, gpus, host="this host"):
    """The GPUs bm and cn cells can use: assigned to the host and not bound to vfio-pci, in PCI order."""
    bound = drivers(gpus)
    return [address for address in gpus_assigned_to(assignment, "host", gpus, host) if bound[address] != VFIO_DRIVER]


def guest_pool(assignment, gpus, host="this host"):
    """The GPUs vm and vmcn cells can pass through: those assigned to guests, in PCI order."""
    return gpus_assigned_to(assignment, "guests", gpus, host)


def cuda_indexes(addresses, gpus):
    """Where ``addresses`` stand among the GPUs the NVIDIA driver can see (every GPU not bound
    to vfio-pci, in PCI order): their CUDA index with CUDA_DEVICE_ORDER=PCI_BUS_ID, and
    nvidia-smi's index, which the NVIDIA container runtime takes."""
    bound = drivers(gpus)
    visible = [address for address in sorted(bound) if bound[address] != VFIO_DRIVER]
    return [visible.index(address) for address in addresses]


def vfio_functions(addresses, gpus):
    """The PCI functions to bind to vfio-pci for passing ``addresses`` through: each GPU and the
    other functions of its slot (its HDMI audio, USB-C controller), which share its IOMMU group."""
    by_address = {str(gpu["pci_address"]).lower(): gpu for gpu in gpus or ()}
    functions = set()
    for address in addresses:
        address = str(address).lower()
        functions.add(address)
        functions.update(str(other).lower() for other in by_address.get(address, {}).get("slot_functions") or ())
    return sorted(functions)


def pci_address_parts(address):
    """'0000:3b:00.0' -> the hex fields of a libvirt <address> element."""
    text = str(address).strip().lower()
    if not FULL_ADDRESS.match(text):
        raise GpuAssignmentError(f"'{address}' is not a full PCI address (domain:bus:slot.function, e.g. {EXAMPLE})")
    domain, bus, rest = text.split(":")
    slot, function = rest.split(".")
    return {"domain": "0x" + domain, "bus": "0x" + bus, "slot": "0x" + slot, "function": "0x" + function}


def describe(addresses, gpus):
    """'0000:3b:00.0 (nvidia), 0000:af:00.0 (no driver)'"""
    bound = drivers(gpus)
    return ", ".join(f"{address} ({bound.get(address) or 'no driver'})" for address in addresses) or "none"


def describe_all(assignment, gpus, host="this host"):
    """'0000:3b:00.0 (host, nvidia), 0000:af:00.0 (guests, vfio-pci)'"""
    to_guests = set(gpus_assigned_to(assignment, "guests", gpus, host))
    bound = drivers(gpus)
    return (
        ", ".join(
            f"{address} ({'guests' if address in to_guests else 'host'}, {bound[address] or 'no driver'})"
            for address in sorted(bound)
        )
        or "none"
    )
