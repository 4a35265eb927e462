"""The results store: every campaign in one place, for the questions asked across campaigns.

``samples.jsonl`` stays a running campaign's append-only log (crash-safe, resumable). ``platbench index``
(platbench/indexing.py) writes a campaign as Parquet beside it (``store/cells.parquet``: a cell's labels once;
``store/metadata.parquet``: each distinct metadata of a cell once; ``store/samples.parquet``: one row per metric,
naming its metadata) and adds it to the store, where every campaign's rows live in five tables (``campaigns``,
``cells``, ``metadata``, ``samples``, ``campaign_ratios``; docs/src/results-store.md):

- by default a DuckDB file beside the campaigns (``results/platbench.duckdb``);
- with ``--store postgresql://USER@HOST[:PORT]/DATABASE`` (or ``PLATBENCH_STORE``, or the inventory's
  ``platbench_results_store``), a PostgreSQL database that several controllers write into (role
  ``platbench.lab.results_db``). Its password comes from the environment (``PGPASSWORD``, ``~/.pgpass``), never
  from the results; every message names the URL without it.

This module opens and reads the store and the Parquet files (it reads no report module: the report reads it).
``samples_of`` gives a campaign's samples back exactly as samples.jsonl held them (``Sample``); ``sample_rows`` and
``parquet_view`` give the columns the report's frame is built from (report_load.frame_of_columns), without decoding
a metadata more than once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
import time
import urllib.parse
from pathlib import Path

from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    OUTCOME_METRICS,
    Sample,
    read_samples,
)

SCHEMA_VERSION = 1
STORE_FILE = "platbench.duckdb"
STORE_ENV = "PLATBENCH_STORE"
PARQUET_DIR = "store"
SAMPLES_FILE = "samples.jsonl"
PARQUET_TABLES = ("cells", "metadata", "samples")
TABLES = ("campaigns", *PARQUET_TABLES)
# Written in each Parquet file's metadata: the schema, and the samples.jsonl the files were made from (its size and
# modification time), so a reader knows whether they still hold the whole campaign.
SCHEMA_KEY, SOURCE_KEY = b"platbench_schema", b"platbench_source"
URL_SCHEMES = ("postgresql://", "postgres://")
# How long a writer waits for another process that holds the DuckDB file (one writer at a time).
DUCKDB_LOCK_WAIT = 60.0
COLUMNS = {
    "store_info": ("key VARCHAR PRIMARY KEY", "value VARCHAR"),
    "campaigns": (
        "campaign VARCHAR PRIMARY KEY",
        "experiment VARCHAR",
        "first_sample DOUBLE PRECISION",
        "last_sample DOUBLE PRECISION",
        "hosts VARCHAR",
        "environment VARCHAR",
        "source VARCHAR",
        "indexed_at DOUBLE PRECISION",
    ),
    "cells": (
        "campaign VARCHAR",
        "host VARCHAR",
        "cell VARCHAR",
        "scenario VARCHAR",
        "platform VARCHAR",
        "labels VARCHAR",
        "PRIMARY KEY (campaign, host, cell)",
    ),
    "metadata": ("campaign VARCHAR", "metadata_id VARCHAR", "metadata VARCHAR", "PRIMARY KEY (campaign, metadata_id)"),
    # Each campaign's ratios to bm as its report computes them (history.ratio_rows, JSON), made when it is added:
    # ``platbench history`` reads them instead of summarizing every campaign again.
    "campaign_ratios": ("campaign VARCHAR PRIMARY KEY", "ratios VARCHAR"),
    # One row per finding of each `platbench reproduce` (platbench/reproduce/): its verdict and quantity with the
    # 95% interval (null where its groups differ: ``detail`` JSON holds each), so history shows a finding over time.
    "findings": (
        "reproduction VARCHAR",
        "study VARCHAR",
        "finding VARCHAR",
        "recorded_at DOUBLE PRECISION",
        "verdict VARCHAR",
        "estimate DOUBLE PRECISION",
        "low DOUBLE PRECISION",
        "high DOUBLE PRECISION",
        "campaign VARCHAR",
        "lab VARCHAR",
        "detail VARCHAR",
        "PRIMARY KEY (reproduction, finding)",
    ),
    "samples": (
        "campaign VARCHAR",
        "sample_id VARCHAR",
        "host VARCHAR",
        "cell VARCHAR",
        "line_number INTEGER",
        "metric VARCHAR",
        "value DOUBLE PRECISION",
        "integer_value BOOLEAN",
        "unit VARCHAR",
        "timestamp DOUBLE PRECISION",
        "labels VARCHAR",
        "metadata_id VARCHAR",
        "PRIMARY KEY (campaign, sample_id)",
    ),
}
# The columns a frame is built from (report_load.frame_of_columns).
ROW_COLUMNS = ("metric", "value", "integer_value", "unit", "timestamp", "labels", "metadata_id")


class StoreError(Exception):
    """The store cannot be read or written; the message says which and what to do."""


def canonical(value):
    """The text a hash is taken of: key order does not matter."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)


