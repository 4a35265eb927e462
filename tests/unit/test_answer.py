"""The answer's lines (platbench/answer.py) beyond their verdict words: an undecided interval narrower than the
resolution says what is left and asks for the rounds that decide it (never 0); a duet whose pairs are not
exchangeable says so on the line after its answer, in the text report and on the page, which leads with the answer
and draws each pair's ratio in time order; the harness's placement ends every line; a duet row's elapsed is not
compared anywhere the report would show its ratio."""

import math
import re
import shutil

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from round_samples import throughput_sample
from scipy import stats

from platbench import answer, cli
from platbench.report import stats as report_stats
from platbench.report.load import load_samples
from platbench.report.tables import (
    DUET_NOTE,
    NOT_COMPARED,
    PAIRED,
    SAME_WINDOW,
    baseline_rows,
    comparison,
    rounds_needed,
    summarize,
)
from tests import skips

# Ten deviations of mean 0: the log-ratios of a campaign are a mean plus these, scaled to a chosen spread.
DEVIATIONS = [0.3, -1.1, 0.8, -0.4, 1.4, -0.9, 0.1, -1.3, 0.6, 0.5]
HARNESS_SHARED = {
    "harness_isolated": False,
    "harness_isolation": "no CPU outside the cells' on this host",
    "harness_cpu_seconds": 0.3,
    "harness_cpu_share": 0.012,
}


def log_ratios(center, half_width):
    """Log-ratios whose paired 95% interval is exp(log(center) +- log(1 + half_width))."""
    spread = math.log1p(half_width) * math.sqrt(len(DEVIATIONS)) / stats.t.ppf(0.975, len(DEVIATIONS) - 1)
    scale = spread / report_stats.sample_std(DEVIATIONS)
    return [math.log(center) + scale * deviation for deviation in DEVIATIONS]


def rounds_campaign(tmp_path, logs, name="rounds"):
    """bm and cn in rounds, 30 s apart, the host drifting by round on both; cn's log-ratio to bm in each: ``logs``."""
    samples = []
    for repeat, log in enumerate(logs):
        drift = (1.0, 0.9, 1.1, 0.95)[repeat % 4]
        for platform, value in (("bm", 1000.0 * drift), ("cn", 1000.0 * drift * math.exp(log))):
            samples.append(throughput_sample(platform, value, repeat, 30.0 * repeat, schedule="rounds"))
    directory = tmp_path / name
    append_samples(directory / "samples.jsonl", samples)
    return directory


def duet_campaign(tmp_path, logs, metadata=None, name="duet"):
    """cn beside bm's copy in duet pairs, the CPU sets swapped every pair, the host drifting by pair on both sides;
    cn's log-ratio in each pair: ``logs``; each pair's two cells time the same 10 s window (``elapsed``).
    ``metadata``: every sample's."""
    samples = []
    for repeat, log in enumerate(logs):
        lead = f"cn/1/pin/cpu|r{repeat}"
        side = repeat % 2
        host = 1000.0 * (1.0, 0.9, 1.1, 0.95)[repeat % 4]
        for platform, value, own_side in (("cn", host * math.exp(log), side), ("bm", host, 1 - side)):
            partner = {"duet_partner": lead} if platform == "bm" else {}
            for metric, figure, unit in (("throughput", value, "images/sec"), ("elapsed", 10.0, "s")):
                sample = throughput_sample(
                    platform,
                    figure,
                    repeat,
                    60.0 * repeat,
                    schedule="duet",
                    duet_pair=lead,
                    duet_side=own_side,
                    **partner,
                )
                sample.update(metric=metric, unit=unit, metadata=dict(metadata or {}))
                if platform == "bm":
                    sample["labels"]["cell"] = f"bm/1/pin/cpu|r{repeat}|partner=cn/1/pin/cpu"
                samples.append(sample)
    directory = tmp_path / name
    append_samples(directory / "samples.jsonl", samples)
    return directory


def compared_cn(directory, metric="throughput"):
    rows, keys, _ = summarize(load_samples(directory), [metric])
    baselines = baseline_rows(rows, keys)
    (index,) = [number for number, row in enumerate(rows) if row["platform"] == "cn"]
    return rows, keys, baselines, rows[index], baselines[index]


def reported(directory, capsys, *options):
    assert cli.main(["report", str(directory), *options]) == 0
    text = capsys.readouterr().out
    return text, (directory / "report.html").read_text(encoding="utf-8")


def test_an_interval_narrower_than_the_resolution_that_holds_1_says_what_is_left():
    assert answer.verdict(1.015, (0.991, 1.039), "throughput") == (
        "undecided: ±2%, not yet clear of 1 nor within 3% of it"
    )
    assert answer.verdict(1.01, (0.95, 1.07), "throughput") == "undecided: ±6%"  # wider: the width says it
    assert not answer.decided((0.991, 1.039)) and answer.decided((0.98, 1.02)) and answer.decided((1.001, 1.2))


