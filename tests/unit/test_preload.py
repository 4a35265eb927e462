"""The preload callback (plugins/callback/preload.py): every filter, test, lookup and action plugin of the collection
is imported once in ansible-playbook's main process, so that the task workers forked from it import none of them."""

from __future__ import annotations

from playbook_run import REPO, run_playbook

PLUGINS = REPO / "plugins"
FILTER_MODULE = "ansible_collections.platbench.lab.plugins.filter.placements"
ACTION_MODULE = "ansible_collections.platbench.lab.plugins.action.record_cell"
# A filter of the test's own (ANSIBLE_FILTER_PLUGINS) that says which of the named modules its worker already holds,
# in a task that templates no filter of the collection: what the worker inherited from the main process.
PROBE = """import sys


class FilterModule:
    def filters(self):
        return {"already_loaded": lambda names: [name for name in names if name in sys.modules]}
"""
PLAYS = [
    {
        "name": "Ask a task's worker which of the collection's plugins it holds before it loads any",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Probe",
                "ansible.builtin.debug": {"msg": "{{ %r | already_loaded }}" % [FILTER_MODULE, ACTION_MODULE]},
            }
        ],
    }
]


def test_every_plugin_a_worker_loads_is_preloaded():
    from ansible.plugins.loader import callback_loader

    plugin = callback_loader.get("platbench.lab.preload")
    on_disk = {
        f"ansible_collections.platbench.lab.plugins.{folder}.{path.stem}"
        for folder in ("filter", "test", "lookup", "action")
        for path in (PLUGINS / folder).glob("*.py")
        if path.stem != "__init__"
    }
    # A plugin that failed to import would be left out silently, and its tasks would pay for the import again.
    assert set(plugin.preloaded) == on_disk
    assert FILTER_MODULE in on_disk


def loaded_by_a_worker(tmp_path, callbacks):
    """The probe's answer: which of the two modules a task's worker held when it started."""
    probe = tmp_path / "filter_plugins"
    probe.mkdir(parents=True)
    (probe / "probe.py").write_text(PROBE)
    env = {"ANSIBLE_CALLBACKS_ENABLED": callbacks, "ANSIBLE_FILTER_PLUGINS": str(probe)}
    run = run_playbook(PLAYS, tmp_path, env=env)
    assert run.rc == 0, run.output[-3000:]
    (answer,) = [e["event_data"]["res"]["msg"] for e in run.events if e.get("event") == "runner_on_ok"]
    return answer


def test_the_workers_inherit_the_plugins_the_main_process_preloaded(tmp_path):
    # Without the callback a task's worker imports the collection's plugins itself, each time; with it, it holds them.
    assert loaded_by_a_worker(tmp_path / "without", "platbench.lab.results") == []
    preloaded = loaded_by_a_worker(tmp_path / "with", "platbench.lab.results,platbench.lab.preload")
    assert preloaded == [FILTER_MODULE, ACTION_MODULE]
