"""Criteo click logs as published (Kaggle Display Advertising Challenge, Criteo 1TB "Terabyte"): a reader,
and a generator of a stand-in.

Each line is one ad impression, 40 tab-separated fields: the click label (0 or 1), 13 integer features
(I1..I13, decimal counts; some are negative in the Kaggle set) and 26 categorical features (C1..C26,
32-bit hashes written as 8 hexadecimal digits). Every field but the label may be empty: a missing value.
The Kaggle set is one file, ``train.txt``; the Terabyte set is one file a day, ``day_0`` .. ``day_23``.
A directory holding either is read unchanged: ``train.txt`` when present, else the days in order, the
rows in file order.

Reading a directory needs the standard library only, so that a workload can check it before it imports
numpy or a framework.

Run as a program, this module writes ``DIR/train.txt`` in exactly that format::

    python -m workloads.datasets.criteo --out DIR --rows 100000

Counts are heavy-tailed, each categorical column draws Zipf-distributed values from a vocabulary of its own
(the Kaggle set's cardinalities, capped), a few columns are often empty as in the Kaggle set, and about a
quarter of the rows are clicks, more likely for some values than for others. Nothing is ever downloaded.
"""

import os
import re
import sys

from .base import DatasetError, generator_parser, layout_error, run_generator

INTEGER_FEATURES = 13
CATEGORICAL_FEATURES = 26
FIELDS = 1 + INTEGER_FEATURES + CATEGORICAL_FEATURES
FIELD_NAMES = ("label", *(f"I{i}" for i in range(1, 14)), *(f"C{i}" for i in range(1, 27)))
TRAIN_FILE = "train.txt"
DAY_FILE = re.compile(r"^day_(\d+)$")
GENERATOR = "python -m workloads.datasets.criteo --rows 100000"
EXPECTED = (
    f"{TRAIN_FILE} (Criteo Kaggle) or day_0 .. day_23 (Criteo Terabyte): tab-separated rows of a 0/1 label, "
    f"{INTEGER_FEATURES} integer and {CATEGORICAL_FEATURES} hexadecimal categorical fields"
)
# Distinct values of each categorical column in the Kaggle set (as DLRM's Kaggle preprocessing counts them).
KAGGLE_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip
STAND_IN_VOCABULARY = 50_000  # the generator's cap on a column's distinct values
# About how often a field is empty in the Kaggle set, per column; the generator leaves fields empty as often.
INTEGER_MISSING = (0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.77, 0.22)
CATEGORICAL_MISSING = (0.0,) * 18 + (0.44, 0.44, 0.0, 0.76, 0.0, 0.0, 0.44, 0.44)


def find_files(data_dir):
    """The files holding the rows, in reading order; DatasetError when the directory holds neither layout."""
    if not os.path.isdir(data_dir):
        what = "is not a directory" if os.path.exists(data_dir) else "does not exist"
        raise layout_error(f"data directory {what}", data_dir, EXPECTED, GENERATOR)
    train = os.path.join(data_dir, TRAIN_FILE)
    if os.path.isfile(train):
        return [train]
    days = sorted(
        (int(match.group(1)), name)
        for name in os.listdir(data_dir)
        if (match := DAY_FILE.match(name)) and os.path.isfile(os.path.join(data_dir, name))
    )
    if not days:
        raise layout_error(f"neither {TRAIN_FILE} nor day_N files", data_dir, EXPECTED, GENERATOR)
    return [os.path.join(data_dir, name) for _, name in days]


def parse_row(line):
    """(label, integers, categoricals) of one line; None for an empty field. ValueError naming the bad field."""
    fields = line.rstrip("\r\n").split("\t")
    if len(fields) != FIELDS:
        raise ValueError(f"{len(fields)} tab-separated fields, a Criteo row has {FIELDS}")
    if fields[0] not in ("0", "1"):
        raise ValueError(f"label {fields[0]!r} is not 0 or 1")
    integers = []
    for name, text in zip(FIELD_NAMES[1:14], fields[1:14], strict=True):
        try:
            integers.append(int(text) if text else None)
        except ValueError:
            raise ValueError(f"field {name} {text!r} is not an integer") from None
    categoricals = []
    for name, text in zip(FIELD_NAMES[14:], fields[14:], strict=True):
        try:
            categoricals.append(int(text, 16) if text else None)
        except ValueError:
            raise ValueError(f"field {name} {text!r} is not hexadecimal") from None
    return int(fields[0]), integers, categoricals


