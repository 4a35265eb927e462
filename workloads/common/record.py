"""The result record: one `PLATBENCH_RESULT <json>` line on stdout per run.

This module owns the format on both sides: workloads print records with ``emit_record``,
the controller (plugins/plugin_utils/records/records.py, the callback) and the tests read them with
``parse_result_lines``. Stdlib only and cheap to import: the collection imports it too.

Where the plan sets ``PLATBENCH_RECORD_FILE`` (a duet pair's sides, plugins/plugin_utils/cells/cellplan.py), the line
also goes to that file, whole or not at all, so that a stream that loses it on its way out (``docker start
--attach``) does not lose the cell: the controller reads the file where the stream holds no valid record.
"""

import contextlib
import json
import math
import os
import re
import sys
import time

RESULT_PREFIX = "PLATBENCH_RESULT "
SCHEMA_VERSION = 1
# skipped: the run could not measure here, by design (a GPU benchmark without a GPU, a tool that cannot
# be built on this host); ``error`` says why. Not a failure, and no metrics.
STATUSES = ("ok", "failed", "skipped")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_QUOTE_CHARS = 200
# Files a run keeps beside the campaign's samples (a tool's own logs): ``files`` maps a plain file name to its
# text. The controller writes them per cell (plugins/plugin_utils/records/records.py, write_cell_files). They travel in
# the record line, which the controller reads from the last 200,000 characters of the output: at most this many.
KEPT_FILES_CHARS = 120_000
KEPT_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# The file a run also writes its record line to, when the plan names one; it is written to the path with this
# suffix first and renamed over it, so that a reader never sees half a record.
RECORD_FILE_ENV = "PLATBENCH_RECORD_FILE"
RECORD_FILE_TEMPORARY_SUFFIX = ".tmp"


class RecordError(ValueError):
    """A result line is missing, is not JSON, or does not follow the record schema."""


def metric(name, value, unit, labels=None):
    """One entry of the record's `metrics` list.

    ``labels``: what tells apart several entries of one metric in one record (the HPL problem size of
    each ``hpl_gflops``, the file size of each ``dd_write``): lower_snake_case keys, scalar values;
    the collector adds them to that entry's sample labels. They must not repeat a record label.
    """
    entry = {"metric": name, "value": value, "unit": unit}
    if labels:
        entry["labels"] = dict(labels)
    return entry


def metric_value(metrics, name):
    """The value of the entry ``name`` in a list of metric entries."""
    return next(entry["value"] for entry in metrics if entry["metric"] == name)


def _check_metrics(metrics):
    for entry in metrics:
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"metric {entry['metric']!r} is not a number: {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"metric {entry['metric']!r} is not finite: {value!r}")


