"""A DLRM in PyTorch (Naumov et al. 2019, as MLPerf's recommendation benchmark builds it): embedding bags for
the categorical features, a bottom MLP for the dense ones, their pairwise dot products, a top MLP."""

import torch
from torch import nn


def _mlp(widths, generator, last_activation):
    layers = []
    for index, (inputs, outputs) in enumerate(zip(widths, widths[1:], strict=False)):
        linear = nn.Linear(inputs, outputs)
        # DLRM's initialisation: normal weights scaled by fan-in and fan-out, normal biases.
        with torch.no_grad():
            linear.weight.normal_(0.0, (2.0 / (inputs + outputs)) ** 0.5, generator=generator)
            linear.bias.normal_(0.0, (1.0 / outputs) ** 0.5, generator=generator)
        layers.append(linear)
        if index < len(widths) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self, tables, dim, bottom, top, generator):
        super().__init__()
        if bottom[-1] != dim:
            raise ValueError(f"the bottom MLP must end at the embedding width {dim}, got {bottom}")
        self.spec = {"tables": list(tables), "dim": dim, "bottom": list(bottom), "top": list(top)}
        bags = []
        for rows in tables:
            bound = (1.0 / rows) ** 0.5  # DLRM's uniform initialisation of a table
            weight = torch.empty(rows, dim).uniform_(-bound, bound, generator=generator)
            bags.append(nn.EmbeddingBag(rows, dim, mode="sum", _weight=weight))
        self.embeddings = nn.ModuleList(bags)
        self.bottom = _mlp((13, *bottom), generator, last_activation=True)
        vectors = len(tables) + 1
        self.register_buffer("pairs", torch.tril_indices(vectors, vectors, offset=-1), persistent=False)
        self.top = _mlp((dim + self.pairs.shape[1], *top), generator, last_activation=False)

    def forward(self, dense, sparse):
        """dense: float32 [rows, 13]; sparse: int64 [rows, 26] table indices -> one logit a row."""
        bottom = self.bottom(dense)
        offsets = torch.arange(sparse.shape[0], device=sparse.device)  # one index a bag: Criteo is one-hot
        vectors = [bottom] + [bag(sparse[:, column], offsets) for column, bag in enumerate(self.embeddings)]
        stacked = torch.stack(vectors, dim=1)
        dots = torch.bmm(stacked, stacked.transpose(1, 2))
        interactions = dots[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([bottom, interactions], dim=1)).squeeze(1)


class Packed(nn.Module):
    """The model called with one (dense, sparse) tuple, as flops.torch_forward_flops calls a model."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs):
        return self.model(*inputs)
