"""What the host did to the run while it was timed: CPU steal (a hypervisor giving our CPUs to others) and
frequency throttling (cpufreq, thermal throttle counters), read before and after the timed part.

Sources, each read under ``root`` (tests pass a fake tree):
- ``/proc/stat``: the aggregate ``cpu`` line and the ``cpuN`` lines; steal is the 8th value (jiffies), offered by
  kernels since 2.6.11 and non-zero only in guests (a container sees its host's, a VM its own);
- ``/sys/devices/system/cpu/cpuN/cpufreq/``: ``scaling_cur_freq``, ``scaling_max_freq``, ``cpuinfo_max_freq`` (kHz);
- ``/sys/devices/system/cpu/cpuN/thermal_throttle/``: ``core_throttle_count``, ``package_throttle_count`` (Intel,
  x86_therm_throttle); a package's counter shows in each of its CPUs, so it is counted once per package.

A source the host does not offer (most VMs have no cpufreq or thermal_throttle) is recorded as UNAVAILABLE, never
as 0: "no throttling seen" and "could not look" are different findings. Stdlib only, and never raises: a probe must
not break a run.
"""

import os
import re
import time
from typing import NamedTuple

UNAVAILABLE = "not offered by this host"
_CPU_DIR = re.compile(r"^cpu(\d+)$")
_STEAL_FIELD = 7  # user nice system idle iowait irq softirq steal guest guest_nice (guest is already in user)
_SUMMED_FIELDS = 8  # guest and guest_nice are counted inside user and nice: summing them would count twice


class Snapshot(NamedTuple):
    """One reading of the host's counters; None where the host does not offer a source."""

    taken: float  # time.monotonic()
    jiffies: dict | None  # {"all" or cpu number: (total jiffies, steal jiffies)}
    frequencies: dict | None  # {cpu: (scaling_cur_freq, scaling_max_freq, cpuinfo_max_freq)}, kHz
    throttles: dict | None  # {("core", cpu) or ("package", package id): count}


def _read(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except (OSError, ValueError):
        return None


def _read_int(path):
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_jiffies(root="/"):
    """{"all": (total, steal), cpu: (total, steal)} from /proc/stat; None when it has no steal column."""
    text = _read(os.path.join(root, "proc/stat"))
    if text is None:
        return None
    jiffies = {}
    for line in text.splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or len(values) <= _STEAL_FIELD:
            continue
        try:
            counts = [int(value) for value in values[:_SUMMED_FIELDS]]
        except ValueError:
            continue
        key = "all" if name == "cpu" else int(name[3:]) if name[3:].isdigit() else None
        if key is not None:
            jiffies[key] = (sum(counts), counts[_STEAL_FIELD])
    return jiffies if "all" in jiffies else None


def _cpu_dirs(root):
    base = os.path.join(root, "sys/devices/system/cpu")
    try:
        names = os.listdir(base)
    except OSError:
        return {}
    return {int(match.group(1)): os.path.join(base, name) for name in names if (match := _CPU_DIR.match(name))}


def read_frequencies(root="/"):
    """{cpu: (current, scaling max, hardware max)} in kHz for the CPUs with cpufreq; None when none has it."""
    frequencies = {}
    for cpu, directory in _cpu_dirs(root).items():
        values = tuple(
            _read_int(os.path.join(directory, "cpufreq", name))
            for name in ("scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq")
        )
        if values[0] is not None and values[2]:
            frequencies[cpu] = values
    return frequencies or None


def read_throttles(root="/"):
    """{("core", cpu): count, ("package", package id): count}; None when no CPU has thermal_throttle."""
    throttles = {}
    for cpu, directory in _cpu_dirs(root).items():
        core = _read_int(os.path.join(directory, "thermal_throttle", "core_throttle_count"))
        package = _read_int(os.path.join(directory, "thermal_throttle", "package_throttle_count"))
        if core is not None:
            throttles["core", cpu] = core
        if package is not None:
            package_id = _read_int(os.path.join(directory, "topology", "physical_package_id"))
            throttles["package", cpu if package_id is None else package_id] = package
    return throttles or None


def snapshot(root="/"):
    return Snapshot(time.monotonic(), read_jiffies(root), read_frequencies(root), read_throttles(root))


def _steal_percent(before, after, keys):
    """Steal over all jiffies between the readings, in percent, of the ``keys`` both readings hold."""
    keys = [key for key in keys if key in before and key in after]
    total = sum(after[key][0] - before[key][0] for key in keys)
    steal = sum(after[key][1] - before[key][1] for key in keys)
    return round(100.0 * steal / total, 3) if keys and total > 0 else None


def _frequency_ratios(readings, index):
    """Every CPU's frequency (column ``index``) over its hardware maximum, in every reading."""
    return [values[index] / values[2] for reading in readings for values in reading.values() if values[index]]


def host_state(before, after, cpus=None):
    """The record's ``metadata.host_state`` for the window between two snapshots.

    steal_percent: steal jiffies over all jiffies of every CPU (None when no jiffy passed: a window under
    10 ms); steal_percent_cpus: of ``cpus`` only (the run's allowed CPUs; left out when /proc/stat has no
    per-CPU lines for them). throttle_events: how much the thermal throttle counters grew. freq_ratio_min/max:
    the lowest and highest current frequency over the hardware maximum seen in either reading;
    freq_limit_ratio: the lowest scaling_max_freq over the hardware maximum (a cap that an administrator or
    power policy set). A source the host does not offer is UNAVAILABLE."""
    state = {"seconds": round(after.taken - before.taken, 3)}
    if before.jiffies is None or after.jiffies is None:
        state["steal_percent"] = UNAVAILABLE
    else:
        state["steal_percent"] = _steal_percent(before.jiffies, after.jiffies, ["all"])
        cpu_steal = _steal_percent(before.jiffies, after.jiffies, sorted(cpus or ()))
        if cpu_steal is not None:
            state["steal_percent_cpus"] = cpu_steal
    if before.throttles is None or after.throttles is None:
        state["throttle_events"] = UNAVAILABLE
    else:
        state["throttle_events"] = sum(
            max(0, after.throttles[key] - count) for key, count in before.throttles.items() if key in after.throttles
        )
    readings = [reading for reading in (before.frequencies, after.frequencies) if reading]
    current, limits = _frequency_ratios(readings, 0), _frequency_ratios(readings, 1)
    state["freq_ratio_min"] = round(min(current), 3) if current else UNAVAILABLE
    state["freq_ratio_max"] = round(max(current), 3) if current else UNAVAILABLE
    state["freq_limit_ratio"] = round(min(limits), 3) if limits else UNAVAILABLE
    return state
