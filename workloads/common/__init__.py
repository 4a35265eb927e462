"""Shared by every workload: the result record, process timing, environment probe.

Importing this package must stay cheap: stdlib only, no deep-learning framework.
"""

from .clock import process_elapsed
from .environment import (
    format_cpuset,
    parse_cpuset,
    probe_environment,
    set_thread_env,
)
from .record import RESULT_PREFIX, emit_record, metric, metric_value
from .stats import step_time_metrics

__all__ = [
    "RESULT_PREFIX",
    "emit_record",
    "format_cpuset",
    "metric",
    "metric_value",
    "parse_cpuset",
    "probe_environment",
    "process_elapsed",
    "set_thread_env",
    "step_time_metrics",
]
