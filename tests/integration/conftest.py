"""Fixtures of the lab tests.

They need root, Debian's package mirror and the Docker engine that site.yml installs and
starts; the lab is built once per session and reused.
"""

from __future__ import annotations

import os
import shutil

import pytest
from labrun import failed_messages, output_of, run_playbook


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The local lab, built by site.yml (the first run on a fresh machine does the real work)."""
    if os.geteuid() != 0:
        pytest.skip("the lab is built as root (packages, Docker engine, /opt/platbench)")
    if not shutil.which("apt-get"):
        pytest.skip("the local lab is built on Debian/Ubuntu hosts")
    tmp = tmp_path_factory.mktemp("site")
    runner = run_playbook("site.yml", tmp)
    assert runner.rc == 0, "site.yml failed: %s\n%s" % (failed_messages(runner), output_of(runner)[-6000:])
    return runner
