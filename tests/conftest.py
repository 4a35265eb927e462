"""Make the repository importable as it is used: the collection by its FQCN
(``ansible_collections.platbench.lab``, through ``collections/``) and the ``platbench`` package."""

import sys
from pathlib import Path

from ansible.plugins.loader import init_plugin_loader

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO / "collections"

for path in (REPO, COLLECTIONS):
    if str(path) in sys.path:
        sys.path.remove(str(path))
    sys.path.insert(0, str(path))

# Ansible's collection loader must own every ansible_collections import before the first
# one happens: plugins loaded by FQCN and modules imported by tests are then the same modules.
init_plugin_loader([str(COLLECTIONS)])
