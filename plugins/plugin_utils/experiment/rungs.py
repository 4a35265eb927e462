# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A rung: a platform, or a platform with some of its cells' labels (``cn[data_path:overlay]``), as the experiment's
``baselines`` names what each is compared with (schedule.py) and platbench explain climbs (platbench/explain/).

A label's value is written after a colon, several separated by commas: ``cn[data_path:overlay,network:bridge]``. A
rung matches a cell of its platform whose labels have those values; a platform alone matches every cell of it.
"""

from __future__ import annotations

import re

_RUNG = re.compile(r"^([a-z0-9_]+)(?:\[([a-z0-9_]+:[^,\]\[]+(?:,[a-z0-9_]+:[^,\]\[]+)*)\])?$")


class RungError(ValueError):
    """A rung that does not parse; the message shows the form."""


def parse(text):
    """``(platform, {label: value})`` of a rung's text."""
    found = _RUNG.match(str(text))
    if not found:
        raise RungError(
            f"{text!r} is not a rung: a platform (cn), or a platform with label values (cn[data_path:overlay])"
        )
    settings = dict(part.split(":", 1) for part in found.group(2).split(",")) if found.group(2) else {}
    return found.group(1), settings


def text(platform, settings=None):
    """The rung's text: ``cn``, or ``cn[data_path:overlay]`` (labels in name order)."""
    settings = settings or {}
    inner = ",".join(f"{name}:{settings[name]}" for name in sorted(settings))
    return f"{platform}[{inner}]" if inner else platform


def matches(labels, platform, settings):
    """Whether a cell's (or a row's) ``labels`` are of the rung ``platform`` with ``settings``."""
    return labels.get("platform") == platform and all(
        str(labels.get(name)) == str(value) for name, value in settings.items()
    )
