"""platbench reproduce on the lab site.yml builds: one short finding of Xu 2017 (FCN5, cn against bm) runs real
cells until decided or 10 minutes are spent, and writes the page with a verdict and a row in the store."""

from __future__ import annotations

import json

import pytest
from playbook_run import platbench_command, read_samples

from platbench import store

# Runs with nothing beside it (tests/suite.py, `quiet`): beside the test cloud and the unit tests its pairs spread, and
# the finding took 412 s of CI instead of about 45 s.
pytestmark = [pytest.mark.lab, pytest.mark.quiet]

FINDING = "fcn5-cn-similar"
VERDICTS = ("reproduced", "not reproduced", "undecided")


@pytest.fixture(scope="module")
def reproduced(lab, tmp_path_factory):
    results = tmp_path_factory.mktemp("reproduce") / "results"
    done = platbench_command(
        "reproduce",
        "xu2017",
        "--finding",
        FINDING,
        "--max-time",
        "10m",
        "--precision",
        "0.05",  # beside the test cloud and the unit tests the pairs spread: settle at ±5%, in a few rounds
        "--results-dir",
        str(results),
    )
    pages = sorted(results.glob("reproduce-xu2017-*"))
    assert len(pages) == 1, sorted(path.name for path in results.iterdir())
    return {"results": results, "page": pages[0], "output": done.stdout}


def test_the_finding_ran_real_cells_of_bm_and_cn(reproduced):
    campaigns = [path for path in reproduced["results"].glob("xu2017-fcn5-reproduce-*") if path.is_dir()]
    assert len(campaigns) == 1
    samples = read_samples(campaigns[0])
    assert [s for s in samples if s["metric"] == "failed"] == []
    later = [s for s in samples if s["metric"] == "batch_time_later_mean"]
    assert {s["labels"]["platform"] for s in later} == {"bm", "cn"}
    assert len({s["labels"]["repeat"] for s in later}) >= 3 and all(s["value"] > 0 for s in later)


def test_the_page_gives_the_verdict_with_its_interval_and_the_papers_numbers(reproduced):
    data = json.loads((reproduced["page"] / "reproduction.json").read_text())
    assert data["summary"].startswith("Xu 2017: ")
    (row,) = data["findings"]
    assert row["finding"] == FINDING and row["verdict"] in VERDICTS
    assert row["low"] <= row["estimate"] <= row["high"]
    text = (reproduced["page"] / "reproduction.txt").read_text()
    assert text.splitlines()[0] == data["summary"] and f"[{FINDING}]" in text and "paper: " in text
    html = (reproduced["page"] / "reproduction.html").read_text()
    assert f'id="{FINDING}"' in html and "Diff% here [95%]" in html
    assert data["summary"] in reproduced["output"]


def test_the_verdict_is_a_row_of_the_store(reproduced):
    rows = store.findings_over_time(str(reproduced["results"] / store.STORE_FILE), "xu2017")
    assert [(row["finding"], row["verdict"] in VERDICTS) for row in rows] == [(FINDING, True)]
