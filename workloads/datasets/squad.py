"""SQuAD v1.1 (Rajpurkar et al. 2016) as published, and the WordPiece vocabulary BERT reads it with.

The data directory holds the dataset's JSON file unchanged, ``dev-v1.1.json`` (MLPerf's BERT benchmark
uses the dev set), or one other ``*.json`` file in the same format:
``{"version": "1.1", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}]}]}]}]}``. Questions are read in the file's order. ``answers`` are
not needed to serve questions and are not required.

Beside it, ``vocab.txt`` (BERT's format: one token a line, the id is the line number, ``##`` marks a
continuation piece) is the tokenizer's vocabulary: a real BERT uncased vocabulary works as it is. Where
there is none, the loader builds one from the file's own text (apps/_wordpiece.py).

``python -m workloads.datasets.squad --out DIR --questions N`` writes N questions on generated articles
(about 5 a paragraph, as SQuAD has) in that format, each answer a span of its context with its exact
``answer_start``, and the vocabulary built from the generated text. Reading needs the standard library
only, so that a workload can reject a bad ``--data-dir`` before it imports a framework.
"""

import json
import os
import sys
from typing import NamedTuple

from .base import DatasetError, generator_parser, layout_error, pseudo_words, run_generator

DATASET_FILE = "dev-v1.1.json"
VOCABULARY_FILE = "vocab.txt"
MAX_VOCABULARY = 30522  # BERT's uncased vocabulary: the models' embedding tables have this many rows
GENERATOR = "python -m workloads.datasets.squad"
EXPECTED = (
    f"{DATASET_FILE} (SQuAD v1.1 JSON: data -> paragraphs -> context, qas -> id, question) [and {VOCABULARY_FILE}]"
)


class Question(NamedTuple):
    id: str
    question: str
    context: str
    answers: tuple  # (text, answer_start) pairs, possibly none
    where: str  # "data[0].paragraphs[1].qas[2]", for messages


def dataset_file(data_dir):
    """The SQuAD JSON file of ``data_dir``: dev-v1.1.json, or its only *.json file; DatasetError otherwise."""
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    if os.path.isfile(os.path.join(data_dir, DATASET_FILE)):
        return os.path.join(data_dir, DATASET_FILE)
    found = sorted(name for name in os.listdir(data_dir) if name.endswith(".json"))
    if len(found) == 1:
        return os.path.join(data_dir, found[0])
    problem = f"{DATASET_FILE} not found" + (f" and several JSON files ({', '.join(found)})" if found else "")
    raise layout_error(problem, data_dir, EXPECTED, GENERATOR)


def _field(container, key, kind, path, where):
    if not isinstance(container, dict) or key not in container:
        raise DatasetError(f"{path}: {where} lacks {key!r}; SQuAD v1.1 has data -> paragraphs -> context, qas")
    value = container[key]
    if not isinstance(value, kind):
        raise DatasetError(f"{path}: {where}.{key} is a {type(value).__name__}, expected a {kind.__name__}")
    return value


def read_questions(data_dir, count=None):
    """The first ``count`` questions (all when None) of the data directory's SQuAD file, in its order, and the
    file's path; DatasetError naming the file, the place in it and the problem."""
    path = dataset_file(data_dir)
    try:
        with open(path, encoding="utf-8") as source:
            document = json.load(source)
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error})") from None
    except json.JSONDecodeError as error:
        cut = error.pos >= len(error.doc.rstrip()) or error.msg.startswith("Unterminated")
        end = " (the file ends inside it: truncated?)" if cut else ""
        raise DatasetError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}{end}"
        ) from None
    questions = []
    for article_number, article in enumerate(_field(document, "data", list, path, "the file")):
        where = f"data[{article_number}]"
        for paragraph_number, paragraph in enumerate(_field(article, "paragraphs", list, path, where)):
            at = f"{where}.paragraphs[{paragraph_number}]"
            context = _field(paragraph, "context", str, path, at)
            for qa_number, qa in enumerate(_field(paragraph, "qas", list, path, at)):
                here = f"{at}.qas[{qa_number}]"
                answers = tuple(
                    (_field(answer, "text", str, path, f"{here}.answers[{n}]"), answer.get("answer_start"))
                    for n, answer in enumerate(qa.get("answers", []) if isinstance(qa, dict) else [])
                )
                questions.append(
                    Question(
                        str(_field(qa, "id", (str, int), path, here)),
                        _field(qa, "question", str, path, here),
                        context,
                        answers,
                        here,
                    )
                )
                if count is not None and len(questions) == count:
                    return questions, path
    if count is not None:
        raise DatasetError(
            f"{path} holds {len(questions)} questions, {count} are needed; to write more: "
            f"{GENERATOR} --out {data_dir} --questions {count}"
        )
    return questions, path