@pytest.mark.parametrize("estimate", [1.0, 1.015, 0.985, 0.99, 1.05, 0.9])
@pytest.mark.parametrize("method", [PAIRED, "unpaired"])
def test_the_deciding_half_width_is_where_the_interval_starts_to_decide(estimate, method):
    compared = {"estimate": estimate, "method": method}
    half = answer.deciding_half_width(compared)

    def interval(width):
        if method == PAIRED:  # symmetric in logarithms
            return estimate / (1.0 + width), estimate * (1.0 + width)
        return estimate - width, estimate + width

    assert answer.decided(interval(half * 0.999)) and not answer.decided(interval(half * 1.01))


def test_an_undecided_answer_asks_for_the_rounds_that_decide_it_never_none(tmp_path):
    rows, keys, baselines, cn, bm = compared_cn(rounds_campaign(tmp_path, log_ratios(1.015, 0.02)))
    compared = comparison(cn, bm, "throughput")
    low, high = compared["interval"]
    assert low < 1.0 < high and high - 1.0 > 0.03 and (high - low) / 2 < 0.03  # undecided, though under ±3%
    assert rounds_needed(compared, cn, bm, "throughput", 0.03) == 0  # what the line used to ask for
    (_, line) = answer.lines(rows, keys, baselines, "throughput", seconds_per_round=30.0)
    assert line.startswith("cn/bm throughput 1.015 [0.995, 1.035]: undecided: ±2%, not yet clear of 1 nor within 3%")
    more = int(re.search(r"about (\d+) more round\(s\) \((\d+) min\) to resolve 3% \(±1\.5% decides it\)$", line)[1])
    target = answer.deciding_half_width(compared)
    assert more >= 1 and more == rounds_needed(compared, cn, bm, "throughput", target)
    # Those rounds, at the pairs' spread, bring the interval to the half-width that decides it (t at the pairs then).
    spread = report_stats.sample_std(report_stats.log_ratio_series(compared["pairs"]))
    assert stats.t.ppf(0.975, 10 + more - 1) * spread / math.sqrt(10 + more) <= math.log1p(target)


def test_a_duet_of_two_regimes_is_said_after_its_answer_and_drawn_on_the_page(tmp_path, capsys):
    noise = [0.004 * deviation for deviation in DEVIATIONS * 2]
    logs = [0.12 + jitter for jitter in noise] + [-0.05 + jitter for jitter in reversed(noise)]
    text, page = reported(duet_campaign(tmp_path, logs), capsys)
    answer_block = text.split("\n\n", 1)[0].splitlines()
    assert answer_block[0].startswith("Answer: throughput, each platform against bm (95% interval, paired by duet")
    assert answer_block[1].startswith("cn/bm throughput 1.03")
    assert answer_block[2].startswith(
        "cn/bm: the pairs are not exchangeable: a change of level after pair 20 of 40 (1.127 before, 0.951 after; "
        "two-segment fit p<0.001)"
    )
    assert answer_block[2].endswith(": the ratio averages two regimes")
    # The page leads with the same lines and the duet note, then the pairs in time order, before any table.
    lead = page[page.index('<section id="answer"') : page.index("</section>")]
    assert page.index('<section id="answer"') < page.index("<table")
    assert "cn/bm: the pairs are not exchangeable: a change of level after pair 20 of 40" in lead
    assert DUET_NOTE.replace("'", "&#39;") in lead
    assert re.findall(r"<figcaption>([^<]*)</figcaption>", lead) == [
        "cn/bm throughput: each pair&#39;s ratio in the order the pairs ran, the answer&#39;s 95% interval as a band"
    ]
    clip_paths = re.findall(r'<clipPath id="([^"]+)"', page)
    assert clip_paths and len(clip_paths) == len(set(clip_paths))  # every figure's ids its own


def test_the_pairs_figure_shows_each_ratio_in_time_order_and_the_two_levels(tmp_path):
    from platbench.report import figures as report_figures

    logs = [0.12 + 0.004 * deviation for deviation in DEVIATIONS * 2] + [-0.05] * 20
    rows, keys, baselines, _, _ = compared_cn(duet_campaign(tmp_path, logs))
    _, (line,) = answer.answer_of(rows, keys, baselines, "throughput")
    axes = report_figures.pairs_figure(line, "throughput", line.label).axes[0]
    points = [drawn for drawn in axes.lines if drawn.get_marker() in ("o", "^")]
    shown = sorted((x, y) for drawn in points for x, y in zip(drawn.get_xdata(), drawn.get_ydata(), strict=True))
    assert [x for x, _ in shown] == list(range(1, 41))
    assert [y for _, y in shown] == pytest.approx([math.exp(log) for log in logs])
    levels = sorted(segment[0][1] for collection in axes.collections for segment in collection.get_segments())
    assert levels == pytest.approx([math.exp(-0.05), math.exp(0.12)], abs=0.002)
    low, high = line.compared["interval"]
    (band,) = axes.patches
    assert band.get_y() == pytest.approx(low) and band.get_height() == pytest.approx(high - low)


