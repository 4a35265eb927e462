"""The results store (platbench/store.py) and history across campaigns (platbench/history.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import read_samples
from pandas.testing import assert_frame_equal

from platbench import cli, history, indexing, store
from platbench.report import figures_stamp as figures_stamp
from platbench.report import load as report_load
from platbench.report.context import ReportContext
from platbench.report.load import frame_of, load_samples

DATA = Path(__file__).parent / "data"
FIXTURES = ["handmade_html_samples.jsonl", "handmade_diff_samples.jsonl", "handmade_inference_samples.jsonl"]


def campaign(tmp_path, fixture, name=None, shift_days=0, kernel=None):
    """A campaign directory holding ``fixture``'s samples, renamed and moved in time when asked."""
    lines = []
    for line in (DATA / fixture).read_text().splitlines():
        sample = json.loads(line)
        if name:
            sample["labels"]["campaign"] = name
        sample["timestamp"] += shift_days * 86400
        if kernel:
            sample["metadata"]["kernel"] = kernel
        lines.append(json.dumps(sample))
    directory = tmp_path / "results" / (name or Path(fixture).stem)
    directory.mkdir(parents=True)
    (directory / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return directory


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_store_gives_back_each_sample_exactly_and_the_same_frame_as_the_jsonl(tmp_path, fixture):
    directory = campaign(tmp_path, fixture)
    path = tmp_path / "results" / store.STORE_FILE
    name, added = indexing.index(directory, path)
    jsonl = read_samples(directory / "samples.jsonl")
    assert added == len(jsonl) and {p.name for p in (directory / "store").iterdir()} == {
        "cells.parquet",
        "metadata.parquet",
        "samples.parquet",
    }
    connection = store.connect(path, read_only=True)
    try:
        stored = store.samples_of(connection, name)
    finally:
        connection.close()
    assert stored == jsonl
    assert [type(sample["value"]) for sample in stored] == [type(sample["value"]) for sample in jsonl]
    # The report's frame, from the JSONL and from the store: the same, column for column.
    assert_frame_equal(frame_of(stored), load_samples(directory))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_a_report_read_from_the_parquet_files_is_the_jsonls_byte_for_byte(tmp_path, fixture, capsys, monkeypatch):
    from_jsonl = campaign(tmp_path / "jsonl", fixture)
    from_parquet = campaign(tmp_path / "parquet", fixture)
    assert cli.main(["index", str(from_parquet)]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(from_jsonl)]) == 0
    jsonl_out = capsys.readouterr().out.replace(str(from_jsonl), "RESULTS")

    def no_jsonl(*_args, **_kwargs):
        raise AssertionError("samples.jsonl was read: the Parquet files hold the whole campaign")

    for module in (report_load, store):
        monkeypatch.setattr(module, "read_samples", no_jsonl)
    assert cli.main(["report", str(from_parquet)]) == 0
    assert capsys.readouterr().out.replace(str(from_parquet), "RESULTS") == jsonl_out
    # What each report wrote, but the figures' stamp: it keeps the times of each campaign's own files.
    inputs = ("samples.jsonl", figures_stamp.STAMP)
    written = sorted(path.name for path in from_jsonl.iterdir() if path.is_file() and path.name not in inputs)
    assert "report.html" in written and "report.csv" in written
    assert written == sorted(path.name for path in from_parquet.iterdir() if path.is_file() and path.name not in inputs)
    for name in written:
        assert (from_parquet / name).read_bytes() == (from_jsonl / name).read_bytes(), name


def test_the_parquet_files_are_left_once_the_campaign_grows(tmp_path):
    directory = campaign(tmp_path, FIXTURES[0])
    indexing.index(directory, tmp_path / store.STORE_FILE)
    assert store.parquet_current(directory)
    lines = (directory / "samples.jsonl").read_text().splitlines()
    grown = json.loads(lines[0])
    grown["labels"]["cell"] = "a-cell-of-a-resumed-run"
    with (directory / "samples.jsonl").open("a") as handle:
        handle.write(json.dumps(grown) + "\n")
    # A resumed campaign's new cells: read from samples.jsonl until it is indexed again.
    assert not store.parquet_current(directory)
    assert "a-cell-of-a-resumed-run" in set(load_samples(directory)["cell"])


