"""BERT's WordPiece tokenisation, with each token's place in the original text, and a vocabulary builder.

The behaviour is the one BERT's paper and its published tokenizer document (Devlin et al. 2019; uncased
models): first basic tokenisation, which drops control characters, splits on whitespace, lower-cases,
strips accents (Unicode NFD, combining marks removed), and makes every punctuation character and every
CJK ideograph a word of its own; then WordPiece on each word, greedy longest-match-first: the longest
prefix in the vocabulary, then the longest ``##``-prefixed continuation, and so on; a word that cannot
be covered (or is longer than 100 characters) becomes one ``[UNK]``.

Unlike the published tokenizer, each token keeps the span of the original text it came from, so that an
answer found in tokens is cut from the context exactly (the NLP app's post-processing). Standard library
only: the dataset generator builds vocabularies with it before any framework is imported.
"""

import collections
import unicodedata

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL = (PAD, UNK, CLS, SEP, MASK)  # ids 0-4 of the vocabularies built here
CONTINUATION = "##"
MAX_WORD_CHARACTERS = 100  # longer words are one [UNK], as in BERT


def _is_whitespace(character):
    return character in " \t\n\r" or unicodedata.category(character) == "Zs"


def _is_dropped(character):
    """NUL, the replacement character and control characters: BERT removes them before splitting."""
    if character in "\t\n\r":
        return False
    return character in "\x00\ufffd" or unicodedata.category(character) in ("Cc", "Cf")


def _is_punctuation(character):
    """Unicode punctuation, and every ASCII character that is neither a letter, a digit nor a space
    ("$", "^", "`" are symbols to Unicode, punctuation to BERT)."""
    code = ord(character)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def _is_cjk(character):
    code = ord(character)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _normalise(character, lower_case):
    if not lower_case:
        return character
    decomposed = unicodedata.normalize("NFD", character.lower())
    return "".join(part for part in decomposed if unicodedata.category(part) != "Mn")


def basic_words(text, lower_case=True):
    """BERT's basic tokenisation of ``text``: a list of (word, origins), ``origins[k]`` being the index in
    ``text`` of the character that the word's k-th character came from."""
    words, word, origins = [], [], []

    def flush():
        if word:
            words.append(("".join(word), list(origins)))
            word.clear()
            origins.clear()

    for index, character in enumerate(text):
        if _is_dropped(character):
            continue
        if _is_whitespace(character):
            flush()
            continue
        if _is_cjk(character):
            flush()
            words.append((character, [index]))
            continue
        for normal in _normalise(character, lower_case):
            if _is_punctuation(normal):
                flush()
                words.append((normal, [index]))
            else:
                word.append(normal)
                origins.append(index)
    flush()
    return words


class WordPiece:
    """A tokenizer over a vocabulary (a list of tokens, ids by position, as BERT's vocab.txt)."""

    def __init__(self, vocabulary, lower_case=True):
        self.vocabulary = list(vocabulary)
        self.ids = {token: index for index, token in enumerate(self.vocabulary)}
        missing = [token for token in (PAD, UNK, CLS, SEP) if token not in self.ids]
        if missing:
            raise ValueError(f"the vocabulary lacks {', '.join(missing)}")
        self.lower_case = lower_case
        self.unknown = self.ids[UNK]

    def _pieces(self, word):
        """(id, start, end) of the word's pieces, start and end indexing the word; one [UNK] when it cannot
        be covered."""
        if len(word) > MAX_WORD_CHARACTERS:
            return [(self.unknown, 0, len(word))]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                token = self.ids.get(piece)
                if token is not None:
                    pieces.append((token, start, end))
                    start = end
                    break
            else:
                return [(self.unknown, 0, len(word))]
        return pieces

    def tokenize(self, text):
        """(ids, spans) of ``text``: each token's id and the (start, end) of the text it covers."""
        ids, spans = [], []
        for word, origins in basic_words(text, self.lower_case):
            for token, start, end in self._pieces(word):
                ids.append(token)
                spans.append((origins[start], origins[end - 1] + 1))
        return ids, spans

    def tokens(self, text):
        """The token strings of ``text``, as BERT's tokenizer would print them."""
        return [self.vocabulary[token] for token in self.tokenize(text)[0]]


def build_vocabulary(texts, size=30522, lower_case=True, word_count=2, piece_count=2):
    """A WordPiece vocabulary for ``texts``: the special tokens, every character seen (alone and as a ``##``
    continuation, so that no word of these texts is [UNK]), the words seen at least ``word_count`` times,
    then the prefixes and ``##`` suffixes of 2 to 4 characters of the rarer words seen at least ``piece_count``
    times, most frequent first; ``size`` tokens at most (30,522: BERT's uncased vocabulary, the model's size)."""
    words = collections.Counter(word for text in texts for word, _ in basic_words(text, lower_case))
    characters = sorted({character for word in words for character in word})
    vocabulary = [*SPECIAL, *characters, *(CONTINUATION + character for character in characters)]
    frequent = sorted((word for word, count in words.items() if count >= word_count), key=lambda w: (-words[w], w))
    pieces = collections.Counter()
    for word, count in words.items():
        if count >= word_count:
            continue
        for length in range(2, min(4, len(word) - 1) + 1):
            pieces[word[:length]] += count
            pieces[CONTINUATION + word[-length:]] += count
    common = sorted((piece for piece, count in pieces.items() if count >= piece_count), key=lambda p: (-pieces[p], p))
    seen = set(vocabulary)
    for token in frequent + common:
        if len(vocabulary) >= size:
            break
        if token not in seen:
            vocabulary.append(token)
            seen.add(token)
    if len(vocabulary) > size:
        raise ValueError(f"these texts have {len(characters)} distinct characters: more than a {size}-token vocabulary")
    return vocabulary