def test_exchangeable_pairs_add_no_line(tmp_path, capsys):
    text, page = reported(duet_campaign(tmp_path, log_ratios(0.97, 0.01)), capsys)
    block = text.split("\n\n", 1)[0].splitlines()
    assert len(block) == 2 and re.fullmatch(r"cn/bm throughput 0\.970 \[0\.96\d, 0\.97\d\]: 3% slower", block[1])
    assert "not exchangeable" not in page


def test_a_harness_not_isolated_and_no_isolation_end_every_answer_line(tmp_path, capsys):
    metadata = {**HARNESS_SHARED, "isolation": "none"}
    text, page = reported(duet_campaign(tmp_path, log_ratios(0.97, 0.01), metadata), capsys)
    line = text.splitlines()[1]
    assert line.endswith(
        "3% slower; isolation: none (the experiment's choice); harness not isolated: no CPU outside the cells' on "
        "this host"
    )
    # Its share of the cells' CPUs marks the rows too.
    assert "the harness used 1.2% of the cell's CPUs during its timed part (> 0.5%)" in text
    assert "harness not isolated: no CPU outside the cells&#39; on this host" in page
    isolated = {"harness_isolated": True, "harness_isolation": "CPU 3", "harness_cpu_share": 0.002}
    text, _ = reported(duet_campaign(tmp_path, log_ratios(0.97, 0.01), isolated, name="isolated"), capsys)
    assert text.splitlines()[1].endswith(": 3% slower") and "the harness used" not in text


def test_a_duet_rows_elapsed_is_not_compared_where_its_ratio_would_be(tmp_path, capsys):
    directory = duet_campaign(tmp_path, log_ratios(0.97, 0.01))
    text, page = reported(directory, capsys, "--metric", "elapsed")
    assert text.splitlines()[1] == f"cn/bm elapsed: {SAME_WINDOW}"
    table = text.split("\n\n")[1].splitlines()
    assert table[0].split()[-1] == "bm" and all(row.endswith(NOT_COMPARED) for row in table[2:])
    assert f"elapsed: {SAME_WINDOW}" in text.split("\n\n")[2:]
    assert f"<td>{NOT_COMPARED}</td>" in page and f"elapsed: {SAME_WINDOW}" in page
    assert "elapsed normalised to bm" not in page  # no bars of a ratio that says nothing
    diff = (directory / "diff_training.md").read_text()
    (elapsed_row,) = [row for row in diff.splitlines() if row.startswith("| elapsed")]
    assert elapsed_row.endswith(f"| {NOT_COMPARED} | {NOT_COMPARED} |") and f"elapsed: {SAME_WINDOW}" in diff
    # The same elapsed in rounds is compared as any metric.
    rows, keys, baselines, cn, _ = compared_cn(rounds_campaign(tmp_path, log_ratios(0.97, 0.01)))
    assert cn["throughput ratio to bm"] == pytest.approx(0.97)


@skips.requires(
    modules=["selenium"],
    commands=["chromium", "chromedriver"],
    by="`make venv` (apt-get: chromium chromium-driver; requirements.txt: selenium)",
)
def test_the_page_leads_with_the_answer_and_its_pairs_in_headless_chromium(tmp_path, capsys):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    logs = [0.12 + 0.004 * deviation for deviation in DEVIATIONS * 2] + [-0.05] * 20
    directory = duet_campaign(tmp_path, logs)
    reported(directory, capsys)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get((directory / "report.html").as_uri())
        assert [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"] == []
        found = driver.execute_script(
            "const answer = document.getElementById('answer');"
            "const svg = answer.querySelector('figure svg').getBoundingClientRect();"
            "const table = document.querySelector('table').getBoundingClientRect();"
            "const notice = answer.querySelector('.not-exchangeable');"
            "return [answer.getBoundingClientRect().top, table.top, svg.width, svg.height, notice.textContent];"
        )
        answer_top, table_top, width, height, notice = found
        assert answer_top < table_top and width > 0 and height > 0
        assert notice.startswith("cn/bm: the pairs are not exchangeable: a change of level after pair 20 of 40")
    finally:
        driver.quit()


def test_the_pairs_are_compared_in_the_order_they_ran(tmp_path):
    # Rounds 0-11, round 3 run again last (a campaign resumed after a failed cell); duet pair ids sort as text
    # ("r10" before "r2") but run by number.
    samples = []
    for repeat in range(12):
        stamp = 1000.0 if repeat == 3 else 30.0 * repeat
        for platform, value in (("bm", 1000.0), ("cn", 900.0 + repeat)):
            samples.append(throughput_sample(platform, value, repeat, stamp, schedule="rounds"))
    append_samples(tmp_path / "resumed" / "samples.jsonl", samples)
    _, _, _, cn, bm = compared_cn(tmp_path / "resumed")
    ran = [round(value - 900.0) for value, _ in comparison(cn, bm, "throughput")["pairs"]]
    assert ran == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 3]
    _, _, _, cn, bm = compared_cn(duet_campaign(tmp_path, [0.001 * number for number in range(12)]))
    assert [value / baseline for value, baseline in comparison(cn, bm, "throughput")["pairs"]] == pytest.approx(
        [math.exp(0.001 * number) for number in range(12)]
    )
