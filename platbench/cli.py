"""platbench: benchmark deep-learning jobs across execution platforms."""

import argparse

from platbench import __version__, report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="platbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"platbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    report.add_arguments(commands.add_parser("report", help=report.__doc__.splitlines()[0], description=report.__doc__))
    args = parser.parse_args(argv)
    return args.handler(args)
