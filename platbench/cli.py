"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse
import sys

from platbench import __version__, compare, report, run


def main(argv=None):
    parser = argparse.ArgumentParser(prog="platbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"platbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    report.add_arguments(commands.add_parser("report", help=report.__doc__.splitlines()[0], description=report.__doc__))
    compare.add_arguments(
        commands.add_parser("compare", help=compare.__doc__.splitlines()[0], description=compare.__doc__)
    )
    run.add_arguments(commands.add_parser("run", help=run.__doc__.splitlines()[0], description=run.__doc__))
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[2:] if argv is None else argv[1:])  # the subcommand's own, to say how to rerun
    return args.handler(args)
