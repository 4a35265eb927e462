"""A campaign's samples as the report reads them: RESULTS_DIR/samples.jsonl loaded into a pandas frame (metric,
value, unit, one column per label and the fields that say whether a figure counts: accelerator, skip reason,
an inference run's state (VALID, INVALID or scaled-down), GPU device), and what the report asks of that frame:
which labels vary and so make rows, which metrics to show, which samples are measurements, the platforms' order
and baseline."""

import json
import sys
from pathlib import Path

import numpy
import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    OUTCOME_METRICS,
    SKIPPED_METRIC,
    Sample,
    read_samples,
)

from platbench import store, validity

# The platform every other one is normalized to, and the row order: both from the registry.
BASELINE = platforms.BASELINE
DEFAULT_METRICS = ("throughput", "elapsed")
# A campaign of micro-benchmarks (workloads/micro_*) has no throughput: its main table shows one
# headline figure per component, and every Diff% table is printed (Xu 2017's way of reporting them).
MICRO_METRICS = ("hpl_gflops", "stream_triad", "mem_latency", "dd_write", "net_throughput", "gpu_sgemm")
SCENARIO_LABELS = ["platform", "scaleup", "cpu_config", "processor"]
# Labels that identify a run rather than what was run: never a row of their own.
# A duet campaign's cells also carry their pair, side, partner and role (plugin_utils/experiment/schedule.py). The
# schedule is no run label: in a duet campaign, the cells that ran alone (under rounds) are rows of their own.
RUN_LABELS = {"scenario", "cell", "repeat", "campaign", "duet_pair", "duet_side", "duet_partner", "duet_role"}
# The sample's own timestamp (seconds since the epoch): a column of the frame, never a label; the answer's time per
# round comes from it (platbench/answer.py).
SAMPLE_TIME = "sample_time"
# The inventory host that measured a cell: a row of its own (and its own baseline) once a
# campaign holds samples of more than one host.
HOST = "host"
WORKLOAD = "workload"
# metadata.reason of a skipped sample, a column of the frame (never a label, never a row key).
SKIP_REASON = "skip_reason"
# metadata.accelerator of the vm and vmcn samples: "kvm" or "tcg" (QEMU's software emulator).
ACCELERATOR = "accelerator"
EMULATED = "tcg"
# metadata.loadgen of an inference_e2e sample: its state and reasons, columns of the frame (never labels). The
# states (workloads/inference_e2e/settings.py), each also the column counting a row's cells in it: VALID (MLPerf's
# minimums met, loadgen's VALID), INVALID (loadgen's INVALID, at any size), scaled-down (below MLPerf's minimums:
# timed, never an MLPerf result).
LOADGEN_RESULT = "loadgen_result"
LOADGEN_REASONS = "loadgen_reasons"
VALID, INVALID, SCALED_DOWN = "VALID", "INVALID", "scaled-down"
LOADGEN_STATES = (VALID, INVALID, SCALED_DOWN)
LOADGEN_SPEED = "loadgen_samples_per_sec"  # MLPerf's own figure: marked with its cells' state
# A VALID written before the records carried MLPerf's minimums (metadata.loadgen.mlperf_minimums): loadgen's verdict
# on what it was given, which no run of that platbench held to MLPerf's minimums.
UNCHECKED_VALID_REASON = "recorded before MLPerf's minimums were checked: loadgen's VALID at the size it was given"
# The device a GPU sample's roofline belongs to: metadata.roofline_device, else the first device it used.
GPU_DEVICE = "gpu_device"
# The unreadable lines of samples.jsonl named one by one; the rest are counted.
BAD_LINES_SHOWN = 10


class ReportError(Exception):
    """Nothing to report; the message says why."""


