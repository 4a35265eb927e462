# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the kubernetes role renders and checks, computed as data.

The role templates only serialize what these functions return (to_nice_yaml), so every document
can be validated offline: the kubeadm and kubelet configurations against their own types, the
Kubernetes objects (flannel, NVIDIA device plugin, RuntimeClass) against the API's OpenAPI schema.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"
FLANNEL_NAMESPACE = "kube-flannel"
FLANNEL_NAME = "kube-flannel"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
DEVICE_PLUGIN_NAME = "nvidia-device-plugin"
# Interfaces that flannel and the CNI bridge create from the pod network itself: on a second run
# they carry pod addresses, which are no reason to call the pod network overlapping.
POD_NETWORK_INTERFACES = re.compile(r"^(flannel\.\d+|cni\d+|veth.*|kube-ipvs\d+|lo)$")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


class KubernetesConfigError(ValueError):
    """A role input that cannot build a working cluster; the message names the variable and the fix."""


def parse_cpuset(text, variable="kubernetes_reserved_system_cpus"):
    """CPU numbers of a cpuset string such as ``0-1,4``; an error names ``variable``."""
    cpus = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match or (match.group(2) and int(match.group(2)) < int(match.group(1))):
            raise KubernetesConfigError(
                f"{variable}: {text!r} is not a CPU list; write CPU numbers and ranges such as '0-1' or '0,8'"
            )
        first = int(match.group(1))
        cpus.update(range(first, int(match.group(2) or first) + 1))
    return sorted(cpus)


def _network(value, variable):
    try:
        return ipaddress.ip_network(str(value), strict=True)
    except ValueError as exc:
        raise KubernetesConfigError(f"{variable}: {value!r} is not a network in CIDR form ({exc})") from None


def node_networks(facts):
    """The node's IPv4/IPv6 networks from gathered facts, leaving out the pod network's own interfaces."""
    networks = set()
    for interface in facts.get("interfaces") or []:
        if POD_NETWORK_INTERFACES.match(interface):
            continue
        details = facts.get(interface.replace("-", "_")) or facts.get(interface) or {}
        for entry in [details.get("ipv4") or {}] + list(details.get("ipv4_secondaries") or []):
            if entry.get("address") and entry.get("netmask"):
                networks.add(str(ipaddress.ip_interface(f"{entry['address']}/{entry['netmask']}").network))
        for entry in details.get("ipv6") or []:
            if entry.get("address") and entry.get("prefix") and entry.get("scope") != "link":
                networks.add(str(ipaddress.ip_interface(f"{entry['address']}/{entry['prefix']}").network))
    return sorted(networks)


def problems(settings, facts):
    """Messages for every input that would break the cluster on this node; empty when all is well.

    ``settings``: the role's variables (version, supported versions, CIDRs, reserved CPUs, largest
    pinned scale-up, node CIDRs). ``facts``: the node's gathered facts (CPU count, interfaces).
    """
    found = []
    version = str(settings["version"])
    supported = [str(item) for item in settings["supported_versions"]]
    if version not in supported:
        found.append(
            f"kubernetes_version: {version!r} is not a supported minor version; set it to one of "
            f"{', '.join(supported)} (the package repository is pinned per minor, e.g. '1.33')"
        )
    try:
        pod = _network(settings["pod_cidr"], "kubernetes_pod_cidr")
        service = _network(settings["service_cidr"], "kubernetes_service_cidr")
    except KubernetesConfigError as exc:
        return found + [str(exc)]
    if pod.overlaps(service):
        found.append(
            f"kubernetes_pod_cidr {pod} overlaps kubernetes_service_cidr {service}; choose two disjoint "
            "networks (flannel's default pod network is 10.244.0.0/16, kubeadm's service network 10.96.0.0/12)"
        )
    node_cidrs = settings.get("node_cidrs") or []
    source = "kubernetes_node_cidrs" if node_cidrs else "the node's interface addresses (facts)"
    for value in node_cidrs or node_networks(facts):
        network = _network(value, "kubernetes_node_cidrs")
        for name, subnet in (("kubernetes_pod_cidr", pod), ("kubernetes_service_cidr", service)):
            if network.version == subnet.version and network.overlaps(subnet):
                found.append(
                    f"{name} {subnet} overlaps the node network {network} (from {source}); pods and services "
                    f"would shadow real hosts. Set {name} to a private range the nodes do not use"
                )
    try:
        reserved = parse_cpuset(settings["reserved_system_cpus"])
    except KubernetesConfigError as exc:
        return found + [str(exc)]
    cpu_count = int(facts.get("processor_nproc") or facts.get("processor_vcpus") or 0)
    largest = int(settings["largest_pinned_scaleup"])
    if not reserved:
        found.append(
            "kubernetes_reserved_system_cpus is empty; the static CPU manager needs at least one CPU reserved "
            "for the system, e.g. '0'"
        )
    elif cpu_count:
        outside = [cpu for cpu in reserved if cpu >= cpu_count]
        if outside:
            found.append(
                f"kubernetes_reserved_system_cpus names CPUs {outside} that this node does not have "
                f"({cpu_count} CPUs, 0-{cpu_count - 1}); reserve CPUs of the node"
            )
        elif cpu_count - len(reserved) < largest:
            found.append(
                f"kubernetes_reserved_system_cpus {settings['reserved_system_cpus']!r} reserves {len(reserved)} of "
                f"this node's {cpu_count} CPUs, leaving {cpu_count - len(reserved)} for pods, fewer than "
                f"kubernetes_largest_pinned_scaleup ({largest}); reserve fewer CPUs or lower the largest pinned "
                "scale-up your experiments use"
            )
    if settings.get("topology_manager_policy", "best-effort") not in TOPOLOGY_POLICIES:
        found.append(
            f"kubernetes_topology_manager_policy: {settings['topology_manager_policy']!r} is not one of "
            f"{', '.join(TOPOLOGY_POLICIES)}"
        )
    return found


