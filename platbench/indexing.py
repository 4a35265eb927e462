"""Adding campaigns to the results store (platbench/store.py): ``platbench index`` and ``platbench import``.

A campaign's rows come from its samples.jsonl (or an export's Parquet files), with what ``compare`` reads as its
environment and, once it is in the store, its ratios to bm as its report computes them (``history.ratio_rows``,
kept in ``campaign_ratios``). A campaign is added in one transaction: a server lost mid-write leaves nothing of it,
and samples.jsonl still holds every sample for the next ``platbench index``. ``index`` keys a sample on its campaign
and the hash of its whole line (indexing a growing campaign again adds its new samples only); ``import`` keys a cell
on its campaign, host and cell id (a cell the store holds is not added again, from wherever it comes).

It sits above the store and the report (it reads both); the store itself reads no report module.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import read_samples

from platbench import compare, history
from platbench.report import load as report_load
from platbench.store import (
    PARQUET_DIR,
    SAMPLES_FILE,
    STORE_HELP,
    StoreError,
    as_text,
    canonical,
    connect,
    digest,
    location_of,
    parquet_tables,
    sample_rows,
    shown,
    write_parquet,
)


def campaign_rows(results_dir):
    """``(campaign, {table: [row dict, ...]})`` of the campaign in ``results_dir``: from its samples.jsonl, else
    (a campaign exported as Parquet) from its store/ files."""
    results_dir = Path(results_dir)
    path = results_dir / SAMPLES_FILE
    if not path.is_file():
        if (results_dir / PARQUET_DIR / "samples.parquet").is_file():
            return _parquet_rows(results_dir)
        raise StoreError(f"{results_dir} holds no {SAMPLES_FILE}: give a campaign's directory, results/<campaign>")
    samples = read_samples(path)
    if not samples:
        raise StoreError(f"{path} holds no sample: nothing to index")
    campaign = str(samples[0].labels.get("campaign") or results_dir.name)
    rows = {"cells": {}, "metadata": {}, "samples": {}}
    last_of_cell = {}  # (host, cell) -> (metadata, its id, its canonical text): a cell's metrics share one metadata
    for position, sample in enumerate(samples):
        labels, host, cell = sample.labels, str(sample.labels.get("host") or ""), str(sample.labels.get("cell") or "")
        known = last_of_cell.get((host, cell))
        if known is None or known[0] != sample.metadata:  # comparing dicts costs far less than writing them out
            text = canonical(sample.metadata)
            known = last_of_cell[(host, cell)] = (sample.metadata, digest(text), text)
            rows["metadata"].setdefault(known[1], {"metadata_id": known[1], "metadata": as_text(sample.metadata)})
        _, metadata_id, metadata_canonical = known
        labels_text = as_text(labels)
        rows["cells"].setdefault(
            (host, cell),
            {
                "host": host,
                "cell": cell,
                "scenario": labels.get("scenario"),
                "platform": labels.get("platform"),
                "labels": labels_text,
            },
        )
        line = _line_text(sample, metadata_canonical)
        rows["samples"][digest(line)] = {
            "sample_id": digest(line),
            "host": host,
            "cell": cell,
            "line_number": position,
            "metric": sample.metric,
            "value": float(sample.value),
            "integer_value": isinstance(sample.value, int),
            "unit": sample.unit,
            "timestamp": sample.timestamp,
            "labels": labels_text,
            "metadata_id": metadata_id,
        }
    tables = {name: [{"campaign": campaign, **row} for row in found.values()] for name, found in rows.items()}
    # Its times and hosts are read from the store once the campaign is in it (_merge_campaign).
    tables["campaigns"] = [
        {
            "campaign": campaign,
            "experiment": samples[0].labels.get("experiment"),
            "environment": canonical(_environment(results_dir, samples)),
            "source": str(results_dir.resolve()),
            "indexed_at": time.time(),
        }
    ]
    return campaign, tables


def _line_text(sample, metadata_canonical):
    """The text a sample's id is the hash of: the whole line, canonical (``canonical(sample)``), its metadata's
    canonical text made once per cell rather than once per metric."""
    text = canonical({**sample, "metadata": _PLACEHOLDER})
    return text.replace(f'"metadata":"{_PLACEHOLDER}"', f'"metadata":{metadata_canonical}', 1)


_PLACEHOLDER = "platbench:metadata:placeholder"  # no JSON escape in it: found as written


def _environment(results_dir, samples):
    """The environment ``compare`` shows, read the same way."""
    return compare.environment_of([Path(results_dir)], samples)


def _parquet_rows(results_dir):
    """A campaign exported as Parquet (``platbench export --format parquet``), as ``campaign_rows`` gives it."""
    tables = {name: table.to_pylist() for name, table in parquet_tables(results_dir).items()}
    if not tables.get("samples"):
        raise StoreError(f"{results_dir}/{PARQUET_DIR}/samples.parquet holds no sample: nothing to add")
    campaign = tables["samples"][0]["campaign"]
    # An export's campaign row, else none known; its times and hosts are read from the store (_merge_campaign).
    row = (tables.get("campaigns") or [{"campaign": campaign, "experiment": None, "environment": "{}"}])[0]
    tables["campaigns"] = [{**row, "source": str(Path(results_dir).resolve()), "indexed_at": time.time()}]
    return campaign, tables


def add(results_dir, location, key="sample", rows=None):
    """Write the campaign in ``results_dir`` into the store at ``location``, in one transaction; ``key`` "sample"
    (``index``: every sample the store lacks) or "cell" (``import``: the cells the store lacks, whole); ``rows``:
    its ``campaign_rows`` when read already. Returns ``(campaign, samples added, cells added, cells in it)``."""
    campaign, tables = rows or campaign_rows(results_dir)
    with connect(location) as store:
        try:
            with store.transaction():
                if store.postgresql:
                    # Writers of one campaign (two controllers, one campaign name) merge its row in turn.
                    store.execute("SELECT pg_advisory_xact_lock(hashtext(?))", [campaign])
                samples = store.insert("samples", tables["samples"], skip_known_cells=key == "cell")
                cells = store.insert("cells", tables["cells"])
                store.insert("metadata", tables["metadata"])
                _merge_campaign(store, tables["campaigns"][0])
                _keep_ratios(store, campaign)
        except store.errors() as exc:
            raise StoreError(
                store.failure(f"could not take campaign {campaign}", exc)
                + f"; nothing of it was written (one transaction): {Path(results_dir) / SAMPLES_FILE} keeps every "
                f"sample; run `platbench index {results_dir} --store {store.name}` once the store answers"
            ) from None
    return campaign, samples, cells, len(tables["cells"])


def _merge_campaign(store, row):
    """The campaign's row: this copy's, merged with what the store knew of it (other hosts' cells, their
    environment), its times and hosts read from the store."""
    known = store.execute("SELECT environment FROM campaigns WHERE campaign = ?", [row["campaign"]]).fetchone()
    environment = json.loads(row["environment"] or "{}")
    for field, values in json.loads(known[0] or "{}").items() if known else ():
        environment[field] = sorted(set(environment.get(field, [])) | set(values))
    first, last = store.execute(
        "SELECT min(timestamp), max(timestamp) FROM samples WHERE campaign = ?", [row["campaign"]]
    ).fetchone()
    hosts = [
        host
        for (host,) in store.execute(
            "SELECT DISTINCT host FROM cells WHERE campaign = ? ORDER BY host", [row["campaign"]]
        ).fetchall()
        if host
    ]
    merged = {**row, "first_sample": first, "last_sample": last, "hosts": ",".join(hosts)}
    merged["environment"] = canonical(environment)
    columns = list(merged)
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column != "campaign")
    store.execute(
        f"INSERT INTO campaigns ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
        f"ON CONFLICT (campaign) DO UPDATE SET {updates}",
        [merged[column] for column in columns],
    )


def _keep_ratios(store, campaign):
    """The campaign's ratios to bm, from every sample the store now holds of it (history.ratio_rows)."""
    try:
        ratios = history.ratio_rows(report_load.frame_of_columns(*sample_rows(store, campaign)))
    except report_load.ReportError:
        ratios = []  # no successful cell: nothing to compare
    store.execute(
        "INSERT INTO campaign_ratios VALUES (?, ?) ON CONFLICT (campaign) DO UPDATE SET ratios = excluded.ratios",
        [campaign, as_text(ratios)],
    )