def load_samples(results_dir):
    """The samples of a campaign as a frame: metric, value, unit, accelerator and one column per label.

    Read from the campaign's Parquet files (RESULTS_DIR/store/, ``platbench index``) when they hold samples.jsonl as
    it is now, else from samples.jsonl: the same frame either way. A line of samples.jsonl that is not a sample (a
    write cut short, an edit gone wrong) is reported on stderr with its number and why, and skipped: the report
    renders from the others."""
    directory = Path(results_dir)
    path = directory / "samples.jsonl"
    expected = "a campaign's directory, results/<campaign>, which `platbench run` fills with samples.jsonl"
    if not directory.exists():
        raise ReportError(f"results directory {results_dir} does not exist: expected {expected}")
    if not directory.is_dir():
        raise ReportError(f"{results_dir} is not a directory: expected {expected}")
    try:
        if store.parquet_current(directory):
            return frame_of_columns(*store.parquet_view(directory))
    except store.StoreError as exc:
        raise ReportError(str(exc)) from None
    if not path.is_file():
        found = sorted(entry.name for entry in directory.iterdir())[:5]
        holds = f"it holds {', '.join(found)}" if found else "it is empty"
        raise ReportError(
            f"no samples: {path} does not exist ({holds}); expected {expected} (has the campaign recorded any cell?)"
        )
    bad_lines = []
    samples = read_samples(path, on_bad_line=lambda number, line: bad_lines.append((number, line)))
    for number, line in bad_lines[:BAD_LINES_SHOWN]:
        print(f"note: {path} line {number}: {_why_not_a_sample(line)}; skipped", file=sys.stderr)
    if len(bad_lines) > BAD_LINES_SHOWN:
        print(
            f"note: {path}: {len(bad_lines) - BAD_LINES_SHOWN} more line(s) that are not samples skipped",
            file=sys.stderr,
        )
    if not samples:
        raise ReportError(f"no samples in {path}: none of its lines is a sample (a JSON object with a metric)")
    return frame_of(samples)


def frame_of(samples):
    """The report's frame of ``samples`` (``Sample``s from samples.jsonl or the results store)."""
    rows = [
        _row(sample.metric, sample.value, sample.unit, sample.timestamp, _fields(sample.metadata), sample.labels)
        for sample in samples
    ]
    return _integer_labels(pd.DataFrame(rows), [sample.labels for sample in samples])


def frame_of_columns(columns, metadata):
    """The report's frame of a campaign's samples in the results store (store.sample_rows, store.parquet_view:
    ``columns``, each of store.ROW_COLUMNS a list; ``metadata``, each metadata id's dict or its JSON text): the
    frame ``frame_of`` makes of the same samples, built a column at a time: each metadata read once, each distinct
    labels once, and the rows' columns taken from those (a 10,000-cell campaign holds 170,000 samples)."""
    if not columns or not columns["metric"]:
        raise ReportError("no samples in the campaign's store files")
    metric, value, integer, unit, timestamp, labels_text, metadata_id = (
        columns[name] for name in ("metric", "value", "integer_value", "unit", "timestamp", "labels", "metadata_id")
    )
    label_codes, label_texts = _codes(labels_text)
    metadata_codes, metadata_ids = _codes(metadata_id)
    distinct_labels = [json.loads(text) for text in label_texts]
    decoded = [metadata[found] for found in metadata_ids]
    field_rows = [_fields(json.loads(found) if isinstance(found, str) else found) for found in decoded]
    fields = pd.DataFrame(field_rows)
    own = {"metric", "value", "unit", SAMPLE_TIME, *fields.columns}
    if any(own & set(found) for found in distinct_labels):
        # A label named as a column of the sample's own (none the workloads write): the rows as frame_of builds them.
        labels = [distinct_labels[code] for code in label_codes]
        values = [int(found) if whole else found for found, whole in zip(value, integer, strict=True)]
        built = [
            _row(*sample, field_rows[code], labels[number])
            for number, (sample, code) in enumerate(
                zip(zip(metric, values, unit, timestamp, strict=True), metadata_codes, strict=True)
            )
        ]
        return _integer_labels(pd.DataFrame(built), labels)
    taken = fields.take(metadata_codes).reset_index(drop=True)
    skip_reasons = taken[SKIP_REASON].tolist()
    columns = {
        "metric": metric,
        "value": [int(found) if whole else found for found, whole in zip(value, integer, strict=True)],
        "unit": unit,
        ACCELERATOR: taken[ACCELERATOR],
        GPU_DEVICE: taken[GPU_DEVICE],
        SAMPLE_TIME: timestamp,
        SKIP_REASON: [
            reason if name == SKIPPED_METRIC else None for name, reason in zip(metric, skip_reasons, strict=True)
        ],
    }
    parts = [
        pd.DataFrame({name: column for name, column in columns.items() if not isinstance(column, pd.Series)}),
        taken[[column for column in fields.columns if column not in _OWN_FIELDS]],
        pd.DataFrame(distinct_labels).take(label_codes).reset_index(drop=True),
    ]
    frame = pd.concat(parts, axis=1)
    frame.insert(3, ACCELERATOR, taken[ACCELERATOR])
    frame.insert(4, GPU_DEVICE, taken[GPU_DEVICE])
    return _integer_labels(frame, distinct_labels, label_codes)