def as_text(value):
    """The text stored: the keys in their order, as samples.jsonl holds them (the report's columns follow it)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)


def digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def is_url(location):
    return str(location).startswith(URL_SCHEMES)


def shown(location):
    """The store as messages name it: a URL without its password (in the user part or as a parameter)."""
    text = str(location)
    if not is_url(text):
        return text
    text = re.sub(r"^([a-z]+://[^:/@?]*):[^/?]*@", r"\1@", text)  # to the last @: a password may hold one
    return re.sub(r"([?&]password=)[^&]*", r"\1***", text)


def location_of(option, results_root="results"):
    """Where the store is: ``--store``, else ``PLATBENCH_STORE``, else the DuckDB file in ``results_root``."""
    return str(option or os.environ.get(STORE_ENV) or Path(results_root) / STORE_FILE)


def store_path(results_root):
    return Path(results_root) / STORE_FILE


# --- a campaign's rows ---------------------------------------------------------------------------------------------


def _source_stamp(results_dir):
    """The samples.jsonl the Parquet files are made from: its size and modification time (ns)."""
    stat = (Path(results_dir) / SAMPLES_FILE).stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def write_parquet(results_dir, tables, folder=None):
    """The campaign's tables as Parquet files in ``folder`` (RESULTS_DIR/store/), the schema version and the
    samples.jsonl they were made from in each file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder or Path(results_dir) / PARQUET_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    metadata = {SCHEMA_KEY: str(SCHEMA_VERSION).encode()}
    if (Path(results_dir) / SAMPLES_FILE).is_file():
        metadata[SOURCE_KEY] = _source_stamp(results_dir).encode()
    written = []
    for name in ("campaigns", *PARQUET_TABLES):
        if name == "campaigns" and folder == Path(results_dir) / PARQUET_DIR:
            continue  # beside its campaign, the campaign's row is the store's business
        table = pa.Table.from_pylist(tables[name], schema=_arrow_schema(name))
        pq.write_table(table.replace_schema_metadata(metadata), folder / f"{name}.parquet")
        written.append(folder / f"{name}.parquet")
    return written


def _arrow_schema(name):
    import pyarrow as pa

    kinds = {"VARCHAR": pa.string(), "DOUBLE": pa.float64(), "INTEGER": pa.int64(), "BOOLEAN": pa.bool_()}
    fields = []
    for column in COLUMNS[name]:
        if column.startswith("PRIMARY KEY"):
            continue
        column_name, kind = column.split()[:2]
        fields.append(pa.field(column_name, kinds[kind]))
    return pa.schema(fields)


def parquet_schema_problem(path):
    """Why the Parquet file at ``path`` cannot be read by this platbench (a newer schema), or None."""
    import pyarrow.parquet as pq

    found = (pq.read_schema(path).metadata or {}).get(SCHEMA_KEY)
    if found is not None and int(found) > SCHEMA_VERSION:
        return f"{path} has schema {int(found)}, newer than this platbench's {SCHEMA_VERSION}: upgrade platbench"
    return None


