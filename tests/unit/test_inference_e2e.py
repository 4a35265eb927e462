"""workloads.inference_e2e: its checks of bad input, its loaders on the generators' data, its loadgen driver
with a stand-in app (in this process, fast) and the IC and RS apps run as the hosts run them, at tiny sizes."""

import datetime
import json
import math
import shutil
import time

import pytest
from workload_run import metric_values, only_record, run_module

from tests import skips
from workloads.datasets import criteo, imagenet
from workloads.inference_e2e import cli, settings
from workloads.inference_e2e.apps import ic, nlp, rs, sr
from workloads.inference_e2e.apps.base import App, RawRequest
from workloads.inference_e2e.loadgen_logs import parse_detail, parse_summary, verdict
from workloads.inference_e2e.phases import batches_of, span_problem

needs_tensorflow = skips.requires(modules=["tensorflow"])
needs_torch = skips.requires(modules=["torch"])
RS_ROWS = 6 * rs.ROWS_PER_REQUEST


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("imagenet")
    imagenet.generate(str(folder), 8, 2, 40)
    return folder


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("criteo")
    criteo.generate(str(folder), RS_ROWS)
    return folder


def refusal(capsys, *argv):
    """The message parse_args exits 2 with, for ``--check-args`` and ``argv``."""
    with pytest.raises(SystemExit) as stopped:
        cli.parse_args(["--check-args", *map(str, argv)])
    assert stopped.value.code == 2
    return capsys.readouterr().err


# --- bad input stops at --check-args, naming the setting


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--app", "ic", "--data-dir", "/nowhere", "--requests", 0],
            "argument --requests: expected a positive integer",
        ),
        (["--app", "vision", "--data-dir", "/nowhere"], "argument --app: invalid choice: 'vision'"),
        (
            ["--app", "ic", "--data-dir", "/nowhere", "--requests", 10, "--batch-size", 11],
            "--batch-size 11 is larger than --requests 10",
        ),
        (
            ["--app", "rs", "--data-dir", "/nowhere", "--model-size", "huge"],
            "--model-size 'huge' is not a size of app rs",
        ),
        (["--app", "ic", "--data-dir", "/nowhere", "--timing", "both"], "argument --timing: invalid choice: 'both'"),
        (
            ["--app", "rs", "--data-dir", "/nowhere", "--framework", "tensorflow"],
            "--framework tensorflow: app rs runs on torch only",
        ),
        (
            ["--app", "ic", "--data-dir", "/nowhere", "--mlperf-minimums", "--requests", 1000],
            "--requests 1000 is below MLPerf's Offline minimum for app ic (MLPerf's resnet50): 24576 samples; "
            "give --requests 24576 or more",
        ),
        (
            ["--app", "nlp", "--data-dir", "/nowhere", "--mlperf-minimums", "--requests", 10_832],
            "--requests 10832 is below MLPerf's Offline minimum for app nlp (MLPerf's bert): 10833 samples",
        ),
        (
            ["--app", "sr", "--data-dir", "/nowhere", "--mlperf-minimums", "--min-duration-ms", 60_000],
            "--min-duration-ms 60000 is below MLPerf's Offline minimum for app sr (MLPerf's rnnt): 600000 ms",
        ),
    ],
)
def test_bad_parameters_are_refused_with_the_setting_named(capsys, argv, message):
    assert message in refusal(capsys, *argv)


def test_the_defaults_are_the_studys_counts_and_a_batch_no_larger_than_the_requests():
    args = cli.parse_args(["--check-args", "--app", "ic", "--data-dir", "/nowhere"])
    assert (args.requests, args.batch_size, args.model_size, args.timing) == (1000, 32, "resnet50", "e2e")
    args = cli.parse_args(["--check-args", "--app", "rs", "--data-dir", "/nowhere", "--requests", "5"])
    assert (args.requests, args.batch_size, args.model_size) == (5, 5, "small")