def _codes(values):
    """``(codes, distinct)``: each of ``values`` as the index of its first occurrence's value in ``distinct`` (None
    a value like any other). A dict does it several times faster than pandas.factorize on a store's columns, whose
    repeated strings are one object each (store.parquet_view), their hashes computed once."""
    index = {}
    positions = (index.setdefault(value, len(index)) for value in values)
    codes = numpy.fromiter(positions, dtype=numpy.intp, count=len(values))
    return codes, list(index)


def _fields(metadata):
    """What the report needs of a sample's metadata (once per metadata; the skip reason kept for skipped samples)."""
    return {
        ACCELERATOR: metadata.get(ACCELERATOR),
        GPU_DEVICE: gpu_device(metadata),
        SKIP_REASON: metadata.get("reason"),
        **loadgen_verdict(metadata),
        **validity.sample_fields(metadata),
    }


def _row(metric, value, unit, timestamp, fields, labels):
    """A sample's row of the report's frame: what it measured, what the report needs of its metadata, its labels."""
    return {
        "metric": metric,
        "value": value,
        "unit": unit,
        ACCELERATOR: fields[ACCELERATOR],
        GPU_DEVICE: fields[GPU_DEVICE],
        SAMPLE_TIME: timestamp,
        SKIP_REASON: fields[SKIP_REASON] if metric == SKIPPED_METRIC else None,
        **{field: found for field, found in fields.items() if field not in _OWN_FIELDS},
        **labels,
    }


_OWN_FIELDS = (ACCELERATOR, GPU_DEVICE, SKIP_REASON)


def _why_not_a_sample(line):
    """What is wrong with a line of samples.jsonl that is not a sample, in words."""
    try:
        decoded = json.loads(line)
    except ValueError as exc:
        return f"not JSON ({exc.msg}: column {exc.colno}), probably a write cut short"
    return Sample.problem(decoded)


def _integer_labels(frame, labels, codes=None):
    """Integer labels stay integers (hpl_n 2000, not 2000.0) where samples without the label leave a gap,
    which would make pandas store the column as floats. ``labels``: each row's labels; with ``codes``, the distinct
    labels and each row's index into them (frame_of_columns)."""
    for column in frame.columns:
        if column in ("metric", "value", "unit") or frame[column].dtype.kind != "f":
            continue
        values = [found.get(column) for found in labels]
        present = [value for value in values if value is not None]
        if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
            if codes is not None:
                values = numpy.asarray(values, dtype=object)[codes]
            frame[column] = pd.Series(values, index=frame.index, dtype=object)
    return frame


def loadgen_verdict(metadata):
    """{LOADGEN_RESULT: VALID|INVALID|scaled-down|None, LOADGEN_REASONS: its reasons joined, or None} of a sample.

    An older record's VALID, without the minimums it was held to, reads scaled-down: never shown as VALID."""
    loadgen = metadata.get("loadgen")
    if not isinstance(loadgen, dict) or not loadgen.get("result"):
        return {LOADGEN_RESULT: None, LOADGEN_REASONS: None}
    result = str(loadgen["result"])
    reasons = [str(reason) for reason in loadgen.get("reasons") or []]
    if result == VALID and not isinstance(loadgen.get("mlperf_minimums"), dict):
        result, reasons = SCALED_DOWN, [UNCHECKED_VALID_REASON]
    return {LOADGEN_RESULT: result, LOADGEN_REASONS: "; ".join(reasons) or None}


def gpu_device(metadata):
    """The name of the GPU a sample measured on, None for CPU samples."""
    if metadata.get("roofline_device"):
        return str(metadata["roofline_device"])
    devices = metadata.get("devices")
    if isinstance(devices, list) and devices and isinstance(devices[0], dict) and devices[0].get("name"):
        return str(devices[0]["name"])
    return None


