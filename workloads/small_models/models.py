"""The two networks of the study, their losses and optimizers."""

import torch
import torch.nn.functional as F
from torch import nn

from .settings import ADADELTA_LEARNING_RATE, ADAM_LEARNING_RATE, IMDB_EMBEDDING, IMDB_HIDDEN


class MnistCnn(nn.Module):
    """PyTorch's examples/mnist network: 2 convolutions, 2 dropouts, 2 fully-connected layers, log-softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.flatten(self.dropout1(F.max_pool2d(x, 2)), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        return F.log_softmax(x, dim=1)


class ImdbRnn(nn.Module):
    """Embedding, one (Elman, tanh) RNN layer, one fully-connected output: the sentiment logit."""

    def __init__(self, vocabulary_size):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, IMDB_EMBEDDING, padding_idx=0)
        self.rnn = nn.RNN(IMDB_EMBEDDING, IMDB_HIDDEN, batch_first=True)
        self.fc = nn.Linear(IMDB_HIDDEN, 1)

    def forward(self, words):
        _, hidden = self.rnn(self.embedding(words))
        return self.fc(hidden[-1]).squeeze(1)


def build(net, vocabulary_size=None):
    """(model, loss function, optimizer factory) of a net."""
    if net == "mnist_cnn":
        return MnistCnn(), F.nll_loss, lambda parameters: torch.optim.Adadelta(parameters, lr=ADADELTA_LEARNING_RATE)
    return (
        ImdbRnn(vocabulary_size),
        F.binary_cross_entropy_with_logits,
        lambda parameters: torch.optim.Adam(parameters, lr=ADAM_LEARNING_RATE),
    )


def parameter_count(model):
    return sum(parameter.numel() for parameter in model.parameters())
