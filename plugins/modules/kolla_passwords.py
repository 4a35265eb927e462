#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""kolla-ansible's passwords.yml: every secret its release asks for, generated once and kept."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kolla_passwords
short_description: Generate kolla-ansible's passwords.yml once, and keep it
description:
  - Reads the key list of the pinned kolla-ansible release's passwords template (O(template)) and writes O(path)
    with a generated value for each key, mode 0600, atomically.
  - A file that exists is never regenerated; only keys the release added since are generated, the values already
    there are kept as they are.
  - "Values by kind: an RSA key pair (C(private_key), C(public_key)) for C(*_ssh_key); a UUID for C(*_uuid) and the
    ids that must be UUIDs; a Fernet key for C(barbican_crypto_key); 32 hex digits for HMAC-MD5 keys; a bcrypt salt
    for C(prometheus_bcrypt_salt); nothing for C(docker_registry_password) (set it yourself when a registry needs
    one); 40 letters and digits otherwise."
  - Returns key names only, never a value; run it with C(no_log) all the same.
version_added: "0.8.0"
author: platbench developers (@platbench)
requirements:
  - PyYAML and cryptography on the host (the kolla-ansible virtualenv has both)
options:
  path:
    description: The passwords file to write (kolla-ansible's C(--passwords)).
    type: path
    required: true
  template:
    description:
      - The release's passwords template, C(share/kolla-ansible/etc_examples/kolla/passwords.yml) in its virtualenv.
    type: path
    required: true
  ssh_key_bits:
    description: Size of the generated RSA keys.
    type: int
    default: 4096
attributes:
  check_mode:
    description: Reports which keys would be added and writes nothing.
    support: full
  diff_mode:
    description: No diff is shown; the content is secret.
    support: none
"""

EXAMPLES = r"""
- name: Generate passwords.yml
  platbench.lab.kolla_passwords:
    path: /etc/kolla/passwords.yml
    template: /opt/kolla-venv/share/kolla-ansible/etc_examples/kolla/passwords.yml
  no_log: true
"""

RETURN = r"""
added:
  description: The keys generated in this run (all of them for a new file), sorted; no values.
  returned: always
  type: list
  elements: str
  sample: [database_password, nova_ssh_key]
created:
  description: Whether the file did not exist before.
  returned: always
  type: bool
"""

import base64
import os
import secrets
import string
import tempfile
import traceback
import uuid

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import yaml
except ImportError:
    yaml = None
    YAML_ERROR = traceback.format_exc()
try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
except ImportError:
    rsa = None
    CRYPTOGRAPHY_ERROR = traceback.format_exc()

# Keys whose value must be a UUID although their name does not end in _uuid.
UUID_KEYS = ("gnocchi_project_id", "gnocchi_resource_id", "gnocchi_user_id", "designate_pool_id")
HMAC_MD5_KEYS = ("designate_rndc_key", "osprofiler_secret")
FERNET_KEYS = ("barbican_crypto_key",)
BCRYPT_SALT_KEYS = ("prometheus_bcrypt_salt",)
# Left empty: only the user knows these.
USER_KEYS = ("docker_registry_password",)
PASSWORD_LENGTH = 40
MODE = 0o600


def ssh_key_pair(bits):
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {"private_key": private.decode(), "public_key": public.decode()}


def random_text(alphabet, length):
    return "".join(secrets.choice(alphabet) for _ in range(length))


def generated(key, bits):
    """A value for ``key`` of the kind kolla-ansible expects there."""
    if key.endswith("_ssh_key"):
        return ssh_key_pair(bits)
    if key.endswith("_uuid") or key in UUID_KEYS:
        return str(uuid.uuid4())
    if key in HMAC_MD5_KEYS:
        return secrets.token_hex(16)
    if key in FERNET_KEYS:
        return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    if key in BCRYPT_SALT_KEYS:
        return random_text("./" + string.ascii_letters + string.digits, 22)
    return random_text(string.ascii_letters + string.digits, PASSWORD_LENGTH)


def unset(value):
    """A template's empty value: nothing, or an SSH key pair with neither half."""
    if isinstance(value, dict):
        return not value.get("private_key") and not value.get("public_key")
    return value is None


def load(module, path, what):
    try:
        with open(path) as stream:
            data = yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as exc:
        module.fail_json(msg=f"cannot read {what} {path}: {exc}")
    if not isinstance(data, dict):
        module.fail_json(msg=f"{what} {path} is not a mapping of names to secrets; restore it or move it away")
    return data


def write(path, passwords):
    """Atomically, never readable by others even for a moment."""
    directory = os.path.dirname(path) or "."
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".passwords-")
    try:
        with os.fdopen(descriptor, "w") as stream:
            os.fchmod(stream.fileno(), MODE)
            yaml.safe_dump(passwords, stream, default_flow_style=False)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "template": {"type": "path", "required": True},
            "ssh_key_bits": {"type": "int", "default": 4096},
        },
        supports_check_mode=True,
    )
    if yaml is None:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_ERROR)
    path, template = module.params["path"], module.params["template"]
    if not os.path.isfile(template):
        module.fail_json(
            msg=f"the release's passwords template {template} does not exist: install kolla-ansible "
            "(openstack_deploy_install) or point openstack_deploy_kolla_share_dir at its share/kolla-ansible"
        )
    keys = load(module, template, "the passwords template")
    created = not os.path.exists(path)
    passwords = {} if created else load(module, path, "the passwords file")
    added = sorted(key for key in keys if key not in USER_KEYS and unset(passwords.get(key)))
    if added and rsa is None and any(key.endswith("_ssh_key") for key in added):
        module.fail_json(msg=missing_required_lib("cryptography"), exception=CRYPTOGRAPHY_ERROR)
    mode_wrong = not created and (os.stat(path).st_mode & 0o777) != MODE
    changed = created or bool(added) or mode_wrong
    if changed and not module.check_mode:
        for key in keys:
            passwords.setdefault(key, None)
        for key in added:
            passwords[key] = generated(key, module.params["ssh_key_bits"])
        if created or added:
            write(path, passwords)
        else:
            os.chmod(path, MODE)
    module.exit_json(changed=changed, added=added, created=created)


if __name__ == "__main__":
    main()
