# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Where a runner looks for the micro-benchmarks' tools before any cell runs, and what it says when one is missing.

The places come from the registry: the host itself when a planned platform runs the workload as a process from
the host's venv (bm), and the workload image once per container engine of the planned, ready container platforms
(cn on Docker, ...). Guests are not asked (booting one costs minutes); a guest without a tool fails its cell with
the words of ``workloads/common/tools.py``, whose tool-to-package table this module reads too.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.workloads.common.tools import TOOLS

# Prints the arguments that are no command on the PATH, one a line.
SCRIPT = 'for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || echo "$tool"; done'
HOST_FIX = "the role platbench.lab.micro_tools installs them on lab hosts (playbooks/lab_host.yml, run by site.yml)"
IMAGE_FIX = (
    "platbench.lab.workload_image puts workload_image_micro_packages into its base image; rebuild it with site.yml"
)


def _planned(labels):
    return [platforms.get(label, "platform_run_plan.platforms") for label in labels or []]


def checks(plan, status, image):
    """The places to look: each ``{where, argv, fix}``; ``argv`` prints the missing tools, one a line."""
    tools = list(plan.get("tools") or [])
    planned = _planned(plan.get("platforms"))
    found = []
    on_host = [p.label for p in planned if placements.declaration(p).launched and p.launcher == "venv"]
    if on_host:
        found.append(
            {
                "where": f"on the host ({', '.join(on_host)})",
                "argv": ["sh", "-c", SCRIPT, "sh", *tools],
                "fix": HOST_FIX,
            }
        )
    engines = {}
    for platform in planned:
        if placements.declaration(platform).engine_run and (status or {}).get(platform.label, {}).get("ready"):
            engines.setdefault(platform.engine, []).append(platform.label)
    for engine, labels in engines.items():
        found.append(
            {
                "where": f"in the workload image {image} ({', '.join(labels)})",
                "argv": [engine, "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", SCRIPT, "sh"]
                + tools,
                "fix": IMAGE_FIX,
            }
        )
    return found


def package(tool):
    """The Debian package that provides ``tool`` (workloads/common/tools.py's table; the tool's name otherwise)."""
    return TOOLS[tool].package if tool in TOOLS else tool


def problems(results, tools, host):
    """One message per place that lacks a tool (``results``: the looped command's registered results)."""
    messages = []
    for result in results or []:
        missing = str(result.get("stdout") or "").split()
        if not missing:
            continue
        check = result["item"]
        packages = ", ".join(dict.fromkeys(package(tool) for tool in missing))
        messages.append(
            f"{', '.join(missing)} not installed {check['where']} on {host}, and the experiment's workloads run "
            f"{', '.join(tools)}. Install the Debian package(s) {packages}: {check['fix']}."
        )
    return messages