def parquet_current(results_dir):
    """True when RESULTS_DIR/store/ holds the whole campaign: written from samples.jsonl as it is now (or there is
    no samples.jsonl: a campaign exported as Parquet). Raises StoreError for a file of a newer schema."""
    import pyarrow.parquet as pq

    path = Path(results_dir) / PARQUET_DIR / "samples.parquet"
    if not path.is_file():
        return False
    problem = parquet_schema_problem(path)
    if problem:
        raise StoreError(problem)
    if not (Path(results_dir) / SAMPLES_FILE).is_file():
        return True
    stamp = (pq.read_schema(path).metadata or {}).get(SOURCE_KEY)
    return stamp is not None and stamp.decode() == _source_stamp(results_dir)


def parquet_tables(results_dir, samples_columns=None):
    """``{table: pyarrow Table}`` of the Parquet files in RESULTS_DIR/store/; ``samples_columns``: only those of
    samples.parquet, its repeated strings read as dictionaries (``_SAMPLES_DICTIONARIES``)."""
    import pyarrow.parquet as pq

    folder = Path(results_dir) / PARQUET_DIR
    tables = {}
    for name in (*PARQUET_TABLES, "campaigns"):
        path = folder / f"{name}.parquet"
        if path.is_file():
            problem = parquet_schema_problem(path)
            if problem:
                raise StoreError(problem)
            if name == "samples" and samples_columns is not None:
                dictionaries = [column for column in _SAMPLES_DICTIONARIES if column in samples_columns]
                tables[name] = pq.read_table(path, columns=list(samples_columns), read_dictionary=dictionaries)
            else:
                tables[name] = pq.read_table(path)
    return tables


# The samples' columns that repeat a few values many times (a 10,000-cell campaign: 170,000 rows, 10,000 distinct
# labels of about 400 characters): read as dictionaries, each distinct string is decoded once (0.03 s against about
# 0.5 s for the whole file read as plain strings).
_SAMPLES_DICTIONARIES = ("metric", "unit", "labels", "metadata_id")


def _python_column(column):
    """A pyarrow column as a list; a dictionary column's values taken from its dictionary by index, each distinct
    value made a Python object once."""
    import pyarrow as pa

    column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type) or column.null_count:
        return column.to_pylist()
    distinct = column.dictionary.to_pylist()
    return [distinct[index] for index in column.indices.to_numpy()]