def read_rows(data_dir, count):
    """The first ``count`` rows as (file, line number, line text); DatasetError when there are fewer, or a file is
    not text."""
    rows = []
    for path in find_files(data_dir):
        try:
            with open(path, encoding="utf-8") as stream:
                for number, line in enumerate(stream, start=1):
                    if len(rows) == count:
                        return rows
                    rows.append((path, number, line))
        except UnicodeDecodeError as error:
            raise DatasetError(f"{path}: not a text file of Criteo rows ({error})") from None
    if len(rows) < count:
        raise layout_error(
            f"{len(rows)} rows, {count} needed",
            data_dir,
            EXPECTED,
            f"{GENERATOR.rsplit(' --rows', 1)[0]} --rows {count}",
        )
    return rows


def check_rows(rows):
    """DatasetError naming the first row (file:line) that is not a Criteo row, and why."""
    for path, number, line in rows:
        try:
            parse_row(line)
        except ValueError as error:
            raise DatasetError(f"{path}:{number}: not a Criteo row: {error}") from None


# ---------------------------------------------------------------------------------------------
# The generator: numpy, imported only when it runs.


def generate(out, rows, seed=0):
    """Writes ``out/train.txt`` with ``rows`` rows; returns a summary dict."""
    import numpy as np

    if os.path.exists(os.path.join(out, TRAIN_FILE)):
        raise DatasetError(f"{os.path.join(out, TRAIN_FILE)} exists; write the dataset into a new directory")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    # Counts: geometric-like, heavy-tailed; I2 may be negative as in the Kaggle set.
    scales = rng.uniform(1.0, 400.0, INTEGER_FEATURES)
    integers = np.floor(rng.exponential(1.0, (rows, INTEGER_FEATURES)) ** 2 * scales).astype(np.int64)
    integers[:, 1] -= rng.integers(0, 4, rows) * (rng.random(rows) < 0.1)
    # Categories: Zipf ranks into a column's vocabulary of random 32-bit hashes.
    vocabularies = [
        rng.integers(0, 2**32, min(cardinality, STAND_IN_VOCABULARY), dtype=np.uint64)
        for cardinality in KAGGLE_CARDINALITIES
    ]
    ranks = np.stack([np.minimum(rng.zipf(1.3, rows) - 1, len(vocabulary) - 1) for vocabulary in vocabularies], axis=1)
    categoricals = np.stack([vocabularies[column][ranks[:, column]] for column in range(CATEGORICAL_FEATURES)], axis=1)
    # Clicks: about 26% of rows, more likely with popular values of C1 and with larger I1.
    score = -0.95 + 0.6 * (ranks[:, 0] < 3) + 0.3 * np.log1p(integers[:, 0]) / 6 + rng.normal(0, 0.8, rows)
    labels = (score > 0).astype(np.int64)
    integer_missing = rng.random((rows, INTEGER_FEATURES)) < np.asarray(INTEGER_MISSING)
    categorical_missing = rng.random((rows, CATEGORICAL_FEATURES)) < np.asarray(CATEGORICAL_MISSING)
    path = os.path.join(out, TRAIN_FILE)
    with open(path, "w", encoding="utf-8") as stream:
        for row in range(rows):
            fields = [str(labels[row])]
            fields += ["" if integer_missing[row, i] else str(integers[row, i]) for i in range(INTEGER_FEATURES)]
            fields += [
                "" if categorical_missing[row, i] else f"{int(categoricals[row, i]):08x}"
                for i in range(CATEGORICAL_FEATURES)
            ]
            stream.write("\t".join(fields) + "\n")
    return {"out": os.path.abspath(out), "file": path, "rows": rows, "clicks": int(labels.sum())}


def build_parser():
    return generator_parser(
        "criteo",
        "Write a Criteo-format click log (train.txt: label, 13 integer and 26 categorical tab-separated fields).",
        "--rows",
        100_000,
        "rows (ad impressions) to write",
    )


def main(argv=None):
    args = build_parser().parse_args(argv)
    return run_generator(args, lambda: generate(args.out, args.rows, args.seed))


if __name__ == "__main__":
    sys.exit(main())