def index(results_dir, location):
    """Write the campaign in ``results_dir`` as Parquet and add it to the store at ``location``; returns
    ``(campaign, samples added)``: 0 when every sample was there already."""
    rows = campaign_rows(results_dir)
    if (Path(results_dir) / SAMPLES_FILE).is_file():
        write_parquet(results_dir, rows[1])
    campaign, added, _, _ = add(results_dir, location, rows=rows)
    return campaign, added


def add_index_arguments(parser):
    parser.add_argument("results_dirs", nargs="+", metavar="DIR", help="campaign directories, results/<campaign>")
    parser.add_argument("--store", help=STORE_HELP)
    parser.set_defaults(handler=run_index)


def run_index(args):
    """``platbench index``: each campaign written as Parquet and added to the store; 2 on a directory or a store
    that cannot be read, after indexing the others."""
    status = 0
    for results_dir in args.results_dirs:
        location = location_of(args.store, Path(results_dir).resolve().parent)
        try:
            campaign, added = index(results_dir, location)
        except StoreError as exc:
            print(f"platbench index: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{campaign}: {added} sample(s) added to {shown(location)}" + ("" if added else " (indexed before)"))
    return status


def add_import_arguments(parser):
    parser.add_argument(
        "results_dirs", nargs="+", metavar="DIR", help="campaign directories copied from another machine"
    )
    parser.add_argument("--store", help=STORE_HELP.replace("beside the campaigns", "in results/"))
    parser.set_defaults(handler=run_import)


def run_import(args):
    """``platbench import``: each campaign directory (samples.jsonl, or an export's Parquet files) added to the
    store, a cell at a time: the cells the store holds (campaign, host, cell id) are left out."""
    status = 0
    location = location_of(args.store)
    for results_dir in args.results_dirs:
        try:
            campaign, samples, cells, total = add(results_dir, location, key="cell")
        except StoreError as exc:
            print(f"platbench import: {exc}", file=sys.stderr)
            status = 2
            continue
        print(
            f"{campaign}: {cells} of its {total} cell(s) added to {shown(location)} ({samples} sample(s))"
            + (f"; {total - cells} the store held already" if cells < total else "")
        )
    return status