def parquet_view(results_dir):
    """A campaign's Parquet files as the report reads them: ``(columns, metadata)``, ``columns`` the samples'
    ROW_COLUMNS as lists in the order samples.jsonl held them, ``metadata`` each metadata id's decoded dict. Read
    once per process while the files stay the same (the frame and the report's metadata both read them)."""
    path = Path(results_dir).resolve() / PARQUET_DIR / "samples.parquet"
    stat = path.stat()
    return _parquet_view(str(path.parent.parent), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _parquet_view(results_dir, _size, _mtime):
    tables = parquet_tables(results_dir, samples_columns=(*ROW_COLUMNS, "line_number"))
    samples = tables["samples"].sort_by("line_number")
    columns = {name: _python_column(samples.column(name)) for name in (*ROW_COLUMNS, "line_number")}
    metadata = tables["metadata"]
    texts = zip(*(metadata.column(name).to_pylist() for name in ("metadata_id", "metadata")), strict=True)
    return columns, {found: json.loads(text) for found, text in texts}


def campaign_samples(results_dir):
    """The samples a campaign's metadata is read from (report_meta, compare's environment): from its Parquet files
    when they hold the whole campaign, one per distinct labels and metadata (every failed or skipped sample, each
    with its own reason), in the order first written; else every line of samples.jsonl."""
    results_dir = Path(results_dir)
    try:
        current = parquet_current(results_dir)
    except StoreError:
        current = False
    if not current:
        path = results_dir / SAMPLES_FILE
        return read_samples(path) if path.is_file() else []
    columns, metadata = parquet_view(results_dir)
    decoded, seen, samples = {}, set(), []
    for number, (line, metric, labels, metadata_id) in enumerate(
        zip(columns["line_number"], columns["metric"], columns["labels"], columns["metadata_id"], strict=True)
    ):
        key = (labels, metadata_id, line if metric in OUTCOME_METRICS else None)
        if key in seen:
            continue
        seen.add(key)
        if labels not in decoded:
            decoded[labels] = json.loads(labels)
        samples.append(sample_at(columns, number, decoded[labels], metadata[metadata_id]))
    return samples


def sample_at(columns, number, labels, metadata):
    """The ``Sample`` in row ``number`` of a campaign's ``columns`` (store.ROW_COLUMNS), its labels and metadata
    decoded: equal to its line of samples.jsonl (a value written as an integer is one again)."""
    value = columns["value"][number]
    return Sample.read(
        {
            "metric": columns["metric"][number],
            "value": int(value) if columns["integer_value"][number] else value,
            "unit": columns["unit"][number],
            "timestamp": columns["timestamp"][number],
            "labels": labels,
            "metadata": metadata,
        }
    )


# --- the store ---------------------------------------------------------------------------------------------------


class Store:
    """One open store, a DuckDB file or a PostgreSQL database: the same statements on either (``?`` placeholders,
    ``ON CONFLICT``), each backend's own way to load many rows at once."""

    def __init__(self, location, read_only=False):
        self.location = str(location)
        self.name = shown(self.location)
        self.postgresql = is_url(self.location)
        self.read_only = read_only
        self._connection = self._open_postgresql() if self.postgresql else self._open_duckdb()
        try:
            if not read_only:
                self._create_tables()
            self._check_schema()
        except StoreError:
            self.close()
            raise
        except self.errors() as exc:
            self.close()
            raise StoreError(self.failure("cannot be read", exc)) from None

    # opening

    def _open_duckdb(self):
        import duckdb

        path = Path(self.location)
        if self.read_only and not path.is_file():
            raise StoreError(f"no store at {path}: run `platbench index results/<campaign>` first")
        deadline = time.monotonic() + DUCKDB_LOCK_WAIT
        while True:
            try:
                return duckdb.connect(str(path), read_only=self.read_only)
            except duckdb.IOException as exc:
                # Another process writes into the file: one writer at a time, so wait for it (bounded).
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise StoreError(f"the store {path} cannot be opened: {_first_line(exc)}") from None
                time.sleep(0.5)
            except duckdb.Error as exc:
                raise StoreError(f"the store {path} cannot be opened: {_first_line(exc)}") from None

    def _open_postgresql(self):
        import psycopg

        try:
            urllib.parse.urlsplit(self.location).port  # noqa: B018 - raises on a port that is no number
            psycopg.conninfo.conninfo_to_dict(self.location)
        except (ValueError, psycopg.Error) as exc:
            raise StoreError(
                f"the store URL {self.name} does not parse ({_first_line(exc)}): give "
                "postgresql://USER@HOST[:PORT]/DATABASE, the password in PGPASSWORD or ~/.pgpass"
            ) from None
        try:
            connection = psycopg.connect(self.location, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                f"the store {self.name} cannot be reached: {_first_line(exc)}; is the server up (role "
                "platbench.lab.results_db) and the password in PGPASSWORD or ~/.pgpass?"
            ) from None
        if self.read_only:
            connection.read_only = True
            connection.autocommit = False
        return connection

    def errors(self):
        if self.postgresql:
            import psycopg

            return psycopg.Error
        import duckdb

        return duckdb.Error

    def failure(self, what, exc):
        return f"the store {self.name} {what}: {_first_line(exc)}"

    def _create_tables(self):
        with self.transaction():
            if self.postgresql:
                # Two controllers creating the tables at once: one waits for the other.
                self.execute("SELECT pg_advisory_xact_lock(hashtext('platbench store schema'))")
            for table, columns in COLUMNS.items():
                self.execute(f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(columns)})")
            self.execute("INSERT INTO store_info VALUES (?, ?) ON CONFLICT DO NOTHING", ["schema", str(SCHEMA_VERSION)])

    def _check_schema(self):
        try:
            found = self.execute("SELECT value FROM store_info WHERE key = 'schema'").fetchone()
        except self.errors():
            if self.postgresql and self.read_only:
                self._connection.rollback()
            raise StoreError(
                f"the store {self.name} holds no platbench tables: run `platbench index results/<campaign> --store "
                f"{self.name}` first"
            ) from None
        if found is not None and int(found[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.name} has schema {found[0]}, newer than this platbench's {SCHEMA_VERSION}: "
                "upgrade platbench"
            )

    # statements

    def execute(self, sql, params=None):
        """Run one statement (``?`` placeholders) and return its cursor."""
        if self.postgresql:
            return self._connection.execute(sql.replace("?", "%s") if params is not None else sql, params)
        return self._connection.execute(sql, params) if params is not None else self._connection.execute(sql)

    def statement(self, sql):
        """Run a statement of the user's as it is (no placeholders; in PostgreSQL, prepared: one statement only)."""
        if self.postgresql:
            return self._connection.execute(sql, prepare=True)
        return self._connection.execute(sql)

    @contextlib.contextmanager
    def transaction(self):
        if self.postgresql:
            with self._connection.transaction():
                yield
            return
        self._connection.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def insert(self, table, rows, skip_known_cells=False):
        """Add ``rows`` (dicts of one table's columns) to ``table``, leaving the rows whose key is there; with
        ``skip_known_cells``, also the samples of a cell (campaign, host, cell) the store holds. Returns how many
        were added."""
        if not rows:
            return 0
        columns = [column.split()[0] for column in COLUMNS[table] if not column.startswith("PRIMARY KEY")]
        names = ", ".join(columns)
        where = (
            " WHERE NOT EXISTS (SELECT 1 FROM cells c WHERE c.campaign = incoming.campaign "
            "AND c.host = incoming.host AND c.cell = incoming.cell)"
            if skip_known_cells
            else ""
        )
        insert = f"INSERT INTO {table} ({names}) SELECT {names} FROM incoming{where} ON CONFLICT DO NOTHING"
        if self.postgresql:
            self.execute(f"CREATE TEMPORARY TABLE incoming (LIKE {table}) ON COMMIT DROP")
            with self._connection.cursor() as cursor:
                with cursor.copy(f"COPY incoming ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row([row.get(column) for column in columns])
                cursor.execute(insert)
                added = cursor.rowcount
            self.execute("DROP TABLE incoming")
            return added
        import pyarrow as pa

        incoming = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows], _arrow_schema(table))
        self._connection.register("incoming", incoming)
        try:
            return self._connection.execute(insert).fetchone()[0]
        finally:
            self._connection.unregister("incoming")

    def close(self):
        with contextlib.suppress(Exception):
            self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _first_line(exc):
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def connect(location, read_only=False):
    """The store at ``location`` (a DuckDB file or a postgresql:// URL), created with its tables when writable and
    missing; refused when its schema is newer than this platbench's."""
    return Store(location, read_only=read_only)


