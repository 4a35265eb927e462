# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Workload result records and the samples stored from them.

A workload prints one line ``PLATBENCH_RESULT {json}``; each metric of that record
becomes one sample (docs/src/design.md) appended to ``results/<campaign>/samples.jsonl``.
Pure Python so that the callback, the report and the tests share one implementation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import time

# The record format is the workloads' own (workloads/common/record.py): one definition of the
# prefix, the schema and the parser, re-exported here for the controller side.
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.cell_labels import CELL_LABELS
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
# A failed sample's metadata keeps the end of the output (``output_tail``), short enough for every failure; the whole
# output goes to a file of the cell's folder (failed_output_path), which the sample names (``output_file``).
TAIL_LINES = 40
TAIL_CHARS = 4000
# The files a record keeps (its ``files``, e.g. loadgen's logs) go to RESULTS_DIR/files/<cell folder>/<name>.
CELL_FILES_DIR = "files"
# One file per failure, named by its sample's time (UTC): a cell that fails again on resume keeps both outputs.
FAILED_OUTPUT_NAME = "failed-output-{stamp}.log"
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


class Sample(dict):
    """One measured value and all that tells it apart, PerfKitBenchmarker's sample: ``metric``, ``value``,
    ``unit``, ``timestamp`` (seconds since the epoch), ``labels`` (the scenario, the workload's parameters: what a
    report groups by) and ``metadata`` (the environment, what the workload saw: what a report explains with).

    A dict, so that it is one JSON line of samples.jsonl as it is and every reader of a line gets the same
    thing back: built by ``Sample.of`` on the way in (the callback), checked by ``Sample.read`` on the way out
    (report, compare, history)."""

    __slots__ = ()

    @classmethod
    def of(cls, metric, value, unit, labels, metadata, timestamp=None):
        """A new sample; ``timestamp`` None is now. Refuses a metric that is no name or labels that are no mapping."""
        sample = cls(
            metric=metric,
            value=value,
            unit=unit,
            timestamp=time.time() if timestamp is None else timestamp,
            labels=dict(labels),
            metadata=dict(metadata),
        )
        problem = cls.problem(sample)
        if problem is not None:
            raise ValueError(f"not a sample: {problem}")
        return sample

    @staticmethod
    def problem(data):
        """Why ``data`` (a decoded line) is not a sample, in words; None when it is one."""
        if not isinstance(data, dict):
            return f"a JSON {type(data).__name__}, not an object"
        missing = [field for field in ("metric", "value") if field not in data]
        if missing:
            return f"an object without {' and '.join(missing)}"
        if not isinstance(data["metric"], str):
            return "an object whose metric is not a name"
        if not isinstance(data.get("labels", {}), dict) or not isinstance(data.get("metadata") or {}, dict):
            return "an object whose labels or metadata are not a mapping"
        return None

    @classmethod
    def read(cls, data):
        """A sample read back from samples.jsonl: the decoded line, checked (ValueError with ``problem``), with
        labels and metadata present (older lines may lack them) so that readers need no defaults."""
        problem = cls.problem(data)
        if problem is not None:
            raise ValueError(problem)
        return cls(data, unit=data.get("unit"), labels=data.get("labels") or {}, metadata=data.get("metadata") or {})

    def but(self, **fields):
        """A copy with ``fields`` replaced (a derived sample: a shared cell's degradation from its elapsed)."""
        return Sample.read({**self, **fields})

    metric = property(lambda self: self["metric"])
    value = property(lambda self: self["value"])
    unit = property(lambda self: self.get("unit"))
    timestamp = property(lambda self: self.get("timestamp"))
    labels = property(lambda self: self["labels"])
    metadata = property(lambda self: self["metadata"])


def samples_from_record(record, cell_labels, env_metadata, runtime_metadata):
    """One sample per metric of ``record``.

    Labels: see ``record_labels`` and ``metric_labels``.
    Metadata: host environment < runtime (what was requested) < record (what the
    workload saw), so the workload's own observation is the truth.
    """
    labels = record_labels(record, cell_labels)
    metadata = _merged(env_metadata, runtime_metadata, record["metadata"])
    return [
        Sample.of(
            metric["metric"],
            metric["value"],
            metric["unit"],
            metric_labels(labels, metric),
            metadata,
            record["timestamp"],
        )
        for metric in record["metrics"]
    ]


