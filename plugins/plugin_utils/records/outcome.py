# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The outcome of one experiment cell: ok with its samples, failed with one sample saying why, or
skipped (the workload could not measure here by design) with one sample giving the reason.

Decided once, on the controller, by the ``record_cell`` action; the results callback only
writes down what it is handed.
"""

from __future__ import annotations

import json

from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    FAILED_METRIC,
    RESULT_PREFIX,
    RecordError,
    Sample,
    cell_files,
    cell_folder,
    failed_output_path,
    failed_sample,
    json_safe,
    parse_result_lines,
    samples_from_record,
    skipped_sample,
)

OK, FAILED, SKIPPED = "ok", "failed", "skipped"
# A shared cell's foreground is measured alone and beside its background (plugins/plugin_utils/cells/several.py);
# Lin 2018 reports the degradation of its elapsed time.
SHARE, ALONE, SHARED = "share", "alone", "shared"
DEGRADED_METRIC, DEGRADATION_METRIC = "elapsed", "degradation"
# A record's per-step figures (step_times, data_waits, losses: one number per timed step, thousands in a 10 s window)
# would be repeated in the metadata of each of its samples, a megabyte per cell that every cell's record, the results
# callback and every report then carry: a list at least this long goes once to a file of the cell's folder instead,
# which each of its samples names in metadata.series_file.
SERIES_MIN_ITEMS = 64
SERIES_FILE_NAME = "series-{index}.json"


def cell_labels(cell, campaign_name):
    """The labels every sample of ``cell`` carries: the matrix's, plus the cell id and the campaign."""
    labels = {**cell.get("labels", {}), "cell": cell["id"], "campaign": campaign_name}
    labels["scenario"] = cell.get("scenario") or labels.get("scenario")
    return labels


def workload_errors(output):
    """The errors of the failed records in ``output``, or None when it holds no valid failed record."""
    try:
        records = parse_result_lines(output)
    except RecordError:
        return None
    return _failed_record_errors(records)


def _failed_record_errors(records):
    errors = [
        record["error"] or "the workload reported status failed" for record in records if record["status"] == FAILED
    ]
    return "; ".join(errors) if errors else None


def cell_outcome(labels, output, error, env, runtime):
    """``(status, error, samples)`` of one cell.

    ``error``: why the platform says the cell failed (None when its tasks succeeded). Otherwise
    the cell failed when its output holds no valid result line or a record of status failed. A
    record of status skipped becomes one ``skipped`` sample; a cell of skipped records only is
    skipped, ``error`` its reasons.
    """

    def failed(why):
        return FAILED, str(why), [failed_sample(labels, why, output, env, runtime)]

    if error:
        return failed(error)
    try:
        records = parse_result_lines(output)
    except RecordError as exc:
        return failed(str(exc))
    if not records:
        return failed(f"the workload output holds no {RESULT_PREFIX.strip()} line")
    errors = _failed_record_errors(records)
    if errors:
        return failed(errors)
    samples = []
    for record in records:
        if record["status"] == SKIPPED:
            samples.append(skipped_sample(record, labels, env, runtime))
        else:
            samples += samples_from_record(record, labels, env, runtime)
    skipped = [record["error"] for record in records if record["status"] == SKIPPED]
    if len(skipped) == len(records):
        return SKIPPED, "; ".join(dict.fromkeys(skipped)), samples
    return OK, None, samples + degradation_samples(samples)


def degradation_samples(samples):
    """A shared cell's degradation: (elapsed beside the background - elapsed alone) / elapsed alone x 100, as one
    sample with the shared run's labels but ``share``; [] for a cell that does not hold both runs."""
    runs = {
        sample["labels"].get(SHARE): sample
        for sample in samples
        if sample["metric"] == DEGRADED_METRIC and sample["labels"].get(SHARE) in (ALONE, SHARED)
    }
    if set(runs) != {ALONE, SHARED} or not runs[ALONE]["value"]:
        return []
    alone, shared = runs[ALONE], runs[SHARED]
    labels = {key: value for key, value in shared["labels"].items() if key != SHARE}
    metadata = {**shared["metadata"], "elapsed_alone": alone["value"], "elapsed_shared": shared["value"]}
    value = (shared["value"] - alone["value"]) / alone["value"] * 100
    return [Sample.read(shared).but(metric=DEGRADATION_METRIC, value=value, unit="%", labels=labels, metadata=metadata)]


def kept_files(cell_id, output, samples):
    """The files the ok records in ``output`` keep, as {path relative to the results directory: text}; each of
    ``samples`` then names them in ``metadata.kept_files`` ({file name: that path}). {} for a cell that is not ok."""
    try:
        files = cell_files(cell_id, parse_result_lines(output))
    except RecordError:
        return {}
    if files:
        named = {path.rsplit("/", 1)[1]: path for path in files}
        for sample in samples:
            sample["metadata"]["kept_files"] = dict(named)
    return files


def series_files(cell_id, samples):
    """Move the long lists (SERIES_MIN_ITEMS or more) out of ``samples``' metadata into files of the cell's folder,
    one per record (the samples of one record share their lists), as {path relative to the results directory: JSON
    text of {name: list}}; each sample keeps the path in ``metadata.series_file``. {} where no list is that long."""
    files, paths, by_lists = {}, {}, {}
    for sample in samples:
        metadata = sample["metadata"]
        series = {
            name: value
            for name, value in metadata.items()
            if isinstance(value, list) and len(value) >= SERIES_MIN_ITEMS
        }
        if not series:
            continue
        # The samples of one record hold the same list objects: each record's lists are encoded once.
        lists = tuple((name, id(value)) for name, value in series.items())
        if lists not in by_lists:
            text = json.dumps(json_safe(series), sort_keys=True, allow_nan=False, default=str)
            if text not in paths:
                paths[text] = f"{cell_folder(cell_id)}/{SERIES_FILE_NAME.format(index=len(paths) + 1)}"
                files[paths[text]] = text
            by_lists[lists] = paths[text]
        sample["metadata"] = {
            **{name: value for name, value in metadata.items() if name not in series},
            "series_file": by_lists[lists],
        }
    return files


def failed_output_file(cell_id, output, samples):
    """A failed cell's whole ``output`` as a file of its folder, {path relative to the results directory: text}, which
    its failed sample (of ``samples``) names in ``metadata.output_file``; {} without output or failed sample."""
    failed = [sample for sample in samples if sample["metric"] == FAILED_METRIC]
    if not (output or "").strip() or not failed:
        return {}
    path = failed_output_path(cell_id, failed[0]["timestamp"])
    for sample in failed:
        sample["metadata"]["output_file"] = path
    return {path: output}
