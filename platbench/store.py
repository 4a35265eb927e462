"""The results store: every campaign in one place, for the questions asked across campaigns.

``samples.jsonl`` stays a running campaign's append-only log (crash-safe, resumable). ``platbench index`` writes a
campaign as Parquet beside it (``store/cells.parquet``: a cell's labels once; ``store/metadata.parquet``: each
distinct metadata of a cell once; ``store/samples.parquet``: one row per metric, naming its metadata) and registers
it in a DuckDB file (``results/platbench.duckdb`` by default), where every campaign's rows live in four tables
(``campaigns``, ``cells``, ``metadata``, ``samples``; docs/src/results-store.md). A sample's key is its campaign
and the hash of its whole line: indexing or importing a campaign again adds nothing.

``samples_of`` gives a campaign's samples back exactly as samples.jsonl held them (``Sample``), so every reader
(the report, ``history``) builds the same frame from either.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from ansible_collections.platbench.lab.plugins.plugin_utils.records import Sample, read_samples

SCHEMA_VERSION = 1
STORE_FILE = "platbench.duckdb"
PARQUET_DIR = "store"
SAMPLES_FILE = "samples.jsonl"
TABLES = ("campaigns", "cells", "metadata", "samples")
_DDL = {
    "store_info": "CREATE TABLE IF NOT EXISTS store_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "campaigns": (
        "CREATE TABLE IF NOT EXISTS campaigns (campaign VARCHAR PRIMARY KEY, experiment VARCHAR, first_sample DOUBLE, "
        "last_sample DOUBLE, hosts VARCHAR, environment VARCHAR, source VARCHAR, indexed_at DOUBLE)"
    ),
    "cells": (
        "CREATE TABLE IF NOT EXISTS cells (campaign VARCHAR, host VARCHAR, cell VARCHAR, scenario VARCHAR, "
        "platform VARCHAR, labels VARCHAR, PRIMARY KEY (campaign, host, cell))"
    ),
    "metadata": (
        "CREATE TABLE IF NOT EXISTS metadata (campaign VARCHAR, metadata_id VARCHAR, metadata VARCHAR, "
        "PRIMARY KEY (campaign, metadata_id))"
    ),
    "samples": (
        "CREATE TABLE IF NOT EXISTS samples (campaign VARCHAR, sample_id VARCHAR, host VARCHAR, cell VARCHAR, "
        "line_number INTEGER, metric VARCHAR, value DOUBLE, integer_value BOOLEAN, unit VARCHAR, timestamp DOUBLE, "
        "labels VARCHAR, metadata_id VARCHAR, PRIMARY KEY (campaign, sample_id))"
    ),
}


class StoreError(Exception):
    """The store cannot be read or written; the message says which and what to do."""


def _canonical(value):
    """The text a hash is taken of: key order does not matter."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)


def _text(value):
    """The text stored: the keys in their order, as samples.jsonl holds them (the report's columns follow it)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def campaign_rows(results_dir):
    """``(campaign, {table: [row dict, ...]})`` of the campaign in ``results_dir``, from its samples.jsonl."""
    results_dir = Path(results_dir)
    path = results_dir / SAMPLES_FILE
    if not path.is_file():
        raise StoreError(f"{results_dir} holds no {SAMPLES_FILE}: give a campaign's directory, results/<campaign>")
    samples = read_samples(path)
    if not samples:
        raise StoreError(f"{path} holds no sample: nothing to index")
    campaign = str(samples[0].labels.get("campaign") or results_dir.name)
    rows = {"cells": {}, "metadata": {}, "samples": {}}
    for position, sample in enumerate(samples):
        labels, host, cell = sample.labels, str(sample.labels.get("host") or ""), str(sample.labels.get("cell") or "")
        metadata_id = _digest(_canonical(sample.metadata))
        rows["metadata"].setdefault(metadata_id, {"metadata_id": metadata_id, "metadata": _text(sample.metadata)})
        rows["cells"].setdefault(
            (host, cell),
            {
                "host": host,
                "cell": cell,
                "scenario": labels.get("scenario"),
                "platform": labels.get("platform"),
                "labels": _text(labels),
            },
        )
        line = _canonical(sample)
        rows["samples"][_digest(line)] = {
            "sample_id": _digest(line),
            "host": host,
            "cell": cell,
            "line_number": position,
            "metric": sample.metric,
            "value": float(sample.value),
            "integer_value": isinstance(sample.value, int),
            "unit": sample.unit,
            "timestamp": sample.timestamp,
            "labels": _text(labels),
            "metadata_id": metadata_id,
        }
    tables = {name: [{"campaign": campaign, **row} for row in found.values()] for name, found in rows.items()}
    times = [sample.timestamp for sample in samples if isinstance(sample.timestamp, (int, float))]
    hosts = sorted({row["host"] for row in tables["cells"] if row["host"]})
    tables["campaigns"] = [
        {
            "campaign": campaign,
            "experiment": samples[0].labels.get("experiment"),
            "first_sample": min(times) if times else None,
            "last_sample": max(times) if times else None,
            "hosts": ",".join(hosts),
            "environment": _canonical(_environment(results_dir, samples)),
            "source": str(results_dir.resolve()),
            "indexed_at": time.time(),
        }
    ]
    return campaign, tables


def _environment(results_dir, samples):
    from platbench.compare import environment_of  # the environment compare shows, read the same way

    return environment_of([Path(results_dir)], samples)


def write_parquet(results_dir, tables):
    """The campaign's tables as Parquet files in RESULTS_DIR/store/, its schema version in each file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(results_dir) / PARQUET_DIR
    folder.mkdir(exist_ok=True)
    written = []
    for name in ("cells", "metadata", "samples"):
        table = pa.Table.from_pylist(tables[name])
        table = table.replace_schema_metadata({b"platbench_schema": str(SCHEMA_VERSION).encode()})
        pq.write_table(table, folder / f"{name}.parquet")
        written.append(folder / f"{name}.parquet")
    return written


