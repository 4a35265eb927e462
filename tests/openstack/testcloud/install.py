"""What the cloud needs installed: MariaDB and RabbitMQ from Debian, the services in their own venv."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .processes import CloudError

HERE = Path(__file__).resolve().parent
CONSTRAINTS = HERE.parent / "constraints.txt"
PLUGINS = HERE.parent / "plugins"

# One release series (2026.2); tests/openstack/constraints.txt freezes every dependency.
SERVICES = (
    "keystone==30.0.0",
    "openstack-placement==16.0.0",
    "glance==33.0.0",
    "neutron==29.0.0",
    "nova==34.0.0",
    "ironic==39.0.0",
    "magnum==23.0.0",
)
TOOLS = ("gunicorn", "PyMySQL", "python-openstackclient", "python-ironicclient", "python-magnumclient")
DEBIAN_PACKAGES = {"mariadb-server": "/usr/sbin/mariadbd", "rabbitmq-server": "/usr/lib/rabbitmq/bin/rabbitmq-server"}
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


class Unsupported(CloudError):
    """MariaDB or RabbitMQ cannot be installed on this machine: the only reason the live tests skip
    (tests/skips.py); anything that fails once they are installed, their start included, is an error."""


def check_host():
    if os.geteuid() != 0:
        raise Unsupported("the test cloud needs root (it installs MariaDB and RabbitMQ with apt-get)")
    if not Path("/etc/debian_version").exists() or not shutil.which("apt-get"):
        raise Unsupported("the test cloud needs Debian (MariaDB and RabbitMQ come from its packages)")


def ensure_debian_packages():
    """Install MariaDB and RabbitMQ when missing, without letting their init scripts start daemons."""
    missing = [package for package, binary in DEBIAN_PACKAGES.items() if not Path(binary).exists()]
    if not missing:
        return
    saved_policy = POLICY_RC_D.read_bytes() if POLICY_RC_D.exists() else None
    # policy-rc.d exiting 101 tells invoke-rc.d "not allowed": the packages install, nothing starts.
    POLICY_RC_D.write_text("#!/bin/sh\nexit 101\n")
    POLICY_RC_D.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
            result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise Unsupported(
                    f"`{' '.join(argv)}` failed, so MariaDB/RabbitMQ are missing:\n{result.stderr[-2000:]}"
                )
    finally:
        if saved_policy is None:
            POLICY_RC_D.unlink(missing_ok=True)
        else:
            POLICY_RC_D.write_bytes(saved_policy)


def ensure_venv(layout):
    """Create the services' venv once; later bring-ups reuse it (a marker names what it holds)."""
    marker = layout.venv / ".platbench-installed"
    wanted = "\n".join((*SERVICES, *TOOLS, CONSTRAINTS.read_text(), _plugins_fingerprint()))
    if marker.exists() and marker.read_text() == wanted:
        return False
    if not layout.bin("python").exists():
        _run([sys.executable, "-m", "venv", str(layout.venv)], "create the test cloud's venv")
    pip = [str(layout.bin("python")), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-c", str(CONSTRAINTS), *SERVICES, *TOOLS], "install the OpenStack services")
    _run([*pip, "--no-deps", str(PLUGINS)], "install the test cloud's plugins")
    marker.write_text(wanted)
    return True


def _plugins_fingerprint():
    sources = sorted(PLUGINS.glob("*.toml")) + sorted(PLUGINS.glob("*/*.py"))
    return hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()


def _run(argv, what):
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise CloudError(f"could not {what}: `{' '.join(argv[:6])} ...` failed:\n{result.stderr[-3000:]}")
