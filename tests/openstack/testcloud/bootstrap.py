"""Databases synced, keystone bootstrapped, the catalog written, nova's cells mapped."""

import json
import subprocess
import time
from pathlib import Path

from . import processes
from .configs import COMPUTE_HOST, config_file
from .layout import REGION, SERVICE_USERS
from .processes import CloudError

KEYSTONE_SETUP = Path(__file__).resolve().parent / "keystone_setup.py"
# Catalog: user -> (service name, service type, URL path under the service's port)
CATALOG = {
    "placement": ("placement", "placement", ""),
    "glance": ("glance", "image", ""),
    "neutron": ("neutron", "network", ""),
    "nova": ("nova", "compute", "/v2.1"),
    "ironic": ("ironic", "baremetal", ""),
    "magnum": ("magnum", "container-infra", "/v1"),
}
DISCOVER_TIMEOUT = 120


def run(layout, argv, what, stdin=None):
    """Run a command from the venv; its output goes to logs/<what>.log (a failure shows its tail)."""
    log = layout.log_dir / f"{what}.log"
    with open(log, "ab") as out:
        result = subprocess.run(
            [str(arg) for arg in argv],
            input=stdin,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=layout.state_dir,
            check=False,
        )
    if result.returncode != 0:
        raise CloudError(f"{what} failed (exit {result.returncode}). Last lines of {log}:\n{processes.log_tail(log)}")


def manage(layout, service, command, *args):
    return [layout.bin(command), "--config-file", config_file(layout, service), *args]


def sync_keystone(layout, secrets):
    keys = layout.data_dir / "keystone"
    for directory in ("fernet-keys", "credential-keys"):
        (keys / directory).mkdir(parents=True, exist_ok=True, mode=0o700)
    run(layout, manage(layout, "keystone", "keystone-manage", "db_sync"), "keystone-db-sync")
    owner = ["--keystone-user", "root", "--keystone-group", "root"]
    run(layout, manage(layout, "keystone", "keystone-manage", "fernet_setup", *owner), "keystone-fernet-setup")
    run(layout, manage(layout, "keystone", "keystone-manage", "credential_setup", *owner), "keystone-credential-setup")
    # The password goes in by environment, not on a command line that `ps` would show.
    bootstrap = manage(
        layout,
        "keystone",
        "keystone-manage",
        "bootstrap",
        "--bootstrap-region-id",
        REGION,
        "--bootstrap-public-url",
        layout.url("keystone"),
        "--bootstrap-internal-url",
        layout.url("keystone"),
        "--bootstrap-admin-url",
        layout.url("keystone"),
    )
    log = layout.log_dir / "keystone-bootstrap.log"
    with open(log, "ab") as out:
        result = subprocess.run(
            [str(arg) for arg in bootstrap],
            env={"OS_BOOTSTRAP_PASSWORD": secrets["admin"], "PATH": "/usr/bin:/bin"},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        raise CloudError(f"keystone bootstrap failed. Last lines of {log}:\n{processes.log_tail(log)}")


def sync_nova(layout):
    run(layout, manage(layout, "nova", "nova-manage", "api_db", "sync"), "nova-api-db-sync")
    run(layout, manage(layout, "nova", "nova-manage", "cell_v2", "map_cell0"), "nova-map-cell0")
    run(layout, manage(layout, "nova", "nova-manage", "cell_v2", "create_cell", "--name", "cell1"), "nova-create-cell")
    run(layout, manage(layout, "nova", "nova-manage", "db", "sync"), "nova-db-sync")


# Every service but keystone: its schema, each independent of the others (run in parallel).
SCHEMA_SYNCS = {
    "placement": lambda layout: run(
        layout, manage(layout, "placement", "placement-manage", "db", "sync"), "placement-db-sync"
    ),
    "glance": lambda layout: run(layout, manage(layout, "glance", "glance-manage", "db_sync"), "glance-db-sync"),
    "neutron": lambda layout: run(
        layout, manage(layout, "neutron", "neutron-db-manage", "upgrade", "heads"), "neutron-db-sync"
    ),
    "nova": sync_nova,
    "ironic": lambda layout: run(layout, manage(layout, "ironic", "ironic-dbsync", "create_schema"), "ironic-db-sync"),
    "magnum": lambda layout: run(layout, manage(layout, "magnum", "magnum-db-manage", "upgrade"), "magnum-db-sync"),
}


def register_services(layout, secrets):
    plan = {
        "auth_url": layout.url("keystone"),
        "admin_password": secrets["admin"],
        "region": REGION,
        "services": [
            {
                "user": user,
                "password": secrets[user],
                "name": CATALOG[user][0],
                "type": CATALOG[user][1],
                "url": layout.url(user, CATALOG[user][2]),
            }
            for user in SERVICE_USERS
        ],
        "magnum_trustee": {"domain": "magnum", "user": "magnum_domain_admin", "password": secrets["magnum"]},
    }
    run(layout, [layout.bin("python"), KEYSTONE_SETUP], "keystone-setup", stdin=json.dumps(plan).encode())


def map_compute_host(layout):
    """discover_hosts until nova-compute's host is in cell1 (it appears once the service registered)."""
    log = layout.log_dir / "nova-compute.log"
    deadline = time.monotonic() + DISCOVER_TIMEOUT
    for _attempt in range(DISCOVER_TIMEOUT):
        result = subprocess.run(
            [str(arg) for arg in manage(layout, "nova", "nova-manage", "cell_v2", "list_hosts")],
            capture_output=True,
            text=True,
            check=False,
        )
        if COMPUTE_HOST in result.stdout:
            return
        subprocess.run(
            [str(arg) for arg in manage(layout, "nova", "nova-manage", "cell_v2", "discover_hosts")],
            capture_output=True,
            check=False,
        )
        if time.monotonic() > deadline:
            break
        time.sleep(2)
    raise CloudError(
        f"nova-compute's host {COMPUTE_HOST} never registered. Last lines of {log}:\n{processes.log_tail(log)}"
    )
