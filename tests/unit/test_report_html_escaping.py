"""report.html escapes every label and metadata value: a campaign whose experiment name, labels, campaign name and
metadata (the samples' and run.json's) hold markup gives a page, parsed as a browser's parser would, with no element
or attribute of that markup, and its text shown as text."""

import contextlib
import io
import json
from html.parser import HTMLParser
from pathlib import Path

from platbench import cli

DATA = Path(__file__).parent / "data"
# Each breaks out of a different place: element content, a quoted attribute, an SVG comment (the figures' text).
NAME = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(2)>'
COMMENT = "--><iframe src=javascript:alert(3)></iframe><!--"
LABELS = {"experiment": NAME, "model": ATTRIBUTE, "framework": COMMENT, "campaign": ATTRIBUTE}
METADATA = {"cpu_model": NAME, "kernel": ATTRIBUTE, "os": COMMENT, "framework_version": "<svg onload=alert(4)>"}
# The elements the markup above would make live (the <svg onload> one: an attribute, checked on its own).
LIVE_TAGS = {"script", "img", "iframe"}


class Page(HTMLParser):
    """What a browser builds of the page: every element with its attributes, and the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def marked_up_campaign(tmp_path):
    """The handmade HTML campaign with markup in its experiment name, labels, campaign and metadata."""
    results_dir = tmp_path / ATTRIBUTE  # the campaign's directory name too
    results_dir.mkdir()
    lines = []
    for line in (DATA / "handmade_html_samples.jsonl").read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        sample["labels"].update(LABELS)
        sample["metadata"].update(METADATA)
        lines.append(json.dumps(sample))
    (results_dir / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = json.loads((DATA / "handmade_html_run.json").read_text(encoding="utf-8"))
    run["campaign"], run["controller"] = ATTRIBUTE, NAME
    run["experiment"]["name"] = NAME
    run["experiment"]["params"][COMMENT] = ATTRIBUTE
    for environment in run["hosts"].values():
        environment.update(METADATA)
    (results_dir / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return results_dir


def test_markup_in_names_labels_and_metadata_is_shown_as_text_never_as_markup(tmp_path):
    results_dir = marked_up_campaign(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["report", str(results_dir), "--format", "csv"]) == 0
    page = Page()
    page.feed((results_dir / "report.html").read_text(encoding="utf-8"))
    page.close()
    tags = {tag for tag, _ in page.elements}
    assert "table" in tags and "svg" in tags  # the page was built, figures included
    assert not tags & LIVE_TAGS, tags & LIVE_TAGS
    handlers = [(tag, name) for tag, attrs in page.elements for name in attrs if name.startswith("on")]
    assert handlers == []
    links = [value for _, attrs in page.elements for name, value in attrs.items() if name in ("href", "src")]
    assert not [value for value in links if value and value.strip().lower().startswith("javascript:")]
    # Shown to the reader as the text it is: the experiment's name, the labels, the metadata.
    text = "".join(page.text)
    for value in {*LABELS.values(), *METADATA.values()}:
        assert value in text, value