def varying_labels(frame):
    """Workload labels (parameters) that vary within a scenario: each value gets its own rows.

    A label that only follows the scenario (threads = scale-up) adds nothing and is left out. A label some cells of
    a scenario carry and others do not varies too (a campaign resumed with a parameter set that its first cells
    left to the workload's default): pooling them would make one row of two set-ups.
    """
    fixed = set(SCENARIO_LABELS) | RUN_LABELS | {"metric", "value", "unit", ACCELERATOR, HOST, GPU_DEVICE, SKIP_REASON}
    fixed |= {LOADGEN_RESULT, LOADGEN_REASONS, SAMPLE_TIME, *validity.COLUMNS}
    scenarios = [column for column in SCENARIO_LABELS if column in frame.columns]
    candidates = [column for column in frame.columns if column not in fixed]
    varying = []
    if candidates:
        # Every candidate's distinct values per scenario, in one grouping (a grouping per label costs far more).
        values = frame[candidates].astype(str).where(frame[candidates].notna())
        if scenarios:
            most = values.groupby([frame[c].astype(str) for c in scenarios]).nunique().max()
        else:
            most = values.nunique()
        varying = [column for column in candidates if most.get(column, 0) > 1]
    unset = _set_by_some_cells(frame, candidates)
    return [column for column in candidates if column in varying or column in unset]


def _set_by_some_cells(frame, candidates):
    """The labels that some cells carry and others do not, where the cells are alike in every other label (their
    scenario, workload and the rest): two set-ups that one row would pool."""
    if "cell" not in frame.columns or not candidates:
        return set()
    columns = list(dict.fromkeys(column for column in [*SCENARIO_LABELS, WORKLOAD, *candidates] if column in frame))
    # A cell's value of each label: its first sample's that has one (None: none of its samples has it).
    cells = frame.groupby(frame["cell"].astype(str))[columns]
    per_cell = cells.first().astype(str).where(cells.count() > 0)
    found = set()
    carried_by = per_cell.notna().sum()
    # A label every cell carries, or none does, is set alike everywhere: only the others are looked at.
    for column in (column for column in candidates if 0 < carried_by[column] < len(per_cell)):
        alike = [per_cell[c].fillna("") for c in columns if c != column]
        carried = per_cell[column].notna()
        if (carried.groupby(alike).nunique() > 1).any() if alike else carried.nunique() > 1:
            found.add(column)
    return found


def workload_keys(frame):
    """[workload] when the campaign holds samples of several workloads, else []."""
    if WORKLOAD not in frame.columns:
        return []
    return [WORKLOAD] if frame[WORKLOAD].dropna().astype(str).nunique() > 1 else []


def host_keys(frame):
    """[host] when the campaign holds samples of several runner hosts, else []."""
    if HOST not in frame.columns:
        return []
    return [HOST] if frame[HOST].dropna().astype(str).nunique() > 1 else []


def measured(frame):
    """The samples that are measurements: not the one sample of a failed or skipped cell."""
    return frame[~frame["metric"].isin(OUTCOME_METRICS)]


def metrics_present(frame):
    """The metrics ``frame`` measures, in the order they first appear (one pass in pandas, not a Python loop over a
    10,000-cell campaign's 170,000 samples)."""
    return measured(frame)["metric"].dropna().drop_duplicates().tolist()


def choose_metrics(frame, requested=None):
    present = metrics_present(frame)
    if requested:
        missing = [metric for metric in requested if metric not in present]
        if missing:
            raise ReportError(
                f"metric(s) {', '.join(missing)} not in the samples; available: "
                + (", ".join(present) or "none (every cell failed)")
            )
        return list(requested)
    if "throughput" not in present and is_micro_campaign(present):
        return [metric for metric in MICRO_METRICS if metric in present]
    return [metric for metric in DEFAULT_METRICS if metric in present] or present


def is_micro_campaign(present):
    """True when the measured metrics hold a micro-benchmark's headline figure."""
    return any(metric in MICRO_METRICS for metric in present)


def platform_rank(platform):
    """The platform's place in the row order, from the registry: bm first."""
    return platforms.rank(platform)


def is_emulated(row):
    """True for a row (or sample) of an emulated guest (QEMU TCG)."""
    return row.get(ACCELERATOR) == EMULATED
