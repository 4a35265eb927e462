"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse
import sys

from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import no_world_write

from platbench import __version__

# The subcommands: the name of the function of its module that adds its arguments and handler, and its line in
# `platbench --help`. Only the module of the command given is imported (_module): a report needs none of run's
# Ansible, calibrate's or the store's imports, which would cost it a quarter of a second each time.
COMMANDS = {
    "report": ("add_arguments", "summarize a campaign: every platform against bm"),
    "compare": ("add_arguments", "compare two campaigns: what changed the platforms' speed"),
    "run": ("add_arguments", "run an experiment: plan it, then drive its playbook"),
    "calibrate": ("add_arguments", "how small a difference this host can tell, in what time"),
    "reproduce": ("add_arguments", "re-run a study's findings on this lab until each is decided"),
    "explain": ("add_arguments", "why a platform costs what it costs: a ladder of rungs from bm, step by step"),
    "index": ("add_index_arguments", "write campaigns as Parquet and add them to the store"),
    "history": ("add_arguments", "every campaign of the store over time, against bm"),
    "query": ("add_query_arguments", "run a read-only SQL query on the results store"),
    "import": ("add_import_arguments", "add campaign directories copied from another machine"),
    "export": ("add_export_arguments", "write the store's campaigns as Parquet or CSV"),
}


def _module(command):
    """The module of ``command``, imported now. The imports are written out, not built from names, so that tools
    reading imports literally (and the cycle guard's graph) still see them."""
    if command == "report":
        from platbench.report import command as module
    elif command == "compare":
        from platbench import compare as module
    elif command == "run":
        from platbench import run as module
    elif command == "calibrate":
        from platbench import calibrate as module
    elif command == "reproduce":
        from platbench.reproduce import command as module
    elif command == "explain":
        from platbench.explain import command as module
    elif command == "history":
        from platbench import history as module
    elif command in ("index", "import"):
        from platbench import indexing as module
    else:  # query, export
        from platbench import store as module
    return module


def _chosen(argv):
    """The subcommand ``argv`` names (its first word that is not an option), or None."""
    return next((word for word in argv if not word.startswith("-")), None)


def parser_for(argv):
    """The command line's parser, with the arguments of the subcommand ``argv`` names (the others only listed)."""
    parser = argparse.ArgumentParser(prog="platbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"platbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv)
    for name, (adder, summary) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary)
        if name == chosen:
            module = _module(name)
            # A module of one command describes it; one that serves two (indexing, store) is described by the line.
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
