"""The documentation site builds with warnings as errors (make docs), and the README stays a front page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_LINES = 250


def test_the_documentation_site_builds_with_warnings_as_errors(tmp_path):
    built = subprocess.run(
        [sys.executable, str(REPO / "docs" / "build.py"), str(tmp_path / "docs")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-8000:]
    html = tmp_path / "docs" / "html"
    pages = {path.relative_to(html).as_posix() for path in html.rglob("*.html")}
    # The guides, the generated kinds page and the collection's reference of every plugin type.
    assert {"index.html", "running.html", "calibrating.html", "architecture.html", "kinds.html"} <= pages
    reference = "collections/platbench/lab/"
    for page in ("lxc_role.html", "docker_role.html", "record_cell_module.html", "placement_results_filter.html"):
        assert reference + page in pages, page
    kinds = (html / "kinds.html").read_text()
    assert "lxc" in kinds and "platform_run_lxc" in kinds


def test_the_readme_is_a_front_page_pointing_into_the_site():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    for page in ("running", "reading-a-report", "calibrating", "adding-a-platform", "openstack", "architecture"):
        assert f"docs/src/{page}.md" in readme, page
        assert (REPO / "docs" / "src" / f"{page}.md").is_file(), page


def test_the_changelog_fragments_and_metadata_lint():
    for argv in (["lint"], ["lint-changelog-yaml", "changelogs/changelog.yaml"]):
        linted = subprocess.run(
            [str(Path(sys.executable).parent / "antsibull-changelog"), *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr
