"""inference_e2e's NLP app: SQuAD v1.1 JSON, BERT's WordPiece tokenisation with character spans, BERT, answer spans."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workloads.datasets import squad
from workloads.datasets.base import DatasetError
from workloads.inference_e2e.apps import _wordpiece, nlp
from workloads.inference_e2e.apps.base import get_app

NLP = get_app("nlp")
REPO_ROOT = Path(__file__).resolve().parents[2]
# A real dev-v1.1.json's first question, shortened: the format as published (no vocab.txt beside it).
REAL = {
    "data": [
        {
            "title": "Super_Bowl_50",
            "paragraphs": [
                {
                    "context": "Super Bowl 50 was an American football game to determine the champion of the National "
                    "Football League (NFL) for the 2015 season. The American Football Conference (AFC) "
                    "champion Denver Broncos defeated the National Football Conference (NFC) champion Carolina "
                    "Panthers 24\u201310.",
                    "qas": [
                        {
                            "answers": [
                                {"answer_start": 177, "text": "Denver Broncos"},
                                {"answer_start": 177, "text": "Denver Broncos"},
                            ],
                            "question": "Which NFL team represented the AFC at Super Bowl 50?",
                            "id": "56be4db0acb8001400a502ec",
                        }
                    ],
                }
            ],
        }
    ],
    "version": "1.1",
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("squad")
    squad.generate(str(folder), 12, seed=3)
    return folder


def test_generated_set_round_trips_with_exact_answer_offsets(generated):
    questions, path = squad.read_questions(str(generated))
    assert path == str(generated / "dev-v1.1.json") and len(questions) == 12
    for question in questions:
        assert question.answers and question.question.endswith("?")
        for text, start in question.answers:
            assert question.context[start : start + len(text)] == text
    vocabulary = squad.read_vocabulary(str(generated))
    assert vocabulary[:5] == list(_wordpiece.SPECIAL)
    requests = NLP.load(str(generated), 5)
    assert [request.data.question for request in requests] == [question.question for question in questions[:5]]
    assert requests[1].source == f"{path}:data[0].paragraphs[0].qas[1] (id {questions[1].id})"
    assert requests[0].data.tokenizer.vocabulary == vocabulary
    # Every word of the generated text is covered by its vocabulary.
    assert all(_wordpiece.UNK not in requests[0].data.tokenizer.tokens(q.context + " " + q.question) for q in questions)


def test_a_real_squad_file_is_read_unchanged_and_gets_a_vocabulary_of_its_own(tmp_path):
    (tmp_path / "dev-v1.1.json").write_text(json.dumps(REAL))
    NLP.validate(str(tmp_path), 1)
    (request,) = NLP.load(str(tmp_path), 1)
    features = NLP.preprocess(request.data)
    # Built from one paragraph, the vocabulary has its words seen twice and pieces of the others; no [UNK].
    tokens = request.data.tokenizer.tokens(request.data.question)
    assert tokens[:3] == ["w", "##h", "##i"] and tokens[-4:] == ["super", "bowl", "50", "?"]
    answer = REAL["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]
    positions = [
        position
        for position, (start, end) in zip(features.context_tokens, features.spans, strict=True)
        if answer["answer_start"] <= start and end <= answer["answer_start"] + len(answer["text"])
    ]
    logits = np.zeros((2, nlp.MAX_SEQUENCE), np.float32)
    logits[0, positions[0]] = logits[1, positions[-1]] = 5.0
    assert NLP.postprocess((logits[0], logits[1], features)) == "Denver Broncos"


def test_truncated_json_missing_fields_and_short_files_are_named(generated, tmp_path):
    text = (generated / "dev-v1.1.json").read_text()
    (tmp_path / "dev-v1.1.json").write_text(text[: len(text) // 2])
    with pytest.raises(DatasetError, match=rf"{tmp_path}/dev-v1.1.json: not valid JSON at line 1 .*truncated\?"):
        NLP.validate(str(tmp_path), 1)
    broken = json.loads(text)
    del broken["data"][0]["paragraphs"][0]["qas"][1]["question"]
    (tmp_path / "dev-v1.1.json").write_text(json.dumps(broken))
    with pytest.raises(DatasetError, match=r"dev-v1.1.json: data\[0\].paragraphs\[0\].qas\[1\] lacks 'question'"):
        NLP.validate(str(tmp_path), 5)
    NLP.validate(str(tmp_path), 1)  # the first question is whole
    with pytest.raises(DatasetError, match=r"holds 12 questions, 13 are needed.*squad --out .* --questions 13"):
        NLP.validate(str(generated), 13)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match="dev-v1.1.json not found.*python -m workloads.datasets.squad"):
        NLP.validate(str(empty), 1)
    (tmp_path / "dev-v1.1.json").write_text(text)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n")
    with pytest.raises(DatasetError, match=r"vocab.txt: a BERT vocabulary lists \[CLS\], \[SEP\], this one does not"):
        NLP.validate(str(tmp_path), 1)


VOCABULARY = [*_wordpiece.SPECIAL, "un", "una", "##aff", "##able", "want", "##want", "##ed", ",", "runn", "##ing", "中"]


def test_wordpiece_is_greedy_longest_match_first_with_unknown_words():
    tokenizer = _wordpiece.WordPiece(VOCABULARY)
    # BERT's documented examples: lower case, accents stripped, punctuation split.
    assert tokenizer.tokens("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    # Longest match first and no backtracking: "una" is taken, "##ffable" cannot follow, so the word is [UNK]
    # although "un ##aff ##able" would cover it.
    assert tokenizer.tokens("unaffable") == ["[UNK]"]
    assert tokenizer.tokens("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokens("x" * 101 + " 中中") == ["[UNK]", "中", "中"]
    ids, spans = tokenizer.tokenize("  Ünwänted,\tRUNNING\x00!")
    assert [tokenizer.vocabulary[i] for i in ids] == ["un", "##want", "##ed", ",", "runn", "##ing", "[UNK]"]
    assert spans == [(2, 4), (4, 8), (8, 10), (10, 11), (12, 16), (16, 19), (20, 21)]


def test_wordpiece_agrees_with_transformers_bert_tokenizer(generated):
    transformers = pytest.importorskip("transformers")
    vocabulary = generated / "vocab.txt"
    theirs = transformers.BertTokenizer(str(vocabulary), do_lower_case=True)
    ours = _wordpiece.WordPiece(squad.read_vocabulary(str(generated)))
    questions, _ = squad.read_questions(str(generated))
    texts = [q.context for q in questions[:3]] + [q.question for q in questions[:3]]
    texts += ["Caf\u00e9 d\u00e9j\u00e0-vu: $5^x `quoted` (1999)\u2014\u201csmart\u201d", "\u4e2d\u6587 ok"]
    for text in texts:
        assert ours.tokens(text) == theirs.tokenize(text), text


def test_the_sequence_is_cls_question_sep_context_sep_truncated_and_padded(generated):
    (request,) = NLP.load(str(generated), 1)
    tokenizer = request.data.tokenizer
    long = request.data._replace(question=request.data.question * 20, context=request.data.context * 10)
    features = NLP.preprocess(long)
    ids = features.input_ids.tolist()
    cls, sep = tokenizer.ids["[CLS]"], tokenizer.ids["[SEP]"]
    question = tokenizer.tokenize(long.question)[0][: nlp.MAX_QUERY_TOKENS]
    assert ids[: len(question) + 2] == [cls, *question, sep]
    assert len(ids) == nlp.MAX_SEQUENCE and ids[-1] == sep and features.attention_mask.all()
    assert features.context_tokens == range(len(question) + 2, nlp.MAX_SEQUENCE - 1)
    assert features.token_type_ids.tolist() == [0] * (len(question) + 2) + [1] * (nlp.MAX_SEQUENCE - len(question) - 2)
    short = NLP.preprocess(request.data)
    used = int(short.attention_mask.sum())
    assert short.input_ids[used - 1] == sep and not short.input_ids[used:].any()  # [PAD] is 0


def test_best_span_keeps_start_before_end_within_the_context_and_length():
    positions = range(5, 50)
    starts, ends = np.zeros(64, np.float32), np.zeros(64, np.float32)
    starts[2] = ends[3] = 100  # in the question: never chosen
    starts[30], ends[25] = 10, 10  # end before start: not a span
    starts[12], ends[14] = 6, 6
    assert nlp.best_span(starts, ends, positions) == (12, 25)  # 6 + 10, the best with start <= end
    starts[:], ends[:] = 0, 0
    starts[8], ends[8 + nlp.MAX_ANSWER_TOKENS] = 9, 9.5  # one token too long
    ends[8 + nlp.MAX_ANSWER_TOKENS - 1] = 9
    assert nlp.best_span(starts, ends, positions) == (8, 8 + nlp.MAX_ANSWER_TOKENS - 1)
    assert nlp.best_span(starts, ends, range(0)) == (None, None)


# The models run in a fresh process, as in the workload: transformers' BERT imports torch._dynamo, which cannot
# import beside the Ansible loaded in the test process (tests/unit/test_flops.py).
MODELS = """
import json, sys, numpy as np, torch
from workloads.inference_e2e.apps.base import get_app
app = get_app("nlp")
report = {}
with torch.device("meta"):  # constructed, not run
    for size in ("base", "large"):
        report[size] = sum(p.numel() for p in app.build_model(size, 0, "meta").parameters())