def record_findings(location, reproduction, recorded_at, data):
    """Add a reproduction's verdicts (reproduce/page.as_json's ``data``) to the store at ``location``."""
    rows = [
        {
            "reproduction": reproduction,
            "study": data["study"],
            "finding": row["finding"],
            "recorded_at": recorded_at,
            "verdict": row["verdict"],
            "estimate": row["estimate"],
            "low": row["low"],
            "high": row["high"],
            "campaign": row["campaign"],
            "lab": data["lab"],
            "detail": json.dumps({"groups": row["groups"], "detail": row["detail"]}, default=str),
        }
        for row in data["findings"]
    ]
    with connect(location) as opened:
        try:
            with opened.transaction():
                opened.insert("findings", rows)
        except opened.errors() as exc:
            raise StoreError(opened.failure("cannot be written", exc)) from None


def findings_over_time(location, study, finding=None):
    """The store's verdicts of ``study`` (one ``finding`` where given), oldest first, as dicts."""
    with connect(location, read_only=True) as opened:
        sql = (
            "SELECT reproduction, finding, recorded_at, verdict, estimate, low, high, campaign FROM findings "
            "WHERE study = ?"
        )
        params = [study]
        if finding:
            sql += " AND finding = ?"
            params.append(finding)
        try:
            rows = opened.execute(sql + " ORDER BY recorded_at, finding", params).fetchall()
        except opened.errors():
            return []  # a store written before the table was
    names = ("reproduction", "finding", "recorded_at", "verdict", "estimate", "low", "high", "campaign")
    return [dict(zip(names, row, strict=True)) for row in rows]


