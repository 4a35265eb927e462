"""Loadgen's verdict, speed, issued samples and settings, read from the two logs it writes (stdlib only).

- ``mlperf_log_summary.txt``: "Samples per second: X", "Result is : VALID|INVALID", one
  "<criterion> satisfied : Yes|NO" line per criterion (min duration, min queries, early stopping...),
  then "Recommendations:" bullets when INVALID, and the "Test Parameters Used" as "name : value".
- ``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` event a line; ``generated_query_count`` and
  ``generated_samples_per_query`` say what was really issued, ``effective_*`` the settings loadgen ran
  with, events whose ``metadata.is_error`` is true its errors, and its own clock's span of the run:
  ``power_begin`` and ``power_end`` (wall-clock times, to the millisecond) and ``result_max_latency_ns`` (in
  Offline, from the issue of the one query to its last sample's completion: loadgen's run time).

``verdict`` turns loadgen's verdict and what the run was given into the record's one state: VALID, INVALID or
scaled-down (settings.py says what each means).
"""

import json
import re

from .settings import INVALID, SCALED_DOWN, VALID

MLLOG_PREFIX = ":::MLLOG "
VALIDITIES = (VALID, INVALID)
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
    """{"queries", "samples_per_query", "samples", "settings", "errors", "span"} of a detail log.

    ``samples``: the query samples loadgen really issued (queries x samples per query); ``settings``: its
    ``effective_*`` values without the prefix; ``errors``: the values of its error events; ``span``: loadgen's
    own timing of the run, {"begin", "end", "seconds"} (None where it logged no result)."""
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
    span = None
    if isinstance(events.get("result_max_latency_ns"), (int, float)):
        span = {
            "begin": events.get("power_begin"),
            "end": events.get("power_end"),
            "seconds": events["result_max_latency_ns"] / 1e9,
        }
    return {
        "queries": queries,
        "samples_per_query": per_query,
        "samples": queries * per_query,
        "settings": settings,
        "errors": errors,
        "span": span,
    }


def verdict(loadgen_result, loadgen_reasons, min_duration_ms, samples, minimums):
    """(state, reasons, minimums record) of a run: loadgen's own ``loadgen_result`` (VALID or INVALID) and
    ``loadgen_reasons``, the minimum duration it ran with, the ``samples`` it issued, and ``minimums``, MLPerf's
    (settings.MlperfMinimums) for the app's benchmark in the run's scenario, None where MLPerf has none.

    INVALID whenever loadgen says so, with its reasons; else VALID when the run met MLPerf's minimums, and
    scaled-down, with what fell short, when it did not. The record names the minimums, what was asked and
    whether it met them."""
    short_of = []
    if minimums is None:
        short_of.append("MLPerf has no benchmark of this app in this scenario")
    else:
        if min_duration_ms < minimums.min_duration_ms:
            short_of.append(
                f"min duration {min_duration_ms} ms, MLPerf's {minimums.benchmark} asks for {minimums.min_duration_ms}"
            )
        if samples < minimums.min_samples:
            short_of.append(f"{samples} samples, MLPerf's {minimums.benchmark} asks for {minimums.min_samples}")
    record = {
        "benchmark": None if minimums is None else minimums.benchmark,
        "min_duration_ms": None if minimums is None else minimums.min_duration_ms,
        "min_samples": None if minimums is None else minimums.min_samples,
        "asked": {"min_duration_ms": min_duration_ms, "samples": samples},
        "met": not short_of,
        "short_of": short_of,
    }
    if loadgen_result == INVALID:
        return INVALID, list(loadgen_reasons) or ["loadgen gave no unmet criterion"], record
    if short_of:
        return SCALED_DOWN, short_of, record
    return VALID, [], record
