# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Decide one experiment cell's outcome on the controller and hand its samples to the results callback."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_version
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.records import harness_marks
from ansible_collections.platbench.lab.plugins.plugin_utils.records.failures import (
    describe_failure,
    failure_output,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.records.outcome import (
    FAILED,
    OK,
    cell_labels,
    cell_outcome,
    failed_output_file,
    kept_files,
    series_files,
    workload_errors,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import room_problem

# Output parsed for the record: enough to find the record line and the tail of a failure, without parsing
# megabytes of framework logs. A failed cell's whole output is kept in a file of its own (outcome.failed_output_file).
MAX_OUTPUT_CHARS = 200_000
WARNING_CHARS = 500


def _tail(text, limit=MAX_OUTPUT_CHARS):
    text = text or ""
    return text[-limit:]


def failure_error(failure, output, timeout=None):
    """The error message of a ``failure: {task, result}`` argument (see failures.describe_failure);
    ``timeout``: the cell's timeout (its plan's), which a process cell stopped by it is described with."""
    if not isinstance(failure, dict) or not {"task", "result"} >= set(failure):
        raise AnsibleActionFail(
            "record_cell: 'failure' must be a mapping with 'task' (ansible_failed_task.name) "
            f"and 'result' (ansible_failed_result), got {str(failure)[:200]!r}"
        )
    return describe_failure(
        failure.get("task"), failure.get("result") or {}, workload_error=workload_errors(output), timeout=timeout
    )


class ActionModule(ActionBase):
    """Parse the workload output, decide ok or failed, and return the cell's finished samples."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("cell", "campaign", "plan", "results", "engines", "output", "error", "failure", "runtime"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        unknown = set(args) - self._VALID_ARGS
        if unknown:
            raise AnsibleActionFail(
                "record_cell got unknown arguments %s; valid: %s" % (sorted(unknown), sorted(self._VALID_ARGS))
            )
        cell, campaign = args.get("cell"), args.get("campaign")
        if not isinstance(cell, dict) or "id" not in cell or "labels" not in cell:
            raise AnsibleActionFail(
                "record_cell needs 'cell' with 'id' and 'labels' (a cell of the expanded experiment)"
            )
        if not isinstance(campaign, dict) or not campaign.get("name") or not campaign.get("results_dir"):
            raise AnsibleActionFail("record_cell needs 'campaign' with 'name' and 'results_dir'")

        failure = args.get("failure")
        output, runtime, observed_error = self._observed(args, self._registered(args, task_vars))
        if failure and not output.strip():
            output = failure_output((failure or {}).get("result") if isinstance(failure, dict) else None)
        whole_output, output = output, _tail(output)
        error = (
            args.get("error")
            or observed_error
            or (failure_error(failure, output, timeout=(args.get("plan") or {}).get("timeout")) if failure else None)
        )
        env = self._environment(task_vars, args.get("engines") or {})
        status, error, samples = cell_outcome(cell_labels(cell, campaign["name"]), output, error, env, runtime)
        # Where the harness was, and what it cost the cell's CPUs during its timed part (records/harness_marks.py).
        local = task_vars.get("ansible_connection") == "local" or task_vars.get("inventory_hostname") == "localhost"
        samples = harness_marks.with_marks(
            samples, task_vars.get("platbench_harness"), (args.get("plan") or {}).get("cpuset"), local
        )
        # The files an ok record keeps (loadgen's logs), or a failed cell's whole output: the callback writes them
        # beside the samples.
        if status == OK:
            files = {**kept_files(cell["id"], output, samples), **series_files(cell["id"], samples)}
        elif status == FAILED:
            files = failed_output_file(cell["id"], whole_output, samples)
        else:
            files = {}
        # A full disk stops the campaign here, before the callback would have to cut a write short.
        problem = room_problem(os.path.abspath(os.path.expanduser(campaign["results_dir"])), samples, files)
        if problem:
            raise AnsibleActionFail(f"cell {cell['id']} is not recorded: {problem}")
        result.update(
            changed=False,
            platbench_cell={
                "id": cell["id"],
                "scenario": cell.get("scenario"),
                "labels": cell["labels"],
                "kind": (args.get("plan") or {}).get("kind"),
            },
            platbench_campaign={
                "name": campaign["name"],
                "results_dir": os.path.abspath(os.path.expanduser(campaign["results_dir"])),
                # run.json keeps the experiment's definition; the expanded cells, should a caller pass them, go.
                "experiment": plan_file.definition(campaign.get("experiment")),
            },
            platbench_status=status,
            platbench_error=error,
            platbench_samples=samples,
            platbench_files=files,
            platbench_env=env,
        )
        if status == FAILED:
            # The task stays ok so that the campaign goes on; the warning and the callback's summary
            # at the end of the run are where a failed cell shows.
            # Ansible keeps warnings when no_log censors a result: the error, which may quote secrets, stays out.
            hidden = self._task.no_log or getattr(self._play_context, "no_log", False)
            shown = "(error hidden by no_log)" if hidden else error[:WARNING_CHARS]
            result["warnings"] = [f"cell {cell['id']} failed and is recorded as failed: {shown}"]
        return result

    def _registered(self, args, task_vars):
        """The registered results the cell's kinds left: ``results`` where the task gives them (a duet pair's side),
        else each variable of the table the kinds declare (placements.RESULTS; tasks/cell.yml forgets them all before
        every cell, so that a cell never reads the one before's)."""
        if args.get("results") is not None or not args.get("plan"):
            return args.get("results")
        # Registered and set_fact values are data, never templates: they are taken as they are (templating them
        # would only cost time, per cell).
        return {name: task_vars.get(variable) or {} for name, variable in placements.RESULTS.items()}

    @staticmethod
    def _observed(args, results):
        """The output, runtime and error of the cell: with ``plan``, what its kind maps from the engine's
        registered ``results`` (plugins/plugin_utils/placements/), on top of what the plan asked for;
        without, the ``output`` and ``runtime`` given."""
        plan = args.get("plan") or {}
        runtime = dict(args.get("runtime") or {})
        if not plan:
            return args.get("output") or "", runtime, None
        if not isinstance(plan, dict) or not isinstance(results or {}, dict):
            raise AnsibleActionFail("record_cell: 'plan' (a cell_plan) and 'results' must be mappings")
        try:
            observed = placements.observed(plan, results or {})
        except (placements.PlacementError, ValueError) as exc:
            raise AnsibleActionFail(f"record_cell: {exc}") from None
        runtime = {**runtime, **(plan.get("runtime") or {}), **observed.runtime}
        return args.get("output") or observed.output, runtime, observed.error

    @staticmethod
    def _environment(task_vars, engines):
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
            # The host's Docker engine as platform_status found it (the `engines` argument), as the record has always
            # said; a container cell's own engine and its version (docker_version, podman_version) are in its runtime.
            "docker_version": (engines.get("docker") or {}).get("version"),
            "ansible_version": ansible_version,
        }
