"""Where a test cloud keeps its files and which loopback ports it uses."""

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_STATE_DIR = REPO / ".cache" / "test-cloud"
DEFAULT_PORT_BASE = 19000
HOST = "127.0.0.1"
REGION = "RegionOne"
CLOUD = "platbench-test"
SYSTEM_CLOUD = "platbench-test-system"

# Offsets from TEST_CLOUD_PORT_BASE: two clouds with bases 100 apart never collide.
PORT_OFFSETS = {
    "mysql": 0,
    "rabbitmq": 1,
    "rabbitmq_dist": 2,
    "epmd": 3,
    "keystone": 10,
    "placement": 11,
    "glance": 12,
    "neutron": 13,
    "nova": 14,
    "ironic": 15,
    "magnum": 16,
}

# The services with a database of their own (nova needs two more: api and cell0).
DATABASES = ("keystone", "placement", "glance", "neutron", "nova", "nova_api", "nova_cell0", "ironic", "magnum")
SERVICE_USERS = ("placement", "glance", "neutron", "nova", "ironic", "magnum")


@dataclass(frozen=True)
class Layout:
    state_dir: Path
    port_base: int

    @classmethod
    def from_env(cls, environ=os.environ):
        state_dir = Path(environ.get("TEST_CLOUD_DIR") or DEFAULT_STATE_DIR).resolve()
        raw_base = environ.get("TEST_CLOUD_PORT_BASE") or str(DEFAULT_PORT_BASE)
        if not raw_base.isdigit() or not 1024 <= int(raw_base) <= 65535 - max(PORT_OFFSETS.values()):
            raise SystemExit(
                f"TEST_CLOUD_PORT_BASE={raw_base!r} is not a port number between 1024 and "
                f"{65535 - max(PORT_OFFSETS.values())}; set it to a free range, e.g. 19000."
            )
        return cls(state_dir, int(raw_base))

    def port(self, name):
        return self.port_base + PORT_OFFSETS[name]

    def url(self, name, path=""):
        return f"http://{HOST}:{self.port(name)}{path}"

    # The venv survives `down`; everything else under the state dir is the cloud's data.
    @property
    def venv(self):
        return self.state_dir / "venv"

    def bin(self, name):
        return self.venv / "bin" / name

    @property
    def data_dir(self):
        return self.state_dir / "data"

    @property
    def etc_dir(self):
        return self.state_dir / "etc"

    @property
    def log_dir(self):
        return self.state_dir / "logs"

    @property
    def run_dir(self):
        return self.state_dir / "run"

    @property
    def clouds_yaml(self):
        return self.state_dir / "clouds.yaml"

    @property
    def facts_file(self):
        """Written last by `up`: its presence means the cloud is up."""
        return self.state_dir / "cloud.json"

    @property
    def secrets_file(self):
        return self.run_dir / "secrets.json"

    @property
    def volatile_dirs(self):
        return (self.data_dir, self.etc_dir, self.log_dir, self.run_dir)

    def mysql_socket(self):
        return self.run_dir / "mysqld.sock"


def new_secrets():
    """Passwords for this bring-up only (the cloud is local and thrown away at `down`)."""
    names = ("admin", "mysql", "rabbitmq", *SERVICE_USERS)
    return {name: secrets.token_urlsafe(18) for name in names}


def load_secrets(layout):
    return json.loads(layout.secrets_file.read_text())


def save_secrets(layout, values):
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    layout.secrets_file.touch(mode=0o600)
    layout.secrets_file.write_text(json.dumps(values))
