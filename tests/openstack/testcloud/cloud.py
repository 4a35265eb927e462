"""Bring the whole test cloud up, report on it, and take it down."""

import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from . import backing, bootstrap, configs, install, processes, services
from .layout import CLOUD, HOST, PORT_OFFSETS, REGION, SYSTEM_CLOUD, load_secrets, new_secrets, save_secrets
from .processes import CloudError

IRONIC_DRIVER_TIMEOUT = 90
MAGNUM_SETTLE_SECONDS = 5


def is_up(layout):
    return layout.facts_file.exists() and bool(processes.recorded_pids(layout))


def check_ports_free(layout):
    for name in PORT_OFFSETS:
        port = layout.port(name)
        if processes.port_in_use(port):
            raise CloudError(
                f"port {port} on {HOST} ({name}) is already in use; stop what uses it or pick another "
                f"range with TEST_CLOUD_PORT_BASE (now {layout.port_base})."
            )


def up(layout, say=print):
    if is_up(layout):
        say(f"test cloud already up in {layout.state_dir}")
        return facts(layout)
    install.check_host()
    started = time.monotonic()
    install.ensure_debian_packages()
    check_ports_free(layout)
    if install.ensure_venv(layout):
        say(f"installed the test cloud's venv in {time.monotonic() - started:.0f}s")
    install_seconds = time.monotonic() - started
    remove_data(layout)
    secrets = new_secrets()
    save_secrets(layout, secrets)
    configs.write_all(layout, secrets)
    try:
        timings = _bring_up(layout, secrets, say)
        write_clouds_yaml(layout, secrets)
        ironic_drivers = _wait_ironic_drivers(layout)
        magnum, magnum_reason = _magnum_state(layout)
    except BaseException:
        say("bring-up failed: stopping what started (logs stay in %s)" % layout.log_dir)
        processes.stop_all(layout)
        raise
    timings["install_s"] = round(install_seconds, 1)
    record = {
        "endpoints": endpoints(layout),
        "magnum": magnum,
        "magnum_reason": magnum_reason,
        "ironic_drivers": ironic_drivers,
        "timings": timings,
        "port_base": layout.port_base,
    }
    layout.facts_file.write_text(json.dumps(record, indent=2))
    say(f"test cloud up in {timings['bring_up_s']}s; clouds.yaml: {layout.clouds_yaml}")
    return record


def _bring_up(layout, secrets, say):
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        rabbit = pool.submit(backing.start_rabbitmq, layout, secrets["rabbitmq"])
        # A start failure (our own configuration included) is an error with the daemon's log, not Unsupported:
        # only what cannot be installed is (install.py).
        try:
            backing.start_mysql(layout)
            backing.create_databases(layout, secrets["mysql"])
        except CloudError as error:
            raise CloudError(f"MariaDB did not start: {error}") from error
        keystone = pool.submit(_keystone, layout, secrets)
        apis = {name: pool.submit(_service, layout, name) for name in bootstrap.SCHEMA_SYNCS}
        try:
            rabbit.result()
        except CloudError as error:
            raise CloudError(f"RabbitMQ did not start: {error}\n{backing.rabbitmq_log_tail(layout)}") from error
        keystone.result()
        say(f"keystone up after {time.monotonic() - started:.0f}s")
        bootstrap.register_services(layout, secrets)
        api_processes = {name: future.result() for name, future in apis.items()}
    # The workers log in to keystone as they start: only once their users exist.
    for worker in services.WORKERS:
        services.start_worker(layout, worker)
    for name, process in api_processes.items():
        services.wait_api(layout, name, process)
    say(f"APIs up after {time.monotonic() - started:.0f}s")
    _check_alive(layout, [worker for worker in services.WORKERS if not worker.startswith("magnum")])
    bootstrap.map_compute_host(layout)
    return {"bring_up_s": round(time.monotonic() - started, 1)}


def _check_alive(layout, names):
    alive = processes.recorded_pids(layout)
    for name in names:
        if name not in alive:
            log = layout.log_dir / f"{name}.log"
            raise CloudError(f"{name} exited. Last lines of {log}:\n{processes.log_tail(log)}")