def kubeadm_init_documents(settings):
    """InitConfiguration, ClusterConfiguration and KubeletConfiguration for ``kubeadm init --config``.

    ``settings``: node_name, advertise_address, kubernetes_version (full, e.g. v1.33.4), pod_cidr,
    service_cidr, dns_domain, reserved_system_cpus, topology_manager_policy, cluster_name.
    """
    init = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration",
        "nodeRegistration": {
            "name": settings["node_name"],
            "criSocket": CONTAINERD_SOCKET,
            "imagePullPolicy": "IfNotPresent",
        },
        "localAPIEndpoint": {"bindPort": 6443},
    }
    if settings.get("advertise_address"):
        # Without one, kubeadm takes the address of the default route's interface.
        init["localAPIEndpoint"]["advertiseAddress"] = settings["advertise_address"]
    if settings.get("schedule_on_control_plane"):
        # A one-node lab: the control plane runs the Jobs too.
        init["nodeRegistration"]["taints"] = []
    cluster = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": settings.get("cluster_name", "platbench"),
        "kubernetesVersion": settings["kubernetes_version"],
        "networking": {
            "podSubnet": str(settings["pod_cidr"]),
            "serviceSubnet": str(settings["service_cidr"]),
            "dnsDomain": settings.get("dns_domain", "cluster.local"),
        },
    }
    return [init, cluster, kubelet_configuration(settings)]


def kubelet_configuration(settings):
    """The kubelet settings every node gets (kubeadm stores them in the kubelet-config ConfigMap)."""
    reserved = parse_cpuset(settings["reserved_system_cpus"])
    return {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": CONTAINERD_SOCKET,
        # Exclusive cores for Guaranteed pods with integer CPU requests (the k8s platform's pin cells).
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": ",".join(str(cpu) for cpu in reserved),
        "topologyManagerPolicy": settings.get("topology_manager_policy", "best-effort"),
        "topologyManagerScope": "container",
        "failSwapOn": True,
    }


def parse_join_command(text):
    """API endpoint, token and CA hashes of ``kubeadm token create --print-join-command`` output."""
    words = shlex.split(str(text).strip())
    if len(words) < 3 or words[:2] != ["kubeadm", "join"]:
        raise KubernetesConfigError("the control plane's join command does not start with 'kubeadm join'")
    endpoint, token, hashes = words[2], None, []
    options = iter(words[3:])
    for word in options:
        if word == "--token":
            token = next(options, None)
        elif word == "--discovery-token-ca-cert-hash":
            hashes.append(next(options, None))
    # Never put the token itself in the message: it goes to logs.
    if not token or not re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token):
        raise KubernetesConfigError(
            "the control plane's join command carries no bootstrap token of the form abcdef.0123456789abcdef"
        )
    if not hashes or not all(re.fullmatch(r"sha256:[0-9a-f]{64}", item or "") for item in hashes):
        raise KubernetesConfigError(
            "the control plane's join command carries no --discovery-token-ca-cert-hash sha256:<hex>"
        )
    return {"endpoint": endpoint, "token": token, "ca_cert_hashes": hashes}


def kubeadm_join_document(join_command, node_name):
    """JoinConfiguration of a worker, from the control plane's join command (holds the token: no_log)."""
    parts = parse_join_command(join_command)
    return {
        "apiVersion": KUBEADM_API,
        "kind": "JoinConfiguration",
        "nodeRegistration": {"name": node_name, "criSocket": CONTAINERD_SOCKET, "imagePullPolicy": "IfNotPresent"},
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": parts["endpoint"],
                "token": parts["token"],
                "caCertHashes": parts["ca_cert_hashes"],
            },
        },
    }


