# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: results
type: aggregate
author: platbench developers (@platbench)
version_added: "0.1.0"
short_description: Record platbench experiment cells as samples
description:
  - Appends the samples of every experiment cell to C(RESULTS_DIR/samples.jsonl), one JSON object per line,
    flushed and synced to disk before the next cell runs, so an interrupted campaign loses nothing and can resume.
  - Decides nothing. The C(platbench.lab.record_cell) action parses the workload's output, decides whether the cell
    is ok or failed and returns the finished samples in C(platbench_samples), with C(platbench_cell),
    C(platbench_campaign), C(platbench_status), C(platbench_error) and C(platbench_env). Results without
    C(platbench_cell) are ignored.
  - Writes C(RESULTS_DIR/run.json) (campaign, experiment, controller, versions, environment of each host) on the
    first cell and completes it with the finish time and cell counts when the playbook ends; a resumed campaign
    keeps the file and adds an entry to its C(resumes) list.
  - At the end of the run, prints per campaign the cells ok, failed and skipped (a workload that could not
    measure there by design, such as a GPU benchmark in a CPU cell; no failure), and each failed cell with
    the first line of its error (after Ansible's recap, where a failed cell's record task counts as ok so that
    the campaign goes on; its warning shows in the play output).
  - Timing comes from the workloads themselves, never from task durations.
  - A write that fails (a full disk) leaves no partial line - the samples file is cut back to its size before it,
    the cell is not recorded, a warning says so, and a resumed campaign runs that cell again. The
    C(platbench.lab.record_cell) action stops a campaign whose results directory has no room before that.
  - Records the orchestration's own cost of every cell in C(run.json), under C(overhead) by cell id. C(before_launch_s)
    runs from the runner host deciding to run the cell (the cell selection, or the sample of its previous cell on disk)
    to the workload's launch (its record's C(metadata.launched_at)); C(after_exit_s) from its record to its samples
    synced to disk. Each entry names the cell's C(kind) and C(platform). Guests' clocks may differ from the host's.
  - Writes the files an ok cell's record keeps (C(platbench_files), for example loadgen's logs) under
    C(RESULTS_DIR/files/<cell folder>/) before its samples, which name them in C(metadata.kept_files).
  - Honours C(no_log) - a hidden result is not recorded, and a warning says so.
  - Makes the results directory and its files with the invoking user's umask, never writable by others
    (plugins/plugin_utils/records/file_modes.py).
requirements:
  - Enable with C(callbacks_enabled = platbench.lab.results) in C(ansible.cfg).
