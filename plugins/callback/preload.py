# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
author: platbench developers (@platbench)
version_added: "0.13.0"
short_description: Load this collection's filter, test, lookup and action plugins once, before any task runs
description:
  - ansible-playbook runs each task in a worker process forked from its main process. A worker that templates one of
    this collection's filters, or runs one of its action plugins, imports that plugin and the Python under
    C(plugins/plugin_utils/) it needs; the import dies with the worker, so the next task imports it again. That cost
    about 0.2 s a task, three times in every cell (its plan, the results it forgets, its record).
  - This plugin imports those plugins once, in the main process, when the playbook starts; every worker forked after
    inherits them and imports nothing. The import itself costs the main process about as much as one task did.
  - Changes nothing else; records nothing. A plugin that fails to import here is left to fail where a task uses it,
    with Ansible's own message.
requirements:
  - Enable with C(callbacks_enabled = platbench.lab.preload) in C(ansible.cfg).
"""

import importlib
import pkgutil
from pathlib import Path

from ansible.plugins.callback import CallbackBase

COLLECTION = "ansible_collections.platbench.lab"
# The plugin types a worker loads while it templates or runs a task (callbacks and modules are not: the former run in
# the main process already, the latter on the target).
TYPES = ("filter", "test", "lookup", "action")
PLUGINS_DIR = Path(__file__).resolve().parents[1]


def preload(plugins_dir=PLUGINS_DIR):
    """Import every plugin of ``TYPES`` under ``plugins_dir`` (this collection's plugins/); the names imported."""
    imported = []
    for plugin_type in TYPES:
        folder = plugins_dir / plugin_type
        if not folder.is_dir():
            continue
        for module in pkgutil.iter_modules([str(folder)]):
            name = f"{COLLECTION}.plugins.{plugin_type}.{module.name}"
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the task that uses it reports it, in Ansible's words
                continue
            imported.append(name)
    return imported


class CallbackModule(CallbackBase):
    """Imports the collection's plugins in the main process, so that the task workers forked from it inherit them."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "platbench.lab.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.preloaded = preload()