def skipped_sample(record, cell_labels, env_metadata, runtime_metadata):
    """The single sample of a ``skipped`` record: metric ``skipped``, value 1, the reason in metadata.reason."""
    metadata = _merged(env_metadata, runtime_metadata, record["metadata"], {"reason": record["error"]})
    return Sample.of(SKIPPED_METRIC, 1, "", record_labels(record, cell_labels), metadata, record["timestamp"])


def tail_of(output):
    """The last lines of a workload's output, short enough to store with every failure."""
    tail = "\n".join((output or "").splitlines()[-TAIL_LINES:])
    return tail[-TAIL_CHARS:]


def failed_sample(cell_labels, error, output, env_metadata, runtime_metadata):
    """The single sample that records a failed cell, with its error and the tail of its ``output`` (the whole output
    goes to a file of the cell's folder: outcome.failed_output_file)."""
    metadata = _merged(env_metadata, runtime_metadata, {"error": str(error), "output_tail": tail_of(output)})
    return Sample.of(FAILED_METRIC, 1, "cell", cell_labels, metadata)


def json_safe(value):
    """``value`` with each NaN and infinity made None and each key a string: strict JSON has neither, and metadata
    from a workload (a loss that diverged) may still carry them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


# The last line of each append ends with this before its newline: invisible to a JSON reader, it says that the write
# got to its end. A line that does not decode (a write a crash cut short) may follow lines of the same write that do;
# without the mark on the line before it, they are the start of that cut write (see read_samples).
WRITE_END = " "
# What must stay free beyond what a cell's record writes (see room_problem): run.json is rewritten beside itself, and
# a full disk should stop a campaign before a write is cut, not after.
RECORD_RESERVE_BYTES = 1024 * 1024


def _lines(samples):
    """The bytes of one append: one JSON line per sample, the last one marked as the end of the write."""
    lines = [json.dumps(json_safe(sample), allow_nan=False, default=str) for sample in samples]
    lines[-1] += WRITE_END
    return "".join(line + "\n" for line in lines).encode("utf-8")


def append_samples(path, samples):
    """Append one JSON line per sample in a single write, then flush and fsync.

    The file is only ever appended to. A line left incomplete by an earlier crash is
    closed first so that the new samples start on a line of their own. A write that fails
    (a full disk) is taken back: the file is cut to the size it had, so that no partial
    line is left, and the error is raised.
    """
    if not samples:
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    data = _lines(samples)
    created = not os.path.exists(path)
    # The user's umask decides the mode, as for the campaign's other files (file_modes.py: never writable by others).
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(descriptor).st_size
        if size > 0 and os.pread(descriptor, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            written = 0
            while written < len(data):
                written += os.write(descriptor, data[written:])
            os.fsync(descriptor)
        except OSError:
            os.ftruncate(descriptor, size)
            if created:
                os.unlink(path)
            raise
    finally:
        os.close(descriptor)
    if created:
        # Make the new directory entry durable too.
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _in_units(count):
    """``512 bytes``, ``3.5 KiB``, ``1.0 MiB``."""
    if count < 1024:
        return f"{count} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        count /= 1024
        if count < 1024 or unit == "GiB":
            break
    return f"{count:.1f} {unit}"


def room_problem(results_dir, samples, files=None, reserve=RECORD_RESERVE_BYTES):
    """Why ``results_dir`` cannot take a cell's ``samples`` and ``files`` ({relative path: text}) now, or None.

    record_cell asks before it hands them to the results callback: a campaign whose results directory is full
    stops at that cell with this message, and what was written before stays whole."""
    existing = os.path.abspath(results_dir)
    while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    run_file = os.path.join(results_dir, "run.json")
    try:
        stats = os.statvfs(existing)
        run_bytes = os.path.getsize(run_file) if os.path.exists(run_file) else 0
    except OSError as exc:
        return f"the results directory {results_dir} cannot be read: {exc}"
    needed = (len(_lines(samples)) if samples else 0) + run_bytes + reserve
    needed += sum(len(str(text).encode("utf-8")) for text in (files or {}).values())
    free = stats.f_bavail * stats.f_frsize
    inodes = stats.f_files == 0 or stats.f_favail > len(files or {}) + 2  # f_files 0: no inode limit (btrfs)
    if free >= needed and inodes:
        return None
    what = f"only {_in_units(free)} free" if free < needed else "no free inodes"
    return (
        f"the results directory {results_dir} has {what}, too little to record this cell (it needs about "
        f"{_in_units(needed)})\nThe campaign stops here; the samples written before are kept whole. Free space on that "
        "file system, then rerun the same command: the campaign resumes, and this cell runs again."
    )


def read_samples(path, on_bad_line=None, on_cut_write=None):
    """All samples in ``path``, each a ``Sample`` (checked by ``Sample.read``). A line that does not decode (a
    write a crash cut short) is skipped, and so are the lines before it that its write had completed (see
    WRITE_END): that cell's samples are incomplete, so none of them counts and the cell runs again on resume.

    ``on_bad_line(line_number, line)`` is called for each line that does not decode or is not a sample (an edit
    gone wrong: ``Sample.problem`` says why); ``on_cut_write(line_numbers, cell)`` for the complete lines of each
    cut write.
    """
    entries = []  # (line number, line without its newline, the sample or None)
    with open(path, encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError:
                sample = None
            entries.append((number, line.rstrip("\n"), sample if isinstance(sample, dict) else None))
    cut = set()
    for index, (_, _, sample) in enumerate(entries):
        if sample is None:
            numbers = _rest_of_cut_write(entries[:index])
            if numbers:
                cut.update(numbers)
                if on_cut_write is not None:
                    on_cut_write(numbers, entries[index - 1][2]["labels"]["cell"])
    samples = []
    for number, line, sample in entries:
        if number in cut:
            continue
        if sample is not None and Sample.problem(sample) is None:
            samples.append(Sample.read(sample))
        elif on_bad_line is not None:
            on_bad_line(number, line)
    return samples


def _write_key(sample):
    """What the samples of one append share: one cell, one host, one record's timestamp (None: no cell's)."""
    labels = sample.get("labels") if isinstance(sample, dict) else None
    if not isinstance(labels, dict) or not labels.get("cell"):
        return None
    return (labels["cell"], labels.get("host"), sample.get("timestamp"))


def _rest_of_cut_write(before):
    """The line numbers of the complete lines of the write that a line which does not decode cut short: the lines
    just before it of one append, none of them marked as the end of a write. ``before``: the entries before it."""
    numbers, key = [], _write_key(before[-1][2]) if before else None
    if key is None:
        return []
    for number, line, sample in reversed(before):
        if _write_key(sample) != key or line.endswith(WRITE_END):
            break
        numbers.append(number)
    return numbers[::-1]


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


def failed_output_path(cell_id, timestamp):
    """Where a failure of ``cell_id`` at ``timestamp`` (its failed sample's) keeps the cell's whole output, relative
    to the results directory: ``files/<cell folder>/failed-output-20261122T101530.123Z.log``."""
    seconds = int(timestamp)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{int((timestamp - seconds) * 1000):03d}Z"
    return f"{cell_folder(cell_id)}/{FAILED_OUTPUT_NAME.format(stamp=stamp)}"


def write_cell_files(results_dir, files):
    """Write ``files`` ({relative path: text}, as cell_files makes them) under ``results_dir``, each atomically
    and synced to disk, so that a cell's samples never reach the disk before its files."""
    for relative, text in files.items():
        path = os.path.join(results_dir, relative)
        if os.path.isabs(relative) or os.path.normpath(relative).startswith(".."):
            raise ValueError(f"a kept file must stay inside the results directory: {relative!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, text)


def write_atomic(path, text):
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, synced, then renamed over it. On a
    full disk the file keeps its last whole version, and no half-written copy stays beside it."""
    temporary = path + ".tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_json(path, document):
    """``document`` as indented JSON (keys sorted, anything else as its str), written by ``write_atomic``."""
    write_atomic(path, json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
