# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Teardown per kind: every declared kind names the task files that remove what a stopped cell of it leaves (its
declaration's ``teardown``, placements/<kind>/): its own ``tasks/teardown.yml`` in its folder, by path, and names of
``playbooks/tasks/teardown/`` that several kinds share (fence, data_disks; a cell of several instances adds
``placements.INSTANCES_TEARDOWN``). ``playbooks/teardown.yml`` imports the shared files and the first kinds' own files
in plays of their own; its last play runs every other kind's own file (``own_files``). ``problems`` says where the
two part: a kind without a teardown, a file declared but missing or never run, a shared task file no kind declares, a
kind whose behaviour leaves a fence or a data disk without that part. tests/unit/test_teardown.py holds it to none.
"""

from __future__ import annotations

import os

import yaml
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils import placements

PLAYBOOK = os.path.join("playbooks", "teardown.yml")
TASKS_DIR = os.path.join("playbooks", "tasks", "teardown")
IMPORTS = ("ansible.builtin.import_tasks", "import_tasks", "ansible.builtin.include_tasks", "include_tasks")
# What the last play loops over: the kinds' own teardown files no other play imports.
OWN_FILTER = "platbench.lab.kind_teardown"
OWN = "(the kinds' own)"
# The file of the `fence` and `data_disks` teardowns, which some kinds share.
FENCE = "fence"
DATA_DISKS = "data_disks"


def imported(playbook):
    """What each play of the teardown playbook at ``playbook`` runs: a list of (play name, hosts, [task file]) in
    order, each file as a kind's ``teardown`` names it: a shared file by its name in TASKS_DIR (without .yml), a
    kind's own by its real path; OWN for the loop over the kinds' own files (OWN_FILTER)."""
    with open(playbook, encoding="utf-8") as stream:
        plays = yaml.safe_load(stream) or []
    here = os.path.dirname(os.path.abspath(playbook))
    shared = os.path.relpath(TASKS_DIR, os.path.dirname(PLAYBOOK))
    found = []
    for play in plays:
        files = []
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in play.get(section) or []:
                for action in IMPORTS:
                    if action not in task:
                        continue
                    if OWN_FILTER in str(task.get("loop", "")):
                        files.append(OWN)
                        continue
                    target = task[action]
                    target = str(target.get("file") if isinstance(target, dict) else target)
                    directory, name = os.path.split(os.path.normpath(target))
                    if directory == shared and name.endswith(".yml"):
                        files.append(name[: -len(".yml")])
                    elif "{{" not in target:
                        files.append(os.path.realpath(os.path.join(here, target)))
        found.append((play.get("name"), play.get("hosts"), files))
    return found


def own_files(groups, playbook):
    """The kinds' own teardown files for a host in the inventory ``groups`` that the teardown ``playbook`` imports in
    no play of its own: what its last play runs there (placements.own_teardown, less those)."""
    named = {name for _, _, files in imported(playbook) for name in files}
    return [path for path in placements.own_teardown(groups) if os.path.realpath(path) not in named]


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
                f"kind {kind} declares no teardown: write its tasks/teardown.yml in its folder "
                f"(plugins/plugin_utils/placements/{kind}/) and name it in its declaration's teardown"
            )
    if not instances:
        found.append("a cell of several instances declares no teardown (placements.INSTANCES_TEARDOWN)")
    declared = {name for kind in kinds for name in teardown.get(kind) or () if not os.path.isabs(name)} | set(instances)
    for kind in kinds:
        for path in (name for name in teardown.get(kind) or () if os.path.isabs(name)):
            if not os.path.isfile(path):
                found.append(f"kind {kind}: its teardown {path} does not exist: write it in the kind's folder")
            elif os.path.realpath(path) not in run and OWN not in run:
                found.append(
                    f"kind {kind} keeps its teardown in its folder ({path}), but {PLAYBOOK} neither imports it nor "
                    f"has the play that runs the kinds' own teardown files (a loop over {OWN_FILTER}): add that play"
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
                "(placements/<kind>/) or remove it"
            )
    # What the kinds' behaviour implies they leave: a fence where the idle_cores fence confines their neighbours,
    # data disks where the workload reads the host's data from a disk.
    for kind in kinds:
        files = tuple(teardown.get(kind) or ())
        if kind in placements.FENCED and files and FENCE not in files:
            found.append(
                f"kind {kind} runs behind an idle_cores fence (it declares fenced) but its teardown "
                f"has no {FENCE}: add it to the teardown of placements/{kind}/"
            )
        disk = any(platform.data_view == "disk" for platform in platforms.PLATFORMS if platform.kind == kind)
        if disk and files and DATA_DISKS not in files:
            found.append(
                f"kind {kind} reads the host's data from a data disk but its teardown has no {DATA_DISKS}: "
                f"add it to the teardown of placements/{kind}/"
            )
    return found