def store_path(results_root):
    return Path(results_root) / STORE_FILE


def connect(path, read_only=False):
    """A DuckDB connection to the store at ``path``: created with its tables when writable and missing; refused when
    its schema is newer than this platbench's."""
    import duckdb

    path = Path(path)
    if read_only and not path.is_file():
        raise StoreError(f"no store at {path}: run `platbench index results/<campaign>` first")
    try:
        connection = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        raise StoreError(f"the store {path} cannot be opened: {exc}") from None
    if not read_only:
        for statement in _DDL.values():
            connection.execute(statement)
        connection.execute("INSERT OR IGNORE INTO store_info VALUES ('schema', ?)", [str(SCHEMA_VERSION)])
    found = connection.execute("SELECT value FROM store_info WHERE key = 'schema'").fetchone()
    if found is not None and int(found[0]) > SCHEMA_VERSION:
        connection.close()
        raise StoreError(
            f"the store {path} has schema {found[0]}, newer than this platbench's {SCHEMA_VERSION}: upgrade platbench"
        )
    return connection


def index(results_dir, store):
    """Write the campaign in ``results_dir`` as Parquet and add it to the DuckDB store at ``store``; returns
    ``(campaign, samples added)``: 0 when every sample was there already."""
    campaign, tables = campaign_rows(results_dir)
    write_parquet(results_dir, tables)
    connection = connect(store)
    try:
        before = connection.execute("SELECT count(*) FROM samples WHERE campaign = ?", [campaign]).fetchone()[0]
        connection.execute("BEGIN TRANSACTION")
        for name in TABLES:
            rows = tables[name]
            if not rows:
                continue
            columns = list(rows[0])
            verb = "INSERT OR REPLACE" if name == "campaigns" else "INSERT OR IGNORE"
            connection.executemany(
                f"{verb} INTO {name} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                [[row[column] for column in columns] for row in rows],
            )
        connection.execute("COMMIT")
        after = connection.execute("SELECT count(*) FROM samples WHERE campaign = ?", [campaign]).fetchone()[0]
    finally:
        connection.close()
    return campaign, after - before


def samples_of(connection, campaign):
    """The campaign's samples as ``Sample``s, each equal to its line of samples.jsonl, in the order written."""
    rows = connection.execute(
        "SELECT s.metric, s.value, s.integer_value, s.unit, s.timestamp, s.labels, m.metadata FROM samples s "
        "JOIN metadata m ON m.campaign = s.campaign AND m.metadata_id = s.metadata_id "
        "WHERE s.campaign = ? ORDER BY s.line_number",
        [campaign],
    ).fetchall()
    return [
        Sample.read(
            {
                "metric": metric,
                "value": int(value) if integer else value,
                "unit": unit,
                "timestamp": timestamp,
                "labels": json.loads(labels),
                "metadata": json.loads(metadata),
            }
        )
        for metric, value, integer, unit, timestamp, labels, metadata in rows
    ]


def campaigns(connection, since=None, host=None):
    """``[(campaign, experiment, first sample time, environment dict)]`` in time order."""
    query = "SELECT campaign, experiment, first_sample, hosts, environment FROM campaigns"
    found = []
    for campaign, experiment, first, hosts, environment in connection.execute(
        query + " ORDER BY first_sample, campaign"
    ).fetchall():
        if since is not None and (first or 0) < since:
            continue
        if host is not None and host not in (hosts or "").split(","):
            continue
        found.append((campaign, experiment, first, json.loads(environment or "{}")))
    return found


def query(store, sql):
    """Rows of a read-only ``sql`` on the store: ``(column names, rows)``. A statement that writes is refused by the
    read-only connection."""
    import duckdb

    connection = connect(store, read_only=True)
    try:
        cursor = connection.execute(sql)
        columns = [column[0] for column in cursor.description or []]
        return columns, cursor.fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"the query failed: {exc}") from None
    finally:
        connection.close()


def add_index_arguments(parser):
    parser.add_argument("results_dirs", nargs="+", metavar="DIR", help="campaign directories, results/<campaign>")
    parser.add_argument("--store", help=f"the store's DuckDB file (default: beside the campaigns, {STORE_FILE})")
    parser.set_defaults(handler=run_index)


def run_index(args):
    """``platbench index``: each campaign written as Parquet and added to the store; 2 on a directory or a store
    that cannot be read, after indexing the others."""
    status = 0
    for results_dir in args.results_dirs:
        path = Path(args.store) if args.store else store_path(Path(results_dir).resolve().parent)
        try:
            campaign, added = index(results_dir, path)
        except StoreError as exc:
            print(f"platbench index: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{campaign}: {added} sample(s) added to {path}" + ("" if added else " (indexed before)"))
    return status


def add_query_arguments(parser):
    parser.add_argument("sql", help="one SQL statement on the tables campaigns, cells, metadata and samples")
    parser.add_argument("--store", help=f"the store's DuckDB file (default: results/{STORE_FILE})")
    parser.set_defaults(handler=run_query)


def run_query(args):
    """``platbench query``: the rows of a read-only SQL statement, tab-separated under their column names."""
    try:
        columns, rows = query(args.store or Path("results") / STORE_FILE, args.sql)
    except StoreError as exc:
        print(f"platbench query: {exc}", file=sys.stderr)
        return 2
    print("\t".join(columns))
    for row in rows:
        print("\t".join("" if value is None else str(value) for value in row))
    return 0
