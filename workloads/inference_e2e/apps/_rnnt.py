"""The speech app's model: an RNN-T (Graves 2012) in PyTorch, shaped as MLPerf's reference documents it,
with batched greedy decoding.

- Encoder: LSTM layers over the 240 spliced log-mel features, then time stacking (every 2 frames
  concatenated into one, halving the frame rate to 60 ms), then more LSTM layers.
- Prediction network: an embedding of the last emitted character (zeros before the first) and LSTM layers.
- Joint network: the encoder and prediction outputs projected and added (a linear layer over their
  concatenation, split in two so that the encoder's half is computed once per frame), ReLU, a linear
  layer to the 28 characters and the blank.

Greedy decoding, per encoder frame: while the joint network's best label is not blank, emit it and
advance the prediction network with it, at most MAX_SYMBOLS_PER_FRAME times. A batch decodes together:
rows that emit advance, the others keep their state.

Weights are random, and a random RNN-T decodes chaotically: depending on the seed and the input, blank
wins almost everywhere (no prediction step at all) or a character wins again and again (MLPerf's limit of
30 symbols a frame, 30 times a trained model's work). So that the decoding loop costs what it costs with
a trained model, and the same for every seed and input, the blank's output bias is set far below the
others and a frame emits at most one character: every 60 ms frame then takes one joint evaluation and
one prediction step, and a transcript has 16.7 characters a second, about LibriSpeech's speaking rate
(15, spaces included; a trained model emits 0 or 1 character on almost every frame).
"""

from typing import NamedTuple

import torch
from torch import nn

from ._audio import FEATURES

# The character set of MLPerf's RNN-T: space, a-z, apostrophe; the blank comes after them.
LABELS = " abcdefghijklmnopqrstuvwxyz'"
BLANK = len(LABELS)
MAX_SYMBOLS_PER_FRAME = 1  # MLPerf's decoder allows 30 (module docstring)
SUPPRESSED_BLANK_BIAS = -1e4


class RnntSize(NamedTuple):
    encoder_hidden: int
    pre_layers: int  # LSTM layers before time stacking
    post_layers: int  # LSTM layers after it
    stack_time: int  # frames concatenated into one between them
    prediction_hidden: int
    prediction_layers: int
    joint_hidden: int


SIZES = {
    # The same shape, narrower: seconds per batch on one core.
    "small": RnntSize(256, 2, 3, 2, 128, 2, 256),
    # MLPerf inference's RNN-T (rnnt.toml): 2 + 3 encoder LSTM layers of 1024, prediction 2 x 320, joint 512;
    # its README documents 45.3 million parameters.
    "large": RnntSize(1024, 2, 3, 2, 320, 2, 512),
    "tiny": RnntSize(32, 1, 1, 2, 16, 1, 32),  # for tests
}


def _forget_gate_bias(lstm, value=1.0):
    """Sets the forget gates' input bias to ``value`` and their recurrent bias to 0, as MLPerf's RNN-T does."""
    hidden = lstm.hidden_size
    with torch.no_grad():
        for layer in range(lstm.num_layers):
            getattr(lstm, f"bias_ih_l{layer}")[hidden : 2 * hidden].fill_(value)
            getattr(lstm, f"bias_hh_l{layer}")[hidden : 2 * hidden].fill_(0.0)