def test_mlperf_minimums_are_each_apps_benchmarks_and_the_flag_defaults_to_them():
    # mlcommons/inference loadgen/mlperf.conf: 600 s, and the Offline sample count of each benchmark.
    assert {app.APP.name: app.APP.mlperf_minimums() for app in (ic, rs, sr, nlp)} == {
        "ic": ("resnet50", 600_000, 24_576),
        "rs": ("dlrm-v2", 600_000, 24_576),
        "sr": ("rnnt", 600_000, 2_513),
        "nlp": ("bert", 600_000, 10_833),
    }
    assert ic.APP.on("torch").mlperf_minimums() == ic.APP.mlperf_minimums()
    args = cli.parse_args(["--check-args", "--app", "sr", "--data-dir", "/nowhere", "--mlperf-minimums"])
    assert (args.requests, args.min_duration_ms, args.batch_size) == (2_513, 600_000, 32)
    argv = ["--check-args", "--app", "ic", "--data-dir", "/nowhere", "--mlperf-minimums", "--requests", "30000"]
    args = cli.parse_args([*argv, "--min-duration-ms", "900000"])
    assert (args.requests, args.min_duration_ms) == (30_000, 900_000)
    # Without the flag: the study's request count, no minimum duration (a scaled-down run), any count allowed.
    args = cli.parse_args(["--check-args", "--app", "ic", "--data-dir", "/nowhere", "--requests", "8"])
    assert (args.requests, args.min_duration_ms, args.mlperf_minimums) == (8, 0, False)


def test_the_three_states_from_loadgen_s_verdict_and_mlperf_s_minimums():
    minimums = rs.APP.mlperf_minimums()
    # Minimums met and loadgen VALID: VALID, nothing short.
    state, reasons, record = verdict("VALID", [], 600_000, 24_576, minimums)
    assert (state, reasons, record["met"], record["short_of"]) == ("VALID", [], True, [])
    assert record["asked"] == {"min_duration_ms": 600_000, "samples": 24_576}
    assert (record["benchmark"], record["min_duration_ms"], record["min_samples"]) == ("dlrm-v2", 600_000, 24_576)
    # Below them, loadgen VALID (it was given what the run met): scaled-down, with what fell short.
    state, reasons, record = verdict("VALID", [], 0, 8, minimums)
    assert state == settings.SCALED_DOWN == "scaled-down" and not record["met"]
    short = ["min duration 0 ms, MLPerf's dlrm-v2 asks for 600000", "8 samples, MLPerf's dlrm-v2 asks for 24576"]
    assert reasons == record["short_of"] == short
    state, reasons, _ = verdict("VALID", [], 600_000, 24_575, minimums)
    assert (state, reasons) == ("scaled-down", ["24575 samples, MLPerf's dlrm-v2 asks for 24576"])
    # Loadgen INVALID: INVALID with its reasons, at any size.
    for duration, samples in ((600_000, 24_576), (60_000, 8)):
        state, reasons, record = verdict("INVALID", ["min duration not satisfied"], duration, samples, minimums)
        assert (state, reasons) == ("INVALID", ["min duration not satisfied"])
        assert record["met"] is (samples == 24_576)
    # An app of no MLPerf benchmark is never VALID.
    assert verdict("VALID", [], 600_000, 10**6, None)[0] == "scaled-down"


def test_inference_only_is_refused_for_an_app_that_cannot_separate_its_phases(capsys, monkeypatch):
    monkeypatch.setattr(ic.APP, "can_separate_phases", False)
    message = refusal(capsys, "--app", "ic", "--data-dir", "/nowhere", "--timing", "inference_only")
    assert "--timing inference_only: app ic cannot separate its pre-processing from its inference" in message


