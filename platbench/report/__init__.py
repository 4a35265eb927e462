"""The report of a campaign (``platbench report``): each platform against bare metal.

The package only re-exports: the command line is ``command`` (whose docstring says what a report holds), and its
parts live in modules by trade: ``load`` (samples to a frame), ``stats`` (statistics), ``tables`` (the summary
tables and their notes), ``context`` (each summary made once), ``figures`` (charts), ``page`` (report.html),
``diff`` (Diff% tables), ``shares`` (the host-to-device split), ``sizing_columns`` (the sizing columns and chr.png),
``inference`` and ``instances`` (the sections of such campaigns), ``meta`` (run.json's metadata) and
``figures_stamp`` (whether the figures are as the campaign is).
"""

import importlib

# Re-exported lazily (PEP 562): importing a part (platbench.report.stats) runs this file first, and an eager import
# of the command line here would import every part, and what imports them, from inside that import.
_COMMAND = "platbench.report.command"


def __getattr__(name):
    command = importlib.import_module(_COMMAND)
    if name == "command":
        return command
    if name in command.__all__:
        return getattr(command, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), "command", *importlib.import_module(_COMMAND).__all__})
