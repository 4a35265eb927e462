"""The record contract: what a workload prints is what the controller's parser reads back.

The producer is workloads.common.record as the workloads import it; the consumer is the
collection's plugin_utils.records, imported by FQCN as the callback imports it.
"""

import math
import os

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records import records as controller
from ansible_collections.platbench.lab.workloads.common import record as collection_record

from workloads.common import record as producer

NOISE_BEFORE = [
    "2026-11-23 20:00:00.1 I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "worker-1 | PLATBENCH_RESULT {this prefix is not at the start of the line}",
]
NOISE_AFTER = ["Epoch 1/1 done", ""]


def emitted(capsys):
    """What emit_record printed so far, between noise lines."""
    return "\n".join([*NOISE_BEFORE, capsys.readouterr().out, *NOISE_AFTER])


def test_emitted_records_come_back_equal_through_the_controller_parser(capsys):
    metrics = [producer.metric("throughput", 41.7, "images/sec"), producer.metric("elapsed", 3, "s")]
    metadata = {"cpuset": "0-1", "step_times": [0.1, 0.2], "nested": {"none": None}, "text": "a\nb"}
    ok = producer.emit_record("cnn_train", {"model": "tiny", "batch_size": 32}, metrics, metadata)
    failed = producer.emit_record("dl_tools", {"net": "fcn5"}, [], {"pid": 7}, status="failed", error="MemoryError: x")
    assert controller.parse_result_lines(emitted(capsys)) == [ok, failed]


def test_a_record_emit_record_refuses_never_reaches_the_parser(capsys):
    with pytest.raises(ValueError, match="not finite"):
        producer.emit_record("cnn_train", {}, [producer.metric("loss_last", math.nan, "loss")], {})
    with pytest.raises(ValueError):
        producer.emit_record("cnn_train", {}, [producer.metric("throughput", 1.0, "images/sec")], {"x": math.inf})
    text = emitted(capsys)
    assert producer.RESULT_PREFIX not in text.replace(NOISE_BEFORE[2], "")
    assert controller.parse_result_lines(text) == []


def test_one_definition_of_the_format_on_both_sides():
    for name in ("RESULT_PREFIX", "SCHEMA_VERSION", "RecordError", "parse_result_lines"):
        assert getattr(controller, name) is getattr(collection_record, name), name
    # The collection's module and the workloads' own are one source file, not two copies.
    assert os.path.samefile(collection_record.__file__, producer.__file__)
    assert (producer.RESULT_PREFIX, producer.SCHEMA_VERSION) == (controller.RESULT_PREFIX, controller.SCHEMA_VERSION)


def test_a_line_the_parser_rejects_names_the_schema(capsys):
    producer.emit_record("cnn_train", {}, [producer.metric("throughput", 1.0, "images/sec")], {})
    line = capsys.readouterr().out.replace('"schema":1', '"schema":2')
    with pytest.raises(controller.RecordError, match=f"record schema {producer.SCHEMA_VERSION}"):
        controller.parse_result_lines(line)
