"""The result record: one `PLATBENCH_RESULT <json>` line on stdout per run."""

import json
import math
import sys
import time

RESULT_PREFIX = "PLATBENCH_RESULT "
SCHEMA_VERSION = 1
STATUSES = ("ok", "failed")


def metric(name, value, unit):
    """One entry of the record's `metrics` list."""
    return {"metric": name, "value": value, "unit": unit}


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


def emit_record(workload, labels, metrics, metadata, status="ok", error=None):
    """Print the record as exactly one line on stdout and flush.

    Raises (and prints nothing) when a value is not a finite JSON number.
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
    # allow_nan=False also rejects NaN/Infinity hidden in labels or metadata.
    line = RESULT_PREFIX + json.dumps(record, separators=(",", ":"), allow_nan=False)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return record
