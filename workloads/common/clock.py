"""Time since the process was launched ("launch to exit" is what `elapsed` measures)."""

import os
import time

# Fallback origin when /proc is unavailable: as close to launch as Python code gets.
_IMPORT_MONOTONIC = time.monotonic()

# /proc/<pid>/stat field 22 (starttime); fields are counted after the "(comm)" field,
# which may itself contain spaces and parentheses.
_STARTTIME_INDEX = 22 - 3


def _seconds_since_launch_from_proc():
    with open("/proc/self/stat") as stat_file:
        after_comm = stat_file.read().rsplit(")", 1)[1].split()
    start_ticks = int(after_comm[_STARTTIME_INDEX])
    with open("/proc/uptime") as uptime_file:
        uptime = float(uptime_file.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def process_elapsed():
    """Seconds from this process's launch to now."""
    try:
        elapsed = _seconds_since_launch_from_proc()
    except (OSError, ValueError, IndexError):
        elapsed = None
    if elapsed is None or elapsed < 0:
        return time.monotonic() - _IMPORT_MONOTONIC
    return elapsed


def launched_at():
    """The wall-clock time (epoch seconds) this process was launched: where the orchestration's part of a
    cell ends and the workload's begins (the controller measures the gap, plugins/callback/results.py)."""
    return time.time() - process_elapsed()