def write_record_file(path, line):
    """Write the record ``line`` to ``path`` whole: a temporary file beside it, renamed over it. Raises OSError
    (and leaves no temporary file) where it cannot be written."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = path + RECORD_FILE_TEMPORARY_SUFFIX
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(line + "\n")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _kept_in_record_file(line):
    """Whether ``line`` went to the record file the environment names; a file that cannot be written is said on
    stderr, and the line still goes to stdout."""
    path = os.environ.get(RECORD_FILE_ENV)
    if not path:
        return False
    try:
        write_record_file(path, line)
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):
            print(f"the record goes to stdout only: {RECORD_FILE_ENV} {path} is not writable: {exc}", file=sys.stderr)
        return False
    return True


def emit_record(workload, labels, metrics, metadata, status="ok", error=None, files=None):
    """Print the record as exactly one line on stdout and flush; where the environment names a
    ``PLATBENCH_RECORD_FILE``, write the line to that file first (``write_record_file``).

    ``files``: {file name: text} the controller keeps beside the campaign's samples (see KEPT_FILES_CHARS).
    Raises (and prints nothing) when a value is not a finite JSON number. A stdout that cannot be written (a closed
    pipe) raises only when the record file does not hold the line.
    """
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    metrics = list(metrics)
    _check_metrics(metrics)
    record = {
        "schema": SCHEMA_VERSION,
        "workload": workload,
        "status": status,
        "error": error,
        "timestamp": time.time(),
        "labels": labels,
        "metrics": metrics,
        "metadata": metadata,
    }
    if files:
        problems = _files_problems(files)
        if problems:
            raise ValueError("; ".join(problems))
        record["files"] = dict(files)
    # allow_nan=False also rejects NaN/Infinity hidden in labels or metadata.
    line = RESULT_PREFIX + json.dumps(record, separators=(",", ":"), allow_nan=False)
    kept = _kept_in_record_file(line)
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError:
        if not kept:
            raise
    return record


def _quote(line):
    line = line.strip()
    return repr(line if len(line) <= _QUOTE_CHARS else line[:_QUOTE_CHARS] + "...")


def _is_finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _schema_problems(record):
    if not isinstance(record, dict):
        return ["a JSON object"]
    problems = []
    if record.get("schema") != SCHEMA_VERSION:
        problems.append(f'"schema": {SCHEMA_VERSION} (got {record.get("schema")!r})')
    if not isinstance(record.get("workload"), str) or not record.get("workload"):
        problems.append('"workload": a non-empty string')
    if record.get("status") not in STATUSES:
        problems.append(f'"status": one of {", ".join(STATUSES)} (got {record.get("status")!r})')
    if not (record.get("error") is None or isinstance(record.get("error"), str)):
        problems.append('"error": null or a string')
    if not _is_finite_number(record.get("timestamp")):
        problems.append('"timestamp": a finite number (seconds since the epoch)')
    for key in ("labels", "metadata"):
        if not isinstance(record.get(key), dict):
            problems.append(f'"{key}": an object')
    if "files" in record:
        problems += _files_problems(record["files"])
    metrics = record.get("metrics")
    if not isinstance(metrics, list):
        problems.append('"metrics": a list of {"metric": str, "value": finite number, "unit": str}')
        return problems
    if metrics and record.get("status") == "skipped":
        problems.append('"metrics": none when "status" is "skipped"')
    if record.get("status") == "skipped" and not record.get("error"):
        problems.append('"error": the reason when "status" is "skipped"')
    if not metrics and record.get("status") == "ok":
        problems.append('"metrics": at least one metric when "status" is "ok"')
    for index, entry in enumerate(metrics):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("metric"), str)
            and entry.get("metric")
            and _is_finite_number(entry.get("value"))
            and isinstance(entry.get("unit"), str)
        ):
            problems.append(
                f'"metrics"[{index}]: {{"metric": str, "value": finite number, "unit": str}} '
                f"(got {json.dumps(entry, default=str)[:80]})"
            )
        elif "labels" in entry:
            problems += _metric_label_problems(index, entry["labels"], record.get("labels"))
    return problems


def _files_problems(files):
    """What is wrong with a record's optional ``files``: {plain file name: text}, KEPT_FILES_CHARS at most."""
    if not isinstance(files, dict):
        return ['"files": an object {file name: text}']
    problems = [
        f'"files": {name!r} must be a plain file name (letters, digits, ".", "_", "-"; no leading dot)'
        for name in files
        if not (isinstance(name, str) and KEPT_FILE_NAME.match(name))
    ]
    problems += [f'"files"[{name!r}]: a string' for name, text in files.items() if not isinstance(text, str)]
    if not problems and sum(len(text) for text in files.values()) > KEPT_FILES_CHARS:
        problems.append(f'"files": {KEPT_FILES_CHARS} characters at most, all files together')
    return problems


def _metric_label_problems(index, labels, record_labels):
    where = f'"metrics"[{index}]["labels"]'
    if not isinstance(labels, dict) or not labels:
        return [f"{where}: a non-empty object"]
    problems = []
    for key, value in labels.items():
        if not _LABEL_KEY.match(str(key)):
            problems.append(f"{where}: key {key!r} must be lower_snake_case")
        elif isinstance(record_labels, dict) and key in record_labels:
            problems.append(f"{where}: key {key!r} repeats a record label")
        if not (isinstance(value, str) or _is_finite_number(value) or isinstance(value, bool)):
            problems.append(f"{where}: {key!r} must be a string, a finite number or a boolean (got {value!r})")
    return problems


def parse_result_lines(text):
    """Return the validated records of every ``PLATBENCH_RESULT`` line in ``text``.

    Other lines (framework logs, warnings) are ignored. A line counts only when it starts
    with the prefix once surrounding whitespace (``\\r`` included) is stripped. Raises
    RecordError naming the line and what the schema expects.
    """
    records = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith(RESULT_PREFIX):
            continue
        payload = line[len(RESULT_PREFIX) :]
        try:
            record = json.loads(payload)
        except ValueError as exc:
            raise RecordError(
                f"result line {_quote(line)} is not valid JSON ({exc}); "
                f"expected {RESULT_PREFIX.strip()} followed by one JSON object"
            ) from None
        problems = _schema_problems(record)
        if problems:
            raise RecordError(
                f"result line {_quote(line)} does not follow record schema "
                f"{SCHEMA_VERSION}; expected " + "; ".join(problems)
            )
        records.append(record)
    return records
