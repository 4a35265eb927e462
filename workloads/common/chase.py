"""Memory latency by a pointer chase: nanoseconds per dependent load over a working set.

The working set is an array of int64 indexes holding one random cycle through all its cache
lines (Sattolo's algorithm over the lines; the first index of each 64-byte line points to the
first index of the next line in the cycle): each load's address is the value of the previous
load, so loads cannot overlap, every load is a different line until the whole set has been
walked, and the hardware prefetchers cannot guess the next line. One index per line, rather
than per element, makes building a 1 GiB cycle take seconds rather than most of a minute.

One chain is one thread by nature: the chase runs on the calling thread only (numba, no
parallel loops), whatever --threads the platform gives.

The figure includes what a real random access pays on the platform: cache misses and TLB misses
(4 KiB pages, or 2 MiB where transparent huge pages back the array: numpy asks for them with
madvise, so ``page_metadata`` records the host's THP mode), and in a VM the nested (EPT) walks,
which is where virtualisation shows.

numba compiles the two kernels once, on a tiny array, before anything is timed: the JIT time
is reported apart (``compile_seconds``) and never counted in a latency.
"""

import statistics
import time
from typing import NamedTuple

import numpy as np
from numba import njit

MIB = 1 << 20
INDEX_BYTES = 8
LINE_BYTES = 64
INDEXES_PER_LINE = LINE_BYTES // INDEX_BYTES
WARMUP_STEPS = 1 << 21  # loads before timing: brings a small working set into its cache level
TIMED_STEPS = 1 << 22  # loads per timed pass
TIMED_PASSES = 5  # passes per working set; the latency is their median
PASS_SECONDS_BUDGET = 10.0  # no more passes once the timed ones took this long (slow, emulated guests)


@njit(cache=False)
def _sattolo_cycle(size, seed):
    """A permutation of 0..size-1 that is a single cycle (Sattolo's variant of Fisher-Yates)."""
    np.random.seed(seed)
    cycle = np.arange(size)
    for i in range(size - 1, 0, -1):
        j = np.random.randint(0, i)  # j < i, never i itself: that is what makes it one cycle
        cycle[i], cycle[j] = cycle[j], cycle[i]
    return cycle


@njit(cache=False)
def _line_chain(lines, seed):
    """An int64 array of ``lines`` cache lines whose first entries chain every line in one random cycle."""
    order = _sattolo_cycle(lines, seed)
    chain = np.zeros(lines * INDEXES_PER_LINE, dtype=np.int64)
    for line in range(lines):
        chain[line * INDEXES_PER_LINE] = order[line] * INDEXES_PER_LINE
    return chain


@njit(cache=False)
def _chase(cycle, start, steps):
    """Follows ``cycle`` ``steps`` times from ``start``; returns where it ended (so nothing is optimised away)."""
    index = start
    for _ in range(steps):
        index = cycle[index]
    return index


class Latency(NamedTuple):
    working_set_mb: int
    ns_per_load: float  # median of the timed passes
    passes_ns: list  # every timed pass's ns per load
    steps_per_pass: int
    build_seconds: float  # building the cycle (not timed as latency)


def compile_kernels():
    """JIT-compiles the kernels on a tiny array; returns the seconds it took."""
    started = time.perf_counter()
    chain = _line_chain(16, 0)
    _chase(chain, 0, 16)
    return time.perf_counter() - started


def lines_for(working_set_mb):
    return working_set_mb * MIB // LINE_BYTES


def page_metadata():
    """What backs the chase's array: the kernel's transparent huge page mode and whether numpy madvises them."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="utf-8") as handle:
            mode = handle.read().split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        mode = None
    try:
        from numpy._core.multiarray import _get_madvise_hugepage
    except ImportError:
        _get_madvise_hugepage = None
    return {
        "transparent_hugepage": mode,
        "numpy_madvise_hugepage": bool(_get_madvise_hugepage()) if _get_madvise_hugepage else None,
    }


def measure(working_set_mb, seed=0, timed_steps=TIMED_STEPS, passes=TIMED_PASSES, budget=PASS_SECONDS_BUDGET):
    """Latency of a dependent load over ``working_set_mb`` MiB (call compile_kernels first)."""
    started = time.perf_counter()
    lines = lines_for(working_set_mb)
    chain = _line_chain(lines, seed)
    build_seconds = time.perf_counter() - started
    position = _chase(chain, 0, min(WARMUP_STEPS, 2 * lines))
    passes_ns = []
    spent = 0.0
    while len(passes_ns) < passes and (spent < budget or not passes_ns):
        started = time.perf_counter()
        position = _chase(chain, position, timed_steps)
        seconds = time.perf_counter() - started
        spent += seconds
        passes_ns.append(seconds * 1e9 / timed_steps)
    return Latency(working_set_mb, statistics.median(passes_ns), passes_ns, timed_steps, build_seconds)
