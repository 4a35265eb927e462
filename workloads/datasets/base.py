"""What the dataset modules share: the error their loaders raise and the generators' command line.

Stdlib only, so that a workload can check a data directory before it imports numpy or a framework.
"""

import argparse
import json
import os
import sys

from ..common.args import add_check_args, positive_int


class DatasetError(Exception):
    """A data directory does not hold a dataset in its published layout; the message says what was expected."""


def layout_error(problem, data_dir, expected, generator):
    """DatasetError naming the problem, the files expected and the command that writes a stand-in."""
    return DatasetError(
        f"{problem}; expected {expected} in {data_dir}. "
        f"To write a small synthetic set in that format: {generator} --out {data_dir}"
    )


def first_existing(*paths):
    """The first path that exists, or None."""
    return next((path for path in paths if os.path.exists(path)), None)


def generator_parser(module, description, count_flag, count_default, count_help):
    """The command line every generator shares: --out DIR, one size flag, --seed."""
    parser = argparse.ArgumentParser(prog=f"python -m workloads.datasets.{module}", description=description)
    parser.add_argument("--out", required=True, help="directory to write into (created when missing)")
    parser.add_argument(count_flag, type=positive_int, default=count_default, help=count_help)
    parser.add_argument("--seed", type=int, default=0)
    add_check_args(parser.add_argument)
    return parser


def run_generator(args, write, check=None):
    """A generator's exit code. With --check-args: ``check()`` (when given) and 0, nothing written. Otherwise
    ``write()``, and what it returns on stdout: a list of paths one a line, a dict (a summary) as JSON, a path as
    it is. A DatasetError (a size the format cannot hold, a bad --out) is the message on stderr and 2."""
    try:
        if args.check_args:
            if check is not None:
                check()
            return 0
        written = write()
    except DatasetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(written, dict):
        print(json.dumps(written))
    elif isinstance(written, (list, tuple)):
        print(*written, sep="\n")
    else:
        print(written)
    return 0


def pseudo_words(count, rng, reserved=()):
    """`count` distinct pronounceable made-up words (the `reserved` ones included), sorted; rng: numpy Generator."""
    onsets = list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    words = set(reserved)
    while len(words) < count:
        syllables = rng.integers(1, 4)
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)
