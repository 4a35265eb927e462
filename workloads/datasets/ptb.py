"""Penn Treebank (Mikolov's language-model version): a reader for the real text and a generator of a stand-in.

``ptb.train.txt`` (also ``ptb.valid.txt``, ``ptb.test.txt``) is plain text, one sentence per line,
words separated by spaces, a space at both ends of each line, rare words already replaced by
``<unk>`` and numbers by ``N``. Readers append ``<eos>`` to every line; the vocabulary is built
from the training file, most frequent word first (ties by spelling), as TensorFlow's PTB reader does.
The files sit in DIR or, as in the ``simple-examples`` archive, in DIR/data.

``python -m workloads.datasets.ptb --out DIR --words N --vocab V`` writes about N training words
drawn from a sparse Markov chain over V pseudo-words (so a language model can learn it) in that format.
"""

import collections
import os
import sys

import numpy as np

from .base import DatasetError, first_existing, generator_parser, layout_error, pseudo_words, run_generator

TRAIN_FILE = "ptb.train.txt"
SPLIT_FILES = (TRAIN_FILE, "ptb.valid.txt", "ptb.test.txt")
EOS = "<eos>"
UNK = "<unk>"
GENERATOR = "python -m workloads.datasets.ptb"
EXPECTED = f"{TRAIN_FILE} (PTB text, one sentence per line) directly or under data/"


def find_train_file(data_dir):
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    path = first_existing(os.path.join(data_dir, TRAIN_FILE), os.path.join(data_dir, "data", TRAIN_FILE))
    if path is None:
        raise layout_error(f"PTB file {TRAIN_FILE} not found", data_dir, EXPECTED, GENERATOR)
    return path


def read_words(path):
    """Every word of the file, with <eos> closing each line."""
    try:
        with open(path, encoding="utf-8") as text:
            return [word for line in text for word in line.split() + [EOS]]
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path} is not UTF-8 text ({error})") from None


def build_vocabulary(words):
    """Words by decreasing count, ties broken by spelling; a word's id is its index."""
    counts = collections.Counter(words)
    return sorted(counts, key=lambda word: (-counts[word], word))


def load_train(data_dir):
    """(token ids int32 in file order, vocabulary list) of the training file."""
    path = find_train_file(data_dir)
    try:
        words = read_words(path)
    except DatasetError as error:
        raise layout_error(str(error), data_dir, EXPECTED, GENERATOR) from None
    if len(words) < 2 or set(words) == {EOS}:
        raise layout_error(f"{path} holds no words", data_dir, EXPECTED, GENERATOR)
    vocabulary = build_vocabulary(words)
    ids = {word: index for index, word in enumerate(vocabulary)}
    return np.fromiter((ids[word] for word in words), dtype=np.int32, count=len(words)), vocabulary


def markov_chain(vocabulary_size, seed=0):
    """(words, successors): vocabulary_size - 1 pseudo-words (<eos> completes the vocabulary), 4 successors each."""
    rng = np.random.default_rng(seed)
    words = pseudo_words(max(vocabulary_size - 1, 3), rng, reserved=(UNK, "N"))
    return words, rng.integers(0, len(words), size=(len(words), 4))


def synthetic_sentences(chain, word_count, seed=0):
    """Sentences (lists of words), about word_count words with one <eos> per sentence, walking the chain."""
    words, successors = chain
    rng = np.random.default_rng(seed)
    preference = np.array([0.55, 0.25, 0.12, 0.08])
    sentences, total = [], 0
    while total < word_count:
        length = int(rng.integers(5, 26))
        current = int(rng.integers(len(words)))
        sentence = []
        for choice in rng.choice(len(preference), size=length, p=preference):
            sentence.append(words[current])
            current = int(successors[current, choice])
        sentences.append(sentence)
        total += length + 1
    return sentences


def generate(out_dir, word_count, vocabulary_size=1000, seed=0):
    """Writes ptb.train.txt (about word_count words, <eos> included) and valid/test files a tenth its size."""
    os.makedirs(out_dir, exist_ok=True)
    chain = markov_chain(vocabulary_size, seed)
    paths = []
    for offset, (name, share) in enumerate(zip(SPLIT_FILES, (1.0, 0.1, 0.1), strict=False)):
        sentences = synthetic_sentences(chain, max(int(word_count * share), 1), seed + offset + 1)
        paths.append(os.path.join(out_dir, name))
        with open(paths[-1], "w", encoding="utf-8") as text:
            text.writelines(" " + " ".join(sentence) + " \n" for sentence in sentences)
    return paths


def main(argv=None):
    parser = generator_parser("ptb", __doc__.split("\n")[0], "--words", 20000, "training words to write (about)")
    parser.add_argument("--vocab", type=int, default=1000, help="distinct words, <eos> included (PTB: 10000)")
    args = parser.parse_args(argv)
    if args.vocab < 4:
        parser.error(f"--vocab must be at least 4, got {args.vocab}")
    return run_generator(args, lambda: generate(args.out, args.words, args.vocab, args.seed))


if __name__ == "__main__":
    sys.exit(main())
