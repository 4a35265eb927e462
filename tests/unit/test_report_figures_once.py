"""platbench report draws the figures and report.html once per change of the campaign
(platbench/report/figures_stamp.py), and a text report loads no plotting or page library."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import append_samples
from test_report import cell

from platbench import cli
from platbench.report import figures_stamp as figures_stamp

REPO = Path(__file__).resolve().parents[2]
FIGURES = ("report.png", "report.html")


@pytest.fixture
def campaign(tmp_path):
    """Two rounds of bm and cn."""
    append_samples(tmp_path / "samples.jsonl", [*cell("bm", 0, 40.0, 10.0), *cell("cn", 0, 39.0, 11.0)])
    append_samples(tmp_path / "samples.jsonl", [*cell("bm", 1, 42.0, 11.0), *cell("cn", 1, 42.0, 13.0)])
    return tmp_path


def drawn_at(directory):
    return {name: (directory / name).stat().st_mtime_ns for name in FIGURES}


def test_the_figures_are_drawn_once_per_change_of_the_campaign_unless_asked(campaign, capsys):
    assert cli.main(["report", str(campaign)]) == 0
    first = drawn_at(campaign)
    assert "report.png" in capsys.readouterr().err
    assert json.loads((campaign / figures_stamp.STAMP).read_text())["drawn"][-1] == "report.html"

    assert cli.main(["report", str(campaign)]) == 0  # nothing changed: the tables again, the figures as they are
    out, err = capsys.readouterr()
    assert drawn_at(campaign) == first and "report.png" not in err.split("\n")[0]
    assert "figures and report.html are as drawn for this campaign before" in err
    assert out.rstrip().endswith(f"report: {campaign / 'report.html'}")

    assert cli.main(["report", str(campaign), "--metric", "elapsed"]) == 0  # other figures: drawn again
    second = drawn_at(campaign)
    assert all(second[name] > first[name] for name in FIGURES)
    capsys.readouterr()
    assert cli.main(["report", str(campaign), "--metric", "elapsed"]) == 0
    assert drawn_at(campaign) == second

    append_samples(campaign / "samples.jsonl", cell("cn", 2, 43.0, 12.0))  # the campaign changed
    assert cli.main(["report", str(campaign), "--metric", "elapsed"]) == 0
    third = drawn_at(campaign)
    assert all(third[name] > second[name] for name in FIGURES)
    assert cli.main(["report", str(campaign), "--metric", "elapsed", "--figures"]) == 0  # asked
    assert all(drawn_at(campaign)[name] > third[name] for name in FIGURES)

    (campaign / "report.png").unlink()  # a figure gone: drawn again
    assert cli.main(["report", str(campaign), "--metric", "elapsed"]) == 0
    assert (campaign / "report.png").is_file()


# What a text report must not import: the plotting and page libraries, and the other commands with theirs (run's
# Ansible, calibrate, the store's DuckDB).
NOT_FOR_A_TEXT_REPORT = ("matplotlib", "jinja2", "platbench.run", "platbench.calibrate", "duckdb")


def test_a_text_report_loads_no_plotting_or_page_library(campaign):
    probe = (
        "import sys\n"
        "from platbench import cli\n"
        f"code = cli.main(['report', {str(campaign)!r}, '--no-figures'])\n"
        f"loaded = sorted(name for name in {NOT_FOR_A_TEXT_REPORT!r} if name in sys.modules)\n"
        "print('LOADED', loaded, code)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert "LOADED [] 0" in result.stdout, result.stdout + result.stderr
    assert "Answer: throughput" in result.stdout
    assert not any((campaign / name).exists() for name in FIGURES)
    assert "figures and report.html not written (--no-figures)" in result.stderr
    assert "report: " not in result.stdout.splitlines()[-1]  # no page to point at


def test_every_command_is_listed_and_only_the_one_given_is_imported():
    listed = subprocess.run(
        [sys.executable, "-m", "platbench", "--help"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert all(f"    {name} " in listed for name in cli.COMMANDS), listed
    for name in cli.COMMANDS:
        (subcommands,) = [action for action in cli.parser_for([name])._actions if action.dest == "command"]
        # The given command's parser has its module's arguments and handler; the others are only listed.
        handlers = {other: parser.get_default("handler") for other, parser in subcommands.choices.items()}
        assert callable(handlers.pop(name)) and set(handlers.values()) == {None}, name