def kept_ratios(store):
    """``{campaign: [ratio row, ...]}`` that ``index`` and ``import`` kept (campaigns added before they were kept
    have none: history computes theirs)."""
    try:
        rows = store.execute("SELECT campaign, ratios FROM campaign_ratios").fetchall()
    except store.errors():
        if store.postgresql:
            store._connection.rollback()
        return {}  # a store written before the table was: every campaign's ratios are computed
    return {campaign: json.loads(ratios) for campaign, ratios in rows}


def sample_rows(store, campaign):
    """A campaign's samples in the store as the report reads them: ``(columns, metadata)`` as ``parquet_view``
    gives them (the metadata left as stored text: each is decoded once, by whoever reads it)."""
    rows = store.execute(
        f"SELECT {', '.join(ROW_COLUMNS)} FROM samples WHERE campaign = ? ORDER BY line_number, host", [campaign]
    ).fetchall()
    columns = dict(zip(ROW_COLUMNS, map(list, zip(*rows, strict=True)), strict=True)) if rows else {}
    texts = dict(store.execute("SELECT metadata_id, metadata FROM metadata WHERE campaign = ?", [campaign]).fetchall())
    return columns, texts


def samples_of(store, campaign):
    """The campaign's samples as ``Sample``s, each equal to its line of samples.jsonl, in the order written."""
    columns, texts = sample_rows(store, campaign)
    return [
        sample_at(columns, number, json.loads(labels), json.loads(texts[metadata_id]))
        for number, (labels, metadata_id) in enumerate(
            zip(columns.get("labels", []), columns.get("metadata_id", []), strict=True)
        )
    ]


def campaigns(store, since=None, host=None):
    """``[(campaign, experiment, first sample time, environment dict)]`` in time order."""
    found = []
    for campaign, experiment, first, hosts, environment in store.execute(
        "SELECT campaign, experiment, first_sample, hosts, environment FROM campaigns ORDER BY first_sample, campaign"
    ).fetchall():
        if since is not None and (first or 0) < since:
            continue
        if host is not None and host not in (hosts or "").split(","):
            continue
        found.append((campaign, experiment, first, json.loads(environment or "{}")))
    return found


def query(location, sql):
    """Rows of a read-only ``sql`` on the store: ``(column names, rows)``. A statement that writes is refused by the
    read-only connection (a read-only DuckDB file; a read-only PostgreSQL transaction, one prepared statement)."""
    with connect(location, read_only=True) as store:
        try:
            cursor = store.statement(sql)
            columns = [column[0] for column in cursor.description or []]
            return columns, cursor.fetchall()
        except store.errors() as exc:
            raise StoreError(f"the query failed: {_first_line(exc)}") from None


