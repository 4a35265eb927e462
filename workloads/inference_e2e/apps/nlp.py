"""NLP: question answering, as MLPerf's BERT Offline benchmark serves SQuAD v1.1 (Samani 2022's third app), in PyTorch.

- requests: the questions of a SQuAD v1.1 JSON file, in its order (workloads/datasets/squad.py reads the real
  ``dev-v1.1.json`` unchanged and writes a stand-in), each with its paragraph;
- pre: WordPiece tokenisation (apps/_wordpiece.py) with the data directory's ``vocab.txt`` (a real BERT uncased
  vocabulary works; without one, a vocabulary built from the file's text), then ``[CLS] question [SEP] context
  [SEP]``: the question cut to MAX_QUERY_TOKENS, the context to what fits in MAX_SEQUENCE (384) tokens, padded to
  384 as MLPerf's features are, with token types and the attention mask;
- inference: ``transformers``' BertForQuestionAnswering (the class MLPerf's PyTorch reference runs) built from a
  BertConfig with random weights: start and end logits for every token;
- post: the best answer span, start <= end within MAX_ANSWER_TOKENS tokens, both in the context, by the sum of
  their logits; its text cut from the context through the tokens' character spans.

One request is one question and one window: BERT's reference cuts a context longer than the window into windows
``doc_stride`` (128) tokens apart; here the context's tail is cut off instead. In SQuAD v1.1's dev set that
concerns about 2.5% of the questions (MLPerf's 10,833 windows for 10,570 questions); every window costs the same,
being padded to 384 tokens.

Model sizes (the vocabulary is BERT's 30,522 tokens in all): ``small`` (default; 4 layers, 256 wide, 4 heads:
BERT-Mini of Turc et al. 2019, 11.1 million parameters), ``base`` (BERT-Base: 12, 768, 12; 108.9 million),
``large`` (BERT-Large, MLPerf's and the study's: 24, 1024, 16; 334.1 million), ``tiny`` (for tests).
"""

from typing import NamedTuple

from ...datasets import squad
from ..settings import OFFLINE, offline_minimums
from .base import App, RawRequest

MAX_SEQUENCE = 384  # MLPerf's max_seq_length
MAX_QUERY_TOKENS = 64  # MLPerf's max_query_length
MAX_ANSWER_TOKENS = 30  # BERT's max_answer_length
# (layers, hidden width, attention heads); the feed-forward layers are 4 times as wide, as in BERT.
SIZES = {"small": (4, 256, 4), "base": (12, 768, 12), "large": (24, 1024, 16), "tiny": (2, 64, 2)}


class SquadRequest(NamedTuple):
    question: str
    context: str
    tokenizer: object  # the WordPiece tokenizer, one for all requests


class QaFeatures(NamedTuple):
    input_ids: object  # int64 (MAX_SEQUENCE,)
    token_type_ids: object
    attention_mask: object
    context_tokens: range  # positions of the context's tokens in the sequence
    spans: list  # (start, end) in the context of each of those tokens
    context: str


