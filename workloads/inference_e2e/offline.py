"""One app's requests through MLPerf loadgen in the Offline scenario: a QSL over the requests, a SUT that
processes the issued samples in batches, and the logs loadgen writes.

Offline issues every sample at once, in one query; the SUT works through it in batches of ``batch_size``
and completes each batch as soon as it is done, so that loadgen times the whole batch of requests, as the
study did. With ``features`` (inference_only) the requests' tensors are fed as they are and only inference
is timed; otherwise each request is pre-processed, inferred and post-processed in the timed run.
"""

import os
import time
from typing import NamedTuple

import mlperf_loadgen as lg

from .phases import PhaseTimes
from .settings import LOG_FILES, OFFLINE_QPS_SLACK, RESULTS_KEPT


class OfflineRun(NamedTuple):
    phases: PhaseTimes
    run_time: float  # seconds from the first issued query to the last completed sample
    issued: list  # the request indices in the order loadgen issued them
    results: list  # the first RESULTS_KEPT post-processed results, in issue order
    settings: dict  # what was asked of loadgen


class RequestFailed(Exception):
    """Processing one request failed; the message names its source (file) and the error."""


def preprocess(app, request):
    """The request's features; RequestFailed naming its source when the app cannot pre-process it."""
    try:
        return app.preprocess(request.data)
    except Exception as error:  # whatever the decoder raises, the message must name the file
        raise RequestFailed(f"{request.source}: pre-processing failed: {type(error).__name__}: {error}") from error


class RequestSampleLibrary:
    """Loadgen's QSL over requests already read from their files: loading a sample makes it available to the
    SUT, unloading drops it (loadgen loads its performance set before the timed run, untimed)."""

    def __init__(self, requests):
        self.requests = requests
        self.loaded = {}

    def load(self, indices):
        for index in indices:
            self.loaded[index] = self.requests[index]

    def unload(self, indices):
        for index in indices:
            self.loaded.pop(index, None)


class BatchingSystem:
    """Loadgen's SUT: processes the issued samples batch by batch, timing each request's phases."""

    def __init__(self, app, model, library, batch_size, phases, features=None):
        self.app, self.model, self.library, self.batch_size = app, model, library, batch_size
        self.phases, self.features = phases, features
        self.issued, self.results = [], []
        self.first_issue = self.last_complete = None
        self.error = None

    def issue_queries(self, samples):
        if self.first_issue is None:
            self.first_issue = time.perf_counter()
        for start in range(0, len(samples), self.batch_size):
            batch = samples[start : start + self.batch_size]
            if self.error is None:
                try:
                    self._process(batch)
                except Exception as error:  # noqa: BLE001 - kept and raised after loadgen returns
                    self.error = error
            # Completed even after a failure, so that loadgen ends its test and the error can surface.
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, 0, 0) for sample in batch])
        self.last_complete = time.perf_counter()

    def _process(self, batch):
        clock, phases, app = time.perf_counter, self.phases, self.app
        indices = [sample.index for sample in batch]
        self.issued += indices
        if self.features is not None:
            features = [self.features[index] for index in indices]
        else:
            features = []
            for index in indices:
                request = self.library.loaded[index]
                started = clock()
                features.append(preprocess(app, request))
                phases.add("pre", index, clock() - started)
        started = clock()
        outputs = app.infer(self.model, features)
        phases.add_batch("inference", indices, clock() - started)
        if self.features is not None:
            return  # inference_only: no post-processing, as the study's inference-only runs
        for index, output in zip(indices, outputs, strict=True):
            started = clock()
            result = app.postprocess(output)
            phases.add("post", index, clock() - started)
            if len(self.results) < RESULTS_KEPT:
                self.results.append(result)

    def flush_queries(self):
        pass


def offline_settings(requests, min_duration_ms):
    """The loadgen settings that issue each of ``requests`` exactly once, in one Offline query."""
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_query_count = requests
    settings.min_duration_ms = min_duration_ms
    # Offline issues max(min_query_count, ceil(OFFLINE_QPS_SLACK x expected QPS x min duration)) samples: an
    # expected QPS that keeps the second term at or below the request count issues the requests once each. A run
    # that serves them faster than the minimum duration is then INVALID in loadgen's words, never padded with
    # repeated requests (the record's state, loadgen_logs.verdict, also weighs MLPerf's minimums).
    seconds = min_duration_ms / 1000
    settings.offline_expected_qps = requests / (OFFLINE_QPS_SLACK * seconds) * (1 - 1e-9) if seconds else 1.0
    asked = {
        "scenario": "Offline",
        "mode": "PerformanceOnly",
        "min_query_count": requests,
        "min_duration_ms": min_duration_ms,
        "offline_expected_qps": settings.offline_expected_qps,
        "performance_sample_count": requests,
    }
    return settings, asked


def run_offline(app, model, requests, batch_size, log_dir, min_duration_ms, features=None):
    """Run the requests (RawRequest list) through loadgen; loadgen's logs go to ``log_dir``.

    ``features``: the requests' pre-processed features (inference_only), or None (e2e)."""
    phases = PhaseTimes(len(requests), ("inference",) if features is not None else ("pre", "inference", "post"))
    library = RequestSampleLibrary(requests)
    system = BatchingSystem(app, model, library, batch_size, phases, features)
    settings, asked = offline_settings(len(requests), min_duration_ms)
    os.makedirs(log_dir, exist_ok=True)
    output = lg.LogOutputSettings()
    output.outdir = log_dir
    output.copy_summary_to_stdout = False  # stdout carries the record; the summary is kept as a file
    log_settings = lg.LogSettings()
    log_settings.log_output = output
    log_settings.enable_trace = False
    sut = lg.ConstructSUT(system.issue_queries, system.flush_queries)
    qsl = lg.ConstructQSL(len(requests), len(requests), library.load, library.unload)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if system.error is not None:
        raise system.error
    missing = [name for name in LOG_FILES.values() if not os.path.isfile(os.path.join(log_dir, name))]
    if missing or system.first_issue is None:
        raise RuntimeError(f"loadgen ran no query or wrote no {', '.join(missing) or 'log'} in {log_dir}")
    run_time = system.last_complete - system.first_issue
    return OfflineRun(phases, run_time, system.issued, system.results, asked)
