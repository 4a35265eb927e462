"""platbench: which execution platform should a deep-learning job run on?

The Python side of the project (reports). The record and matrix code lives in the
platbench.lab collection's plugin_utils, shared with the Ansible plugins; this repository's
``collections/`` directory links the collection in, so it is put on the import path here.
"""

import sys
from pathlib import Path

__version__ = "0.10.0"

_COLLECTIONS = str(Path(__file__).resolve().parent.parent / "collections")
if _COLLECTIONS not in sys.path:
    sys.path.append(_COLLECTIONS)
