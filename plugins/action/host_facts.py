# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Runs the host_facts module on the host, then answers on the controller which of the host's GPUs stay with it
and which go to guests (``platbench_gpu_assignment``), so that no role re-derives it in Jinja."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.platbench.lab.plugins.plugin_utils.lab import gpus as gpu_pools

# Read from the task's variables (the inventory) when the task does not pass gpu_assignment.
ASSIGNMENT_VAR = gpu_pools.SETTING


def gpu_facts(assignment, gpus, host):
    """``host_gpus``, ``guest_gpus`` (sorted PCI addresses) and ``gpu_assignment_problems`` (messages; an entry
    with a problem is left out, so its GPU stays with the host, as a GPU not named does)."""
    problems = gpu_pools.assignment_problems(assignment, gpus, host)
    usable = {}
    if isinstance(assignment, dict):
        usable = {
            address: role
            for address, role in assignment.items()
            if role in gpu_pools.ROLES and not gpu_pools.assignment_problems({address: role}, gpus, host)
        }
    return {
        "host_gpus": gpu_pools.gpus_assigned_to(usable, "host", gpus, host),
        "guest_gpus": gpu_pools.gpus_assigned_to(usable, "guests", gpus, host),
        "gpu_assignment_problems": problems,
    }


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        assignment = args.pop("gpu_assignment", None)
        if assignment is None:
            assignment = self._templar.template(task_vars.get(ASSIGNMENT_VAR) or {})
        result.update(
            self._execute_module(module_name="platbench.lab.host_facts", module_args=args, task_vars=task_vars)
        )
        facts = (result.get("ansible_facts") or {}).get("platbench")
        if not result.get("failed") and isinstance(facts, dict):
            host = task_vars.get("inventory_hostname", "this host")
            facts.update(gpu_facts(assignment, facts.get("gpus") or [], host))
        return result
