"""What the CLI accepts and the defaults it fills in; no framework imports here."""

from typing import NamedTuple

WORKLOAD = "inference_e2e"
# e2e: each request pre-processed, inferred and post-processed while loadgen times the batch (the study's
# end-to-end time). inference_only: every request pre-processed before loadgen starts and its tensors fed
# (the study's DLBS runs); only inference is timed, post-processing is left out.
TIMINGS = ("e2e", "inference_only")
DEVICES = ("auto", "cpu", "cuda")
PHASES = ("pre", "inference", "post")
# Loadgen's minimum duration when none is asked: 0 lets the request count decide the run's length. Such a run
# is below MLPerf's minimums (MLPERF_OFFLINE_MIN_DURATION_MS), so it is recorded scaled-down, never VALID.
DEFAULT_MIN_DURATION_MS = 0
# Loadgen issues max(requests, 1.1 x expected QPS x min duration) samples in Offline: the expected QPS is set
# so that the second term never exceeds the request count, and every request is issued exactly once.
OFFLINE_QPS_SLACK = 1.1
LOG_FILES = {"summary": "mlperf_log_summary.txt", "detail": "mlperf_log_detail.txt"}
RESULTS_KEPT = 3  # post-processed results quoted in the record's metadata, as a sign of life

# The run's state, one field of the record (metadata.loadgen.result):
# - VALID: the run met MLPerf's minimums for its benchmark and scenario, and loadgen called it VALID;
# - INVALID: loadgen called it INVALID (a minimum it was given was not met, whatever the run's size);
# - scaled-down: loadgen's criteria were met, but what it was given is below MLPerf's minimums: timed and
#   reported, never an MLPerf result.
VALID, INVALID, SCALED_DOWN = "VALID", "INVALID", "scaled-down"
STATES = (VALID, INVALID, SCALED_DOWN)
OFFLINE = "Offline"


class MlperfMinimums(NamedTuple):
    """What MLPerf inference asks of a result in one scenario of one of its benchmarks."""

    benchmark: str  # MLPerf's name of the benchmark the app re-runs (mlperf.conf's model name)
    min_duration_ms: int
    min_samples: int  # Offline: the samples of its one query


# MLPerf inference's rules, as mlcommons/inference's loadgen/mlperf.conf states them: "*.Offline.min_duration =
# 600000", and per benchmark "<model>.Offline.min_query_count", which loadgen folds into the sample count of the
# Offline query (test_settings_internal.cc) and the submission checker enforces (tools/submission/
# submission_checker.py, OFFLINE_MIN_SPQ_SINCE_V4): 24,576 for resnet50 and dlrm-v2, the dataset's size where it
# is smaller (bert 10,833, rnnt 2,513). Each app names its benchmark's (apps/*.py, ``mlperf``).
MLPERF_OFFLINE_MIN_DURATION_MS = 600_000
MLPERF_OFFLINE_MIN_SAMPLES = {"resnet50": 24_576, "dlrm-v2": 24_576, "bert": 10_833, "rnnt": 2_513}


def offline_minimums(benchmark):
    """MLPerf's Offline minimums of ``benchmark`` (a key of MLPERF_OFFLINE_MIN_SAMPLES)."""
    return MlperfMinimums(benchmark, MLPERF_OFFLINE_MIN_DURATION_MS, MLPERF_OFFLINE_MIN_SAMPLES[benchmark])
