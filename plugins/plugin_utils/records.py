# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Workload result records and the samples stored from them.

A workload prints one line ``PLATBENCH_RESULT {json}``; each metric of that record
becomes one sample (design.md) appended to ``results/<campaign>/samples.jsonl``.
Pure Python so that the callback, the report and the tests share one implementation.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time

# The record format is the workloads' own (workloads/common/record.py): one definition of the
# prefix, the schema and the parser, re-exported here for the controller side.
from ansible_collections.platbench.lab.plugins.plugin_utils.matrix import CELL_LABELS
from ansible_collections.platbench.lab.workloads.common import record as _record

RESULT_PREFIX = _record.RESULT_PREFIX
SCHEMA_VERSION = _record.SCHEMA_VERSION
RecordError = _record.RecordError
parse_result_lines = _record.parse_result_lines

FAILED_METRIC = "failed"
# A cell that could not measure here by design (a GPU benchmark without a GPU): one sample of this
# metric, the reason in metadata.reason. Not a failure; the cell is done for resume.
SKIPPED_METRIC = "skipped"
# The metrics that are no measurement: never in a table, a Diff% or a chart.
OUTCOME_METRICS = (FAILED_METRIC, SKIPPED_METRIC)
TAIL_LINES = 40
TAIL_CHARS = 4000
# The files a record keeps (its ``files``, e.g. loadgen's logs) go to RESULTS_DIR/files/<cell folder>/<name>.
CELL_FILES_DIR = "files"
_UNSAFE_IN_FOLDER_NAME = re.compile(r"[^A-Za-z0-9=._-]+")


def _merged(*layers):
    merged = {}
    for layer in layers:
        merged.update(layer or {})
    return merged


def record_labels(record, cell_labels):
    """The labels every sample of ``record`` carries: the cell's first, then the workload's own.
    The cell's win (the matrix defines the scenario)."""
    return {**cell_labels, **{key: value for key, value in record["labels"].items() if key not in cell_labels}}


def metric_labels(labels, entry):
    """``labels`` with a metric entry's own labels (the HPL size of one ``hpl_gflops``...) last. They tell
    the entries of one record apart, so they win over a workload parameter of the same name (a list of
    sizes given as one option), never over the scenario's labels."""
    own = {key: value for key, value in (entry.get("labels") or {}).items() if key not in CELL_LABELS}
    return {**labels, **own}


def samples_from_record(record, cell_labels, env_metadata, runtime_metadata):
    """One sample per metric of ``record``.

    Labels: see ``record_labels`` and ``metric_labels``.
    Metadata: host environment < runtime (what was requested) < record (what the
    workload saw), so the workload's own observation is the truth.
    """
    labels = record_labels(record, cell_labels)
    metadata = _merged(env_metadata, runtime_metadata, record["metadata"])
    return [
        {
            "metric": metric["metric"],
            "value": metric["value"],
            "unit": metric["unit"],
            "timestamp": record["timestamp"],
            "labels": metric_labels(labels, metric),
            "metadata": dict(metadata),
        }
        for metric in record["metrics"]
    ]


def skipped_sample(record, cell_labels, env_metadata, runtime_metadata):
    """The single sample of a ``skipped`` record: metric ``skipped``, value 1, the reason in metadata.reason."""
    metadata = _merged(env_metadata, runtime_metadata, record["metadata"], {"reason": record["error"]})
    return {
        "metric": SKIPPED_METRIC,
        "value": 1,
        "unit": "",
        "timestamp": record["timestamp"],
        "labels": record_labels(record, cell_labels),
        "metadata": metadata,
    }


def tail_of(output):
    """The last lines of a workload's output, short enough to store with every failure."""
    tail = "\n".join((output or "").splitlines()[-TAIL_LINES:])
    return tail[-TAIL_CHARS:]


def failed_sample(cell_labels, error, output_tail, env_metadata, runtime_metadata):
    """The single sample that records a failed cell, with its error and output tail."""
    metadata = _merged(env_metadata, runtime_metadata, {"error": str(error), "output_tail": tail_of(output_tail)})
    return {
        "metric": FAILED_METRIC,
        "value": 1,
        "unit": "cell",
        "timestamp": time.time(),
        "labels": dict(cell_labels),
        "metadata": metadata,
    }


def _json_safe(value):
    # Strict JSON has no NaN/Infinity; metadata from a workload may still carry them.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def append_samples(path, samples):
    """Append one JSON line per sample in a single write, then flush and fsync.

    The file is only ever appended to. A line left incomplete by an earlier crash is
    closed first so that the new samples start on a line of their own.
    """
    if not samples:
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    data = "".join(json.dumps(_json_safe(sample), allow_nan=False, default=str) + "\n" for sample in samples).encode(
        "utf-8"
    )
    created = not os.path.exists(path)
    with open(path, "a+b") as stream:
        if stream.tell() > 0:
            stream.seek(-1, os.SEEK_END)
            if stream.read(1) != b"\n":
                data = b"\n" + data
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    if created:
        # Make the new directory entry durable too.
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_samples(path, on_bad_line=None, is_sample=None):
    """All samples in ``path``; lines that do not decode (a write cut by a crash) are skipped.

    ``on_bad_line(line_number, line)`` is called for each skipped line; ``is_sample(object)``, when given, also
    skips the JSON objects it turns down.
    """
    samples = []
    with open(path, encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError:
                sample = None
            if isinstance(sample, dict) and (is_sample is None or is_sample(sample)):
                samples.append(sample)
            elif on_bad_line is not None:
                on_bad_line(number, line.rstrip("\n"))
    return samples


def done_cells(path, host=None):
    """Ids of the cells that already have a successful or skipped sample in ``path`` (for resume).

    ``host``: only the cells measured by that inventory host (its ``host`` label); samples
    without a ``host`` label (campaigns of one host, before hosts were labelled) count for
    every host. None: the cells measured by any host.
    """
    if not os.path.exists(path):
        return set()
    done = set()
    for sample in read_samples(path):
        labels = sample.get("labels") or {}
        if sample.get("metric") == FAILED_METRIC or not labels.get("cell"):
            continue
        if host is None or labels.get("host") in (None, host):
            done.add(labels["cell"])
    return done


def cell_folder(cell_id):
    """The folder of a cell's kept files, relative to the campaign's results directory: the cell id made a
    file name ("bm/2/pin/cpu|app=ic|r0" -> "files/bm_2_pin_cpu_app=ic_r0-<8 hex>"); the hash of the id keeps
    two ids that read alike apart."""
    readable = _UNSAFE_IN_FOLDER_NAME.sub("_", str(cell_id)).strip("._-")[:120]
    digest = hashlib.sha1(str(cell_id).encode("utf-8")).hexdigest()[:8]
    return f"{CELL_FILES_DIR}/{readable}-{digest}"


def cell_files(cell_id, records):
    """{path relative to the results directory: text} of the files the ok ``records`` of a cell keep."""
    files = {}
    for record in records:
        if record["status"] == "ok":
            for name, text in (record.get("files") or {}).items():
                files[f"{cell_folder(cell_id)}/{name}"] = text
    return files


def write_cell_files(results_dir, files):
    """Write ``files`` ({relative path: text}, as cell_files makes them) under ``results_dir``, each atomically
    and synced to disk, so that a cell's samples never reach the disk before its files."""
    for relative, text in files.items():
        path = os.path.join(results_dir, relative)
        if os.path.isabs(relative) or os.path.normpath(relative).startswith(".."):
            raise ValueError(f"a kept file must stay inside the results directory: {relative!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