def _keystone(layout, secrets):
    bootstrap.sync_keystone(layout, secrets)
    process = services.start_api(layout, "keystone")
    services.wait_api(layout, "keystone", process)


def _service(layout, name):
    """Sync one service's schema, then start its API."""
    bootstrap.SCHEMA_SYNCS[name](layout)
    return services.start_api(layout, name)


def _magnum_state(layout):
    time.sleep(MAGNUM_SETTLE_SECONDS)
    try:
        _check_alive(layout, ("magnum-api", "magnum-conductor"))
    except CloudError as error:
        return False, str(error)
    return True, (
        "magnum-api and magnum-conductor run with the test cloud's no-orchestration driver: templates and "
        "cluster requests are validated, clusters end CREATE_FAILED (no Heat or Cluster API; see the README)"
    )


def _wait_ironic_drivers(layout):
    """The conductor registers its hardware types shortly after it starts; listing needs system scope."""
    env = cloud_env(layout)
    argv = [layout.bin("openstack"), "--os-cloud", SYSTEM_CLOUD, "baremetal", "driver", "list", "-f", "json"]
    deadline = time.monotonic() + IRONIC_DRIVER_TIMEOUT
    for _attempt in range(IRONIC_DRIVER_TIMEOUT):
        result = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, check=False)
        if result.returncode == 0:
            drivers = sorted(entry["name"] for entry in json.loads(result.stdout))
            if "fake-hardware" in drivers:
                return drivers
        if time.monotonic() > deadline:
            break
        time.sleep(2)
    log = layout.log_dir / "ironic-conductor.log"
    raise CloudError(f"ironic never listed fake-hardware. Last lines of {log}:\n{processes.log_tail(log)}")


def endpoints(layout):
    return {
        "identity": layout.url("keystone"),
        "placement": layout.url("placement"),
        "image": layout.url("glance"),
        "network": layout.url("neutron"),
        "compute": layout.url("nova", "/v2.1"),
        "baremetal": layout.url("ironic"),
        "container-infra": layout.url("magnum", "/v1"),
    }


def cloud_env(layout):
    return {"OS_CLIENT_CONFIG_FILE": str(layout.clouds_yaml), "PATH": f"{layout.venv / 'bin'}:/usr/bin:/bin"}


def write_clouds_yaml(layout, secrets):
    auth = {
        "auth_url": layout.url("keystone"),
        "username": "admin",
        "password": secrets["admin"],
        "user_domain_name": "Default",
    }
    clouds = {
        "clouds": {
            CLOUD: {
                "auth": {**auth, "project_name": "admin", "project_domain_name": "Default"},
                "region_name": REGION,
                "identity_api_version": 3,
            },
            SYSTEM_CLOUD: {
                "auth": {**auth, "system_scope": "all"},
                "region_name": REGION,
                "identity_api_version": 3,
            },
        }
    }
    layout.clouds_yaml.touch(mode=0o600)
    # JSON is YAML: no YAML library needed in the controller's python.
    layout.clouds_yaml.write_text(json.dumps(clouds, indent=2) + "\n")


def facts(layout):
    return json.loads(layout.facts_file.read_text())


def memory_rss_kib(layout):
    total = 0
    for pid in processes.session_pids(layout):
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
        except FileNotFoundError:
            continue
    return total


def status(layout):
    alive = processes.recorded_pids(layout)
    return {
        "state_dir": str(layout.state_dir),
        "up": is_up(layout),
        "processes": alive,
        "memory_rss_mib": round(memory_rss_kib(layout) / 1024),
    }


def remove_data(layout):
    for directory in layout.volatile_dirs:
        shutil.rmtree(directory, ignore_errors=True)
    for path in (layout.facts_file, layout.clouds_yaml):
        path.unlink(missing_ok=True)


def down(layout, say=print):
    survivors = processes.stop_all(layout)
    if survivors:
        raise CloudError(f"processes {survivors} of the test cloud survived SIGKILL; data left in {layout.state_dir}")
    remove_data(layout)
    say(f"test cloud in {layout.state_dir} stopped and its data removed (venv kept)")


__all__ = ["down", "load_secrets", "status", "up"]
