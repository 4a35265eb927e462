"""What a campaign recorded about how it ran, for the report's titles and the HTML page's metadata section: the
hosts' environment (kernel, OS, CPU model, engine and framework versions) from the samples' metadata and run.json,
the experiment as it ran (run.json: the file merged with its size and overrides), and every cell that did not
measure (failed with its error, skipped with its reason). A field nothing recorded is reported as such
(``NOT_RECORDED``), never left out."""

import json
from pathlib import Path
from typing import NamedTuple

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import FAILED_METRIC, SKIPPED_METRIC

from platbench import store
from platbench.report.load import HOST

NOT_RECORDED = "not recorded"
RUN_FILE = "run.json"  # written by the results callback (plugins/callback/results.py)
SAMPLES_FILE = "samples.jsonl"
# A host's environment as record_cell's platbench_env gives it, in this order; then every ``*_version`` field.
HOST_FIELDS = (
    "hostname",
    "os",
    "kernel",
    "cpu_model",
    "cpu_count",
    "threads_per_core",
    "numa_nodes",
    "gpu_count",
    "host_virt",
)
VERSION_SUFFIX = "_version"
# A sample's metadata holds the environment flat; older records nest parts of it under these keys.
NESTED_METADATA = ("environment", "runtime")
# The versions every campaign should name: shown as not recorded where none did.
EXPECTED_VERSIONS = ("framework_version", "python_version", "docker_version", "ansible_version")
# The session fields of run.json shown, in this order.
SESSION_FIELDS = ("started", "finished", "controller", "platbench_version", "ansible_version", "python_version")
ERROR_LINES = 3  # a failed cell's error as the page's table shows it; the output tail is folded below it


class Outcome(NamedTuple):
    status: str  # failed or skipped
    cell: str
    scenario: str
    host: str
    reason: str  # the first lines of the error, or the skip reason
    detail: str  # the full error and output tail of a failed cell; "" for a skipped one


class Metadata(NamedTuple):
    campaign: str  # run.json's, else the samples' campaign label, else the directory's name
    experiments: list  # the experiment labels of the samples
    hosts: dict  # host -> {field: "value" (distinct values joined) or NOT_RECORDED}
    versions: dict  # host -> {"*_version" field: value}
    run: dict | None  # run.json, None when the campaign has none
    sessions: list  # [{field: value}] per run of the campaign (the first, then each resume)
    experiment: dict | None  # the experiment as it ran (the last session's), None without run.json
    outcomes: list  # Outcome of every failed or skipped cell, in the file's order
    cell_hosts: dict  # cell id -> the host that measured it


def _flat(metadata):
    layers = [metadata, *(metadata.get(key) for key in NESTED_METADATA)]
    merged = {}
    for layer in layers:
        if isinstance(layer, dict):
            merged.update({key: value for key, value in layer.items() if not isinstance(value, (dict, list))})
    return merged


def _first_lines(text, count=ERROR_LINES):
    lines = str(text or "").strip().splitlines()
    return "\n".join(lines[:count]) if lines else "no reason given"


def read_run_file(results_dir):
    """run.json as a dict, None when it is missing or unreadable."""
    path = Path(results_dir) / RUN_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def load(results_dir):
    """The Metadata of the campaign in ``results_dir``."""
    results_dir = Path(results_dir)
    samples = store.campaign_samples(results_dir)  # its Parquet files where they are current
    run = read_run_file(results_dir)
    found, experiments, campaigns, outcomes, cell_hosts = {}, {}, {}, [], {}

    def add(host, fields):
        values = found.setdefault(host, {})
        for field, value in fields.items():
            if value is not None and value != "" and (field in HOST_FIELDS or field.endswith(VERSION_SUFFIX)):
                values.setdefault(field, {})[str(value)] = None

    for sample in samples:
        labels, metadata = sample.get("labels") or {}, sample.get("metadata") or {}
        flat = _flat(metadata)
        host = str(flat.get("host") or labels.get(HOST) or NOT_RECORDED)
        add(host, flat)
        if labels.get("cell"):
            cell_hosts[str(labels["cell"])] = host
        for name, into in ((labels.get("experiment"), experiments), (labels.get("campaign"), campaigns)):
            if name:
                into[str(name)] = None
        if sample.get("metric") in (FAILED_METRIC, SKIPPED_METRIC):
            failed = sample["metric"] == FAILED_METRIC
            error = metadata.get("error") if failed else metadata.get("reason")
            tail = str(metadata.get("output_tail") or "") if failed else ""
            outcomes.append(
                Outcome(
                    sample["metric"],
                    str(labels.get("cell") or NOT_RECORDED),
                    str(labels.get("scenario") or NOT_RECORDED),
                    host,
                    _first_lines(error),
                    (str(error or "") + ("\n\noutput tail:\n" + tail if tail else "")).strip(),
                )
            )
    sessions = []
    if run:
        for session in [run, *(run.get("resumes") or [])]:
            if not isinstance(session, dict):
                continue
            sessions.append({field: session.get(field) for field in SESSION_FIELDS})
            for host, environment in (session.get("hosts") or {}).items():
                add(str(host), _flat(environment) if isinstance(environment, dict) else {})
    hosts = {
        host: {field: ", ".join(values[field]) if field in values else NOT_RECORDED for field in HOST_FIELDS}
        for host, values in found.items()
    }
    versions = {}
    for host, values in found.items():
        names = sorted({*EXPECTED_VERSIONS, *(field for field in values if field.endswith(VERSION_SUFFIX))})
        versions[host] = {name: ", ".join(values[name]) if name in values else NOT_RECORDED for name in names}
    experiment = None
    if run:
        with_experiment = [s for s in [run, *(run.get("resumes") or [])] if isinstance(s, dict) and s.get("experiment")]
        experiment = with_experiment[-1]["experiment"] if with_experiment else None
    campaign = (run or {}).get("campaign") or ", ".join(campaigns) or results_dir.resolve().name
    return Metadata(str(campaign), list(experiments), hosts, versions, run, sessions, experiment, outcomes, cell_hosts)


def context_line(metadata):
    """``experiment smoke (campaign smoke-1); host lab1``: what a chart's title says of the run."""
    experiments = ", ".join(metadata.experiments) or NOT_RECORDED
    hosts = [host for host in metadata.hosts if host != NOT_RECORDED]
    host_text = ", ".join(hosts) if hosts else NOT_RECORDED
    return f"experiment {experiments} (campaign {metadata.campaign}); host{'s' if len(hosts) > 1 else ''} {host_text}"