def test_export_then_import_gives_the_same_campaign_and_a_second_import_adds_nothing(tmp_path, capsys):
    directory = campaign(tmp_path, FIXTURES[2])
    first_store, second_store = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    name, _ = indexing.index(directory, first_store)
    assert cli.main(["export", "--store", str(first_store), "-o", str(tmp_path / "out")]) == 0
    exported = tmp_path / "out" / name
    assert sorted(p.name for p in (exported / "store").iterdir()) == [f"{t}.parquet" for t in sorted(store.TABLES)]
    # The exported directory reads as the campaign does: its report's frame, and into another store.
    assert_frame_equal(load_samples(exported), load_samples(directory))
    capsys.readouterr()
    assert cli.main(["import", str(exported), "--store", str(second_store)]) == 0
    assert cli.main(["import", str(exported), "--store", str(second_store)]) == 0
    out = capsys.readouterr().out.splitlines()
    cells = len(set(load_samples(directory)["cell"]))
    assert out[0].startswith(f"{name}: {cells} of its {cells} cell(s) added")
    assert out[1] == (
        f"{name}: 0 of its {cells} cell(s) added to {second_store} (0 sample(s)); {cells} the store held already"
    )
    with store.connect(first_store, read_only=True) as one, store.connect(second_store, read_only=True) as other:
        assert store.samples_of(other, name) == store.samples_of(one, name)
        assert store.campaigns(other) == store.campaigns(one)


def test_an_import_keys_cells_on_campaign_host_and_cell(tmp_path):
    directory = campaign(tmp_path, FIXTURES[0])
    path = tmp_path / store.STORE_FILE
    indexing.add(directory, path, key="cell")
    # A copy whose cells measured again: the cells the store holds are not added twice, one new cell is.
    copy = tmp_path / "copy" / directory.name
    copy.mkdir(parents=True)
    lines = [json.loads(line) for line in (directory / "samples.jsonl").read_text().splitlines()]
    for sample in lines:
        sample["value"] = sample["value"] * 2
    lines[-1]["labels"]["cell"] = "a-cell-only-the-copy-ran"
    (copy / "samples.jsonl").write_text("".join(json.dumps(sample) + "\n" for sample in lines))
    _, samples, cells, total = indexing.add(copy, path, key="cell")
    assert (samples, cells) == (1, 1) and total == len({sample["labels"]["cell"] for sample in lines})


def test_export_as_csv_has_a_column_per_label(tmp_path):
    directory = campaign(tmp_path, FIXTURES[0])
    path = tmp_path / store.STORE_FILE
    indexing.index(directory, path)
    [(name, written, count)] = store.export(path, tmp_path / "csv", file_format="csv")
    assert sorted(p.name for p in written.iterdir()) == ["cells.csv", "metadata.csv", "samples.csv"]
    frame = pd.read_csv(written / "samples.csv")
    assert len(frame) == count == len(read_samples(directory / "samples.jsonl"))
    assert {"campaign", "host", "cell", "metric", "value", "platform", "scenario", "workload"} <= set(frame.columns)
    with pytest.raises(store.StoreError, match="holds no campaign nope: its campaigns are " + name):
        store.export(path, tmp_path / "csv", ["nope"])


def test_indexing_or_importing_a_campaign_twice_adds_nothing(tmp_path):
    directory = campaign(tmp_path, FIXTURES[0])
    path = tmp_path / "results" / store.STORE_FILE
    _, first = indexing.index(directory, path)
    copied = tmp_path / "elsewhere" / directory.name
    shutil.copytree(directory, copied)  # the same campaign copied from another machine
    assert first > 0 and indexing.index(directory, path)[1] == 0 and indexing.index(copied, path)[1] == 0
    columns, rows = store.query(path, "SELECT count(*) AS n, count(DISTINCT sample_id) AS ids FROM samples")
    assert columns == ["n", "ids"] and rows == [(first, first)]


def test_history_gives_each_campaigns_ratio_as_its_report_does_and_what_changed(tmp_path):
    first = campaign(tmp_path, "handmade_html_samples.jsonl", "html-1")
    second = campaign(tmp_path, "handmade_html_samples.jsonl", "html-2", shift_days=1, kernel="6.1.0-99-amd64")
    path = tmp_path / "results" / store.STORE_FILE
    for directory in (second, first):  # indexed out of order: history orders by time
        indexing.index(directory, path)
    connection = store.connect(path, read_only=True)
    try:
        lines = history.history(connection, metric="throughput")
    finally:
        connection.close()
    assert [line["campaign"] for line in lines] == sorted(line["campaign"] for line in lines)
    for directory in (first, second):
        report = ReportContext(load_samples(directory))
        rows, keys, _ = report.summarize(["throughput"])
        report.with_intervals(rows, keys, ["throughput"])
        expected = {
            history._scenario(row): (row["throughput ratio to bm"], list(row["throughput ratio interval"]))
            for row in rows
            if row["platform"] != "bm" and row["throughput ratio to bm"] is not None
        }
        got = {
            line["scenario"]: (line["ratio"], line["interval"]) for line in lines if line["campaign"] == directory.name
        }
        assert got == expected and got
    assert all(not line["changed"] for line in lines if line["campaign"] == "html-1")
    assert any("kernel: 6.1.0-28-amd64 -> 6.1.0-99-amd64" in line["changed"] for line in lines)
    # The ratios index kept are those history computes of a store without them (a store of before they were kept).
    with store.connect(path) as writable:
        writable.execute("DELETE FROM campaign_ratios")
    with store.connect(path, read_only=True) as connection:
        assert history.history(connection, metric="throughput") == lines
        assert history.history(connection) == lines  # throughput is these campaigns' main metric
    text = history.render(lines)
    assert "html-2" in text and "kernel: 6.1.0-28-amd64 -> 6.1.0-99-amd64" in text


