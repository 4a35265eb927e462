"""Whether a campaign's figures and report.html are as the campaign is now: ``platbench report`` draws them once per
change of the campaign (its samples, its run.json) or of what they show (the options that select metrics, rows and
marks, the budgets file's content, platbench's version), not on every call; ``--figures`` draws them again anyway.

The stamp, RESULTS_DIR/figures.stamp.json, keeps the inputs they were drawn from and the files drawn; they are
current when the inputs are the same and every one of those files is still there.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

STAMP = "figures.stamp.json"
# The campaign's files the report reads (its Parquet copy, store/, is made from samples.jsonl and checked against it).
CAMPAIGN_FILES = ("samples.jsonl", "run.json")
# The report's options that change what the figures and the page show.
OPTIONS = (
    "metric",
    "include_emulated",
    "cv_threshold",
    "min_timed_seconds",
    "max_steal_percent",
    "max_harness_percent",
    "strict",
)


def inputs(results_dir, args, version):
    """What the figures of ``results_dir`` drawn now would be drawn from: the campaign's files (size and
    modification time), the options (``args``), the budgets file's digest and platbench's ``version``."""
    files = {}
    for name in CAMPAIGN_FILES:
        path = Path(results_dir) / name
        if path.is_file():
            status = path.stat()
            files[name] = [status.st_size, status.st_mtime_ns]
    budgets = getattr(args, "budgets", None)
    digest = hashlib.sha256(Path(budgets).read_bytes()).hexdigest() if budgets and Path(budgets).is_file() else None
    return {
        "version": version,
        "files": files,
        "options": {name: getattr(args, name, None) for name in OPTIONS},
        "budgets": [budgets, digest] if budgets else None,
    }


def current(results_dir, stamp):
    """Whether the figures last drawn in ``results_dir`` were drawn from ``stamp`` and are all still there."""
    try:
        kept = json.loads((Path(results_dir) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(kept, dict) or kept.get("inputs") != json.loads(json.dumps(stamp)):
        return False
    drawn = kept.get("drawn")
    if not isinstance(drawn, list) or not drawn:
        return False
    return all((Path(results_dir) / name).is_file() for name in drawn)


def write(results_dir, stamp, drawn):
    """Keep that the files ``drawn`` were drawn from ``stamp``."""
    (Path(results_dir) / STAMP).write_text(json.dumps({"inputs": stamp, "drawn": drawn}, indent=2) + "\n")
