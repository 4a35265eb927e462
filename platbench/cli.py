"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse
import sys

from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import no_world_write

from platbench import __version__

# Each subcommand's module is imported only when that command is given: a report needs none of run's Ansible,
# calibrate's or the store's imports, which would cost it a quarter of a second each time. The imports are written
# out in the functions below (not built from names), so that tools reading imports literally still see them.


def _report(parser):
    from platbench.report import command

    command.add_arguments(parser)
    return command.__doc__


def _compare(parser):
    from platbench import compare

    compare.add_arguments(parser)
    return compare.__doc__


def _run(parser):
    from platbench import run

    run.add_arguments(parser)
    return run.__doc__


def _calibrate(parser):
    from platbench import calibrate

    calibrate.add_arguments(parser)
    return calibrate.__doc__


def _index(parser):
    from platbench import indexing

    indexing.add_index_arguments(parser)


def _history(parser):
    from platbench import history

    history.add_arguments(parser)
    return history.__doc__


def _query(parser):
    from platbench import store

    store.add_query_arguments(parser)


def _import(parser):
    from platbench import indexing

    indexing.add_import_arguments(parser)


def _export(parser):
    from platbench import store

    store.add_export_arguments(parser)


# The subcommands: the function that imports its module and adds its arguments and handler (returning its
# description, where its module's docstring is one), and its line in `platbench --help`.
COMMANDS = {
    "report": (_report, "summarize a campaign: every platform against bm"),
    "compare": (_compare, "compare two campaigns: what changed the platforms' speed"),
    "run": (_run, "run an experiment: plan it, then drive its playbook"),
    "calibrate": (_calibrate, "how small a difference this host can tell, in what time"),
    "index": (_index, "write campaigns as Parquet and add them to the store"),
    "history": (_history, "every campaign of the store over time, against bm"),
    "query": (_query, "run a read-only SQL query on the results store"),
    "import": (_import, "add campaign directories copied from another machine"),
    "export": (_export, "write the store's campaigns as Parquet or CSV"),
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
    for name, (add, summary) in COMMANDS.items():
        sub = commands.add_parser(name, help=summary)
        if name == chosen:
            sub.description = add(sub) or summary
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser_for(argv).parse_args(argv)
    args.argv = argv[1:]  # the subcommand's own, to say how to rerun
    # What a command writes (a campaign, its report) follows the user's umask, never writable by others; the
    # ansible-playbook that `platbench run` starts inherits it.
    with no_world_write():
        return args.handler(args)
