# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Teardown per kind: every declared kind names the task files of ``playbooks/tasks/teardown/`` that remove what a
stopped cell of it leaves (its declaration's ``teardown``, placements/<kind>.py; a cell of several instances adds
``placements.INSTANCES_TEARDOWN``), and ``playbooks/teardown.yml`` imports each of them. ``problems`` says where the
two part: a kind without a teardown, a file declared but missing or never run, a task file no kind declares, a kind
whose behaviour leaves a fence or a data disk without that part. tests/unit/test_teardown.py holds it to none.
"""

from __future__ import annotations

import os

import yaml
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements

PLAYBOOK = os.path.join("playbooks", "teardown.yml")
TASKS_DIR = os.path.join("playbooks", "tasks", "teardown")
IMPORTS = ("ansible.builtin.import_tasks", "import_tasks", "ansible.builtin.include_tasks", "include_tasks")
# What the play that runs the kinds' own teardown files (kept in their folders, named by path) loops over.
OWN_FILTER = "platbench.lab.kind_teardown"
OWN = "(the kinds' own)"
# The file of the `fence` and `data_disks` teardowns, which some kinds share.
FENCE = "fence"
DATA_DISKS = "data_disks"


def imported(playbook):
    """What each play of the teardown playbook at ``playbook`` runs: a list of (play name, hosts, [task file name])
    in order, each file named as a kind's ``teardown`` names it (its name in TASKS_DIR, without .yml), and OWN for
    the loop over the files kinds keep in their own folders (OWN_FILTER)."""
    with open(playbook, encoding="utf-8") as stream:
        plays = yaml.safe_load(stream) or []
    found = []
    for play in plays:
        files = []
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in play.get(section) or []:
                for action in IMPORTS:
                    if action in task:
                        target = task[action]
                        target = target.get("file") if isinstance(target, dict) else target
                        if OWN_FILTER in str(task.get("loop", "")):
                            files.append(OWN)
                            continue
                        directory, name = os.path.split(os.path.normpath(str(target)))
                        if directory == os.path.relpath(TASKS_DIR, os.path.dirname(PLAYBOOK)) and name.endswith(".yml"):
                            files.append(name[: -len(".yml")])
        found.append((play.get("name"), play.get("hosts"), files))
    return found


def problems(repo, teardown=None, kinds=None, instances=None):
    """Where ``repo``'s teardown playbook and its kinds' declared teardowns part, each naming what to change.
    ``teardown`` (kind to its files), ``kinds`` and ``instances``: the declared ones, unless given (the tests)."""
    teardown = placements.TEARDOWN if teardown is None else teardown
    kinds = tuple(placements.KINDS) if kinds is None else kinds
    instances = placements.INSTANCES_TEARDOWN if instances is None else instances
    plays = imported(os.path.join(repo, PLAYBOOK))
    run = {name for _, _, files in plays for name in files}
    found = []
    for kind in kinds:
        if not teardown.get(kind):
            found.append(
                f"kind {kind} declares no teardown: name the task files of {TASKS_DIR}/ that remove what a stopped "
                f"cell of it leaves in its declaration's teardown, and import them in {PLAYBOOK}"
            )
    if not instances:
        found.append("a cell of several instances declares no teardown (placements.INSTANCES_TEARDOWN)")
    declared = {name for kind in kinds for name in teardown.get(kind) or () if not os.path.isabs(name)} | set(instances)
    for kind in kinds:
        for path in (name for name in teardown.get(kind) or () if os.path.isabs(name)):
            if not os.path.isfile(path):
                found.append(f"kind {kind}: its teardown {path} does not exist: write it in the kind's folder")
            elif OWN not in run:
                found.append(
                    f"kind {kind} keeps its teardown in its folder ({path}), but {PLAYBOOK} has no play that includes "
                    f"the kinds' own teardown files (a loop over {OWN_FILTER}): add it"
                )
    for name in sorted(declared):
        if not os.path.isfile(os.path.join(repo, TASKS_DIR, f"{name}.yml")):
            found.append(f"teardown {name} is declared but {TASKS_DIR}/{name}.yml does not exist: write it")
        elif name not in run:
            found.append(f"teardown {name} ({TASKS_DIR}/{name}.yml) is declared but {PLAYBOOK} never imports it")
    on_disk = sorted(
        entry[: -len(".yml")] for entry in os.listdir(os.path.join(repo, TASKS_DIR)) if entry.endswith(".yml")
    )
    for name in on_disk:
        if name not in declared:
            found.append(
                f"{TASKS_DIR}/{name}.yml is no kind's teardown: declare it in a kind's teardown "
                "(placements/<kind>.py) or remove it"
            )
    # What the kinds' behaviour implies they leave: a fence where the idle_cores fence confines their neighbours,
    # data disks where the workload reads the host's data from a disk.
    for kind in kinds:
        files = tuple(teardown.get(kind) or ())
        if kind in placements.FENCED and files and FENCE not in files:
            found.append(
                f"kind {kind} runs behind an idle_cores fence (it declares fenced) but its teardown "
                f"has no {FENCE}: add it to the teardown of placements/{kind}.py"
            )
        disk = any(platform.data_view == "disk" for platform in platforms.PLATFORMS if platform.kind == kind)
        if disk and files and DATA_DISKS not in files:
            found.append(
                f"kind {kind} reads the host's data from a data disk but its teardown has no {DATA_DISKS}: "
                f"add it to the teardown of placements/{kind}.py"
            )
    return found
