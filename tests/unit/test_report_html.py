"""report.html: built by `platbench report` from fixed sample campaigns, checked as text (which figures and
sections each kind of campaign gets, no external resource, escaping) and loaded in a real headless Chromium
(Debian's chromium and chromium-driver, which `make venv` installs)."""

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

from platbench import cli
from platbench.report import figures as report_figures
from platbench.report import meta as report_meta
from platbench.report import page as report_html
from platbench.report.context import ReportContext
from platbench.report.load import choose_metrics, load_samples
from platbench.report.tables import summarize
from tests import skips

DATA = Path(__file__).parent / "data"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_BY = "`make venv` (apt-get: chromium chromium-driver; requirements.txt: selenium)"


def campaign(tmp_path, *sample_files, run_file="handmade_html_run.json", name="campaign"):
    results_dir = tmp_path / name
    results_dir.mkdir()
    with (results_dir / "samples.jsonl").open("w", encoding="utf-8") as stream:
        for sample_file in sample_files:
            stream.write((DATA / sample_file).read_text(encoding="utf-8"))
    if run_file:
        shutil.copy(DATA / run_file, results_dir / "run.json")
    return results_dir


def report(results_dir, *options):
    assert cli.main(["report", str(results_dir), *options]) == 0
    return (results_dir / "report.html").read_text(encoding="utf-8")


def page_of(results_dir):
    """report.html's text without the rest of the report (the CSV, Markdown and PNG files)."""
    frame = load_samples(results_dir)
    return report_html.render(results_dir, ReportContext(frame), choose_metrics(frame))


@pytest.fixture(scope="module")
def html_campaign(tmp_path_factory):
    """The richer sample campaign, reported once: scale-ups 1 and 2, a failed, a skipped and emulated (tcg) cells."""
    results_dir = campaign(tmp_path_factory.mktemp("html"), "handmade_html_samples.jsonl")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        page = report(results_dir)
    return results_dir, page, out.getvalue()


def figure_names(page):
    return re.findall(r"<figcaption>([^<]*)</figcaption>", page)


def test_report_ends_with_the_page_path(html_campaign):
    results_dir, _, out = html_campaign
    assert out.rstrip().splitlines()[-1] == f"report: {results_dir / 'report.html'}"


def test_html_campaign_page_holds_tables_figures_outcomes_and_metadata(html_campaign):
    _, page, _ = html_campaign
    names = figure_names(page)
    # Lin's bars per metric, the scale-up lines (scale-ups 1 and 2), Xu's Diff% bars; no phases, no roofline.
    assert names == [
        "throughput normalised to bm",
        "throughput by scale-up",
        "elapsed normalised to bm",
        "elapsed by scale-up",
        "Diff% against bm, component training",
    ]
    assert page.count("<svg") == len(names)
    # The main table: n, the 95% CI of the mean, CV and the ratio's interval, from the fixed samples.
    assert "<th>95% CI</th>" in page and "<th>CV</th>" in page
    assert "[18.5, 23.5]" in page  # bm/1 throughput 20, 21, 22: 21 ± t(0.975, 2) x 1 / sqrt(3)
    # Every cell that gave no figure that counts, with its reason.
    assert '<tr class="failed">' in page and "MemoryError" in page
    assert '<tr class="skipped">' in page and "no GPU in this cell: gpu_sgemm measures a GPU" in page
    assert page.count('<tr class="emulated">') >= 3 + 1  # the three tcg cells, and their row of the main table
    # Metadata from the samples and run.json; what nothing recorded says so.
    metadata = page[page.index('<section id="metadata">') :]
    for recorded in ("Intel(R) Xeon(R) Gold 6230", "6.1.0-28-amd64", "Debian 12", "2.17.1", "27.3.1", "0.9.0"):
        assert recorded in metadata
    assert 'host_virt</td><td class="text">not recorded' in metadata
    assert "repeats: 3" in metadata  # the experiment as it ran
    as_run = metadata[metadata.index('<pre class="as-run">') :]
    assert as_run.index("size: small") < as_run.index("overrides:") < as_run.index("The experiment file merged")


def test_no_external_resource_and_everything_escaped(html_campaign):
    _, page, _ = html_campaign
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "<link" not in page and "<script" not in page and "@import" not in page
    # The failed cell's error quotes markup: shown as text, in the table and in its folded details.
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") == 2


def test_each_figure_only_where_the_campaign_has_its_data(tmp_path):
    inference = figure_names(page_of(campaign(tmp_path, "handmade_inference_samples.jsonl", name="inference")))
    assert any(name.startswith("Phase breakdown of end-to-end inference") for name in inference)
    assert "Roofline" not in inference and not any("by scale-up" in name for name in inference)
    gpu_page = page_of(campaign(tmp_path, "handmade_gpu_samples.jsonl", name="gpu", run_file=None))
    gpu = figure_names(gpu_page)
    assert "Roofline" in gpu and not any(name.startswith("Phase breakdown") for name in gpu)
    # A campaign without run.json says what is not recorded.
    metadata = gpu_page[gpu_page.index('<section id="metadata">') :]
    assert "not recorded: the campaign directory holds no readable run.json" in metadata
    assert "not recorded: no experiment in run.json" in metadata


