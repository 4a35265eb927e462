"""The ``test_cloud`` session fixture: a real OpenStack control plane on 127.0.0.1 (see testcloud/).

Reuses a cloud that ``make test-cloud-up`` left up (and leaves it up); otherwise brings one up for
the session and takes it down at the end. Skips only when not root, or when MariaDB or RabbitMQ cannot be
installed here (install.Unsupported); a start failure is an error that shows the daemon's log.
"""

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import skips
from tests.openstack.testcloud import cloud
from tests.openstack.testcloud.configs import COMPUTE_HOST, PCI_ALIAS
from tests.openstack.testcloud.install import Unsupported
from tests.openstack.testcloud.layout import CLOUD, SYSTEM_CLOUD, Layout


@dataclass
class LiveCloud:
    """What the tests get: clouds.yaml and its two cloud names, the endpoints, an environment with
    OS_CLIENT_CONFIG_FILE, the fake cloud's facts (compute host, PCI alias, magnum), and
    ``openstack(...)`` to run the cloud venv's CLI (the controller's venv may lack openstacksdk)."""

    clouds_yaml: Path
    state_dir: Path
    endpoints: dict
    env: dict
    magnum: bool
    magnum_reason: str
    port_base: int
    cloud: str = CLOUD
    system_cloud: str = SYSTEM_CLOUD
    compute_host: str = COMPUTE_HOST
    pci_alias: str = PCI_ALIAS
    venv: Path = field(default=None)

    def openstack(self, *args, system=False, check=True, timeout=120):
        """Run the cloud venv's ``openstack`` CLI (``-f json`` output parsed when asked for)."""
        argv = [str(self.venv / "bin" / "openstack"), "--os-cloud", self.system_cloud if system else self.cloud, *args]
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"openstack {' '.join(args)} failed: {result.stderr[-2000:]}")
        if "json" in args and result.returncode == 0:
            return json.loads(result.stdout or "null")
        return result


# The layout of the cloud this session brought up, until it is taken down (None: none, or reused).
_STARTED_HERE = []


def _take_down():
    while _STARTED_HERE:
        cloud.down(_STARTED_HERE.pop(), say=lambda line: None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Take the cloud down after the last test of this directory (once that test's own fixtures
    have deleted what they made), not at the session's end: the tests that follow in `make test`
    should not share the 2 cores with its idle services."""
    try:
        return (yield)
    finally:
        if nextitem is None or Path(__file__).parent not in Path(nextitem.path).parents:
            _take_down()


@pytest.fixture(scope="session")
def test_cloud():
    layout = Layout.from_env()
    if not cloud.is_up(layout):
        skips.unless_root("the test cloud installs MariaDB and RabbitMQ with apt-get and runs them")
        try:
            cloud.up(layout, say=lambda line: None)
        except Unsupported as reason:
            skips.skip(skips.CLOUD_NOT_INSTALLABLE, str(reason))
        _STARTED_HERE.append(layout)
    facts = cloud.facts(layout)
    yield LiveCloud(
        clouds_yaml=layout.clouds_yaml,
        state_dir=layout.state_dir,
        endpoints=facts["endpoints"],
        env={**os.environ, "OS_CLIENT_CONFIG_FILE": str(layout.clouds_yaml)},
        magnum=facts["magnum"],
        magnum_reason=facts["magnum_reason"],
        port_base=facts["port_base"],
        venv=layout.venv,
    )
    _take_down()
