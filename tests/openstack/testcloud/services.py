"""The cloud's long-running processes: one gunicorn per API, and the workers behind them."""

from . import processes
from .configs import config_file
from .layout import HOST

WSGI_APP = "platbench_testcloud_plugins.wsgi:application"
# service: (its WSGI module, the prefix of its OS_<X>_CONFIG_DIR/FILES variables, or None: --config-file)
APIS = {
    "keystone": ("keystone.wsgi.api", "KEYSTONE"),
    "placement": ("placement.wsgi.api", "PLACEMENT"),
    "glance": ("glance.wsgi.api", "GLANCE"),
    "neutron": ("neutron.wsgi.api", "NEUTRON"),
    "nova": ("nova.wsgi.osapi_compute", "NOVA"),
    "ironic": ("ironic.wsgi.api", None),
    "magnum": ("magnum.wsgi.api", None),
}
# worker name: (service whose config it reads, command in the venv)
WORKERS = {
    "nova-conductor": ("nova", "nova-conductor"),
    "nova-scheduler": ("nova", "nova-scheduler"),
    "nova-compute": ("nova", "platbench-nova-compute"),
    "ironic-conductor": ("ironic", "ironic-conductor"),
    "magnum-conductor": ("magnum", "magnum-conductor"),
}
# nova's loader reads its paste pipeline from the first file of its list: keep its default list
# (api-paste.ini, nova.conf), both in its config dir.
DEFAULT_FILE_LIST = {"nova"}
API_TIMEOUT = 120
API_PROBE_PATHS = {"nova": "/v2.1", "glance": "/versions", "neutron": "/"}


def start_api(layout, name):
    module, env_prefix = APIS[name]
    conf = config_file(layout, name)
    env = {"PLATBENCH_WSGI_MODULE": module, "PLATBENCH_WSGI_ARGV": f"{name}-api"}
    if env_prefix:
        env[f"OS_{env_prefix}_CONFIG_DIR"] = str(conf.parent)
        if name not in DEFAULT_FILE_LIST:
            env[f"OS_{env_prefix}_CONFIG_FILES"] = conf.name
    else:
        env["PLATBENCH_WSGI_ARGV"] += f" --config-file {conf}"
    argv = [
        layout.bin("gunicorn"),
        "--bind",
        f"{HOST}:{layout.port(name)}",
        "--workers",
        "1",
        "--worker-class",
        "gthread",
        "--threads",
        "8",
        "--timeout",
        "300",
        "--name",
        f"{name}-api",
        WSGI_APP,
    ]
    return processes.start(layout, f"{name}-api", argv, env)


def wait_api(layout, name, process):
    url = layout.url(name, API_PROBE_PATHS.get(name, "/"))
    processes.wait_until(
        processes.http_answers(url), f"{name} API at {url}", API_TIMEOUT, layout.log_dir / f"{name}-api.log", process
    )


def start_worker(layout, name):
    service, command = WORKERS[name]
    return processes.start(layout, name, [layout.bin(command), "--config-file", config_file(layout, service)])
