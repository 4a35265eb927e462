"""Results directories and files follow the invoking user's umask and are never writable by others: what the results
callback writes of a campaign (samples, run.json, kept files) and what `platbench report` adds
(plugins/plugin_utils/records/file_modes.py)."""

import os
import stat
from pathlib import Path

import pytest
from ansible.executor.task_result import _RawTaskResult
from ansible.inventory.host import Host
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.plugins.loader import callback_loader
from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import (
    no_world_write,
    world_writable,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import cell_folder
from record_cell_run import record_cell

from platbench import cli


@pytest.fixture
def umask():
    """Sets the process's umask for the test (as the user's shell would have it), then puts it back."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


class Quiet:
    def display(self, *args, **kwargs):
        pass

    warning = display


def record_campaign(results_dir, monkeypatch):
    """Two cells recorded by the results callback as Ansible hands them over, one keeping a file, then the run's end."""
    callback = callback_loader.get("platbench.lab.results")
    callback.set_options()
    monkeypatch.setattr(callback, "_display", Quiet())
    task = Task.load({"name": "Record the cell", "platbench.lab.record_cell": {}}, loader=DataLoader())
    for cell_id in ("bm/2/pin/cpu|r0", "cn/2/pin/cpu|r0"):
        data = record_cell(results_dir, cell_id)
        data["platbench_files"] = {f"{cell_folder(cell_id)}/loadgen.log": "a log a tool kept\n"}
        callback.v2_runner_on_ok(_RawTaskResult(Host("lab1"), task, data, {}).as_callback_task_result())
    callback.v2_playbook_on_stats(stats=None)


def modes(root):
    """{path relative to root: permission bits} of the tree, root itself as '.'."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.mark.parametrize(
    ("user_umask", "directory_mode", "file_mode"),
    [
        (0o000, 0o775, 0o664),  # a umask of 0: everything but write for others
        (0o022, 0o755, 0o644),
        (0o002, 0o775, 0o664),  # a group's shared results tree stays shared
        (0o077, 0o700, 0o600),  # a private umask is kept, not widened
    ],
)
def test_a_campaign_and_its_report_follow_the_umask_and_are_never_world_writable(
    tmp_path, monkeypatch, umask, user_umask, directory_mode, file_mode
):
    umask(user_umask)
    results_dir = tmp_path / "results" / "smoke-20261122"
    record_campaign(results_dir, monkeypatch)
    assert cli.main(["report", str(results_dir), "--format", "csv"]) == 0
    found = modes(tmp_path / "results")
    names = set(found)
    assert {"smoke-20261122/samples.jsonl", "smoke-20261122/run.json", "smoke-20261122/report.html"} <= names
    assert any(name.endswith("/loadgen.log") for name in names)  # a kept file, in a folder of its own
    assert world_writable(tmp_path / "results") == []
    for name, mode in found.items():
        kind = "directory" if (tmp_path / "results" / name).is_dir() else "file"
        assert mode == (directory_mode if kind == "directory" else file_mode), (name, oct(mode))
    assert os.umask(user_umask) == user_umask  # the user's own umask is back once the writes are done


def test_the_check_finds_a_world_writable_path(tmp_path, umask):
    umask(0o022)
    (tmp_path / "kept" / "deep").mkdir(parents=True)
    (tmp_path / "kept" / "deep" / "open.txt").write_text("")
    (tmp_path / "kept" / "deep" / "open.txt").chmod(0o666)
    (tmp_path / "kept" / "shared").mkdir(mode=0o777)
    os.chmod(tmp_path / "kept" / "shared", 0o1777)
    (tmp_path / "kept" / "link").symlink_to("deep")  # a link's own mode (777) means nothing
    assert world_writable(tmp_path / "kept") == [
        str(tmp_path / "kept" / "deep" / "open.txt"),
        str(tmp_path / "kept" / "shared"),
    ]
    with no_world_write():
        Path(tmp_path / "made").mkdir()
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o755
