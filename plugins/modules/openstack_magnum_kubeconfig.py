#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Write the kubeconfig of a Magnum cluster: a client key, its certificate signed by the cluster's CA."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openstack_magnum_kubeconfig
short_description: Write the kubeconfig of a Magnum Kubernetes cluster
description:
  - What C(openstack coe cluster config) does, which C(openstack.cloud) 2.5.0 has no module for, through
    openstacksdk - a new client key, a certificate signing request that Magnum's certificate API signs with
    the cluster's CA, and a kubeconfig naming the cluster's API address, the CA, the certificate and the key.
  - The file is written with mode 0600; the key never leaves it (the result holds only the path).
  - A cluster that is not C(CREATE_COMPLETE) or C(UPDATE_COMPLETE) fails with its status and reason.
version_added: "0.8.0"
author: platbench developers (@platbench)
requirements:
  - openstacksdk (the version requirements.txt pins)
  - cryptography
options:
  cloud:
    description: The clouds.yaml cloud name.
    type: str
    required: true
  cluster:
    description: The cluster's name or id.
    type: str
    required: true
  dest:
    description: Where to write the kubeconfig.
    type: path
    required: true
attributes:
  check_mode:
    description: Reads the cluster, writes nothing.
    support: full
  diff_mode:
    description: The key is new on every run; no difference is shown.
    support: none
"""

EXAMPLES = r"""
- name: Write the cluster's kubeconfig
  platbench.lab.openstack_magnum_kubeconfig:
    cloud: lab
    cluster: pb-0123456789-magnum-2-pin-cpu
    dest: /var/lib/platbench/openstack/pb-0123456789-magnum-2-pin-cpu.kubeconfig
"""

RETURN = r"""
dest:
  description: The kubeconfig written.
  returned: success
  type: str
api_address:
  description: The cluster's Kubernetes API.
  returned: success
  type: str
"""

import base64
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import openstack
    import yaml
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
except ImportError:
    IMPORT_ERROR = traceback.format_exc()
else:
    IMPORT_ERROR = None

READY = ("CREATE_COMPLETE", "UPDATE_COMPLETE")
USER = "admin"


def client_key_and_csr():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, USER)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return key_pem.decode(), csr.public_bytes(serialization.Encoding.PEM).decode()


def kubeconfig(name, server, ca_pem, cert_pem, key_pem):
    def b64(text):
        return base64.b64encode(text.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": USER, "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": USER}}],
        "current-context": name,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "cloud": {"type": "str", "required": True},
            "cluster": {"type": "str", "required": True},
            "dest": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    if IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("openstacksdk and cryptography"), exception=IMPORT_ERROR)
    params = module.params
    try:
        magnum = openstack.connect(cloud=params["cloud"]).container_infrastructure_management
        cluster = magnum.find_cluster(params["cluster"], ignore_missing=False)
        if cluster.status not in READY:
            module.fail_json(
                msg=f"Magnum cluster {params['cluster']} is {cluster.status} ({cluster.status_reason}), not ready"
            )
        if module.check_mode:
            module.exit_json(changed=True, dest=params["dest"], api_address=cluster.api_address)
        key_pem, csr_pem = client_key_and_csr()
        signed = magnum.create_cluster_certificate(cluster_uuid=cluster.id, csr=csr_pem)
        ca = magnum.get_cluster_certificate(cluster.id)
    except openstack.exceptions.SDKException as exc:
        module.fail_json(msg=f"cloud {params['cloud']}, Magnum cluster {params['cluster']}: {exc}")
    config = kubeconfig(cluster.name, cluster.api_address, ca.pem, signed.pem, key_pem)
    os.makedirs(os.path.dirname(params["dest"]) or ".", mode=0o700, exist_ok=True)
    descriptor = os.open(params["dest"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        yaml.safe_dump(config, handle)
    module.exit_json(changed=True, dest=params["dest"], api_address=cluster.api_address)


if __name__ == "__main__":
    main()
