"""The kubernetes role, which no development machine can run for real (no kubelet, no GPU), checked by
what it renders (validated against the API's and kubeadm's own types), its precheck, check mode against
localhost, and a join that must never print its token."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import tomllib
import yaml
from playbook_run import ENV, run_playbook

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.platbench.lab.plugins.plugin_utils.kubernetes import kubernetes_config as kc  # noqa: E402

SCHEMAS = REPO / "tests/unit/data/kubernetes/schemas"
KUBERNETES_SCHEMA_VERSION = "1.33.0"
ROLE_DEFAULTS = yaml.safe_load((REPO / "roles/kubernetes/defaults/main.yml").read_text())

FLANNEL = {
    "pod_cidr": ROLE_DEFAULTS["kubernetes_pod_cidr"],
    "mtu": ROLE_DEFAULTS["kubernetes_flannel_mtu"],
    "vni": ROLE_DEFAULTS["kubernetes_flannel_vni"],
    "image": ROLE_DEFAULTS["kubernetes_flannel_image"],
    "cni_plugin_image": ROLE_DEFAULTS["kubernetes_flannel_cni_plugin_image"],
}
NVIDIA = {
    "image": ROLE_DEFAULTS["kubernetes_nvidia_device_plugin_image"],
    "node_labels": ROLE_DEFAULTS["kubernetes_gpu_node_labels"],
}
INIT = {
    "node_name": "k8s-cp",
    "advertise_address": "192.0.2.10",
    "kubernetes_version": "v1.33.4",
    "cluster_name": "platbench",
    "pod_cidr": "10.244.0.0/16",
    "service_cidr": "10.96.0.0/12",
    "dns_domain": "cluster.local",
    "reserved_system_cpus": "0-1",
    "topology_manager_policy": "best-effort",
    "schedule_on_control_plane": False,
}
# A made-up token and CA hash, in the shape kubeadm prints them.
FAKE_TOKEN = "q7w3zk.m2v9x4c8b1n6p0rt"
FAKE_HASH = "sha256:" + "3f" * 32
JOIN_COMMAND = f"kubeadm join 192.0.2.10:6443 --token {FAKE_TOKEN} --discovery-token-ca-cert-hash {FAKE_HASH} "
SETTINGS = {
    "version": "1.33",
    "supported_versions": ["1.31", "1.32", "1.33"],
    "pod_cidr": "10.244.0.0/16",
    "service_cidr": "10.96.0.0/12",
    "node_cidrs": [],
    "reserved_system_cpus": "0",
    "largest_pinned_scaleup": 4,
    "topology_manager_policy": "best-effort",
}
FACTS = {
    "processor_nproc": 8,
    "interfaces": ["lo", "eth0", "flannel.1", "cni0"],
    "lo": {"ipv4": {"address": "127.0.0.1", "netmask": "255.0.0.0"}},
    "eth0": {"ipv4": {"address": "192.168.10.5", "netmask": "255.255.255.0"}},
    # flannel's own interfaces carry pod addresses on a second run: no overlap to report.
    "flannel_1": {"ipv4": {"address": "10.244.0.0", "netmask": "255.255.255.255"}},
    "cni0": {"ipv4": {"address": "10.244.0.1", "netmask": "255.255.255.0"}},
}


def schema(kind):
    return json.loads((SCHEMAS / f"{kind}.json").read_text())


def check_schema(document):
    jsonschema.validate(document, schema(document["kind"]))


def rendered_objects():
    return kc.flannel_manifests(FLANNEL) + kc.nvidia_manifests(NVIDIA)


@pytest.mark.parametrize("index", range(len(rendered_objects())))
def test_every_rendered_kubernetes_object_is_valid_for_the_pinned_api(index):
    obj = rendered_objects()[index]
    kubernetes_validate.validate(obj, KUBERNETES_SCHEMA_VERSION, strict=True)


def test_the_api_validation_catches_a_misspelled_field():
    daemonset = copy.deepcopy(kc.flannel_manifests(FLANNEL)[-1])
    daemonset["spec"]["template"]["spec"]["hostNetwrok"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_SCHEMA_VERSION, strict=True)


def test_flannel_uses_vxlan_the_pod_network_and_the_mtu():
    config = next(obj for obj in kc.flannel_manifests(FLANNEL) if obj["kind"] == "ConfigMap")
    net_conf = json.loads(config["data"]["net-conf.json"])
    cni_conf = json.loads(config["data"]["cni-conf.json"])
    assert net_conf["Network"] == "10.244.0.0/16"
    assert net_conf["Backend"]["Type"] == "vxlan"
    assert cni_conf["plugins"][0]["delegate"]["mtu"] == 1450
    images = {
        container["image"]
        for obj in kc.flannel_manifests(FLANNEL)
        if obj["kind"] == "DaemonSet"
        for key in ("initContainers", "containers")
        for container in obj["spec"]["template"]["spec"][key]
    }
    assert images == {FLANNEL["image"], FLANNEL["cni_plugin_image"]}
    assert all(":" in image and not image.endswith(":latest") for image in images)


def test_device_plugin_and_runtime_class_select_the_gpu_nodes():
    runtime_class, daemonset = kc.nvidia_manifests(NVIDIA)
    assert runtime_class["handler"] == "nvidia" and runtime_class["metadata"]["name"] == "nvidia"
    assert runtime_class["scheduling"]["nodeSelector"] == {"platbench.io/gpu": "true"}
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"platbench.io/gpu": "true"}
    assert pod["containers"][0]["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:v")


def test_kubeadm_init_documents_match_their_types_and_settings():
    init, cluster, kubelet = kc.kubeadm_init_documents(INIT)
    for document in (init, cluster, kubelet):
        check_schema(document)
    assert cluster["networking"] == {
        "podSubnet": "10.244.0.0/16",
        "serviceSubnet": "10.96.0.0/12",
        "dnsDomain": "cluster.local",
    }
    assert kubelet["cgroupDriver"] == "systemd"
    assert kubelet["cpuManagerPolicy"] == "static"
    assert kubelet["reservedSystemCPUs"] == "0,1"
    assert kubelet["topologyManagerPolicy"] == "best-effort"
    assert "taints" not in init["nodeRegistration"]
    one_node = kc.kubeadm_init_documents(dict(INIT, schedule_on_control_plane=True))[0]
    check_schema(one_node)
    assert one_node["nodeRegistration"]["taints"] == []


def test_join_configuration_matches_its_type():
    document = kc.kubeadm_join_document(JOIN_COMMAND, "k8s-gpu1")
    check_schema(document)
    token = document["discovery"]["bootstrapToken"]
    assert token == {"apiServerEndpoint": "192.0.2.10:6443", "token": FAKE_TOKEN, "caCertHashes": [FAKE_HASH]}


def test_a_broken_join_command_fails_without_repeating_the_token():
    with pytest.raises(kc.KubernetesConfigError) as error:
        kc.parse_join_command(f"kubeadm join 192.0.2.10:6443 --token {FAKE_TOKEN}")
    assert "discovery-token-ca-cert-hash" in str(error.value) and FAKE_TOKEN not in str(error.value)


@pytest.mark.parametrize(
    "kind, path, misspelled",
    [
        ("InitConfiguration", ["nodeRegistration"], "criSockets"),
        ("ClusterConfiguration", ["networking"], "podSubnets"),
        ("ClusterConfiguration", [], "kubernetesVerison"),
        ("JoinConfiguration", ["discovery", "bootstrapToken"], "caCertHash"),
        ("KubeletConfiguration", [], "cpuManagerPolicies"),
    ],
)
def test_each_schema_rejects_a_misspelled_field(kind, path, misspelled):
    documents = kc.kubeadm_init_documents(INIT) + [kc.kubeadm_join_document(JOIN_COMMAND, "k8s-gpu1")]
    document = copy.deepcopy(next(doc for doc in documents if doc["kind"] == kind))
    check_schema(document)
    level = document
    for key in path:
        level = level[key]
    level[misspelled] = "x"
    with pytest.raises(jsonschema.ValidationError, match=misspelled):
        check_schema(document)


def test_schemas_reject_wrong_values():
    kubelet = kc.kubelet_configuration(INIT)
    with pytest.raises(jsonschema.ValidationError):
        check_schema(dict(kubelet, cgroupDriver="systemD"))
    with pytest.raises(jsonschema.ValidationError):
        check_schema(dict(kubelet, reservedSystemCPUs="0-"))


def test_good_inputs_have_no_problem_even_with_flannel_interfaces_up():
    assert kc.problems(SETTINGS, FACTS) == []


@pytest.mark.parametrize(
    "change, words",
    [
        ({"version": "1.29"}, ["kubernetes_version", "'1.29'", "1.31, 1.32, 1.33"]),
        (
            {"pod_cidr": "192.168.0.0/16"},
            ["kubernetes_pod_cidr 192.168.0.0/16 overlaps the node network 192.168.10.0/24"],
        ),
        ({"node_cidrs": ["10.244.8.0/22"]}, ["kubernetes_pod_cidr", "10.244.8.0/22", "kubernetes_node_cidrs"]),
        ({"pod_cidr": "10.96.0.0/16"}, ["kubernetes_pod_cidr 10.96.0.0/16 overlaps kubernetes_service_cidr"]),
        (
            {"reserved_system_cpus": "0-4"},
            ["reserves 5 of this node's 8 CPUs, leaving 3", "kubernetes_largest_pinned_scaleup (4)"],
        ),
        ({"reserved_system_cpus": "0,9"}, ["kubernetes_reserved_system_cpus names CPUs [9]"]),
        ({"reserved_system_cpus": "a-b"}, ["kubernetes_reserved_system_cpus: 'a-b' is not a CPU list"]),
        ({"pod_cidr": "10.244.0.1/16"}, ["kubernetes_pod_cidr: '10.244.0.1/16' is not a network"]),
    ],
)
def test_each_bad_input_gets_a_message_naming_the_variable(change, words):
    found = kc.problems(dict(SETTINGS, **change), FACTS)
    assert len(found) == 1, found
    for word in words:
        assert word in found[0]


def test_containerd_config_uses_systemd_cgroups_and_the_nvidia_runtime_only_on_gpu_nodes(tmp_path):
    configs = {}
    for gpu in (False, True):
        dest = tmp_path / f"config-{gpu}.toml"
        variables = {"kubernetes_gpu": gpu, "kubernetes_pause_image": ROLE_DEFAULTS["kubernetes_pause_image"]}
        subprocess.run(
            [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.template"]
            + ["-a", f"src={REPO}/roles/kubernetes/templates/containerd-config.toml.j2 dest={dest}"]
            + ["-e", json.dumps(variables)],
            cwd=REPO,
            env=ENV,
            check=True,
            capture_output=True,
            timeout=120,
        )
        configs[gpu] = tomllib.loads(dest.read_text())
    for config in configs.values():
        assert config["version"] == 2
        runtimes = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
        assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert "nvidia" not in configs[False]["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    nvidia = configs[True]["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}


def run_play(tmp_path, tasks, variables, *options):
    plays = [{"name": "kubernetes role test", "hosts": "localhost", "tasks": tasks}]
    variables = dict(variables, ansible_python_interpreter=sys.executable)
    log = {"ANSIBLE_LOG_PATH": str(tmp_path / "ansible.log")}
    return run_playbook(plays, tmp_path, variables, "-c", "local", *options, env=log)


def test_bad_inputs_stop_the_role_before_anything_changes(tmp_path):
    variables = {
        "kubernetes_version": "1.29",
        "kubernetes_node_cidrs": ["10.244.0.0/24"],
        "kubernetes_reserved_system_cpus": "0-%d" % (os.cpu_count() - 1),
        "kubernetes_largest_pinned_scaleup": 2,
    }
    run = run_play(
        tmp_path, [{"ansible.builtin.import_role": {"name": "platbench.lab.kubernetes"}}], variables, "--check"
    )
    output = run.output
    assert run.rc != 0, output[-3000:]
    assert "Fail on inputs that cannot build a working cluster" in output
    assert "kubernetes_version: '1.29' is not a supported minor version" in output
    assert (
        "kubernetes_pod_cidr 10.244.0.0/16 overlaps the node network 10.244.0.0/24 (from kubernetes_node_cidrs)"
        in output
    )
    assert "leaving 0 for pods, fewer than kubernetes_largest_pinned_scaleup (2)" in output
    assert "changed=0" in output


def test_argument_spec_rejects_an_unknown_topology_policy(tmp_path):
    run = run_play(
        tmp_path,
        [{"ansible.builtin.import_role": {"name": "platbench.lab.kubernetes"}}],
        {"kubernetes_topology_manager_policy": "single-numa"},
        "--check",
    )
    output = run.output
    assert run.rc != 0
    assert "kubernetes_topology_manager_policy" in output and "single-numa-node" in output


def test_check_mode_on_this_host_says_what_it_would_do_and_skips_the_gpu_part(tmp_path):
    variables = {
        "kubernetes_node_role": "control_plane",
        "kubernetes_control_plane_host": "localhost",
        "kubernetes_largest_pinned_scaleup": 1,
        "kubernetes_reserved_system_cpus": "0",
        "platbench_gpu_assignment": {},
    }
    run = run_play(
        tmp_path, [{"ansible.builtin.import_role": {"name": "platbench.lab.kubernetes"}}], variables, "--check"
    )
    output = run.output
    assert run.rc == 0, output[-5000:]
    assert "GPU part skipped on localhost: it keeps no NVIDIA GPU" in output
    assert (
        "kubelet, kubeadm, kubectl 1.33.x would be installed from https://pkgs.k8s.io/core:/stable:/v1.33/deb/"
        in output
    )
    assert "a real run would write the kubeadm configuration, run kubeadm init" in output
    assert "No workload image archive to import" in output
    assert "failed=0" in output


def test_join_tasks_never_print_the_token(tmp_path):
    join_config = tmp_path / "join.yaml"
    variables = {
        "kubernetes_join_command": {"stdout": JOIN_COMMAND},
        "kubernetes_join_config_path": str(join_config),
        "kubernetes_node_name": "k8s-gpu1",
    }
    tasks = [{"ansible.builtin.include_role": {"name": "platbench.lab.kubernetes", "tasks_from": "join_node"}}]
    run = run_play(tmp_path, tasks, variables, "-vvv")
    output = run.output
    # No kubeadm here: the join itself fails, after the JoinConfiguration holding the token was written.
    assert run.rc != 0
    assert "Write the JoinConfiguration" in output and "Run kubeadm join" in output
    assert "censored" in output or "output has been hidden" in output
    assert not join_config.exists(), "the JoinConfiguration holding the token must be removed"
    assert FAKE_TOKEN not in output
    assert FAKE_TOKEN.split(".")[1] not in output
    # Nowhere but in the test's input (the extra vars file): not in the log, the runner's events or its output.
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "extravars":
            assert FAKE_TOKEN not in path.read_text(errors="replace"), path
    assert (tmp_path / "ansible.log").exists()