def test_a_data_dir_in_another_format_is_refused_with_the_file_and_why(capsys, images, rows, tmp_path):
    assert "--data-dir: no train/ folder" in refusal(capsys, "--app", "ic", "--data-dir", rows)
    assert "--data-dir: neither train.txt nor day_N files" in refusal(capsys, "--app", "rs", "--data-dir", images)
    assert "8 JPEG files in" in refusal(capsys, "--app", "ic", "--data-dir", images, "--requests", 9)
    # One file of the right name in the wrong format: named, with what is wrong with it.
    fake = tmp_path / "ic"
    shutil.copytree(images, fake)
    victim = sorted((fake / "train").rglob("*.JPEG"))[3]
    victim.write_bytes(b"GIF89a...")
    message = refusal(capsys, "--app", "ic", "--data-dir", fake, "--requests", 8)
    assert f"--data-dir: {victim}: not a JPEG file (starts with b'GIF'" in message
    bad_rows = tmp_path / "rs"
    bad_rows.mkdir()
    lines = (rows / "train.txt").read_text().splitlines(keepends=True)
    fields = lines[2].split("\t")
    fields[18] = "zz"  # C5
    lines[2] = "\t".join(fields)
    (bad_rows / "train.txt").write_text("".join(lines))
    message = refusal(capsys, "--app", "rs", "--data-dir", bad_rows, "--requests", 1)
    assert f"--data-dir: {bad_rows / 'train.txt'}:3: not a Criteo row: field C5 'zz' is not hexadecimal" in message


# --- the generators' data through the loaders


def test_criteo_rows_round_trip_through_the_reader_and_rs_pre_processing(rows):
    read = criteo.read_rows(str(rows), RS_ROWS)
    assert len(read) == RS_ROWS and read[0][:2] == (str(rows / "train.txt"), 1)
    parsed = [criteo.parse_row(line) for _, _, line in read]
    assert {label for label, _, _ in parsed} == {0, 1}
    assert any(value is None for _, integers, _ in parsed for value in integers)  # empty fields, as in Criteo's
    assert criteo.parse_row("1\t\t-2" + "\t5" * 11 + "\t00ff00ff" + "\t" * 25 + "\n") == (
        1,
        [None, -2] + [5] * 11,
        [0x00FF00FF] + [None] * 25,
    )
    app = rs.Recommendation()
    requests = app.load(str(rows), 6)
    assert len(requests) == 6 and requests[1].source == f"{rows / 'train.txt'}:101-200"
    app.tables = rs.SIZES["tiny"].tables  # what build_model sets
    dense, sparse = app.preprocess(requests[0].data)
    assert dense.shape == (100, 13) and sparse.shape == (100, 26)
    _, integers, categoricals = parsed[0]
    assert dense[0].tolist() == pytest.approx([math.log1p(max(v, 0)) if v is not None else 0.0 for v in integers])
    assert sparse[0].tolist() == [v % 1000 if v is not None else 0 for v in categoricals]


def test_imagenet_jpegs_round_trip_through_the_ic_loader(images):
    requests = ic.APP.load(str(images), 8)
    found = imagenet.scan(str(images), "jpeg")
    assert [request.source for request in requests] == [str(images / "train" / name) for name in found.files]
    assert requests[0].data == (images / "train" / found.files[0]).read_bytes()
    features = ic.APP.preprocess(requests[0].data)
    assert features.shape == (224, 224, 3) and str(features.dtype) == "float32"