def read_vocabulary(data_dir):
    """The tokens of ``data_dir``/vocab.txt, or None when there is none; DatasetError when it is unusable."""
    path = os.path.join(data_dir, VOCABULARY_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as source:
            tokens = [line.rstrip("\n") for line in source]
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error})") from None
    while tokens and not tokens[-1]:
        tokens.pop()
    missing = [token for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if token not in tokens]
    if missing:
        raise DatasetError(f"{path}: a BERT vocabulary lists {', '.join(missing)}, this one does not")
    if len(tokens) > MAX_VOCABULARY:
        raise DatasetError(
            f"{path}: {len(tokens)} tokens, more than the models' {MAX_VOCABULARY} (BERT's uncased vocabulary)"
        )
    return tokens


# --- the generator -----------------------------------------------------------------------------------------

_FUNCTION_WORDS = "the of in a to and was by for on with as at from that its which".split()
_QUESTION_WORDS = ("What", "Who", "Which", "Where", "When", "How")
_PUNCTUATION = (",", ";", ".", ".", ".")


def _sentence(rng, words):
    length = int(rng.integers(8, 25))
    picks = []
    for _ in range(length):
        pool = _FUNCTION_WORDS if rng.random() < 0.35 else words
        picks.append(pool[rng.integers(len(pool))])
    if rng.random() < 0.3:  # a number or a year now and then, as in encyclopaedic text
        picks[int(rng.integers(length))] = str(int(rng.integers(1000, 2030)))
    if rng.random() < 0.3:
        picks[int(rng.integers(length - 1))] += ","
    picks[0] = picks[0].capitalize()
    return " ".join(picks) + "."


def _paragraph(rng, words, questions_wanted, article, paragraph_number):
    sentences = [_sentence(rng, words) for _ in range(int(rng.integers(5, 11)))]  # SQuAD: ~120 words a context
    context = " ".join(sentences)
    offsets, position = [], 0
    for sentence in sentences:
        offsets.append(position)
        position += len(sentence) + 1
    qas = []
    for number in range(questions_wanted):
        chosen = int(rng.integers(len(sentences)))
        tokens = sentences[chosen].rstrip(".").split(" ")
        start_word = int(rng.integers(len(tokens)))
        span = tokens[start_word : start_word + int(rng.integers(1, 5))]
        answer = " ".join(span).rstrip(",")
        answer_start = offsets[chosen] + len(" ".join(tokens[:start_word])) + (1 if start_word else 0)
        rest = [
            token.rstrip(",") for index, token in enumerate(tokens) if not start_word <= index < start_word + len(span)
        ]
        question = f"{_QUESTION_WORDS[rng.integers(len(_QUESTION_WORDS))]} {' '.join(rest[:12]).lower()}?"
        qas.append(
            {
                "answers": [{"answer_start": answer_start, "text": answer}] * int(rng.integers(1, 4)),
                "question": question,
                "id": f"{article:08x}{paragraph_number:08x}{number:08x}",  # 24 hex digits, as SQuAD's
            }
        )
    return {"context": context, "qas": qas}


def generate(out_dir, count, seed=0, questions_per_paragraph=5, paragraphs_per_article=40):
    """Writes ``count`` questions in SQuAD v1.1 format to out_dir/dev-v1.1.json and the vocabulary built from
    the text to out_dir/vocab.txt; returns both paths."""
    import numpy as np

    from ..inference_e2e.apps._wordpiece import build_vocabulary

    rng = np.random.default_rng(seed)
    words = pseudo_words(3000, rng)
    rng.shuffle(words)
    articles, written = [], 0
    while written < count:
        article = {"title": words[len(articles) % len(words)].capitalize(), "paragraphs": []}
        while written < count and len(article["paragraphs"]) < paragraphs_per_article:
            wanted = min(questions_per_paragraph, count - written)
            article["paragraphs"].append(_paragraph(rng, words, wanted, len(articles), len(article["paragraphs"])))
            written += wanted
        articles.append(article)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, DATASET_FILE)
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"data": articles, "version": "1.1"}, out)
    texts = [p["context"] for a in articles for p in a["paragraphs"]]
    texts += [qa["question"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    vocabulary_path = os.path.join(out_dir, VOCABULARY_FILE)
    with open(vocabulary_path, "w", encoding="utf-8") as out:
        out.write("\n".join(build_vocabulary(texts, MAX_VOCABULARY)) + "\n")
    return path, vocabulary_path


def main(argv=None):
    parser = generator_parser(
        "squad",
        __doc__.split("\n")[0],
        "--questions",
        1000,
        "questions to write (the NLP app's default request count)",
    )
    args = parser.parse_args(argv)
    return run_generator(args, lambda: generate(args.out, args.questions, args.seed))


if __name__ == "__main__":
    sys.exit(main())