"""

import datetime
import json
import os
import platform
import socket
import time

import yaml
from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ansible_version
from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import no_world_write
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    FAILED_METRIC,
    SKIPPED_METRIC,
    append_samples,
    write_cell_files,
    write_json,
)

# The actions that record a cell: only their no_log hides a cell (other platbench modules use
# no_log for passwords and tokens, which is none of the callback's business).
CELL_ACTIONS = ("platbench.lab.record_cell",)
SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"
SUMMARY_METRICS = ("throughput", "elapsed")
STATUSES = ("ok", "failed", "skipped")  # what record_cell decides a cell ended as
# The fact platform_run's precheck sets when a runner host has chosen its cells: the start of its first cell.
SELECTION_FACT = "platform_run_selection"
FAILED_SHOWN = 20  # failed cells listed by name at the end of a run; the file has them all
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


def _open_campaign(campaign):
    """run.json content for this run: a new campaign, or a resumed one with this run added to ``resumes``."""
    experiment = campaign.get("experiment") or {}  # without its expanded cells (record_cell leaves them out)
    session = {
        "started": _now(),
        "finished": None,
        "controller": socket.gethostname(),
        "ansible_version": ansible_version,
        "python_version": platform.python_version(),
        "platbench_version": _collection_version(),
        "hosts": {},
        "cells": {},
    }
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


def _summary(samples):
    if samples[0]["metric"] == FAILED_METRIC:
        return "FAILED: " + _first_line(samples[0]["metadata"].get("error"))
    if all(sample["metric"] == SKIPPED_METRIC for sample in samples):
        return "SKIPPED: " + _first_line(samples[0]["metadata"].get("reason"))
    # The headline metrics only; the file has them all.
    shown = [s for s in samples if s["metric"] in SUMMARY_METRICS] or samples[:2]
    return ", ".join(f"{sample['metric']}={sample['value']:.4g} {sample['unit']}" for sample in shown)


def cell_overhead(cell, sample, decided, on_disk):
    """The orchestration's seconds around one cell's workload (see DOCUMENTATION), or None without a record's
    launch time (a cell that failed before its workload started)."""
    launched = (sample.get("metadata") or {}).get("launched_at")
    exited = sample.get("timestamp")
    if not isinstance(launched, (int, float)) or not isinstance(exited, (int, float)):
        return None
    return {
        "kind": cell.get("kind"),
        "platform": (cell.get("labels") or {}).get("platform"),
        "before_launch_s": None if decided is None else round(launched - decided, 3),
        "after_exit_s": round(on_disk - exited, 3),
    }


def _first_line(error):
    lines = str(error or "").strip().splitlines() or ["no error message"]
    return lines[0][:160]


def _valid_samples(samples):
    return (
        isinstance(samples, list)
        and samples
        and all(isinstance(sample, dict) and "metric" in sample for sample in samples)
    )


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "platbench.lab.results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._campaigns = {}  # results_dir -> {"doc": run.json content, "session": this run's part of it}
        self._failed = {}  # results_dir -> [(cell id, first line of its error)] of this run
        self._warned_no_log = False
        self._decided = {}  # host -> when it decided to run its next cell (epoch seconds)

    def v2_runner_on_ok(self, result):
        if SELECTION_FACT in (result._result.get("ansible_facts") or {}):
            self._decided[result._host.get_name()] = time.time()
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result)

    def v2_runner_item_on_ok(self, result):
        self._record(result)

    def v2_runner_item_on_failed(self, result):
        self._record(result)

    def v2_playbook_on_stats(self, stats):
        for results_dir, campaign in self._campaigns.items():
            session = campaign["session"]
            session["finished"] = _now()
            try:
                with no_world_write():
                    write_json(os.path.join(results_dir, RUN_FILE), campaign["doc"])
            except OSError as exc:
                self._display.warning(f"platbench: {RUN_FILE} of campaign {campaign['name']} was not updated: {exc}")
            self._show_summary(campaign["name"], results_dir, session["cells"])

    def _show_summary(self, name, results_dir, cells):
        failed = self._failed.get(results_dir, [])
        # Skipped cells (could not measure here by design) are no failure; named only when there are some.
        skipped = f", skipped: {cells['skipped']}" if cells.get("skipped") else ""
        self._display.display(
            f"platbench: campaign {name}: cells ok: {cells.get('ok', 0)}, "
            f"failed: {cells.get('failed', 0)}{skipped}; samples in {results_dir}/{SAMPLES_FILE}",
            color="red" if failed else "green",
        )
        for cell_id, error in failed[:FAILED_SHOWN]:
            self._display.display(f"platbench:   FAILED {cell_id}: {error}", color="red")
        if len(failed) > FAILED_SHOWN:
            self._display.display(
                f"platbench:   ... and {len(failed) - FAILED_SHOWN} more failed cells "
                f"(metric 'failed' in {SAMPLES_FILE})",
                color="red",
            )

    def _record(self, result):
        with no_world_write():
            self._record_cell(result)

    def _record_cell(self, result):
        data = result._result
        if data.get("censored") or data.get("_ansible_no_log"):
            self._warn_hidden(result)
            return
        cell = data.get("platbench_cell")
        if not isinstance(cell, dict):
            return
        samples = data.get("platbench_samples")
        if not _valid_samples(samples) or data.get("platbench_status") not in STATUSES:
            # Nothing to persist: say so rather than invent a sample or a status the action did not decide.
            self._display.warning(
                f"platbench: the result of task '{result._task.get_name()}' for cell "
                f"{cell.get('id')} carries no platbench_samples and platbench_status; that cell was not recorded"
            )
            return

        campaign = data["platbench_campaign"]
        host = result._host.get_name()
        try:
            session = self._session(campaign, host, data.get("platbench_env") or {})
            # Files first: a cell whose samples are on disk (done, for a resume) has its files there too.
            write_cell_files(campaign["results_dir"], data.get("platbench_files") or {})
            append_samples(os.path.join(campaign["results_dir"], SAMPLES_FILE), samples)
        except OSError as exc:
            # A full disk (record_cell checks for room first, but another writer may have taken it since): the
            # samples were taken back whole, so a resume runs the cell again.
            self._display.warning(
                f"platbench: cell {cell['id']} was NOT recorded: {exc}. Free space in {campaign['results_dir']}, "
                "then rerun the campaign: that cell runs again"
            )
            return
        on_disk = time.time()
        overhead = cell_overhead(cell, samples[0], self._decided.get(host), on_disk)
        self._decided[host] = on_disk  # the next cell of this host is decided from here
        if overhead:
            session.setdefault("overhead", {})[cell["id"]] = overhead
            run_doc = self._campaigns[campaign["results_dir"]]["doc"]
            try:
                write_json(os.path.join(campaign["results_dir"], RUN_FILE), run_doc)
            except OSError as exc:
                self._display.warning(f"platbench: the overhead of cell {cell['id']} is not in {RUN_FILE}: {exc}")

        status = data["platbench_status"]
        session["cells"][status] = session["cells"].get(status, 0) + 1
        if status == "failed":
            self._failed.setdefault(campaign["results_dir"], []).append(
                (cell["id"], _first_line(data.get("platbench_error") or samples[0]["metadata"].get("error")))
            )
        self._display.display(f"platbench: {cell['id']} {_summary(samples)}")

    def _warn_hidden(self, result):
        if self._warned_no_log:
            return
        action = result._task.resolved_action or result._task.action or ""
        if not (action in CELL_ACTIONS or "platbench_cell" in result._result):
            return
        self._warned_no_log = True
        self._display.warning(
            f"platbench: the result of task '{result._task.get_name()}' on {result._host.get_name()} is hidden by "
            "no_log; if it ran an experiment cell, that cell was not recorded. Remove no_log from the cell task "
            "to record it."
        )

    def _session(self, campaign, host, env):
        """This run's entry in the campaign's run.json, which lists the environment of every host seen."""
        results_dir = campaign["results_dir"]
        if results_dir not in self._campaigns:
            self._campaigns[results_dir] = {**_open_campaign(campaign), "name": campaign["name"]}
        state = self._campaigns[results_dir]
        if host not in state["session"]["hosts"]:
            state["session"]["hosts"][host] = env
            write_json(os.path.join(results_dir, RUN_FILE), state["doc"])
        return state["session"]