def _labels(name):
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "platbench"}


def flannel_manifests(settings):
    """Namespace, RBAC, ConfigMap and DaemonSet of flannel with the VXLAN backend.

    ``settings``: pod_cidr, mtu (the pods' interface MTU: the node's MTU less VXLAN's 50 bytes),
    vni, image (flanneld), cni_plugin_image (copies the flannel CNI binary to /opt/cni/bin).
    """
    labels = _labels("flannel")
    net_conf = {
        "Network": str(settings["pod_cidr"]),
        "EnableIPv4": True,
        "Backend": {"Type": "vxlan", "VNI": int(settings.get("vni", 1)), "Port": int(settings.get("port", 8472))},
    }
    cni_conf = {
        "name": "cbr0",
        "cniVersion": "0.3.1",
        "plugins": [
            {
                "type": "flannel",
                # The bridge flannel delegates to keeps this MTU instead of deriving one (CNI flannel plugin).
                "delegate": {"hairpinMode": True, "isDefaultGateway": True, "mtu": int(settings["mtu"])},
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        # flanneld needs host networking and NET_ADMIN: the privileged Pod Security level.
        "metadata": {
            "name": FLANNEL_NAMESPACE,
            "labels": dict(labels, **{"pod-security.kubernetes.io/enforce": "privileged"}),
        },
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "flannel", "namespace": FLANNEL_NAMESPACE, "labels": labels},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "flannel", "labels": labels},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "flannel", "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "flannel"},
        "subjects": [{"kind": "ServiceAccount", "name": "flannel", "namespace": FLANNEL_NAMESPACE}],
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-flannel-cfg", "namespace": FLANNEL_NAMESPACE, "labels": labels},
        "data": {
            "net-conf.json": json.dumps(net_conf, indent=2, sort_keys=True) + "\n",
            "cni-conf.json": json.dumps(cni_conf, indent=2, sort_keys=True) + "\n",
        },
    }
    host_path = [
        ("run", "/run/flannel", "DirectoryOrCreate"),
        ("cni-plugin", "/opt/cni/bin", "DirectoryOrCreate"),
        ("cni", "/etc/cni/net.d", "DirectoryOrCreate"),
        ("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
    ]
    volumes = [{"name": name, "hostPath": {"path": path, "type": kind}} for name, path, kind in host_path]
    volumes.append({"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}})
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": FLANNEL_NAME, "namespace": FLANNEL_NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": "flannel",
                    # Every node, the tainted control plane included, needs the overlay.
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "initContainers": [
                        {
                            "name": "install-cni-plugin",
                            "image": settings["cni_plugin_image"],
                            "command": ["cp"],
                            "args": ["-f", "/flannel", "/opt/cni/bin/flannel"],
                            "volumeMounts": [{"name": "cni-plugin", "mountPath": "/opt/cni/bin"}],
                        },
                        {
                            "name": "install-cni",
                            "image": settings["image"],
                            "command": ["cp"],
                            "args": ["-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"],
                            "volumeMounts": [
                                {"name": "cni", "mountPath": "/etc/cni/net.d"},
                                {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
                            ],
                        },
                    ],
                    "containers": [
                        {
                            "name": "kube-flannel",
                            "image": settings["image"],
                            "command": ["/opt/bin/flanneld"],
                            "args": ["--ip-masq", "--kube-subnet-mgr"],
                            "env": [
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {
                                    "name": "POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
                            ],
                            "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                            "securityContext": {"privileged": False, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
                            "volumeMounts": [
                                {"name": "run", "mountPath": "/run/flannel"},
                                {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
                                {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                            ],
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
    return [namespace, account, role, binding, config, daemonset]


def nvidia_manifests(settings):
    """The ``nvidia`` RuntimeClass and the NVIDIA device plugin DaemonSet (on nodes labelled as GPU nodes).

    ``settings``: image (nvcr.io/nvidia/k8s-device-plugin:<version>), node_labels (the labels the role
    puts on nodes that keep a GPU).
    """
    labels = _labels(DEVICE_PLUGIN_NAME)
    node_selector = {str(key): str(value) for key, value in dict(settings["node_labels"]).items()}
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia", "labels": _labels("nvidia-runtime")},
        # The containerd runtime of that name, written by the role on GPU nodes.
        "handler": "nvidia",
        "scheduling": {"nodeSelector": node_selector},
    }
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DEVICE_PLUGIN_NAME, "namespace": DEVICE_PLUGIN_NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    # The plugin itself needs the NVIDIA libraries: it runs under the nvidia runtime.
                    "runtimeClassName": "nvidia",
                    "nodeSelector": node_selector,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "nvidia-device-plugin",
                            "image": settings["image"],
                            "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "true"}],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "device-plugin",
                            "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
                        }
                    ],
                },
            },
        },
    }
    return [runtime_class, daemonset]
