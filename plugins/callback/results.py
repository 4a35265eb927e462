# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: results
type: aggregate
author: platbench developers
version_added: "0.1.0"
short_description: Record platbench experiment cells as samples
description:
  - Turns the result of every experiment cell into samples appended to C(RESULTS_DIR/samples.jsonl), one JSON
    object per line, flushed and synced to disk before the next cell runs, so an interrupted campaign loses
    nothing and can resume.
  - A cell task result carries C(platbench_cell), C(platbench_campaign), C(platbench_output) (the workload's
    output, holding one C(PLATBENCH_RESULT) line), C(platbench_error), C(platbench_env) and C(platbench_runtime).
    Results without C(platbench_cell) are ignored.
  - A cell that failed, whose output holds no valid result line, or whose workload reported C(status=failed) is
    recorded as one sample of metric C(failed) with the error and the tail of the output; the campaign goes on.
  - Writes C(RESULTS_DIR/run.json) (campaign, experiment, controller, versions, environment of each host) on the
    first cell and completes it with the finish time and cell counts when the playbook ends; a resumed campaign
    keeps the file and adds an entry to its C(resumes) list.
  - Timing comes from the workloads themselves, never from task durations.
  - Honours C(no_log) - a hidden result is not recorded, and a warning says so.
requirements:
  - Enable with C(callbacks_enabled = platbench.lab.results) in C(ansible.cfg).
"""

import datetime
import json
import os
import platform
import socket

import yaml

from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ansible_version

from ansible_collections.platbench.lab.plugins.module_utils.records import (
    FAILED_METRIC,
    RESULT_PREFIX,
    RecordError,
    append_samples,
    failed_sample,
    parse_result_lines,
    samples_from_record,
)

CELL_ACTIONS = "platbench.lab."
SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"
SUMMARY_METRICS = ("throughput", "elapsed")
_COLLECTION_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _collection_version():
    """platbench version from galaxy.yml (source tree) or MANIFEST.json (installed collection)."""
    try:
        with open(os.path.join(_COLLECTION_ROOT, "galaxy.yml"), encoding="utf-8") as stream:
            return yaml.safe_load(stream)["version"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        pass
    try:
        with open(os.path.join(_COLLECTION_ROOT, "MANIFEST.json"), encoding="utf-8") as stream:
            return json.load(stream)["collection_info"]["version"]
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _write_atomically(path, document):
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=2, sort_keys=True, default=str)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def _open_campaign(campaign):
    """run.json content for this run: a new campaign, or a resumed one with this run added to ``resumes``."""
    experiment = {key: value for key, value in (campaign.get("experiment") or {}).items() if key != "cells"}
    session = {"started": _now(), "finished": None, "controller": socket.gethostname(),
               "ansible_version": ansible_version, "python_version": platform.python_version(),
               "platbench_version": _collection_version(), "hosts": {}, "cells": {}}
    path = os.path.join(campaign["results_dir"], RUN_FILE)
    if not os.path.exists(path):
        os.makedirs(campaign["results_dir"], exist_ok=True)
        session.update(campaign=campaign["name"], experiment=experiment)
        return {"doc": session, "session": session}
    with open(path, encoding="utf-8") as stream:
        doc = json.load(stream)
    if experiment != doc.get("experiment"):
        session["experiment"] = experiment  # e.g. resumed with other overrides
    doc.setdefault("resumes", []).append(session)
    return {"doc": doc, "session": session}


def _cell_samples(data, labels, env, runtime, task_failed):
    """The samples of one cell: its metrics, or a single failed sample saying why there are none."""
    output = data.get("platbench_output") or ""

    def failed(error):
        return [failed_sample(labels, error, output, env, runtime)]

    error = data.get("platbench_error") or (task_failed and (data.get("msg") or "the cell task failed"))
    if error:
        return failed(error)
    try:
        records = parse_result_lines(output)
    except RecordError as exc:
        return failed(str(exc))
    if not records:
        return failed(f"the workload output holds no {RESULT_PREFIX.strip()} line")
    errors = [record["error"] or "the workload reported status failed"
              for record in records if record["status"] == "failed"]
    if errors:
        return failed("; ".join(errors))
    return [sample for record in records for sample in samples_from_record(record, labels, env, runtime)]


def _summary(samples):
    if samples[0]["metric"] == FAILED_METRIC:
        error = samples[0]["metadata"]["error"].strip().splitlines() or ["no error message"]
        return "FAILED: " + error[0][:160]
    # The headline metrics only; the file has them all.
    shown = [s for s in samples if s["metric"] in SUMMARY_METRICS] or samples[:2]
    return ", ".join(f"{sample['metric']}={sample['value']:.4g} {sample['unit']}" for sample in shown)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "platbench.lab.results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._campaigns = {}  # results_dir -> {"doc": run.json content, "session": this run's part of it}
        self._warned_no_log = False

    def v2_runner_on_ok(self, result):
        self._record(result, task_failed=False)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, task_failed=True)

    def v2_runner_item_on_ok(self, result):
        self._record(result, task_failed=False)

    def v2_runner_item_on_failed(self, result):
        self._record(result, task_failed=True)

    def v2_playbook_on_stats(self, stats):
        for results_dir, campaign in self._campaigns.items():
            campaign["session"]["finished"] = _now()
            _write_atomically(os.path.join(results_dir, RUN_FILE), campaign["doc"])

    def _record(self, result, task_failed):
        data = result._result
        if data.get("censored") or data.get("_ansible_no_log"):
            self._warn_hidden(result)
            return
        cell = data.get("platbench_cell")
        if not isinstance(cell, dict):
            return

        campaign = data["platbench_campaign"]
        env = data.get("platbench_env") or {}
        labels = {**cell.get("labels", {}), "cell": cell["id"], "campaign": campaign["name"]}
        labels["scenario"] = cell.get("scenario") or labels.get("scenario")
        session = self._session(campaign, result._host.get_name(), env)
        samples = _cell_samples(data, labels, env, data.get("platbench_runtime") or {}, task_failed)
        append_samples(os.path.join(campaign["results_dir"], SAMPLES_FILE), samples)

        status = "failed" if samples[0]["metric"] == FAILED_METRIC else "ok"
        session["cells"][status] = session["cells"].get(status, 0) + 1
        self._display.display(f"platbench: {cell['id']} {_summary(samples)}")

    def _warn_hidden(self, result):
        if self._warned_no_log:
            return
        # Only platbench's own tasks run cells; no_log elsewhere (credentials) is none of our business.
        action = result._task.resolved_action or result._task.action or ""
        if not (action.startswith(CELL_ACTIONS) or "platbench_cell" in result._result):
            return
        self._warned_no_log = True
        self._display.warning(
            f"platbench: the result of task '{result._task.get_name()}' on {result._host.get_name()} is hidden by "
            "no_log; if it ran an experiment cell, that cell was not recorded. Remove no_log from the cell task "
            "to record it.")

    def _session(self, campaign, host, env):
        """This run's entry in the campaign's run.json, which lists the environment of every host seen."""
        results_dir = campaign["results_dir"]
        if results_dir not in self._campaigns:
            self._campaigns[results_dir] = _open_campaign(campaign)
        state = self._campaigns[results_dir]
        if host not in state["session"]["hosts"]:
            state["session"]["hosts"][host] = env
            _write_atomically(os.path.join(results_dir, RUN_FILE), state["doc"])
        return state["session"]
