# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The modes of what platbench writes into results directories (a campaign's samples, run.json, kept files, logs,
reports): the invoking user's umask decides them, as for any file the user makes, except that nothing is ever
writable by others. A shared results tree (umask 002, a group's directory) stays shared; a umask of 0, as some
service managers and containers start processes with, no longer makes a campaign that any local user may rewrite.

The results callback (plugins/callback/results.py) writes under ``no_world_write``; so does every ``platbench``
command (platbench/cli.py), and the ansible-playbook that ``platbench run`` starts inherits it.
"""

from __future__ import annotations

import contextlib
import os
import stat


@contextlib.contextmanager
def no_world_write():
    """Run the block under the process's umask with write for others masked too: what it makes has the modes the
    user's umask gives (0o022: 755 and 644; 0o077: 700 and 600), and never write for others (0: 775 and 664)."""
    previous = os.umask(0o022)
    os.umask(previous | stat.S_IWOTH)
    try:
        yield
    finally:
        os.umask(previous)


def world_writable(root):
    """Every path at or below ``root`` that others may write (symbolic links, whose mode means nothing, left out)."""
    paths = [str(root)]
    for directory, subdirectories, files in os.walk(root):
        paths += [os.path.join(directory, name) for name in subdirectories + files]
    return sorted(path for path in paths if _others_may_write(os.lstat(path).st_mode))


def _others_may_write(mode):
    return not stat.S_ISLNK(mode) and bool(mode & stat.S_IWOTH)