def export(location, output, campaign_names=None, file_format="parquet"):
    """Write campaigns of the store into OUTPUT/<campaign>/: as Parquet (store/*.parquet, the four tables' rows of
    the campaign: ``platbench import`` and ``platbench report`` read the directory as they read a campaign's), or as
    CSV (samples.csv, one row per sample with a column per label; cells.csv; metadata.csv). Returns ``[(campaign,
    directory, samples)]``."""
    import pyarrow as pa

    written = []
    with connect(location, read_only=True) as store:
        known = [name for (name,) in store.execute("SELECT campaign FROM campaigns ORDER BY campaign").fetchall()]
        missing = sorted(set(campaign_names or ()) - set(known))
        if missing:
            raise StoreError(
                f"the store {store.name} holds no campaign {', '.join(missing)}: its campaigns are "
                f"{', '.join(known) or 'none'}"
            )
        for campaign in campaign_names or known:
            tables = {}
            for name in TABLES:
                columns = [c.split()[0] for c in COLUMNS[name] if not c.startswith("PRIMARY KEY")]
                order = " ORDER BY line_number, host" if name == "samples" else ""
                cursor = store.execute(f"SELECT {', '.join(columns)} FROM {name} WHERE campaign = ?{order}", [campaign])
                rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
                tables[name] = pa.Table.from_pylist(rows, schema=_arrow_schema(name))
            directory = Path(output) / campaign
            if file_format == "parquet":
                import pyarrow.parquet as pq

                folder = directory / PARQUET_DIR
                folder.mkdir(parents=True, exist_ok=True)
                for name, table in tables.items():
                    table = table.replace_schema_metadata({SCHEMA_KEY: str(SCHEMA_VERSION).encode()})
                    pq.write_table(table, folder / f"{name}.parquet")
            else:
                directory.mkdir(parents=True, exist_ok=True)
                _write_csv(tables, directory)
            written.append((campaign, directory, tables["samples"].num_rows))
    return written


def _write_csv(tables, directory):
    """samples.csv with a column per label (a spreadsheet's view), cells.csv and metadata.csv as stored."""
    import pandas as pd

    samples = tables["samples"].to_pandas()
    labels = pd.DataFrame([json.loads(text) for text in samples["labels"]], index=samples.index)
    own = ["campaign", "host", "cell", "metric", "value", "unit", "timestamp", "metadata_id"]
    labels = labels[[column for column in labels.columns if column not in own]]
    samples["value"] = samples["value"].astype(object).where(~samples["integer_value"], samples["value"].astype(int))
    pd.concat([samples[own], labels], axis=1).to_csv(directory / "samples.csv", index=False)
    tables["cells"].to_pandas().to_csv(directory / "cells.csv", index=False)
    tables["metadata"].to_pandas().to_csv(directory / "metadata.csv", index=False)


# --- the commands ------------------------------------------------------------------------------------------------

STORE_HELP = (
    f"the store: a DuckDB file, or postgresql://USER@HOST[:PORT]/DATABASE (password in PGPASSWORD or ~/.pgpass); "
    f"default ${STORE_ENV}, else {STORE_FILE} beside the campaigns"
)


def add_query_arguments(parser):
    parser.add_argument("sql", help="one SQL statement on the tables campaigns, cells, metadata and samples")
    parser.add_argument("--store", help=STORE_HELP.replace("beside the campaigns", "in results/"))
    parser.set_defaults(handler=run_query)


def run_query(args):
    """``platbench query``: the rows of a read-only SQL statement, tab-separated under their column names."""
    try:
        columns, rows = query(location_of(args.store), args.sql)
    except StoreError as exc:
        print(f"platbench query: {exc}", file=sys.stderr)
        return 2
    print("\t".join(columns))
    for row in rows:
        print("\t".join("" if value is None else str(value) for value in row))
    return 0


def add_export_arguments(parser):
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="parquet (default) or csv")
    parser.add_argument("--output", "-o", required=True, metavar="DIR", help="written into DIR/<campaign>/")
    parser.add_argument("--campaign", action="append", help="only this campaign (repeat for several; default: all)")
    parser.add_argument("--store", help=STORE_HELP.replace("beside the campaigns", "in results/"))
    parser.set_defaults(handler=run_export)


def run_export(args):
    """``platbench export``: the store's campaigns as Parquet or CSV, a directory each."""
    try:
        written = export(location_of(args.store), args.output, args.campaign, args.format)
    except StoreError as exc:
        print(f"platbench export: {exc}", file=sys.stderr)
        return 2
    for campaign, directory, samples in written:
        print(f"{campaign}: {samples} sample(s) written to {directory} ({args.format})")
    return 0
