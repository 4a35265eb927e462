"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse
import sys

from ansible_collections.platbench.lab.plugins.plugin_utils.records.file_modes import no_world_write

from platbench import __version__, calibrate, compare, history, indexing, report, run, store


def main(argv=None):
    parser = argparse.ArgumentParser(prog="platbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"platbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    report.add_arguments(
        commands.add_parser("report", help=report.command.__doc__.splitlines()[0], description=report.command.__doc__)
    )
    compare.add_arguments(
        commands.add_parser("compare", help=compare.__doc__.splitlines()[0], description=compare.__doc__)
    )
    run.add_arguments(commands.add_parser("run", help=run.__doc__.splitlines()[0], description=run.__doc__))
    calibrate.add_arguments(
        commands.add_parser("calibrate", help=calibrate.__doc__.splitlines()[0], description=calibrate.__doc__)
    )
    indexing.add_index_arguments(
        commands.add_parser("index", help="write campaigns as Parquet and add them to the results store")
    )
    history.add_arguments(
        commands.add_parser("history", help=history.__doc__.splitlines()[0], description=history.__doc__)
    )
    store.add_query_arguments(commands.add_parser("query", help="run a read-only SQL query on the results store"))
    indexing.add_import_arguments(
        commands.add_parser("import", help="add campaign directories copied from another machine to the store")
    )
    store.add_export_arguments(
        commands.add_parser("export", help="write the store's campaigns as Parquet or CSV, a directory each")
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[2:] if argv is None else argv[1:])  # the subcommand's own, to say how to rerun
    # What a command writes (a campaign, its report) follows the user's umask, never writable by others; the
    # ansible-playbook that `platbench run` starts inherits it.
    with no_world_write():
        return args.handler(args)