def test_the_commands_index_history_and_query(tmp_path, capsys, monkeypatch):
    directory = campaign(tmp_path, FIXTURES[0], "html-1")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["index", str(directory)]) == 0
    assert "html-1: " in capsys.readouterr().out
    assert cli.main(["index", str(directory)]) == 0
    assert "(indexed before)" in capsys.readouterr().out
    assert cli.main(["history", "--platform", "cn"]) == 0
    assert "html-1" in capsys.readouterr().out
    # history.html: the figure (ratio lines with their interval bands) inlined, then the same lines as a table.
    page = (tmp_path / "results" / "history.html").read_text()
    assert page.count("<svg") == 1 and "<!-- ratio to bm (95% interval) -->" in page
    assert "campaigns: platform cn" in page and "<td>html-1</td>" in page
    assert "<td>cn/1/pin/cpu (workload=cnn_train)</td>" in page
    assert cli.main(["query", "SELECT campaign FROM campaigns"]) == 0
    assert capsys.readouterr().out.splitlines() == ["campaign", "html-1"]
    # The store is opened read-only for a query: a statement that writes is refused.
    assert cli.main(["query", "DELETE FROM samples"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert cli.main(["index", str(tmp_path / "nowhere")]) == 2
    assert "holds no samples.jsonl" in capsys.readouterr().err


def test_a_store_without_campaigns_or_of_a_newer_schema_is_refused_naming_both_versions(tmp_path, capsys):
    assert cli.main(["history", "--results-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no store at {tmp_path / store.STORE_FILE}: run `platbench index results/<campaign>` first" in err
    path = tmp_path / store.STORE_FILE
    connection = store.connect(path)
    connection.execute("UPDATE store_info SET value = ? WHERE key = 'schema'", [str(store.SCHEMA_VERSION + 1)])
    connection.close()
    with pytest.raises(store.StoreError, match=f"schema {store.SCHEMA_VERSION + 1}, newer than this platbench's 1"):
        store.connect(path, read_only=True)


def test_a_parquet_file_of_a_newer_schema_is_refused_naming_both_versions(tmp_path, capsys):
    import pyarrow.parquet as pq

    directory = campaign(tmp_path, FIXTURES[0])
    indexing.index(directory, tmp_path / store.STORE_FILE)
    path = directory / "store" / "samples.parquet"
    table = pq.read_table(path)
    newer = {**table.schema.metadata, store.SCHEMA_KEY: str(store.SCHEMA_VERSION + 1).encode()}
    pq.write_table(table.replace_schema_metadata(newer), path)
    assert cli.main(["report", str(directory)]) == 2
    assert f"{path} has schema {store.SCHEMA_VERSION + 1}, newer than this platbench's 1" in capsys.readouterr().err
    with pytest.raises(store.StoreError, match="newer than this platbench's 1: upgrade platbench"):
        store.parquet_tables(directory)


def test_a_store_url_that_does_not_parse_or_answers_not_is_named_without_its_password(tmp_path, capsys):
    directory = campaign(tmp_path, FIXTURES[0])
    for url, expected in (
        ("postgresql://lab:s3cret@127.0.0.1:notaport/platbench", "does not parse"),
        ("postgresql://lab:s3cret@127.0.0.1:9/platbench", "cannot be reached"),
    ):
        assert cli.main(["index", str(directory), "--store", url]) == 2
        err = capsys.readouterr().err
        assert f"the store{' URL' if 'parse' in expected else ''} {store.shown(url)} {expected}" in err
        assert "s3cret" not in err and "postgresql://lab@127.0.0.1:" in err
    # Nothing was lost: the campaign's samples.jsonl is as it was, and the DuckDB store takes it.
    assert indexing.index(directory, tmp_path / store.STORE_FILE)[1] == len(read_samples(directory / "samples.jsonl"))


def test_a_label_named_as_a_column_of_the_samples_own_gives_the_same_frame_from_the_store(tmp_path):
    directory = campaign(tmp_path, FIXTURES[0])
    lines = [json.loads(line) for line in (directory / "samples.jsonl").read_text().splitlines()]
    for sample in lines[::3]:
        sample["labels"]["accelerator"] = "kvm"  # a label the report also reads from the metadata
    (directory / "samples.jsonl").write_text("".join(json.dumps(sample) + "\n" for sample in lines))
    from_jsonl = load_samples(directory)
    indexing.index(directory, tmp_path / store.STORE_FILE)
    assert store.parquet_current(directory)
    assert_frame_equal(load_samples(directory), from_jsonl)