def test_the_three_inference_states_are_shown_apart(tmp_path):
    """handmade_inference_samples.jsonl: nlp's bm cell VALID, ic's bm cpu inference_only cells scaled-down, its bm
    gpu inference_only cells INVALID (test_report_inference.py says which cell is what)."""
    page = page_of(campaign(tmp_path, "handmade_inference_samples.jsonl", name="inference"))
    main = page[page.index('<section id="section-1"') : page.index('<section id="section-2"')]
    rows = re.findall(r'<tr(?: class="([^"]*)")?>((?:<td[^>]*>[^<]*</td>)+)</tr>', main)
    cells = {tuple(re.findall(r"<td[^>]*>([^<]*)</td>", line)[:7]): state for state, line in rows}
    states = {(key[0], key[4], key[5], key[6]): state for key, state in cells.items()}
    assert states["bm", "cpu", "nlp", "e2e"] == "mlperf-valid"
    assert states["bm", "cpu", "ic", "inference_only"] == "scaled-down"
    assert states["bm", "gpu", "ic", "inference_only"] == states["cn", "cpu", "ic", "e2e"] == "invalid"
    assert states["vm", "cpu", "ic", "e2e"] == "emulated"  # the most serious first: emulated, then scaled-down
    # The count columns name the states; the legend and the notes say what each means.
    assert "<th>VALID</th><th>INVALID</th><th>scaled-down</th>" in main
    for css in ("tr.scaled-down td {", "tr.mlperf-valid td {", "tr.invalid td"):
        assert css in page
    legend = page[page.index('<p class="legend">') : page.index("</p>", page.index('<p class="legend">'))]
    assert "scaled-down: below MLPerf's minimums" in legend and "VALID: MLPerf's minimums met" in legend
    assert "scaled-down: 11 cell(s) ran below MLPerf&#39;s minimums" in page
    assert "INVALID: 3 cell(s) that MLPerf loadgen called INVALID" in page


def test_budget_verdicts_and_validity_column_are_shown(tmp_path, capsys):
    results_dir = campaign(tmp_path, "handmade_html_samples.jsonl")
    budgets = tmp_path / "budgets.yml"
    budgets.write_text("budgets:\n  cn:\n    throughput: [1.0, -0.5, null]\n", encoding="utf-8")
    page = report(results_dir, "--budgets", str(budgets), "--format", "csv", "--metric", "throughput")
    captured = capsys.readouterr()  # stdout stays one CSV; the page is named with the files written
    assert "report.html" in captured.err and "report:" not in captured.out
    assert '<section id="budgets">' in page and '<tr class="pass">' in page
    # Rows marked invalid by a validity column (another part of the report adds it) are shown and classed so.
    rows = [{"platform": "cn", "n": 3, "failed": 0, "validity": "CV 12% > 5%: raise repeats to 9"}]
    assert report_html.row_state(rows[0]) == "invalid"
    header, lines = report_html.main_table(rows, ["platform"], [], {})
    assert header == ["platform", "n", "failed", "validity"] and lines == [["cn", "3", "0", rows[0]["validity"]]]


def test_report_png_titles_name_the_experiment_and_host(html_campaign):
    results_dir, _, _ = html_campaign
    context = report_meta.context_line(report_meta.load(results_dir))
    assert context == "experiment html-handmade (campaign html-handmade-1); host lab1"
    frame = load_samples(results_dir)
    rows, keys, units = summarize(frame, ["throughput"])
    figure = report_figures.bars_figure(
        ReportContext(frame, title=context), rows, keys, "throughput", units["throughput"]
    )
    axes = figure.axes[0]
    assert axes.get_xlabel() == "scaleup / cpu_config / processor / workload"
    assert axes.get_ylabel() == "throughput / bm's throughput (ratio)"
    assert context in figure.get_suptitle()
    # One error bar per bar: bm's own interval and cn's ratio's, at scale-ups 1 and 2 (vm is emulated: no bar).
    bars = [
        segment
        for container in axes.containers
        if hasattr(container, "lines")
        for segment in container.lines[2][0].get_segments()
    ]
    assert len(bars) == 4 and all(segment[0][1] < segment[1][1] for segment in bars)


@skips.requires(modules=["selenium"], commands=["chromium", "chromedriver"], by=CHROMIUM_BY)
def test_report_html_in_headless_chromium(html_campaign, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    results_dir, _, _ = html_campaign
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The system's chromedriver: selenium-manager never downloads a driver or a browser.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get((results_dir / "report.html").as_uri())
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
        sizes = driver.execute_script(
            "return [...document.querySelectorAll('figure svg')]"
            ".map(svg => { const box = svg.getBoundingClientRect(); return [box.width, box.height]; });"
        )
        assert len(sizes) >= 5 and all(width > 0 and height > 0 for width, height in sizes)
        assert driver.execute_script("return document.getElementById('metadata').querySelectorAll('table').length") >= 3
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, min(height, 16000))
        screenshot = tmp_path / "report.png"
        assert driver.save_screenshot(str(screenshot))
        assert screenshot.stat().st_size > 10_000
        print(f"screenshot: {screenshot}")
    finally:
        driver.quit()
