"""Each service's configuration file, rendered from the layout and this cloud's passwords."""

import json
import shutil

from .backing import database_url, transport_url
from .layout import HOST, REGION

COMPUTE_HOST = "platbench-compute"
PCI_ALIAS = "nvidia-h100"
GPU_MATCH = {"vendor_id": "10de", "product_id": "2330"}
# nova's default filters and PciPassthroughFilter. Not NUMATopologyFilter (kolla's computes run it, see
# openstack_deploy): the fake host reports no NUMA topology, so it would turn every pinned flavor away;
# placement still schedules those on the host's dedicated CPUs (PCPU).
SCHEDULER_FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "PciPassthroughFilter",
)
IRONIC_FAKE_INTERFACES = ("bios", "boot", "console", "deploy", "firmware", "inspect", "management", "power", "raid")
IRONIC_FAKE_INTERFACES += ("rescue", "vendor")


def render_ini(sections):
    """{section: {option: value}} as an ini file (lists are comma-joined, booleans lower-case)."""
    lines = []
    for section, options in sections.items():
        lines.append(f"[{section}]")
        for option, value in options.items():
            if isinstance(value, bool):
                value = str(value).lower()
            elif isinstance(value, (list, tuple)):
                value = ",".join(value)
            lines.append(f"{option} = {value}")
        lines.append("")
    return "\n".join(lines)


def service_auth(layout, password, username):
    """How a service logs in to keystone (keystonemiddleware and its clients of other services)."""
    return {
        "auth_url": layout.url("keystone"),
        "auth_type": "password",
        "project_domain_name": "Default",
        "user_domain_name": "Default",
        "project_name": "service",
        "username": username,
        "password": password,
        "region_name": REGION,
    }


def authtoken(layout, password, username):
    return {
        "www_authenticate_uri": layout.url("keystone"),
        **service_auth(layout, password, username),
        "service_token_roles_required": True,
    }


def common(layout, name):
    return {
        "debug": False,
        "state_path": layout.data_dir / name,
        # `down` waits 10 s before SIGKILL; oslo.service's default grace is 60 s.
        "graceful_shutdown_timeout": 5,
    }


def keystone_conf(layout, secrets):
    keys = layout.data_dir / "keystone"
    return {
        "DEFAULT": {"debug": False},
        "database": {"connection": database_url(layout, secrets["mysql"], "keystone")},
        "token": {"provider": "fernet"},
        "fernet_tokens": {"key_repository": keys / "fernet-keys"},
        "fernet_receipts": {"key_repository": keys / "fernet-keys"},
        "credential": {"key_repository": keys / "credential-keys"},
    }


def placement_conf(layout, secrets):
    return {
        "DEFAULT": {"debug": False},
        "api": {"auth_strategy": "keystone"},
        "placement_database": {"connection": database_url(layout, secrets["mysql"], "placement")},
        "keystone_authtoken": authtoken(layout, secrets["placement"], "placement"),
    }


def glance_conf(layout, secrets):
    images = layout.data_dir / "glance"
    return {
        "DEFAULT": {"debug": False, "enabled_backends": "file:file", "bind_host": HOST},
        "database": {"connection": database_url(layout, secrets["mysql"], "glance")},
        "keystone_authtoken": authtoken(layout, secrets["glance"], "glance"),
        "paste_deploy": {"flavor": "keystone", "config_file": layout.etc_dir / "glance" / "glance-api-paste.ini"},
        "glance_store": {"default_backend": "file"},
        "file": {"filesystem_store_datadir": images / "images"},
        "os_glance_staging_store": {"filesystem_store_datadir": images / "staging"},
        "os_glance_tasks_store": {"filesystem_store_datadir": images / "tasks"},
        "oslo_concurrency": {"lock_path": images / "locks"},
    }


def neutron_conf(layout, secrets):
    return {
        "DEFAULT": {
            **common(layout, "neutron"),
            "core_plugin": "ml2",
            # The router plugin brings the external-network extension (router:external).
            "service_plugins": "router",
            "auth_strategy": "keystone",
            "transport_url": transport_url(layout, secrets["rabbitmq"]),
            "api_paste_config": layout.etc_dir / "neutron" / "api-paste.ini",
            # No agent plugs anything: nothing to tell nova.
            "notify_nova_on_port_status_changes": False,
            "notify_nova_on_port_data_changes": False,
        },
        "database": {"connection": database_url(layout, secrets["mysql"], "neutron")},
        "keystone_authtoken": authtoken(layout, secrets["neutron"], "neutron"),
        "ml2": {
            "type_drivers": "flat,vlan,vxlan",
            "tenant_network_types": "vxlan",
            "mechanism_drivers": "platbench_bind_all",
            "extension_drivers": "port_security",
        },
        "ml2_type_flat": {"flat_networks": "physnet1"},
        "ml2_type_vlan": {"network_vlan_ranges": "physnet1:100:199"},
        "ml2_type_vxlan": {"vni_ranges": "1:1000"},
        "oslo_concurrency": {"lock_path": layout.data_dir / "neutron" / "locks"},
    }


