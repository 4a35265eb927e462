# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Render references into documentation sets the offline build cannot reach as their text, without a warning.

antsibull-docs links a plugin's documentation to Ansible's own pages (``common_return_values``, the plugin type
indexes) and to other collections' modules (``community.docker.docker_container``): those targets live on
docs.ansible.com, which this build does not fetch (it runs where only PyPI is reachable, and a warning fails it).
A reference to this collection's own pages is never resolved here: a broken one still fails the build.
"""

from __future__ import annotations

from docutils import nodes

OWN = "ansible_collections.platbench.lab."


def _external(target):
    return not target.startswith(OWN)


def missing_reference(app, env, node, contnode):
    """The reference's own text, for a target outside this collection; None (a warning) for one inside it."""
    target = node.get("reftarget", "")
    if node.get("reftype") not in ("ref", "any") or not _external(target):
        return None
    return nodes.inline("", "", contnode) if contnode is not None else nodes.inline(target, target)


def setup(app):
    app.connect("missing-reference", missing_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
