"""What the dataset modules share: the error their loaders raise and the generators' command line.

Stdlib only, so that a workload can check a data directory before it imports numpy or a framework.
"""

import argparse
import os

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


def pseudo_words(count, rng, reserved=()):
    """`count` distinct pronounceable made-up words (the `reserved` ones included), sorted; rng: numpy Generator."""
    onsets = list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    words = set(reserved)
    while len(words) < count:
        syllables = rng.integers(1, 4)
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)
