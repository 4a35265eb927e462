#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Name the globals.yml variables the installed kolla-ansible release does not know (typos, renamed settings)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kolla_unknown_globals
short_description: Warn about globals.yml variables the installed kolla-ansible release does not know
description:
  - kolla-ansible ignores a variable it does not know, so a typo in C(globals.yml) (C(enable_magnun)) or a setting a
    release renamed silently leaves the default in place.
  - Collects the variables the release defines (the top-level keys of C(ansible/group_vars/all*) and of every
    role's C(defaults/main.yml), and those its C(etc_examples/kolla/globals.yml) documents) and warns about each of
    O(names) that is none of them, with the closest known names.
  - Changes nothing.
version_added: "0.8.0"
author: platbench developers (@platbench)
options:
  share_dir:
    description: The release's C(share/kolla-ansible) directory in its virtualenv.
    type: path
    required: true
  names:
    description: The variables of C(globals.yml).
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    description: Reads files only.
    support: full
  diff_mode:
    description: Nothing is changed.
    support: none
"""

EXAMPLES = r"""
- name: Warn about variables kolla-ansible would ignore
  platbench.lab.kolla_unknown_globals:
    share_dir: /opt/kolla-venv/share/kolla-ansible
    names: "{{ globals_yml.keys() | list }}"
"""

RETURN = r"""
unknown:
  description: The names the release does not know, each with up to three known names close to it.
  returned: always
  type: dict
  sample: {enable_magnun: [enable_magnum]}
known:
  description: How many variables the release defines.
  returned: always
  type: int
"""

import difflib
import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):", re.MULTILINE)
# The documented globals are mostly commented out: '#enable_magnum: false'.
DOCUMENTED_KEY = re.compile(r"^#?([A-Za-z_][A-Za-z0-9_]*):", re.MULTILINE)


def known_variables(share_dir):
    ansible_dir = os.path.join(share_dir, "ansible")
    files = glob.glob(os.path.join(ansible_dir, "group_vars", "all*"))
    files += glob.glob(os.path.join(ansible_dir, "group_vars", "all", "*.yml"))
    files += glob.glob(os.path.join(ansible_dir, "roles", "*", "defaults", "main.yml"))
    names = set()
    for path in files:
        if os.path.isfile(path):
            with open(path) as stream:
                names.update(TOP_LEVEL_KEY.findall(stream.read()))
    documented = os.path.join(share_dir, "etc_examples", "kolla", "globals.yml")
    if os.path.isfile(documented):
        with open(documented) as stream:
            names.update(DOCUMENTED_KEY.findall(stream.read()))
    return names


def main():
    module = AnsibleModule(
        argument_spec={
            "share_dir": {"type": "path", "required": True},
            "names": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    known = known_variables(module.params["share_dir"])
    if not known:
        module.warn(
            f"no kolla-ansible variables found under {module.params['share_dir']}: globals.yml was not checked for "
            "names the release ignores; check openstack_deploy_kolla_share_dir"
        )
        module.exit_json(changed=False, unknown={}, known=0)
    unknown = {
        name: difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.85)
        for name in module.params["names"]
        if name not in known
    }
    for name, close in unknown.items():
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        module.warn(
            f"globals.yml sets {name}, which this kolla-ansible release does not define, so it has no effect{hint}; "
            "correct it in openstack_deploy_globals"
        )
    module.exit_json(changed=False, unknown=unknown, known=len(known))


if __name__ == "__main__":
    main()