class QuestionAnswering(App):
    name = "nlp"
    description = "question answering: SQuAD v1.1 JSON, WordPiece, BERT (PyTorch, transformers), answer spans"
    framework = "torch"
    sizes = tuple(SIZES)
    # SQuAD v1.1's dev set has 10,570 questions; the study does not give its count. 1,000 is of the order of the
    # other apps' (1,000 images, 1,200 utterances), and keeps BERT-Large on CPUs within minutes, not hours.
    default_requests = 1000
    default_batch_size = 32
    request_unit = "questions"
    mlperf = {OFFLINE: offline_minimums("bert")}  # MLPerf's BERT
    dataset = "squad-v1.1-json"
    data_format = squad.EXPECTED
    generator = squad.GENERATOR

    def validate(self, data_dir, count):
        squad.read_questions(data_dir, count)
        squad.read_vocabulary(data_dir)

    def load(self, data_dir, count):
        from ._wordpiece import WordPiece, build_vocabulary

        questions, path = squad.read_questions(data_dir, count)
        vocabulary = squad.read_vocabulary(data_dir)
        if vocabulary is None:
            everything, _ = squad.read_questions(data_dir)
            texts = {question.context for question in everything} | {question.question for question in everything}
            vocabulary = build_vocabulary(sorted(texts), squad.MAX_VOCABULARY)
        tokenizer = WordPiece(vocabulary)
        return [
            RawRequest(
                f"{path}:{question.where} (id {question.id})",
                SquadRequest(question.question, question.context, tokenizer),
            )
            for question in questions
        ]

    def preprocess(self, data):
        import numpy as np

        from ._wordpiece import CLS, PAD, SEP

        ids = data.tokenizer.ids
        question, _ = data.tokenizer.tokenize(data.question)
        question = question[:MAX_QUERY_TOKENS]
        context, spans = data.tokenizer.tokenize(data.context)
        room = MAX_SEQUENCE - len(question) - 3  # [CLS], [SEP] and [SEP]
        context, spans = context[:room], spans[:room]
        sequence = [ids[CLS], *question, ids[SEP], *context, ids[SEP]]
        input_ids = np.full(MAX_SEQUENCE, ids[PAD], np.int64)
        input_ids[: len(sequence)] = sequence
        token_type_ids = np.zeros(MAX_SEQUENCE, np.int64)
        token_type_ids[len(question) + 2 : len(sequence)] = 1
        attention_mask = np.zeros(MAX_SEQUENCE, np.int64)
        attention_mask[: len(sequence)] = 1
        first = len(question) + 2
        return QaFeatures(
            input_ids, token_type_ids, attention_mask, range(first, first + len(context)), spans, data.context
        )

    def build_model(self, size, seed, device):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to fetch, ever
        import torch
        from transformers import BertConfig, BertForQuestionAnswering

        layers, hidden, heads = SIZES[size]
        config = BertConfig(
            vocab_size=squad.MAX_VOCABULARY,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
            max_position_embeddings=512,
            type_vocab_size=2,
        )
        torch.manual_seed(seed)
        return BertForQuestionAnswering(config).to(device).eval()

    def infer(self, model, features):
        import numpy as np
        import torch

        device = next(model.parameters()).device
        batch = {
            name: torch.from_numpy(np.stack([getattr(request, name) for request in features])).to(device)
            for name in ("input_ids", "token_type_ids", "attention_mask")
        }
        with torch.inference_mode():
            output = model(**batch)
            starts, ends = output.start_logits.cpu().numpy(), output.end_logits.cpu().numpy()
        return [(start, end, request) for start, end, request in zip(starts, ends, features, strict=True)]

    def postprocess(self, output):
        start_logits, end_logits, features = output
        start, end = best_span(start_logits, end_logits, features.context_tokens)
        if start is None:
            return ""
        offset = features.context_tokens[0]
        return features.context[features.spans[start - offset][0] : features.spans[end - offset][1]]

    def forward_flops(self, model, features):
        import torch

        from ...common.flops import torch_forward_flops

        # PyTorch's FLOP counter does not see inside the fused CPU attention kernel: count with the plain one.
        fused = model.config._attn_implementation
        model.set_attn_implementation("eager")
        try:
            device = next(model.parameters()).device
            return torch_forward_flops(model, torch.from_numpy(features.input_ids).unsqueeze(0).to(device))
        finally:
            model.set_attn_implementation(fused)

    def describe(self, model):
        config = model.config
        return {
            "parameters": sum(parameter.numel() for parameter in model.parameters()),
            "bert_layers": config.num_hidden_layers,
            "bert_hidden": config.hidden_size,
            "bert_heads": config.num_attention_heads,
            "max_sequence": MAX_SEQUENCE,
            "attention": config._attn_implementation,  # "sdpa": PyTorch's fused attention
        }


def best_span(start_logits, end_logits, positions, max_tokens=MAX_ANSWER_TOKENS):
    """(start, end) sequence positions of the best answer among ``positions`` (the context's): start <= end,
    at most ``max_tokens`` tokens, the highest start + end logit; (None, None) for an empty context."""
    import numpy as np

    if not len(positions):
        return None, None
    first, last = positions[0], positions[-1] + 1
    starts, ends = start_logits[first:last], end_logits[first:last]
    scores = starts[:, None] + ends[None, :]
    offsets = np.arange(len(starts))
    allowed = (offsets[None, :] >= offsets[:, None]) & (offsets[None, :] - offsets[:, None] < max_tokens)
    best = int(np.argmax(np.where(allowed, scores, -np.inf)))
    return first + best // len(starts), first + best % len(starts)


APP = QuestionAnswering()
