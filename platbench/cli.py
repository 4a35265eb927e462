"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse
import importlib
import sys

from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import no_world_write

from platbench import __version__

# The subcommands: (module, the function that adds its arguments and handler, a line for `platbench --help`). Only
# the module of the command given is imported: a report needs none of run's Ansible, calibrate's or the store's
# imports, which would cost it a quarter of a second each time.
COMMANDS = {
    "report": ("platbench.report.command", "add_arguments", "summarize a campaign: every platform against bm"),
    "compare": ("platbench.compare", "add_arguments", "compare two campaigns: what changed the platforms' speed"),
    "run": ("platbench.run", "add_arguments", "run an experiment: plan it, then drive its playbook"),
    "calibrate": ("platbench.calibrate", "add_arguments", "how small a difference this host can tell, in what time"),
    "index": ("platbench.indexing", "add_index_arguments", "write campaigns as Parquet and add them to the store"),
    "history": ("platbench.history", "add_arguments", "every campaign of the store over time, against bm"),
    "query": ("platbench.store", "add_query_arguments", "run a read-only SQL query on the results store"),
    "import": ("platbench.indexing", "add_import_arguments", "add campaign directories copied from another machine"),
    "export": ("platbench.store", "add_export_arguments", "write the store's campaigns as Parquet or CSV"),
}


def _chosen(argv):
    """The subcommand ``argv`` names (its first word that is not an option), or None."""
    return next((word for word in argv if not word.startswith("-")), None)


def parser_for(argv):
    """The command line's parser, with the arguments of the subcommand ``argv`` names (the others only listed)."""
    parser = argparse.ArgumentParser(prog="platbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"platbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv)
    for name, (module_name, adder, summary) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary)
        if name == chosen:
            module = importlib.import_module(module_name)
            sub.description = module.__doc__ if adder == "add_arguments" else summary
            getattr(module, adder)(sub)
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser_for(argv).parse_args(argv)
    args.argv = argv[1:]  # the subcommand's own, to say how to rerun
    # What a command writes (a campaign, its report) follows the user's umask, never writable by others; the
    # ansible-playbook that `platbench run` starts inherits it.
    with no_world_write():
        return args.handler(args)
