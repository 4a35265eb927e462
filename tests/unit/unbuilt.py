"""A registry with one platform not built, for the tests of what an unbuilt platform does (every platform of
this release is built; a new one starts unbuilt)."""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.module_utils import platforms

REASON = "its roles are not written yet"


def make_unbuilt(monkeypatch, label):
    """Patch the registry so that ``label`` has no placement, with ``REASON``."""
    entry = platforms.BY_LABEL[label]._replace(unbuilt=REASON)
    monkeypatch.setattr(platforms, "PLATFORMS", tuple(entry if p.label == label else p for p in platforms.PLATFORMS))
    monkeypatch.setattr(platforms, "BY_LABEL", {**platforms.BY_LABEL, label: entry})
    monkeypatch.setattr(platforms, "BUILT", tuple(p for p in platforms.BUILT if p != label))
    return entry
