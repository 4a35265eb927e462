#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Say which platforms of the registry this host can run now, and why not."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: platform_status
short_description: Work out which platbench platforms a host can run now, and why not
description:
  - Checks every platform of the platform registry (C(plugins/module_utils/platforms.py)) against the host,
    requirement by requirement (bare-metal venv, container engine, workload image, KVM or QEMU, libvirtd, guest image,
    Apptainer and its SIF, a Kubernetes cluster with this host's node Ready and holding the workload image), and
    returns for each whether it is ready and, if not, why and what to run.
  - Reads the bare-metal venv, the guest image description and the SIF description on the host itself, asks
    C(apptainer --version) which Apptainer is installed and each container engine (C(docker), C(podman)) for its
    version and the workload image's id; takes the capability facts of M(platbench.lab.host_facts) as an argument.
  - Fails, naming the unknown labels and the known ones, when O(platforms) names a platform the registry does not
    know (for example a typo in the inventory's C(platbench_platforms)).
  - Changes nothing.
version_added: "0.4.0"
author: platbench developers (@platbench)
options:
  facts:
    description: The host's capability facts, C(ansible_facts.platbench) from M(platbench.lab.host_facts).
    type: dict
    required: true
  prefix:
    description: Where platbench.lab.workload_env installed the bare-metal environment (C(PREFIX/venv/bin/python)).
    type: path
    default: /opt/platbench
  image:
    description: The workload image reference, named in the reason when it is not built.
    type: str
    default: platbench/workload:latest
  guest_image:
    description: The guest image description written by platbench.lab.guest_image (vm, vmcn).
    type: path
    default: /var/lib/platbench/guest/current.json
  kubeconfig:
    description:
      - The kubeconfig the k8s platform creates its Jobs with; its absence means this host is no Kubernetes node
        (k8s is then skipped, with the reason).
    type: path
    default: /etc/kubernetes/admin.conf
  k8s_node:
    description:
      - This host's Kubernetes node name; empty means its hostname in lower case, as kubelet names it by default.
    type: str
    default: ""
  k8s_nodes:
    description:
      - What C(kubernetes.core.k8s_info) returned (registered, with C(ignore_errors=true)) when asked for the
        cluster's Nodes with O(kubeconfig); a failure becomes the reason k8s is not ready. Empty when not asked.
    type: dict
    default: {}
  sif_description:
    description:
      - The SIF description written by platbench.lab.apptainer (sg); its C(sif) file must exist too.
    type: path
    default: /var/lib/platbench/sif/current.json
  firecracker_binary:
    description: The Firecracker binary (mvm); installed by platbench.lab.firecracker.
    type: path
    default: /usr/local/bin/firecracker
  firecracker_jailer:
    description: The Firecracker jailer binary (mvm).
    type: path
    default: /usr/local/bin/jailer
  kvm_device:
    description: The KVM device Firecracker opens read-write; mvm is skipped, with the reason, where it cannot be.
    type: path
    default: /dev/kvm
  platforms:
    description:
      - The platforms the caller asks about, checked against the registry; every platform is always returned.
      - O(platforms_source) names where the list came from in the error message.
    type: list
    elements: str
    default: []
  platforms_source:
    description: Where O(platforms) was set, for the error message.
    type: str
    default: platforms
  openstack_instances:
    description:
      - Per OpenStack platform (ironic, nova, magnum), the inventory hosts of the campaign's instances, up or
        failed (groups C(platbench_<platform>) and C(platbench_<platform>_failed), which
        C(platbench.lab.openstack_instances) adds).
      - A platform without any is skipped, with the reason.
    type: dict
    default: {}
attributes:
  check_mode:
    description: Reads the same state as in a real run; the module never changes the host.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Work out which platforms are ready
  platbench.lab.platform_status:
    facts: "{{ ansible_facts.platbench }}"
    images: "{{ image_info.images | default([]) }}"
    k8s_nodes: "{{ nodes_info }}"
    platforms: "{{ platbench_platforms }}"
    platforms_source: platbench_platforms (inventory group_vars)
  register: status

- name: Show them
  ansible.builtin.debug:
    msg: "{{ status.summary }}"
"""

RETURN = r"""
platforms:
  description:
    - Every platform of the registry, by label, with C(ready), C(reason) (empty when ready) and C(skip) (true when
      the host cannot run it at all, so experiments skip it); guest platforms also carry C(accelerator) (C(kvm),
      C(tcg) or null) and C(emulated); k8s carries C(node) (C(name), C(ready), C(allocatable_cpus),
      C(allocatable_gpus), C(images_complete)), null when the cluster has no node of this host.
  returned: always
  type: dict
  sample: {"bm": {"ready": true, "reason": "", "skip": false}}
ready:
  description: Labels of the ready platforms, in registry order.
  returned: always
  type: list
  elements: str
emulated:
  description: Labels of the guest platforms whose guests QEMU emulates here (no usable KVM).
  returned: always
  type: list
  elements: str
image_id:
  description: The workload image's id in the host's Docker engine (where it is built), or null.
  returned: always
  type: str
engines:
  description:
    - Per container engine a platform of the registry uses (C(docker), C(podman)) - C(answers), its C(version), and
      the C(image_id) of the workload image it holds (Docker's form, C(sha256:...)), or null.
  returned: always
  type: dict
  sample: {"docker": {"answers": true, "version": "26.1.5", "image_id": "sha256:0123"}}
guest_image:
  description: The guest image description, or an empty dict when there is none.
  returned: always
  type: dict
k8s_node:
  description: This host's Kubernetes node name (O(k8s_node), or the hostname in lower case).
  returned: always
  type: str
sif:
  description:
    - The SIF description (C(image), C(image_id), C(sif), C(apptainer_version), C(sha256)) with C(present), whether
      its SIF file exists; an empty dict when there is none.
  returned: always
  type: dict
apptainer_version:
  description: The host's Apptainer version (C(1.4.5)), or null when it is not installed.
  returned: always
  type: str
summary:
  description: One line per platform of O(platforms) (every platform when empty), ready or skipped with the reason.
  returned: always
  type: list
  elements: str
"""

import json
import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import (
    apptainer,
    engines,
    firecracker,
    lxc,
    oci_bundle,
    platforms,
)
from ansible_collections.platbench.lab.plugins.module_utils.readiness import platform_status, summary


def read_guest_image(path, what="guest image description"):
    """The description as a dict, {} when absent, and a warning when it cannot be read."""
    if not os.path.exists(path):
        return {}, None
    try:
        with open(path, encoding="utf-8") as stream:
            description = json.load(stream)
    except (OSError, ValueError) as exc:
        return {}, f"{what} {path} cannot be read ({exc}): run site.yml to rebuild it"
    return (description, None) if isinstance(description, dict) else ({}, f"{path} holds no JSON object")


def kubernetes_node_name(configured):
    """The node name kubelet registers by default: the hostname, in lower case."""
    return (configured or socket.gethostname()).strip().lower()


def kubernetes_input(kubeconfig, node, nodes_result):
    """The cluster as platform_status reads it, from the registered k8s_info result of its Nodes."""
    error = ""
    # A failed query (ignore_errors) is `failed` with a msg; one without resources was not made.
    if nodes_result.get("failed") or "resources" not in nodes_result:
        error = str(
            nodes_result.get("msg")
            or "nobody asked it for its nodes (k8s_nodes is empty: pass what kubernetes.core.k8s_info returned)"
        ).strip()
    return {
        "kubeconfig": kubeconfig,
        "kubeconfig_present": os.path.exists(kubeconfig),
        "node": node,
        "nodes": nodes_result.get("resources") or [],
        "error": error,
    }


def used_engines():
    """The container engines some platform of the registry runs the workload in."""
    return sorted({platform.engine for platform in platforms.PLATFORMS if platform.engine and platform.placement})


def run(module, argv):
    """``(rc, stdout)`` of a command, or None when its executable is not installed."""
    executable = module.get_bin_path(argv[0])
    if not executable:
        return None
    rc, out, _err = module.run_command([executable] + argv[1:])
    return rc, out


def installed_apptainer(module):
    """The version `apptainer --version` reports, or None when it is not installed or does not answer."""
    executable = module.get_bin_path("apptainer")
    if not executable:
        return None
    rc, out, _err = module.run_command([executable, "--version"])
    return apptainer.parse_version(out) if rc == 0 else None


def main():
    module = AnsibleModule(
        argument_spec={
            "facts": {"type": "dict", "required": True},
            "prefix": {"type": "path", "default": "/opt/platbench"},
            "image": {"type": "str", "default": "platbench/workload:latest"},
            "guest_image": {"type": "path", "default": "/var/lib/platbench/guest/current.json"},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
            "k8s_node": {"type": "str", "default": ""},
            "k8s_nodes": {"type": "dict", "default": {}},
            "sif_description": {"type": "path", "default": apptainer.SIF_DESCRIPTION},
            "platforms": {"type": "list", "elements": "str", "default": []},
            "platforms_source": {"type": "str", "default": "platforms"},
            "openstack_instances": {"type": "dict", "default": {}},
            "firecracker_binary": {"type": "path", "default": firecracker.BINARY},
            "firecracker_jailer": {"type": "path", "default": firecracker.JAILER},
            "kvm_device": {"type": "path", "default": firecracker.KVM},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        wanted = platforms.check_labels(params["platforms"], params["platforms_source"]) or list(platforms.LABELS)
    except platforms.UnknownPlatform as exc:
        module.fail_json(msg=f"{exc}. Fix the list and run again.")
    guest, warning = read_guest_image(params["guest_image"])
    sif, sif_warning = read_guest_image(params["sif_description"], "SIF description")
    found = {
        engine: engines.probe(lambda argv: run(module, argv), engine, params["image"]) for engine in used_engines()
    }
    if sif:
        sif["present"] = bool(sif.get("sif")) and os.path.isfile(str(sif["sif"]))
    version = installed_apptainer(module)
    # The current workload image is the one built in Docker (Podman loads it from there).
    image_id = (found.get("docker") or {}).get("image_id")
    node_name = kubernetes_node_name(params["k8s_node"])
    status = platform_status(
        params["facts"],
        params["prefix"],
        os.path.exists(os.path.join(params["prefix"], "venv", "bin", "python")),
        params["image"],
        image_id,
        params["guest_image"],
        guest,
        kubernetes=kubernetes_input(params["kubeconfig"], node_name, params["k8s_nodes"]),
        apptainer_version=version,
        sif=sif,
        sif_description=params["sif_description"],
        openstack_instances=params["openstack_instances"],
        engines_found=found,
        firecracker_found=firecracker.probe(
            params["firecracker_binary"], params["firecracker_jailer"], params["kvm_device"]
        ),
        lxc_found=lxc.probe(module.get_bin_path(lxc.EXECUTE)),
        oci_bundle_found=oci_bundle.probe(module.get_bin_path(oci_bundle.RUNC)),
    )
    module.exit_json(
        changed=False,
        platforms=status,
        guest_image=guest,
        image_id=image_id,
        engines=found,
        sif=sif,
        apptainer_version=version,
        ready=[label for label in platforms.LABELS if status[label]["ready"]],
        emulated=[label for label in platforms.LABELS if status[label].get("emulated")],
        k8s_node=node_name,
        summary=summary(status, wanted),
        warnings=[text for text in (warning, sif_warning) if text],
    )


if __name__ == "__main__":
    main()