def nova_conf(layout, secrets):
    auth = service_auth(layout, secrets["nova"], "nova")
    return {
        "DEFAULT": {
            **common(layout, "nova"),
            "host": COMPUTE_HOST,
            "my_ip": HOST,
            "transport_url": transport_url(layout, secrets["rabbitmq"]),
            "compute_driver": "platbench_gpu.TwoGpuFakeDriver",
            "instances_path": layout.data_dir / "nova" / "instances",
        },
        "api": {"auth_strategy": "keystone"},
        # Four dedicated CPUs beside the driver's 8 shared vCPUs (the fake host has no real CPUs to check).
        "compute": {"cpu_dedicated_set": "8-11"},
        "wsgi": {"api_paste_config": layout.etc_dir / "nova" / "api-paste.ini"},
        "api_database": {"connection": database_url(layout, secrets["mysql"], "nova_api")},
        "database": {"connection": database_url(layout, secrets["mysql"], "nova")},
        "keystone_authtoken": authtoken(layout, secrets["nova"], "nova"),
        "service_user": {**auth, "send_service_user_token": True},
        "placement": auth,
        "neutron": auth,
        "glance": {"region_name": REGION},
        "ironic": auth,
        # One worker per service: the cloud runs on 2 cores and a few GB.
        "scheduler": {"discover_hosts_in_cells_interval": -1, "workers": 1},
        "filter_scheduler": {"enabled_filters": SCHEDULER_FILTERS, "pci_in_placement": True},
        "pci": {
            "device_spec": json.dumps(GPU_MATCH),
            "alias": json.dumps({"name": PCI_ALIAS, "device_type": "type-PCI", **GPU_MATCH}),
            "report_in_placement": True,
        },
        "conductor": {"workers": 1},
        "oslo_messaging_notifications": {"driver": "noop"},
        "oslo_concurrency": {"lock_path": layout.data_dir / "nova" / "locks"},
        "os_vif_ovs": {"ovsdb_connection": ""},
    }


def ironic_conf(layout, secrets):
    auth = service_auth(layout, secrets["ironic"], "ironic")
    fake = {f"enabled_{kind}_interfaces": "fake" for kind in IRONIC_FAKE_INTERFACES}
    return {
        "DEFAULT": {
            **common(layout, "ironic"),
            "host": "platbench-conductor",
            "auth_strategy": "keystone",
            "transport_url": transport_url(layout, secrets["rabbitmq"]),
            "rpc_transport": "oslo",
            "enabled_hardware_types": "fake-hardware",
            **fake,
            "enabled_network_interfaces": "noop",
            "enabled_storage_interfaces": "noop",
            "default_network_interface": "noop",
        },
        "api": {"host_ip": HOST, "port": layout.port("ironic")},
        "conductor": {"automated_clean": False},
        "dhcp": {"dhcp_provider": "none"},
        "database": {"connection": database_url(layout, secrets["mysql"], "ironic")},
        "keystone_authtoken": authtoken(layout, secrets["ironic"], "ironic"),
        "service_catalog": auth,
        "glance": auth,
        "neutron": auth,
        "nova": {**auth, "send_power_notifications": False},
        "oslo_concurrency": {"lock_path": layout.data_dir / "ironic" / "locks"},
    }


def magnum_conf(layout, secrets):
    auth = service_auth(layout, secrets["magnum"], "magnum")
    return {
        "DEFAULT": {
            **common(layout, "magnum"),
            "host": "platbench-magnum",
            "transport_url": transport_url(layout, secrets["rabbitmq"]),
        },
        "api": {"host": HOST, "port": layout.port("magnum")},
        "database": {"connection": database_url(layout, secrets["mysql"], "magnum")},
        "keystone_authtoken": authtoken(layout, secrets["magnum"], "magnum"),
        "keystone_auth": auth,
        "conductor": {"workers": 1},
        "certificates": {"cert_manager_type": "x509keypair"},
        "cinder_client": {"region_name": REGION},
        "heat_client": {"region_name": REGION},
        "oslo_concurrency": {"lock_path": layout.data_dir / "magnum" / "locks"},
        "oslo_messaging_notifications": {"driver": "noop"},
    }


RENDERERS = {
    "keystone": keystone_conf,
    "placement": placement_conf,
    "glance": glance_conf,
    "neutron": neutron_conf,
    "nova": nova_conf,
    "ironic": ironic_conf,
    "magnum": magnum_conf,
}
# Paste pipelines the wheels install under <venv>/etc/<service>/.
PASTE_FILES = {"glance": "glance-api-paste.ini", "neutron": "api-paste.ini", "nova": "api-paste.ini"}
PASTE_FILES["magnum"] = "api-paste.ini"


# Where each service's WSGI loader looks for its file (glance's name is fixed).
CONFIG_NAMES = {"glance": "glance-api.conf"}


def config_file(layout, name):
    return layout.etc_dir / name / CONFIG_NAMES.get(name, f"{name}.conf")


def write_all(layout, secrets):
    for name, render in RENDERERS.items():
        path = config_file(layout, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(render_ini(render(layout, secrets)))
        if name in PASTE_FILES:
            shutil.copy(layout.venv / "etc" / name / PASTE_FILES[name], path.parent / PASTE_FILES[name])
        (layout.data_dir / name).mkdir(parents=True, exist_ok=True)
