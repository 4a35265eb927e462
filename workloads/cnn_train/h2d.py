"""Lin et al. 2018's split of a GPU step: how much of it was host-to-device copying of the input.

A GPU trainer logs one entry per step (warmup included, zero bytes when the batch was already on
the device) holding how to read the copy's seconds once the run is over, and the bytes copied;
the metrics count the timed steps, which are the last ones. Reading the times only at the end
keeps the steps free of extra synchronization: a CUDA event's time is readable once the stream
passed it, which every step's loss read guarantees. No framework is imported here.
"""

from ..common.record import metric


def no_copy():
    return 0.0


class CopyLog:
    """Per step: (a callable giving the copy's seconds, bytes copied); one ``add`` per step."""

    def __init__(self, method):
        self.method = method  # how the seconds are measured, for the record's metadata
        self.entries = []

    def add(self, seconds, nbytes):
        self.entries.append((seconds, nbytes))

    def totals(self, timed_steps):
        """(seconds, bytes) copied during the last ``timed_steps`` steps."""
        timed = self.entries[max(0, len(self.entries) - timed_steps) :]
        return copy_totals([(seconds(), nbytes) for seconds, nbytes in timed])

    def metrics(self, timed_steps):
        seconds, nbytes = self.totals(timed_steps)
        return [metric("h2d_time", seconds, "s"), metric("h2d_bytes", nbytes, "B")]


def copy_totals(copies):
    """[(seconds, bytes)] of each step's copies -> (seconds, bytes) summed."""
    return sum(seconds for seconds, _ in copies), sum(nbytes for _, nbytes in copies)


def event_seconds(start, end):
    """The device time between two CUDA events (torch's elapsed_time is in milliseconds)."""
    return start.elapsed_time(end) / 1000.0
