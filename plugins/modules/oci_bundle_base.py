#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Make the bundle bases of the oci_bundle kind (ns, sc) from the OCI configuration Docker wrote for a container."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: oci_bundle_base
short_description: Make the runc bundle bases of platforms ns and sc from Docker's OCI configuration of a container
description:
  - Reads the OCI configuration (C(config.json)) the Docker engine wrote for a container of the workload image and
    writes one base per confinement, with O(root) as their root, and the image id they were made from.
  - C(none) - Docker's namespaces, mounts and masked paths; no seccomp filter, every capability of this host's root
    (its bounding set), no AppArmor profile.
  - C(engine) - the same, with Docker's seccomp profile, capability set and AppArmor profile.
  - Writes only what is missing or differs.
version_added: "0.14.0"
author: platbench developers (@platbench)
options:
  engine_config:
    description: The C(config.json) of a running container of the image, in the engine's runtime state directory.
    type: path
    required: true
  root:
    description: The image's root the bundles run (platbench.lab.lxc exports it from the same image id).
    type: path
    default: /var/lib/platbench/lxc/rootfs
  image_id:
    description: The workload image's id, written beside the bases.
    type: str
    required: true
  dest:
    description: The directory the bases go to.
    type: path
    default: /var/lib/platbench/oci
attributes:
  check_mode:
    description: Reads and compares, writes nothing.
    support: full
  diff_mode:
    support: none
    description: Not supported.
"""

EXAMPLES = r"""
- name: Make the bundle bases from the throwaway container's configuration
  platbench.lab.oci_bundle_base:
    engine_config: /run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby/0123abcd/config.json
    image_id: sha256:0123abcd
"""

RETURN = r"""
mechanisms:
  description: Per confinement, what its base confines the process with (namespaces, seccomp, capabilities, AppArmor).
  returned: success
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.platbench.lab.plugins.module_utils import oci_bundle


def _current(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            "engine_config": {"type": "path", "required": True},
            "root": {"type": "path", "default": oci_bundle.ROOT},
            "image_id": {"type": "str", "required": True},
            "dest": {"type": "path", "default": oci_bundle.DIR},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        with open(params["engine_config"], encoding="utf-8") as stream:
            engine_config = json.load(stream)
        bounding = oci_bundle.bounding_set()
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"cannot read the engine's configuration or this process's capabilities: {exc}")
    files, mechanisms = {}, {}
    try:
        for confinement in oci_bundle.CONFINEMENTS:
            base = oci_bundle.base_config(engine_config, confinement, root=params["root"], bounding=bounding)
            name = os.path.basename(oci_bundle.BASES[confinement])
            files[os.path.join(params["dest"], name)] = json.dumps(base, indent=1, sort_keys=True) + "\n"
            mechanisms[confinement] = oci_bundle.mechanisms(base)
    except oci_bundle.BundleError as exc:
        module.fail_json(msg=f"{params['engine_config']}: {exc}")
    files[os.path.join(params["dest"], os.path.basename(oci_bundle.IMAGE_ID_FILE))] = params["image_id"].strip() + "\n"
    changed = [path for path, content in files.items() if _current(path) != content]
    if changed and not module.check_mode:
        os.makedirs(params["dest"], mode=0o755, exist_ok=True)
        # The image id last: a base written without it is not taken for the current image's.
        for path in sorted(changed, key=lambda path: path.endswith(".image-id")):
            with open(path + ".new", "w", encoding="utf-8") as stream:
                stream.write(files[path])
            os.replace(path + ".new", path)
    module.exit_json(changed=bool(changed), mechanisms=mechanisms, written=sorted(changed))


if __name__ == "__main__":
    main()