def test_a_truncated_jpeg_fails_pre_processing_with_its_file_named(images):
    from workloads.inference_e2e.offline import RequestFailed, preprocess

    data = (images / "train" / imagenet.scan(str(images), "jpeg").files[0]).read_bytes()
    with pytest.raises(RequestFailed, match=r"^/x/cut\.JPEG: pre-processing failed: OSError: .*truncated"):
        preprocess(ic.APP, RawRequest("/x/cut.JPEG", data[: len(data) // 2]))


# --- the loadgen driver, with a stand-in app in this process


class CountingApp(App):
    """Pre-processing doubles, inference sums a batch, post-processing rounds: known answers, no framework."""

    name = "counting"

    def preprocess(self, data):
        return data + 0 + data

    def infer(self, model, features):
        model.append(len(features))
        return [value + sum(features) for value in features]

    def postprocess(self, output):
        return round(output)


def test_loadgen_issues_each_request_once_in_batches_and_its_logs_say_so(tmp_path):
    from workloads.inference_e2e.offline import run_offline

    batches = []
    requests = [RawRequest(f"request {index}", index) for index in range(10)]
    run = run_offline(CountingApp(), batches, requests, 4, str(tmp_path), 0)
    assert sorted(run.issued) == list(range(10)) and batches == [4, 4, 2]
    detail = parse_detail((tmp_path / "mlperf_log_detail.txt").read_text())
    assert (detail["queries"], detail["samples_per_query"], detail["samples"]) == (1, 10, 10)
    summary = parse_summary((tmp_path / "mlperf_log_summary.txt").read_text())
    assert (summary["result"], summary["reasons"]) == ("VALID", [])
    assert run.phases.timed == ("pre", "inference", "post") and len(run.results) == 3
    assert run.settings["min_query_count"] == 10


def test_an_unmet_minimum_duration_is_invalid_with_its_reason_and_still_issues_each_request_once(tmp_path):
    from workloads.inference_e2e.offline import run_offline

    requests = [RawRequest(f"request {index}", index) for index in range(7)]
    run_offline(CountingApp(), [], requests, 3, str(tmp_path), 60_000, features=[0] * 7)
    summary = parse_summary((tmp_path / "mlperf_log_summary.txt").read_text())
    assert (summary["result"], summary["reasons"]) == ("INVALID", ["min duration not satisfied"])
    assert parse_detail((tmp_path / "mlperf_log_detail.txt").read_text())["samples"] == 7


def test_a_request_that_fails_mid_run_ends_loadgen_and_fails_the_run_with_its_source(tmp_path):
    from workloads.inference_e2e.offline import RequestFailed, run_offline

    requests = [RawRequest(f"/data/{index}.bin", index if index != 5 else "corrupt") for index in range(8)]
    with pytest.raises(RequestFailed, match=r"^/data/5\.bin: pre-processing failed: TypeError: "):
        run_offline(CountingApp(), [], requests, 3, str(tmp_path), 0)
    # Loadgen was told every sample was done, so it finished its test and wrote its logs.
    assert parse_detail((tmp_path / "mlperf_log_detail.txt").read_text())["samples"] == 8


class SleepingApp(App):
    """Each phase takes a known time: pre and post 4 ms a request, inference 12 ms a batch."""

    name = "sleeping"

    def preprocess(self, data):
        time.sleep(0.004)
        return data

    def infer(self, model, features):
        time.sleep(0.012)
        return features

    def postprocess(self, output):
        time.sleep(0.004)
        return output


def test_the_phases_add_up_to_loadgen_s_own_span_and_the_check_fails_when_one_is_lost_or_counted_twice(tmp_path):
    from workloads.inference_e2e.offline import run_offline

    requests = [RawRequest(f"request {index}", index) for index in range(6)]
    # A minimum duration the run meets (6 x 8 ms + 2 x 12 ms > 50 ms): loadgen's VALID, and VALID as a record
    # would be, held to minimums of that scale.
    run = run_offline(SleepingApp(), None, requests, 3, str(tmp_path), 50)
    detail = parse_detail((tmp_path / "mlperf_log_detail.txt").read_text())
    summary = parse_summary((tmp_path / "mlperf_log_summary.txt").read_text())
    assert summary["result"] == "VALID" and detail["settings"]["min_duration_ms"] == 50
    small = settings.MlperfMinimums("test", 50, 6)
    assert verdict(summary["result"], summary["reasons"], 50, detail["samples"], small)[:2] == ("VALID", [])
    # Loadgen's span: its own clock, from the issue of its query to the last completion; its figure is samples
    # over that span, and its wall-clock begin and end are a millisecond apart at most from it.
    span = detail["span"]
    assert summary["samples_per_sec"] == pytest.approx(6 / span["seconds"], rel=1e-4)
    begin, end = (datetime.datetime.strptime(span[key], "%m-%d-%Y %H:%M:%S.%f") for key in ("begin", "end"))
    assert (end - begin).total_seconds() == pytest.approx(span["seconds"], abs=0.002)
    totals = {phase: sum(run.phases.seconds[phase]) for phase in run.phases.timed}
    batches = batches_of(len(requests), 3)
    assert totals["pre"] >= 0.024 and totals["inference"] >= 0.024 and totals["post"] >= 0.024
    assert span_problem(sum(totals.values()), span["seconds"], batches) is None
    # A phase lost, or counted twice, is caught.
    lost = span_problem(totals["pre"] + totals["inference"], span["seconds"], batches)
    assert lost.startswith("the phases add up to") and lost.endswith("some time is in no phase")
    twice = span_problem(sum(totals.values()) + totals["inference"], span["seconds"], batches)
    assert twice.endswith("some time is counted twice")
    assert span_problem(1.0, None, batches).startswith("no span to compare the phases with")


def test_the_summary_parser_names_every_unmet_criterion():
    text = (
        "Samples per second: 12.5\nResult is : INVALID\n  Min duration satisfied : NO\n"
        "  Min queries satisfied : NO\n  Early stopping satisfied: Yes\nRecommendations:\n * Increase expected QPS.\n"
        "Test Parameters Used\nsamples_per_query : 7\n"
    )
    summary = parse_summary(text)
    assert summary["reasons"] == ["min duration not satisfied", "min queries not satisfied"]
    assert (summary["samples_per_sec"], summary["recommendations"]) == (12.5, ["Increase expected QPS."])
    assert summary["parameters"] == {"samples_per_query": 7}


# --- the apps, run as the hosts run them


def run_inference(*args):
    process, records = run_module("inference_e2e", *args, "--peak-gflops", 0, one_cpu=True)
    record = only_record(process, records)
    assert process.returncode == 0 and record["status"] == "ok", process.stderr[-3000:]
    return record


def check_loadgen(record, requests):
    """The record's loadgen figures agree with the detail log it kept: every request issued once."""
    values = metric_values(record)
    detail = parse_detail(record["files"]["mlperf_log_detail.txt"])
    assert values["loadgen_queries"] == detail["samples"] == requests
    summary = parse_summary(record["files"]["mlperf_log_summary.txt"])
    assert values["loadgen_samples_per_sec"] == summary["samples_per_sec"]
    assert record["metadata"]["loadgen"]["loadgen_result"] == summary["result"]
    assert record["metadata"]["loadgen"]["span"] == detail["span"]
    assert "loadgen_valid" not in values  # the state is one field: metadata.loadgen.result
    return values


def assert_phases_cover_the_timed_run(record, batches):
    """The phases' total is loadgen's own span of the run (its detail log, timed outside the phase timers) but
    for the SUT's completion calls and bookkeeping between them (phases.span_problem); the SUT's own timing of
    the run, which throughput is over, holds the phases too."""
    values = metric_values(record)
    total = sum(values[f"{phase}_time"] for phase in ("pre", "inference", "post") if f"{phase}_time" in values)
    assert span_problem(total, record["metadata"]["loadgen"]["span"]["seconds"], batches) is None
    assert total <= record["labels"]["requests"] / values["throughput"]


@needs_tensorflow
def test_ic_serves_jpegs_end_to_end_with_phases_that_add_up(images):
    record = run_inference(
        "--app", "ic", "--data-dir", images, "--requests", 8, "--batch-size", 4, "--model-size", "tiny"
    )
    assert record["labels"] == {
        "workload": "inference_e2e",
        "framework": "tensorflow",
        "app": "ic",
        "model_size": "tiny",
        "batch_size": 4,
        "requests": 8,
        "timing": "e2e",
        "data": "imagenet-jpeg",
        "threads": 1,
        "device": "cpu",
    }
    values = check_loadgen(record, 8)
    phases = values["pre_time"] + values["inference_time"] + values["post_time"]
    assert values["e2e_time"] == pytest.approx(phases, rel=1e-9)
    assert_phases_cover_the_timed_run(record, batches=2)
    # Loadgen's criteria met, MLPerf's not (8 images in well under 600 s): scaled-down, never VALID.
    loadgen = record["metadata"]["loadgen"]
    assert (loadgen["result"], loadgen["loadgen_result"]) == ("scaled-down", "VALID")
    assert loadgen["reasons"] == [
        "min duration 0 ms, MLPerf's resnet50 asks for 600000",
        "8 samples, MLPerf's resnet50 asks for 24576",
    ]
    assert loadgen["mlperf_minimums"] == {
        "scenario": "Offline",
        "benchmark": "resnet50",
        "min_duration_ms": 600_000,
        "min_samples": 24_576,
        "asked": {"min_duration_ms": 0, "samples": 8},
        "met": False,
        "short_of": loadgen["reasons"],
    }
    assert values["model_flops"] > 0 and "mfu" not in values  # --peak-gflops 0: no MFU
    assert len(record["metadata"]["results"][0]) == ic.TOP_K
    # One CPU (run_module's one_cpu): TensorFlow's pools as sized, one inter-op thread.
    threads = record["metadata"]["framework_threads"]
    assert (threads["intra_op"], threads["inter_op"]) == (1, 1) and threads["process_threads"] >= 1


def test_ic_runs_on_torch_when_asked_with_the_same_requests_and_pre_processing():
    args = cli.parse_args(["--check-args", "--app", "ic", "--data-dir", "/nowhere", "--framework", "torch"])
    app = args.served_app
    assert (args.framework, app.framework, app.name) == ("torch", "torch", "ic")
    assert app.preprocess.__func__ is ic.APP.preprocess.__func__ and app.load.__func__ is ic.APP.load.__func__
    args = cli.parse_args(["--check-args", "--app", "ic", "--data-dir", "/nowhere"])
    app = args.served_app
    assert (args.framework, app) == ("tensorflow", ic.APP)


@needs_torch
def test_ic_on_torch_serves_jpegs_end_to_end_with_the_top_5_of_its_logits(images):
    record = run_inference(
        "--app", "ic", "--framework", "torch", "--data-dir", images, "--requests", 8, "--batch-size", 4,
        "--model-size", "tiny",
    )  # fmt: skip
    assert (record["labels"]["framework"], record["labels"]["device"]) == ("torch", "cpu")
    threads = record["metadata"]["framework_threads"]
    assert (threads["intra_op"], threads["inter_op"]) == (1, 1)
    values = check_loadgen(record, 8)
    assert_phases_cover_the_timed_run(record, batches=2)
    assert values["model_flops"] > 0 and record["metadata"]["model"]["placement"] == "cpu"
    top = record["metadata"]["results"][0]
    assert len(top) == ic.TOP_K and [p for _, p in top] == sorted((p for _, p in top), reverse=True)


@needs_torch
def test_rs_end_to_end_phases_add_up_to_the_timed_run(rows):
    record = run_inference("--app", "rs", "--data-dir", rows, "--requests", 6, "--batch-size", 3)
    values = check_loadgen(record, 6)
    assert {
        f"{phase}_{stat}" for phase in ("pre", "inference", "post", "e2e") for stat in ("time", "p50", "p90")
    } <= set(values)
    phases = values["pre_time"] + values["inference_time"] + values["post_time"]
    assert values["e2e_time"] == pytest.approx(phases, rel=1e-9)
    assert_phases_cover_the_timed_run(record, batches=2)
    assert values["e2e_p50"] <= values["e2e_p90"]
    top = record["metadata"]["results"][0]
    assert len(top) == rs.TOP_K and [p for _, p in top] == sorted((p for _, p in top), reverse=True)


@needs_torch
def test_an_invalid_loadgen_run_is_recorded_as_invalid_with_its_reason(rows):
    record = run_inference(
        "--app", "rs", "--data-dir", rows, "--requests", 4, "--model-size", "tiny", "--timing", "inference_only",
        "--min-duration-ms", 60_000,
    )  # fmt: skip
    values = check_loadgen(record, 4)
    loadgen = record["metadata"]["loadgen"]
    # INVALID whatever the size: loadgen's own verdict, with its reasons; MLPerf's minimums unmet beside it.
    assert (loadgen["result"], loadgen["reasons"]) == ("INVALID", ["min duration not satisfied"])
    assert (loadgen["loadgen_result"], loadgen["loadgen_reasons"]) == ("INVALID", ["min duration not satisfied"])
    assert loadgen["mlperf_minimums"]["asked"] == {"min_duration_ms": 60_000, "samples": 4}
    assert loadgen["mlperf_minimums"]["met"] is False
    assert loadgen["settings"]["effective"]["min_duration_ms"] == 60_000
    assert_phases_cover_the_timed_run(record, batches=1)
    # inference_only: pre-processed before timing, only inference timed, no post-processing.
    assert "pre_time" not in values and "post_time" not in values and "e2e_time" not in values
    assert values["inference_time"] > 0 and record["metadata"]["untimed_preprocess_s"] > 0
    assert json.loads(json.dumps(record["metadata"]["results"])) == []
