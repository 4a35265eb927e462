# -*- coding: utf-8 -*-
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Hand one experiment cell's outcome to the results callback, on the controller."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_version

# Output kept in the task result: enough for the callback to find the record line and to
# show why a cell failed, without holding megabytes of framework logs in memory.
MAX_OUTPUT_CHARS = 200_000


def _tail(text, limit=MAX_OUTPUT_CHARS):
    text = text or ""
    return text[-limit:]


class ActionModule(ActionBase):
    """Package the workload output, cell labels and host environment into one result."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("cell", "campaign", "output", "error", "runtime"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        unknown = set(args) - self._VALID_ARGS
        if unknown:
            raise AnsibleActionFail("record_cell got unknown arguments %s; valid: %s"
                                    % (sorted(unknown), sorted(self._VALID_ARGS)))
        cell, campaign = args.get("cell"), args.get("campaign")
        if not isinstance(cell, dict) or "id" not in cell or "labels" not in cell:
            raise AnsibleActionFail("record_cell needs 'cell' with 'id' and 'labels' (a cell of the expanded experiment)")
        if not isinstance(campaign, dict) or not campaign.get("name") or not campaign.get("results_dir"):
            raise AnsibleActionFail("record_cell needs 'campaign' with 'name' and 'results_dir'")

        error = args.get("error") or None
        result.update(
            changed=False,
            platbench_cell={"id": cell["id"], "scenario": cell.get("scenario"), "labels": cell["labels"]},
            platbench_campaign={"name": campaign["name"],
                                "results_dir": os.path.abspath(os.path.expanduser(campaign["results_dir"])),
                                "experiment": campaign.get("experiment", {})},
            platbench_output=_tail(args.get("output")),
            platbench_error=str(error) if error else None,
            platbench_env=self._environment(task_vars),
            platbench_runtime=args.get("runtime") or {},
        )
        if error:
            result["warnings"] = ["cell %s failed and is recorded as failed: %s" % (cell["id"], str(error)[:500])]
        return result

    @staticmethod
    def _environment(task_vars):
        """What the host looked like to Ansible; the workload adds what it saw itself."""
        facts = task_vars.get("ansible_facts", {})
        lab = facts.get("platbench", {})
        return {
            "host": task_vars.get("inventory_hostname"),
            "hostname": facts.get("hostname"),
            "kernel": facts.get("kernel"),
            "os": " ".join(str(p) for p in (facts.get("distribution"), facts.get("distribution_version")) if p),
            "cpu_model": lab.get("cpu_model"),
            "cpu_count": lab.get("cpu_count"),
            "threads_per_core": lab.get("threads_per_core"),
            "numa_nodes": len(lab.get("numa_nodes", {})) or None,
            "gpu_count": lab.get("gpu_count"),
            "host_virt": lab.get("virt"),
            "docker_version": task_vars.get("platform_run_docker_version"),
            "ansible_version": ansible_version,
        }
