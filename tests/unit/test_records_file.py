"""A run's record also goes to the file PLATBENCH_RECORD_FILE names (workloads/common/record.py), whole or not at all,
and a file that cannot be written never costs the stdout line (issue: a duet cn side's line lost through
`docker start --attach`; the controller side: test_duet.py)."""

from __future__ import annotations

import io
import os

import pytest

from workloads.common.record import (
    RECORD_FILE_ENV,
    RECORD_FILE_TEMPORARY_SUFFIX,
    emit_record,
    metric,
    parse_result_lines,
    write_record_file,
)


def emit_one():
    return emit_record("demo", {"model": "tiny"}, [metric("throughput", 41.5, "images/sec")], {"cpuset": "1"})


def test_the_record_line_goes_to_stdout_and_whole_to_the_file_the_plan_names(tmp_path, monkeypatch, capsys):
    path = tmp_path / "records" / "platbench-0123456789ab.record"  # its directory is made
    monkeypatch.setenv(RECORD_FILE_ENV, str(path))
    record = emit_one()
    printed = capsys.readouterr()
    assert printed.out == path.read_text() and printed.err == ""
    assert parse_result_lines(path.read_text()) == [record]
    assert os.listdir(path.parent) == [path.name]  # no temporary file beside it


def test_the_file_is_renamed_over_an_earlier_one_so_a_reader_sees_one_whole_record(tmp_path, monkeypatch):
    path = tmp_path / "side.record"
    path.write_text("PLATBENCH_RESULT {a record of an earlier try")
    monkeypatch.setenv(RECORD_FILE_ENV, str(path))
    before = path.stat().st_ino
    record = emit_one()
    assert parse_result_lines(path.read_text()) == [record]
    assert path.stat().st_ino != before  # a new file took its name: never the old one rewritten in place


def test_a_file_that_cannot_be_written_leaves_the_stdout_line_and_says_so(tmp_path, monkeypatch, capsys):
    (tmp_path / "not-a-directory").write_text("")
    path = tmp_path / "not-a-directory" / "side.record"
    monkeypatch.setenv(RECORD_FILE_ENV, str(path))
    record = emit_one()
    printed = capsys.readouterr()
    assert parse_result_lines(printed.out) == [record]
    assert f"the record goes to stdout only: {RECORD_FILE_ENV} {path} is not writable" in printed.err
    with pytest.raises(OSError):
        write_record_file(str(path), "PLATBENCH_RESULT {}")


class ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stdout_that_is_gone_costs_nothing_when_the_file_holds_the_record(tmp_path, monkeypatch):
    path = tmp_path / "side.record"
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    with pytest.raises(BrokenPipeError):  # nowhere else to go: the run must fail, as before
        emit_one()
    monkeypatch.setenv(RECORD_FILE_ENV, str(path))
    record = emit_one()
    assert parse_result_lines(path.read_text()) == [record]


def test_a_write_cut_short_leaves_no_temporary_file_and_the_earlier_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "side.record"
    path.write_text("earlier\n")

    def refused(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError, match="No space left"):
        write_record_file(str(path), "PLATBENCH_RESULT {}")
    assert path.read_text() == "earlier\n" and not os.path.exists(str(path) + RECORD_FILE_TEMPORARY_SUFFIX)
