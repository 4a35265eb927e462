"""The ``test_cloud`` session fixture: a real OpenStack control plane on 127.0.0.1 (see testcloud/).

Reuses a cloud that ``make test-cloud-up`` left up (and leaves it up); otherwise brings one up for
the session and takes it down at the end. Skips, never fails, where the machine cannot run it.
"""

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.openstack.testcloud import cloud
from tests.openstack.testcloud.configs import COMPUTE_HOST, PCI_ALIAS
from tests.openstack.testcloud.install import Unsupported
from tests.openstack.testcloud.layout import CLOUD, SYSTEM_CLOUD, Layout


@dataclass
class TestCloud:
    clouds_yaml: Path
    state_dir: Path
    endpoints: dict
    env: dict
    magnum: bool
    magnum_reason: str
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


@pytest.fixture(scope="session")
def test_cloud():
    layout = Layout.from_env()
    started_here = not cloud.is_up(layout)
    if started_here:
        try:
            cloud.up(layout, say=lambda line: None)
        except Unsupported as reason:
            pytest.skip(f"no OpenStack test cloud: {reason}")
    facts = cloud.facts(layout)
    yield TestCloud(
        clouds_yaml=layout.clouds_yaml,
        state_dir=layout.state_dir,
        endpoints=facts["endpoints"],
        env={**os.environ, "OS_CLIENT_CONFIG_FILE": str(layout.clouds_yaml)},
        magnum=facts["magnum"],
        magnum_reason=facts["magnum_reason"],
        venv=layout.venv,
    )
    if started_here:
        cloud.down(layout, say=lambda line: None)
