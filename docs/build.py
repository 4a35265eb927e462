# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""Build the documentation site: `make docs` (or `python docs/build.py [OUT]`, default .cache/docs).

The hand-written pages (docs/src) are copied into OUT/src, antsibull-docs writes the collection's reference beside
them (collections/), the kinds page is generated from the declarations, and Sphinx builds OUT/html with warnings as
errors: a broken reference, a page no toctree holds or a plugin whose documentation does not parse fails it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path[:0] = [str(DOCS), str(REPO / "collections")]

import kinds_page  # noqa: E402 - beside this file, once the collection is importable


def build(out):
    source = out / "src"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(DOCS / "src", source)
    (source / "kinds.md").write_text(kinds_page.page(), encoding="utf-8")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections")}
    # antsibull-docs reports a plugin whose documentation does not parse as an error line and writes an error page:
    # that fails the build here, as a warning fails Sphinx.
    generated = subprocess.run(
        [
            "antsibull-docs",
            "--config-file",
            str(DOCS / "antsibull-docs.cfg"),
            "collection",
            "--use-current",
            "--dest-dir",
            str(source),
            "platbench.lab",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stderr.write(generated.stdout + generated.stderr)
    problems = [line for line in (generated.stdout + generated.stderr).splitlines() if "ERROR" in line]
    if generated.returncode or problems:
        sys.exit(f"docs: antsibull-docs could not document the collection ({len(problems)} error(s) above)")
    subprocess.run(
        ["sphinx-build", "-W", "--keep-going", "-q", "-c", str(DOCS), "-b", "html", str(source), str(out / "html")],
        env=env,
        check=True,
    )
    print(f"docs: {out / 'html' / 'index.html'}")


if __name__ == "__main__":
    build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO / ".cache" / "docs")