requests = app.load(sys.argv[1], 3)
features = [app.preprocess(request.data) for request in requests]
tiny = app.build_model("tiny", 0, "cpu")
outputs = app.infer(tiny, features)
again = app.infer(app.build_model("tiny", 0, "cpu"), features)
report["shapes"] = [[list(start.shape), list(end.shape)] for start, end, _ in outputs]
report["answers"] = [app.postprocess(output) for output in outputs]
report["contexts"] = [request.data.context for request in requests]
report["seeded"] = all(np.array_equal(a[0], b[0]) for a, b in zip(outputs, again))
report["tiny_described"] = app.describe(tiny)["parameters"] == sum(p.numel() for p in tiny.parameters())
small = app.build_model("small", 0, "cpu")
report["small"] = sum(p.numel() for p in small.parameters())
report["small_flops"] = app.forward_flops(small, features[0])
report["attention_after_counting"] = small.config._attn_implementation
print(json.dumps(report))
"""


def test_bert_answers_with_context_substrings_and_has_the_documented_sizes(generated):
    process = subprocess.run(
        [sys.executable, "-c", MODELS, str(generated)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr
    report = json.loads(process.stdout)
    assert report["shapes"] == [[[nlp.MAX_SEQUENCE], [nlp.MAX_SEQUENCE]]] * 3
    assert all(
        answer and answer in context for answer, context in zip(report["answers"], report["contexts"], strict=True)
    )
    assert report["seeded"] and report["tiny_described"]
    # BERT's paper: BERT-Base 110M, BERT-Large 340M parameters; the QA head adds 2 per hidden unit and 2.
    assert report["base"] == pytest.approx(110e6, rel=0.02) and report["large"] == pytest.approx(340e6, rel=0.02)
    assert report["small"] == 11105282
    layers, hidden, _ = nlp.SIZES["small"]
    # Multiply-adds per layer and token: Q, K, V and output (4 h^2), the feed-forward pair (8 h^2), the attention
    # scores and their weighted sum (2 * 384 * h); then the QA head.
    per_token = layers * (12 * hidden * hidden + 2 * nlp.MAX_SEQUENCE * hidden) + 2 * hidden
    assert report["small_flops"] == pytest.approx(2 * per_token * nlp.MAX_SEQUENCE, rel=0.01)
    assert report["attention_after_counting"] == "sdpa"
