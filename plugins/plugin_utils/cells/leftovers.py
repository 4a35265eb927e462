# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What an earlier run left on a runner host, in words: the precheck of platform_run stops on it.

A run ends its cells cleanly, and platbench run removes what a stopped cell left (teardown.yml, on Ctrl-C and
after a run that died). What is still there when a run starts was left by a run that could not clean up (killed,
its controller crashed, plain ansible-playbook interrupted), or belongs to a campaign running there now: workload
processes, cells' network paths (namespaces, bridges, veths, VXLAN devices, FORWARD rules, every name starting
with ``pb`` and 8 hex digits), an idle_cores fence and the cgroups of process cells
(``platbench-cell-`` and 12 hex digits, module_utils/cpu_quota.py). Measuring beside any of them would distort the
cells.
"""

from __future__ import annotations

TEARDOWN = "playbooks/teardown.yml"


NAMES_SHOWN = 4  # names of one kind in the message; the rest are counted


def _names(kind, plural, names):
    """``namespaces a, b, c, d and 3 more``."""
    shown = ", ".join(names[:NAMES_SHOWN])
    if len(names) > NAMES_SHOWN:
        shown += f" and {len(names) - NAMES_SHOWN} more"
    return f"{plural if len(names) > 1 else kind} {shown}"


def _path_words(commands):
    """What the removal commands of platbench.lab.network_path (check mode, cleanup_all) would remove."""
    found = {"namespace": [], "bridge": [], "link": []}
    rules = 0
    for argv in commands or []:
        if argv[:3] == ["ip", "netns", "del"]:
            found["namespace"].append(argv[3])
        elif argv[:3] == ["ip", "link", "del"]:
            found["bridge" if argv[3].endswith("br") else "link"].append(argv[3])
        elif argv[0].endswith("iptables"):
            rules += 1
    words = [_names(kind, kind + "s", names) for kind, names in found.items() if names]
    if rules:
        words.append(f"{rules} FORWARD rule{'s' if rules > 1 else ''}")
    return words


def leftover_problems(paths, fence, processes, host, fence_state_file=None, cgroups=None):
    """The message that stops a run on ``host``, one line per kind of leftover (Campaign shows a failed task's first
    lines), as a one-item list; [] when nothing was left.

    ``paths``: platbench.lab.network_path's result with state absent, cleanup_all and check mode (its
    ``commands``); ``fence``: platbench.lab.cpu_fence's with state absent and check mode (its ``fence``, the state
    in place or None); ``processes``: ``pgrep --list-full`` lines of the workload processes running; ``cgroups``:
    the cgroups of process cells (platbench.lab.cpu_quota_cgroup's ``removed`` with state absent,
    cleanup_all and check mode), as paths."""
    found = []
    words = _path_words((paths or {}).get("commands"))
    if words:
        found.append(f"the network paths of cells: {'; '.join(words)}")
    state = (fence or {}).get("fence")
    if state:
        where = f" ({fence_state_file})" if fence_state_file else ""
        found.append(f"an idle_cores fence: every top-level cgroup kept on CPUs {state.get('cpus')}{where}")
    if cgroups:
        names = [str(path).rstrip("/").rsplit("/", 1)[-1] for path in cgroups]
        where = str(cgroups[0]).rstrip("/").rsplit("/", 1)[0]
        found.append(f"the process cells' {_names('cgroup', 'cgroups', names)} (in {where})")
    pids = [line.split(None, 1)[0] for line in processes or [] if line.strip()]
    if pids:
        found.append(_names("workload process", "workload processes", pids))
    if not found:
        return []
    lines = [f"{host} holds what an earlier run left, or a campaign running there now:"]
    lines += [f"  {line};" for line in found[:-1]] + [f"  {found[-1]}."]
    lines.append(
        f"Measuring beside them would distort the cells: remove them with `ansible-playbook -i INVENTORY {TEARDOWN}` "
        "(or let that campaign end), then run again (platbench run does this itself after a run of its campaign died)."
    )
    return ["\n".join(lines)]
