"""The only reasons a test may be skipped, and the helpers that skip with them.

A skip says what this machine is or lacks that no make target can give it: an NVIDIA GPU (and, for
the tests of the GPU-less path, the absence of one), a kubelet, Apptainer, root; and for the OpenStack
test cloud, MariaDB or RabbitMQ that cannot be installed. Everything `make venv` or the lab (`site.yml`)
installs is required instead: ``requires(...)`` fails the test, saying which target installs it.

tests/suite.py fails the session on a skip whose reason does not start with one of ``ALLOWED``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

import pytest


class Reason(NamedTuple):
    key: str
    text: str  # every skip message with this reason starts with it, then ": " and the detail


NO_GPU = Reason("no-gpu", "this machine has no NVIDIA GPU")
HAS_GPU = Reason("has-gpu", "this machine has an NVIDIA GPU, so it does not take the GPU-less path")
NO_KUBELET = Reason("no-kubelet", "this machine runs no kubelet")
NO_APPTAINER = Reason("no-apptainer", "this machine has no Apptainer")
NOT_ROOT = Reason("not-root", "not root")
CLOUD_NOT_INSTALLABLE = Reason("cloud-not-installable", "MariaDB or RabbitMQ cannot be installed here")
ALLOWED = (NO_GPU, HAS_GPU, NO_KUBELET, NO_APPTAINER, NOT_ROOT, CLOUD_NOT_INSTALLABLE)

# Who installs what a test requires (the ``by`` of ``requires``).
VENV = "`make venv` (requirements.txt)"
LAB = "the lab (`site.yml`, which the `lab` fixture runs)"


def message(reason, detail):
    return f"{reason.text}: {detail}" if detail else reason.text


def allowed_reason(text):
    """The Reason that a skip message ``text`` gives, or None when it gives none of ``ALLOWED``."""
    for reason in ALLOWED:
        if text == reason.text or text.startswith(reason.text + ": "):
            return reason
    return None


# -- what this machine is -----------------------------------------------------------------------------------------


def nvidia_gpu():
    """What shows an NVIDIA GPU here (a PCI device of vendor 0x10de, the driver's /proc entry,
    nvidia-smi), or None when nothing does."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        if Path(vendor).read_text().strip() == "0x10de":
            return f"PCI device {Path(vendor).parent.name}"
    if Path("/proc/driver/nvidia/gpus").exists():
        return "/proc/driver/nvidia/gpus"
    return shutil.which("nvidia-smi")


def is_root():
    return os.geteuid() == 0


def skip(reason, detail=""):
    pytest.skip(message(reason, detail))


def unless_root(detail=""):
    """Skip the running test (or fixture) unless this process is root."""
    if not is_root():
        skip(NOT_ROOT, detail)


def unless_gpu(detail=""):
    if nvidia_gpu() is None:
        skip(NO_GPU, detail)


def unless_no_gpu(detail=""):
    found = nvidia_gpu()
    if found is not None:
        skip(HAS_GPU, f"{found}; {detail}" if detail else found)


def needs_root(detail=""):
    return pytest.mark.skipif(not is_root(), reason=message(NOT_ROOT, detail))


def needs_gpu(detail=""):
    return pytest.mark.skipif(nvidia_gpu() is None, reason=message(NO_GPU, detail))


def needs_no_gpu(detail=""):
    found = nvidia_gpu()
    return pytest.mark.skipif(found is not None, reason=message(HAS_GPU, f"{found}; {detail}" if detail else found))


def needs_kubelet(detail=""):
    return pytest.mark.skipif(shutil.which("kubelet") is None, reason=message(NO_KUBELET, detail))


def needs_apptainer(detail=""):
    return pytest.mark.skipif(shutil.which("apptainer") is None, reason=message(NO_APPTAINER, detail))


# -- what the make targets install: required, never skipped ------------------------------------------------------


def requires(*, modules=(), commands=(), by=VENV):
    """A mark: the test fails when a Python module or a command is missing, naming
    what installs it (tests/suite.py checks it once the test's fixtures are set up)."""
    return pytest.mark.requires(modules=tuple(modules), commands=tuple(commands), by=by)


def missing(modules=(), commands=(), by=VENV):
    """The failure message for what of ``modules`` and ``commands`` is missing, or None."""
    gone = [
        f"the Python module {name!r} (in {sys.prefix})" for name in modules if importlib.util.find_spec(name) is None
    ]
    gone += [f"the command `{name}` (on PATH)" for name in commands if shutil.which(name) is None]
    if not gone:
        return None
    verb, pronoun = ("is", "it") if len(gone) == 1 else ("are", "them")
    return f"{' and '.join(gone)} {verb} missing: {by} installs {pronoun}"


def require(*, modules=(), commands=(), by=VENV):
    """Fail the running test (or fixture) now when a module or command is missing, naming what installs it."""
    problem = missing(modules, commands, by)
    if problem:
        pytest.fail(problem, pytrace=False)


def needs_lab(*commands):
    """Decorator of a test that runs tools the lab installs: marker ``lab`` (so `make unit` leaves it out),
    the session's ``lab`` fixture (the lab is built first), and the tools required."""
    marks = (pytest.mark.lab, pytest.mark.usefixtures("lab"), requires(commands=commands, by=LAB))

    def apply(test):
        for mark in marks:
            test = mark(test)
        return test

    return apply
