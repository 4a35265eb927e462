"""IMDB movie reviews (Maas et al. 2011, ``aclImdb``): a reader for the real layout and a generator of a stand-in.

The training reviews are one text file each, ``aclImdb/train/pos/<id>_<rating>.txt`` (ratings 7-10)
and ``aclImdb/train/neg/<id>_<rating>.txt`` (ratings 1-4), UTF-8, one line, paragraphs separated
by ``<br /><br />``. DIR may be the folder holding ``aclImdb`` or ``aclImdb`` itself.
Tokenization is deliberately simple: lower case, ``<br />`` dropped, runs of letters and digits
(with an apostrophe suffix such as ``n't`` kept) are the words.

``python -m workloads.datasets.imdb --out DIR --reviews N`` writes N synthetic reviews, half
positive and half negative (sentiment words mixed into neutral text, so a model can learn them),
in that layout.
"""

import collections
import os
import re
import sys

import numpy as np

from .base import DatasetError, first_existing, generator_parser, layout_error, pseudo_words, run_generator

FOLDER = "aclImdb"
CLASSES = (("neg", 0), ("pos", 1))  # folder, label
REVIEW_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
PAD, UNK = "<pad>", "<unk>"  # ids 0 and 1 in every vocabulary
GENERATOR = "python -m workloads.datasets.imdb"
RARE_WORDS = 20000  # made-up words (names, titles, rare words) of the synthetic reviews
EXPECTED = f"{FOLDER}/train/pos/<id>_<rating>.txt and {FOLDER}/train/neg/<id>_<rating>.txt (IMDB review files)"

_NEUTRAL = (
    "the a this that movie film story plot actor actress director scene scenes character characters it was is "
    "and but of to in on with for as at by from watched saw seen ending script camera music cast role time "
    "really quite very just about some more one two first part series show dvd watch people life old new "
    "he she they his her their there here which who when while also even though after before"
).split()
_SENTIMENT = {
    1: "great excellent wonderful brilliant superb loved moving beautiful perfect enjoyable masterpiece "
    "touching fantastic best charming funny delightful amazing recommend".split(),
    0: "awful terrible boring waste worst dull poor bad stupid horrible annoying mess disappointing "
    "pointless lame weak ridiculous unwatchable avoid".split(),
}


def reviews_dir(data_dir):
    """The train folder (holding pos/ and neg/): under DIR/aclImdb, or under DIR when it is aclImdb itself."""
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    train = first_existing(os.path.join(data_dir, FOLDER, "train", "pos"), os.path.join(data_dir, "train", "pos"))
    train = os.path.dirname(train) if train else os.path.join(data_dir, FOLDER, "train")
    missing = [name for name, _ in CLASSES if not os.path.isdir(os.path.join(train, name))]
    if missing:
        folders = " and ".join(f"{FOLDER}/train/{name}/" for name in missing)
        raise layout_error(f"IMDB folder(s) {folders} not found", data_dir, EXPECTED, GENERATOR)
    return train


def _review_files(folder):
    """Review files of one class folder, by review id (the real files are numbered from 0)."""
    numbered = [(int(match.group(1)), name) for name in os.listdir(folder) if (match := REVIEW_NAME.match(name))]
    return [os.path.join(folder, name) for _, name in sorted(numbered)]


def load_train(data_dir, limit=None):
    """(texts, labels int64): the first limit // 2 negative and limit - limit // 2 positive reviews, or all."""
    train = reviews_dir(data_dir)
    texts, labels = [], []
    for (name, label), wanted in zip(
        CLASSES, (None, None) if limit is None else (limit // 2, limit - limit // 2), strict=False
    ):
        files = _review_files(os.path.join(train, name))
        if wanted is not None and len(files) < wanted:
            raise DatasetError(
                f"{os.path.join(train, name)} holds {len(files)} review files named <id>_<rating>.txt, "
                f"{wanted} are needed; to write more: {GENERATOR} --out {data_dir} --reviews {limit}"
            )
        for path in files[:wanted]:
            try:
                with open(path, encoding="utf-8") as review:
                    texts.append(review.read())
            except UnicodeDecodeError as error:
                raise layout_error(f"{path} is not UTF-8 text ({error})", data_dir, EXPECTED, GENERATOR) from None
            labels.append(label)
    if not texts:
        raise layout_error(f"{train}/pos and {train}/neg hold no review files", data_dir, EXPECTED, GENERATOR)
    return texts, np.array(labels, np.int64)


def tokenize(text):
    return WORD.findall(text.lower().replace("<br />", " "))


def build_vocabulary(token_lists, max_size=25000):
    """<pad>, <unk>, then the most frequent words (ties by spelling), max_size entries in all."""
    counts = collections.Counter(token for tokens in token_lists for token in tokens)
    return [PAD, UNK] + sorted(counts, key=lambda word: (-counts[word], word))[: max_size - 2]


def encode(token_lists, vocabulary, max_length):
    """int64 ids, one row per review: its first max_length words, padded with <pad> in front."""
    index = {word: position for position, word in enumerate(vocabulary)}
    unknown = index[UNK]
    ids = np.zeros((len(token_lists), max_length), np.int64)
    for row, tokens in enumerate(token_lists):
        words = [index.get(token, unknown) for token in tokens[:max_length]]
        if words:
            ids[row, max_length - len(words) :] = words
    return ids


def synthetic_review(label, rng, rare_words):
    """One review: neutral and rare words with this label's sentiment words (and a few of the other's) mixed in."""
    sentences = []
    for _ in range(rng.integers(5, 16)):
        draws = rng.random(rng.integers(8, 26))
        words = []
        for draw in draws:
            if draw < 0.15:
                pool = _SENTIMENT[label]
            elif draw < 0.18:
                pool = _SENTIMENT[1 - label]
            elif draw < 0.40:
                # Log-uniform rank: a Zipf-like tail, so the vocabulary grows with the corpus as real text does.
                words.append(rare_words[int(len(rare_words) ** rng.random()) - 1])
                continue
            else:
                pool = _NEUTRAL
            words.append(pool[rng.integers(len(pool))])
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "..."]))
    paragraphs = [" ".join(sentences[i : i + 3]) for i in range(0, len(sentences), 3)]
    return "<br /><br />".join(paragraphs)


def generate(out_dir, count, seed=0):
    """Writes count reviews (count // 2 negative) under out_dir/aclImdb/train/{pos,neg}; returns the train folder."""
    rng = np.random.default_rng(seed)
    rare_words = pseudo_words(RARE_WORDS, rng)
    rng.shuffle(rare_words)
    train = os.path.join(out_dir, FOLDER, "train")
    for (name, label), total in zip(CLASSES, (count // 2, count - count // 2), strict=False):
        folder = os.path.join(train, name)
        os.makedirs(folder, exist_ok=True)
        lowest_rating = 1 if label == 0 else 7
        for review_id in range(total):
            # The rating follows from the id, so that writing again replaces the same files.
            path = os.path.join(folder, f"{review_id}_{lowest_rating + review_id % 4}.txt")
            with open(path, "w", encoding="utf-8") as review:
                review.write(synthetic_review(label, rng, rare_words))
    return train


def main(argv=None):
    parser = generator_parser(
        "imdb", __doc__.split("\n")[0], "--reviews", 1000, "reviews to write, half of them negative"
    )
    args = parser.parse_args(argv)
    return run_generator(args, lambda: generate(args.out, args.reviews, args.seed))


if __name__ == "__main__":
    sys.exit(main())