class Encoder(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.stack_time = size.stack_time
        self.pre = nn.LSTM(FEATURES, size.encoder_hidden, size.pre_layers, batch_first=True)
        self.post = nn.LSTM(
            size.stack_time * size.encoder_hidden, size.encoder_hidden, size.post_layers, batch_first=True
        )
        _forget_gate_bias(self.pre)
        _forget_gate_bias(self.post)

    def forward(self, features, lengths):
        """(batch, frames, 240) and frame counts -> (batch, frames / stack, hidden) and the new counts.

        Padded frames run through the LSTMs too; they come after a row's last frame, so a forward LSTM's
        outputs on the real frames do not depend on them, and the decoder stops at each row's length."""
        hidden, _ = self.pre(features)
        batch, frames, width = hidden.shape
        spare = -frames % self.stack_time
        if spare:
            hidden = nn.functional.pad(hidden, (0, 0, 0, spare))
        hidden = hidden.reshape(batch, (frames + spare) // self.stack_time, width * self.stack_time)
        hidden, _ = self.post(hidden)
        return hidden, (lengths + self.stack_time - 1) // self.stack_time


class Prediction(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.embed = nn.Embedding(len(LABELS), size.prediction_hidden)
        self.lstm = nn.LSTM(size.prediction_hidden, size.prediction_hidden, size.prediction_layers, batch_first=True)
        _forget_gate_bias(self.lstm)

    def step(self, labels, state):
        """One step for each row: labels (batch,) of the last emitted characters, -1 for none yet."""
        embedded = self.embed(labels.clamp(min=0)) * (labels >= 0).unsqueeze(1)
        output, state = self.lstm(embedded.unsqueeze(1), state)
        return output.squeeze(1), state


class Joint(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.encoder_part = nn.Linear(size.encoder_hidden, size.joint_hidden)
        self.prediction_part = nn.Linear(size.prediction_hidden, size.joint_hidden, bias=False)
        self.out = nn.Linear(size.joint_hidden, len(LABELS) + 1)

    def forward(self, encoder_projected, prediction_projected):
        return self.out(torch.relu(encoder_projected + prediction_projected))


class Rnnt(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size
        self.encoder = Encoder(size)
        self.prediction = Prediction(size)
        self.joint = Joint(size)

    def forward(self, features, lengths):
        """Greedy transcripts: (batch, frames, 240) padded features and their frame counts -> one list of
        label indices (into LABELS) per row."""
        encoded, lengths = self.encoder(features, lengths)
        return self.decode(self.joint.encoder_part(encoded), lengths)

    def decode(self, encoder_projected, lengths, max_symbols=MAX_SYMBOLS_PER_FRAME):
        """Batched greedy decoding of encoder outputs already projected by the joint network."""
        batch, device = encoder_projected.shape[0], encoder_projected.device
        lengths = lengths.to(device)
        no_label = torch.full((batch,), -1, dtype=torch.long, device=device)
        output, state = self.prediction.step(no_label, None)
        prediction_projected = self.joint.prediction_part(output)
        emitted = []  # (emit mask, labels) of every step, read back once at the end
        for frame in range(int(lengths.max())):
            pending = lengths > frame  # rows whose frames are not done
            for _ in range(max_symbols):
                best = self.joint(encoder_projected[:, frame], prediction_projected).argmax(1)
                emit = pending & (best != BLANK)
                if not bool(emit.any()):
                    break
                emitted.append((emit, best))
                output, new_state = self.prediction.step(torch.where(emit, best, no_label), state)
                prediction_projected = torch.where(
                    emit.unsqueeze(1), self.joint.prediction_part(output), prediction_projected
                )
                keep = emit.view(1, batch, 1)
                state = tuple(torch.where(keep, new, old) for new, old in zip(new_state, state, strict=True))
                pending = emit
        transcripts = [[] for _ in range(batch)]
        if emitted:
            masks = torch.stack([emit for emit, _ in emitted], 1).cpu().numpy()
            labels = torch.stack([best for _, best in emitted], 1).cpu().numpy()
            for row in range(batch):
                transcripts[row] = labels[row][masks[row]].tolist()
        return transcripts


def build(size_name, seed, device="cpu"):
    """The RNN-T of SIZES[size_name], its weights drawn from ``seed``, in eval mode on ``device``."""
    torch.manual_seed(seed)
    model = Rnnt(SIZES[size_name])
    with torch.no_grad():
        model.joint.out.bias[BLANK] = SUPPRESSED_BLANK_BIAS  # module docstring
    return model.to(device).eval()


def pad_batch(features, device="cpu"):
    """A list of (frames, 240) arrays -> the (batch, max frames, 240) zero-padded tensor on ``device`` and the
    frame counts."""
    lengths = torch.tensor([len(rows) for rows in features], dtype=torch.long)
    batch = torch.zeros(len(features), int(lengths.max()), FEATURES)
    for row, rows in enumerate(features):
        batch[row, : len(rows)] = torch.from_numpy(rows)
    return batch.to(device), lengths


class _OneRequest(nn.Module):
    """The model over one request, as common/flops.py's counter calls it: model(features)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, features):
        return self.model(features, torch.tensor([features.shape[1]]))


def forward_flops(model, features):
    """FLOPs of transcribing one request: the encoder and every prediction and joint step the greedy decoder
    takes on it."""
    from ...common.flops import torch_forward_flops

    device = next(model.parameters()).device
    return torch_forward_flops(_OneRequest(model), torch.from_numpy(features).unsqueeze(0).to(device))
