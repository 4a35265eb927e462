# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The fence of a cell with no idle core (``idle_cores: none``): the host's other work kept on the cell's cores.

Such a cell gets every core of the host; the fence makes sure nothing else has a core of its own beside it. It sets
``cpuset.cpus`` of every top-level cgroup of the cpuset hierarchy (``system.slice``, ``user.slice``,
``machine.slice`` on a systemd host; ``docker``, ``machine``... elsewhere) to the cell's cores, so that a
housekeeping core set aside by ``AllowedCPUs=`` or an engine's own cpuset stops being one: the host scheduler has
no idle core left to move the host's other work to. The root cgroup's own tasks cannot be confined (its cpuset is
the whole machine), and need not be: with every core given to the cell, they share the cell's cores.

It works on cgroup v2 (``cpuset`` in the root's ``cgroup.controllers``; it enables the controller for the
top-level groups where it is not, and says so) and on cgroup v1's ``cpuset`` hierarchy, without systemd as PID 1.
What it changes is written to a state file before each change, so that ``absent`` restores exactly that (also
after a run that died mid-cell), and removes the file. The cgroup root and the state file can be given, so the
unit tests work on a fake tree.
"""

from __future__ import annotations

import json
import os
import tempfile

STATE_VERSION = 1


class FenceError(RuntimeError):
    """The fence cannot be put up or taken down; the message says where and what to do."""


def parse_cpus(text):
    """The CPU numbers of a cpuset list (``0-3,6``); an empty list for an empty one."""
    cpus = set()
    for part in str(text).replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
        except ValueError:
            raise FenceError(f"{text!r} is not a CPU list (such as 0-3,6)") from None
    return sorted(cpus)


def format_cpus(cpus):
    """The shortest cpuset list of ``cpus`` (``[0, 1, 2, 5]`` -> ``0-2,5``), also the syntax libvirt reads (a guest's
    NUMA cells, plugins/plugin_utils/cells/sizing.py)."""
    ranges, cpus = [], sorted(set(cpus))
    for cpu in cpus:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _read(path):
    with open(path, encoding="utf-8") as stream:
        return stream.read().strip()


def _write(path, value):
    # A cgroup file takes one write; an empty value is a newline (v2: "inherit the parent's").
    try:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(value if value else "\n")
    except OSError as exc:
        raise FenceError(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


def hierarchy(cgroup_root="/sys/fs/cgroup"):
    """``(version, directory)`` of the cpuset hierarchy under ``cgroup_root``: ``("v2", root)`` where the unified
    hierarchy offers the cpuset controller, else ``("v1", root/cpuset)``."""
    controllers = os.path.join(cgroup_root, "cgroup.controllers")
    if os.path.exists(controllers) and "cpuset" in _read(controllers).split():
        return "v2", cgroup_root
    v1 = os.path.join(cgroup_root, "cpuset")
    if os.path.exists(os.path.join(v1, "cpuset.cpus")):
        return "v1", v1
    raise FenceError(
        f"no cpuset cgroup hierarchy under {cgroup_root} (neither a cgroup v2 root offering cpuset in "
        "cgroup.controllers nor a v1 cpuset mount): idle_cores: none cannot fence the host's other work here; "
        "mount the cpuset controller, or drop idle_cores from the experiment"
    )


def top_groups(directory):
    """The top-level cgroups of a hierarchy's ``directory``, by name, sorted."""
    return sorted(
        entry
        for entry in os.listdir(directory)
        if os.path.isdir(os.path.join(directory, entry)) and not os.path.islink(os.path.join(directory, entry))
    )


def load_state(state_file):
    """The fence in place as ``state_file`` records it, or None."""
    try:
        with open(state_file, encoding="utf-8") as stream:
            state = json.load(stream)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FenceError(
            f"cannot read the fence's state file {state_file}: {exc}; restore its cgroups by hand"
        ) from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise FenceError(f"{state_file} is no platbench fence state (version {STATE_VERSION})")
    return state


def _save_state(state_file, state):
    directory = os.path.dirname(state_file) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".fence-")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        json.dump(state, stream, indent=1, sort_keys=True)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, state_file)


def summary(state):
    """The record's words for a fence: ``cgroup v2 cpuset 0-3 on 3 groups``."""
    groups = len(state["groups"]) + len(state.get("unchanged", []))
    return f"cgroup {state['cgroup']} cpuset {state['cpus']} on {groups} group{'s' if groups != 1 else ''}"


