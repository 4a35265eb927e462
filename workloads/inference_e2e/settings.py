"""What the CLI accepts and the defaults it fills in; no framework imports here."""

WORKLOAD = "inference_e2e"
# e2e: each request pre-processed, inferred and post-processed while loadgen times the batch (the study's
# end-to-end time). inference_only: every request pre-processed before loadgen starts and its tensors fed
# (the study's DLBS runs); only inference is timed, post-processing is left out.
TIMINGS = ("e2e", "inference_only")
DEVICES = ("auto", "cpu", "cuda")
PHASES = ("pre", "inference", "post")
# Loadgen's minimum duration: 0 lets the study's fixed request count decide the run's length; MLPerf's own
# rules ask for 600000 (10 min), and a run shorter than the minimum is INVALID in loadgen's own words.
DEFAULT_MIN_DURATION_MS = 0
# Loadgen issues max(requests, 1.1 x expected QPS x min duration) samples in Offline: the expected QPS is set
# so that the second term never exceeds the request count, and every request is issued exactly once.
OFFLINE_QPS_SLACK = 1.1
LOG_FILES = {"summary": "mlperf_log_summary.txt", "detail": "mlperf_log_detail.txt"}
RESULTS_KEPT = 3  # post-processed results quoted in the record's metadata, as a sign of life
