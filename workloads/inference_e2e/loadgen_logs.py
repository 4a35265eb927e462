"""Loadgen's verdict, speed, issued samples and settings, read from the two logs it writes (stdlib only).

- ``mlperf_log_summary.txt``: "Samples per second: X", "Result is : VALID|INVALID", one
  "<criterion> satisfied : Yes|NO" line per criterion (min duration, min queries, early stopping...),
  then "Recommendations:" bullets when INVALID, and the "Test Parameters Used" as "name : value".
- ``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` event a line; ``generated_query_count`` and
  ``generated_samples_per_query`` say what was really issued, ``effective_*`` the settings loadgen ran
  with, and events whose ``metadata.is_error`` is true its errors.
"""

import json
import re

MLLOG_PREFIX = ":::MLLOG "
VALIDITIES = ("VALID", "INVALID")
_CRITERION = re.compile(r"^\s*(.+?)\s+satisfied\s*:\s*(\S+)\s*$", re.IGNORECASE)
_FIELD = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


class LoadgenLogError(ValueError):
    """A log does not hold what loadgen always writes; the message names the file and what is missing."""


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_summary(text, path="mlperf_log_summary.txt"):
    """{"samples_per_sec", "result", "reasons", "recommendations", "parameters"} of a summary log.

    ``reasons``: why the result is INVALID, one per unmet criterion ("min duration not satisfied"); [] when VALID.
    """
    fields, reasons, recommendations, parameters = {}, [], [], {}
    section = "results"
    for line in text.splitlines():
        if line.startswith("Test Parameters Used"):
            section = "parameters"
            continue
        if line.startswith("Additional Stats"):
            section = "stats"
            continue
        if line.startswith("Recommendations:"):
            section = "recommendations"
            continue
        if section == "recommendations" and line.strip().startswith("*"):
            recommendations.append(line.strip().lstrip("* ").strip())
            continue
        criterion = _CRITERION.match(line)
        if criterion and section in ("results", "recommendations"):
            if criterion.group(2).lower() not in ("yes", "true"):
                reasons.append(f"{criterion.group(1).strip().lower()} not satisfied")
            continue
        field = _FIELD.match(line)
        if field and not line.startswith("="):
            if section == "parameters":
                parameters[field.group(1)] = _number(field.group(2))
            elif section == "results":
                fields[field.group(1)] = field.group(2)
    result = fields.get("Result is")
    if result not in VALIDITIES:
        raise LoadgenLogError(f"{path}: no 'Result is : VALID|INVALID' line (got {result!r})")
    try:
        samples_per_sec = float(fields["Samples per second"])
    except (KeyError, ValueError):
        raise LoadgenLogError(f"{path}: no 'Samples per second: <number>' line") from None
    if result == "INVALID" and not reasons:
        reasons = ["loadgen gave no unmet criterion"]
    return {
        "samples_per_sec": samples_per_sec,
        "result": result,
        "reasons": reasons,
        "recommendations": recommendations,
        "parameters": parameters,
    }


def parse_detail(text, path="mlperf_log_detail.txt"):
    """{"queries", "samples_per_query", "samples", "settings", "errors"} of a detail log.

    ``samples``: the query samples loadgen really issued (queries x samples per query); ``settings``: its
    ``effective_*`` values without the prefix; ``errors``: the values of its error events."""
    events = {}
    errors = []
    for line in text.splitlines():
        if not line.startswith(MLLOG_PREFIX):
            continue
        try:
            event = json.loads(line[len(MLLOG_PREFIX) :])
        except ValueError:
            continue  # a line cut by a crash: the events before it still count
        events[event.get("key")] = event.get("value")
        if (event.get("metadata") or {}).get("is_error"):
            errors.append(str(event.get("value")))
    missing = [key for key in ("generated_query_count", "generated_samples_per_query") if key not in events]
    if missing:
        raise LoadgenLogError(f"{path}: no {' and no '.join(missing)} event: loadgen did not issue its queries")
    queries, per_query = int(events["generated_query_count"]), int(events["generated_samples_per_query"])
    settings = {key[len("effective_") :]: value for key, value in events.items() if key.startswith("effective_")}
    return {
        "queries": queries,
        "samples_per_query": per_query,
        "samples": queries * per_query,
        "settings": settings,
        "errors": errors,
    }