def runtime(state):
    """What a cell's record says of its fence."""
    return {
        "fence": summary(state),
        "fence_groups": sorted([*state["groups"], *state.get("unchanged", [])]),
        "fence_changed_groups": sorted(state["groups"]),
    }


def plan_fence(cpus, cgroup_root="/sys/fs/cgroup"):
    """What putting up the fence would change, as the state :func:`put_up` writes: ``groups`` (name -> its
    ``cpuset.cpus`` before) to set to ``cpus``, ``unchanged`` (already there), ``enable_cpuset`` (v2)."""
    wanted = parse_cpus(cpus) if isinstance(cpus, str) else sorted({int(cpu) for cpu in cpus})
    if not wanted:
        raise FenceError("the fence needs the cell's CPUs, got none")
    version, directory = hierarchy(cgroup_root)
    state = {"version": STATE_VERSION, "cgroup": version, "directory": directory, "cpus": format_cpus(wanted)}
    state.update(enable_cpuset=False, groups={}, unchanged=[])
    offered = "cpuset.cpus.effective" if version == "v2" else "cpuset.cpus"
    available = parse_cpus(_read(os.path.join(directory, offered)))
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise FenceError(f"CPUs {format_cpus(missing)} are not in the host's cpuset ({format_cpus(available)})")
    if version == "v2":
        state["enable_cpuset"] = "cpuset" not in _read(os.path.join(directory, "cgroup.subtree_control")).split()
    for group in top_groups(directory):
        cpus_file = os.path.join(directory, group, "cpuset.cpus")
        # v2: a group shows cpuset.cpus once the controller is enabled for it; empty = its parent's.
        before = _read(cpus_file) if os.path.exists(cpus_file) else ""
        if before and parse_cpus(before) == wanted:
            state["unchanged"].append(group)
        else:
            state["groups"][group] = before
    return state


def put_up(cpus, state_file, cgroup_root="/sys/fs/cgroup", check=False):
    """Fence the host's other work onto ``cpus``; returns ``(changed, state)``. Idempotent: a fence on the same
    CPUs already recorded changes nothing; one on other CPUs must be taken down first. A write that fails takes
    down what was put up before raising."""
    current = load_state(state_file)
    wanted = format_cpus(parse_cpus(cpus) if isinstance(cpus, str) else [int(cpu) for cpu in cpus])
    if current is not None:
        if current["cpus"] == wanted:
            return False, current
        raise FenceError(
            f"a fence on CPUs {current['cpus']} is already in place ({state_file}); take it down first "
            "(platbench.lab.cpu_fence state=absent)"
        )
    state = plan_fence(cpus, cgroup_root)
    if check or not (state["groups"] or state["enable_cpuset"]):
        return bool(state["groups"] or state["enable_cpuset"]), state
    done = {**state, "groups": {}, "enable_cpuset": False}
    directory = state["directory"]
    try:
        if state["enable_cpuset"]:
            done["enable_cpuset"] = True
            _save_state(state_file, done)
            _write(os.path.join(directory, "cgroup.subtree_control"), "+cpuset")
        for group, before in state["groups"].items():
            done["groups"][group] = before  # recorded before the write, so a crash mid-write is still restored
            _save_state(state_file, done)
            _write(os.path.join(directory, group, "cpuset.cpus"), state["cpus"])
    except FenceError as exc:
        try:
            take_down(state_file)
        except FenceError as restore:
            raise FenceError(f"{exc}; restoring what was changed also failed: {restore}") from None
        raise FenceError(f"{exc}; every group changed before it was restored") from None
    _save_state(state_file, done)
    return True, done


def take_down(state_file, check=False):
    """Restore what the fence recorded in ``state_file`` and remove the file; returns ``(changed, state or None,
    problems)``. A group gone since (a container's) needs nothing; every other failure is a problem, and the state
    file then stays, so that a later run can try again."""
    state = load_state(state_file)
    if state is None:
        return False, None, []
    if check:
        return True, state, []
    directory, problems = state["directory"], []
    for group, before in state["groups"].items():
        path = os.path.join(directory, group, "cpuset.cpus")
        if not os.path.exists(path):
            continue
        try:
            _write(path, before)
        except FenceError as exc:
            problems.append(str(exc))
    if state["enable_cpuset"] and not problems:
        try:
            _write(os.path.join(directory, "cgroup.subtree_control"), "-cpuset")
        except FenceError as exc:
            problems.append(f"{exc} (a group below the root may have enabled cpuset for its own children since)")
    if not problems:
        os.unlink(state_file)
    return True, state, problems
