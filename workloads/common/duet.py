"""A duet pair's start line (schedule: duet): both sides of a pair wait for each other after their warmup, then
time the same window.

The pair's two cells start at the same moment, but their warmups do not end together (a container starts later than a
process, a capped side warms up slower). Without a start line, one side's timed part would run partly alone, beside
the other's warmup or after its end, and the pair would not compare like with like. Each side marks its arrival with
a file in the pair's directory (``PLATBENCH_DUET_DIR``: under the runner's cache directory, which every kind sees at
the same path), waits for the other's, and then times a window of the same length (``--steps auto``'s seconds).

Bounded: a side whose partner never arrives (it failed in its warmup) goes on alone after WAIT_LIMIT seconds and says
so; the record's ``duet_start`` holds the wait and whether the partner arrived.
"""

import os
import time

DIR_ENV, SIDE_ENV = "PLATBENCH_DUET_DIR", "PLATBENCH_DUET_SIDE"
WAIT_LIMIT = 120.0
POLL = 0.005


def pair_from_env(environ=os.environ):
    """(directory, side) of this process's duet pair, or None outside a pair."""
    directory, side = environ.get(DIR_ENV), environ.get(SIDE_ENV)
    if not directory or side not in ("0", "1"):
        return None
    return directory, int(side)


def start_line(directory, side, limit=WAIT_LIMIT, clock=time.monotonic, sleep=time.sleep):
    """Mark ``side`` arrived in ``directory`` and wait for the other side's mark: ``{"waited_seconds",
    "partner_arrived"}``."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"side{side}"), "w", encoding="utf-8") as mark:
        mark.write(str(os.getpid()))
    other = os.path.join(directory, f"side{1 - side}")
    started = clock()
    while not os.path.exists(other) and clock() - started < limit:
        sleep(POLL)
    return {"waited_seconds": round(clock() - started, 6), "partner_arrived": os.path.exists(other)}


def timed_window(one_step, first_index, seconds, clock=time.perf_counter):
    """Steps from ``first_index`` until ``seconds`` have passed (at least one): how many ran."""
    started, count = clock(), 0
    while count == 0 or clock() - started < seconds:
        one_step(first_index + count)
        count += 1
    return count
