# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The labels every cell carries, named once: the experiment's expansion sets them (matrix.py), a workload parameter
may not shadow them, and a record's own labels are what is left (records.py). A leaf module: it imports nothing of
platbench, so that reading a record never loads the planning code.

``host`` (the inventory host that measured the cell) is added when the cell is planned for a host.
"""

from __future__ import annotations

SCHEDULE = "schedule"  # the cell's place in a shuffled or duet schedule (schedule.py)
INJECT = "inject"  # the overhead injected into the cell (inject.py)
SCALEUP_REQUESTED = "scaleup_requested"  # the scale-up the experiment asked for, where sizing chose another (sizing.py)
CHR = "chr"  # the cores per hardware thread sizing gave (sizing.py)
NUMA_NODES = "numa_nodes"  # the NUMA nodes the cell spans (sizing.py)
INSTANCE_ROLE, INSTANCE_INDEX, SHARE = "instance_role", "instance_index", "share"  # a cell of several (instances.py)

CELL_LABELS = (
    "experiment",
    "platform",
    "scaleup",
    "cpu_config",
    "processor",
    "mode",
    "repeat",
    "scenario",
    "workload",
    "cell",
    "campaign",
    "emulated",
    "host",
    "network",
    "background",
    "storage",
    "data_path",
    "guest_setup",
    "idle_cores",
    SCHEDULE,
    INJECT,
    "isolation",
    SCALEUP_REQUESTED,
    CHR,
    NUMA_NODES,
    INSTANCE_ROLE,
    INSTANCE_INDEX,
    SHARE,
)
