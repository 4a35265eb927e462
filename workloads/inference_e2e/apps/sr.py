"""Speech recognition (MLPerf inference's RNN-T on LibriSpeech), the study's "SR" app, in PyTorch.

- Requests: 16 kHz mono 16-bit PCM WAV files of at most 15 s, read in MLPerf's manifest order or LibriSpeech's
  tree order (workloads/datasets/librispeech.py); the study sends 1,200 of 15 s.
- pre: the WAV file decoded and turned into log-mel features, 240 per 30 ms (apps/_audio.py).
- inference: a batch padded to its longest request, the RNN-T's encoder, then batched greedy decoding through
  the prediction and joint networks to label indices (apps/_rnnt.py). The decoding loop runs the prediction and
  joint networks, so it belongs to inference, as in MLPerf's reference; with random weights it emits one
  character every 60 ms encoder frame, about a trained model's rate (apps/_rnnt.py says why).
- post: label indices to characters (space, a-z, apostrophe).

Model sizes: ``small`` (default: MLPerf's shape at a quarter of its width, 3.3 million parameters), ``large``
(MLPerf's RNN-T: 45.3 million), ``tiny`` (for tests). Weights are random (seeded).
"""

from ...datasets import librispeech
from ...datasets.base import DatasetError
from ..settings import OFFLINE, offline_minimums
from .base import App, RawRequest

# The model sizes of apps/_rnnt.py, named without importing torch: small (default), large (MLPerf's RNN-T), tiny.
SIZES = ("small", "large", "tiny")


class SpeechRecognition(App):
    name = "sr"
    description = "speech recognition: LibriSpeech WAV files, log-mel features, RNN-T (PyTorch), greedy decoding"
    framework = "torch"
    can_separate_phases = True
    sizes = SIZES
    default_requests = 1200  # Samani et al. 2022: 1,200 WAV files of 15 s
    default_batch_size = 32
    request_unit = "utterances"
    mlperf = {OFFLINE: offline_minimums("rnnt")}  # MLPerf's RNN-T
    dataset = "librispeech-wav"
    data_format = librispeech.EXPECTED
    generator = librispeech.GENERATOR

    def validate(self, data_dir, count):
        librispeech.scan(data_dir, count)

    def load(self, data_dir, count):
        requests = []
        for utterance in librispeech.scan(data_dir, count):
            try:
                with open(utterance.path, "rb") as audio:
                    requests.append(RawRequest(utterance.path, audio.read()))
            except OSError as error:
                raise DatasetError(f"{utterance.path}: cannot be read ({error.strerror})") from None
        return requests

    def preprocess(self, data):
        from ._audio import features_of_wav

        return features_of_wav(data)

    def build_model(self, size, seed, device):
        from ._rnnt import build

        return build(size, seed, device)

    def infer(self, model, features):
        import torch

        from ._rnnt import pad_batch

        batch, lengths = pad_batch(features, next(model.parameters()).device)
        with torch.inference_mode():
            return model(batch, lengths)

    def postprocess(self, output):
        from ._rnnt import LABELS

        return "".join(LABELS[label] for label in output)

    def forward_flops(self, model, features):
        from ._rnnt import forward_flops

        return forward_flops(model, features)

    def describe(self, model):
        from ._rnnt import MAX_SYMBOLS_PER_FRAME

        return {
            "parameters": sum(parameter.numel() for parameter in model.parameters()),
            **{f"rnnt_{field}": value for field, value in model.size._asdict().items()},
            "max_symbols_per_frame": MAX_SYMBOLS_PER_FRAME,
        }


APP = SpeechRecognition()
