# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A workload's command line from its parameters, and back: one place for the ``key`` <-> ``--key`` rule.

Shared by the cell plan, the ``workload_argv`` filter and the plan-time parameter check.
"""

from __future__ import annotations


class WorkloadArgsError(ValueError):
    """A parameter cannot become a command-line option."""


def flag_of(key):
    """``batch_size`` -> ``--batch-size``."""
    return "--" + str(key).replace("_", "-")


def key_of(flag):
    """``--batch-size`` -> ``batch_size``."""
    return flag.lstrip("-").replace("-", "_")


def workload_argv(params, workload):
    """The ``python`` arguments that run ``workloads.<workload>`` with ``params``.

    ``batch_size: 32`` becomes ``--batch-size 32``; a true boolean becomes a bare flag and a
    false one is left out.
    """
    argv = ["-m", f"workloads.{workload}"]
    for key, value in params.items():
        flag = flag_of(key)
        if isinstance(value, bool):
            if value:
                argv.append(flag)
        elif isinstance(value, (str, int, float)):
            argv.extend([flag, str(value)])
        else:
            raise WorkloadArgsError(f"workload_argv: parameter {key!r} must be a scalar, got {value!r}")
    return argv
