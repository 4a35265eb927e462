"""RS: recommendation, as MLPerf's DLRM Offline benchmark serves it (Samani 2022's fourth app).

- requests: Criteo click-log rows (workloads/datasets/criteo.py reads the Kaggle and Terabyte files as
  published; it also writes a stand-in). One request is a user's list of candidate items, ROWS_PER_REQUEST
  consecutive rows, as MLPerf's DLRM groups its samples (100 to 700 rows each; the smallest here);
- pre: each row parsed, its 13 counts clamped at 0 and log(1 + x)-normalised, its 26 categorical hashes
  taken modulo their embedding table's size (DLRM's hashing into "max-ind-range" tables);
- inference: a DLRM (PyTorch, random weights): one embedding bag per categorical feature, a bottom MLP over
  the counts, the pairwise dot products of the 27 vectors, a top MLP to one logit a row;
- post: click probabilities (sigmoid) and the TOP_K most likely clicks of the request.

Model sizes: ``small`` (default) has DLRM's Kaggle MLPs and the Kaggle tables capped at 100,000 rows (about
70 MB); ``kaggle`` the full Kaggle tables (33.8 million rows, 2.2 GB); ``terabyte`` MLPerf's DLRM (tables of
the Terabyte set capped at 40 million rows, 128-wide: about 104 GB): built only where that much memory is
available, refused with the figures otherwise; ``tiny`` is for tests.
"""

import math
from typing import NamedTuple

from ...datasets import criteo
from ...datasets.base import DatasetError
from ..settings import OFFLINE, offline_minimums
from .base import App, RawRequest

ROWS_PER_REQUEST = 100
TOP_K = 10
# MLPerf DLRM (Terabyte, max-ind-range 40,000,000): its tables' sizes.
TERABYTE_TABLES = (
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
    2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36,
)  # fmt: skip
MEMORY_HEADROOM = 0.8  # the share of the available memory the embedding tables may take


class DlrmSize(NamedTuple):
    tables: tuple  # rows of each of the 26 embedding tables
    dim: int  # embedding width, also the bottom MLP's output
    bottom: tuple  # the bottom MLP's layer widths, after the 13 inputs
    top: tuple  # the top MLP's layer widths, after the interactions; the last is the logit

    @property
    def table_bytes(self):
        return sum(self.tables) * self.dim * 4


SIZES = {
    "small": DlrmSize(
        tuple(min(rows, 100_000) for rows in criteo.KAGGLE_CARDINALITIES), 16, (512, 256, 64, 16), (512, 256, 1)
    ),
    "kaggle": DlrmSize(criteo.KAGGLE_CARDINALITIES, 16, (512, 256, 64, 16), (512, 256, 1)),
    "terabyte": DlrmSize(TERABYTE_TABLES, 128, (512, 256, 128), (1024, 1024, 512, 256, 1)),
    "tiny": DlrmSize((1000,) * criteo.CATEGORICAL_FEATURES, 8, (16, 8), (16, 1)),
}


class Recommendation(App):
    name = "rs"
    description = "Criteo TSV rows, DLRM (PyTorch), click probabilities and top-k"
    framework = "torch"
    sizes = tuple(SIZES)
    # 1,000 requests as IC's 1,000 images: 100,000 rows, about 25 MB of text, generated here in seconds.
    default_requests = 1000
    default_batch_size = 16  # requests: 1,600 rows a forward pass
    request_unit = f"requests of {ROWS_PER_REQUEST} rows"
    # MLPerf's DLRM (v2), whose sample is one user's pairs, as a request of rows is here.
    mlperf = {OFFLINE: offline_minimums("dlrm-v2")}
    dataset = "criteo-tsv"
    data_format = criteo.EXPECTED
    generator = criteo.GENERATOR

    def __init__(self):
        self.tables = None  # the model's table sizes, which pre-processing hashes into (build_model sets them)

    def validate(self, data_dir, count):
        criteo.check_rows(criteo.read_rows(data_dir, count * ROWS_PER_REQUEST))

    def load(self, data_dir, count):
        rows = criteo.read_rows(data_dir, count * ROWS_PER_REQUEST)
        criteo.check_rows(rows)
        requests = []
        for start in range(0, len(rows), ROWS_PER_REQUEST):
            group = rows[start : start + ROWS_PER_REQUEST]
            source = f"{group[0][0]}:{group[0][1]}-{group[-1][1]}"
            requests.append(RawRequest(source, group))
        return requests

    def preprocess(self, data):
        import numpy as np

        if self.tables is None:
            raise RuntimeError("build_model first: pre-processing hashes into the model's tables")
        dense = np.zeros((len(data), criteo.INTEGER_FEATURES), np.float32)
        sparse = np.zeros((len(data), criteo.CATEGORICAL_FEATURES), np.int64)
        for row, (path, number, line) in enumerate(data):
            try:
                _, integers, categoricals = criteo.parse_row(line)
            except ValueError as error:
                raise DatasetError(f"{path}:{number}: not a Criteo row: {error}") from None
            # Counts clamped at 0 (the Kaggle set has negatives) then log(1 + x), as DLRM's preprocessing.
            dense[row] = [math.log1p(max(value, 0)) if value is not None else 0.0 for value in integers]
            sparse[row] = [
                value % rows if value is not None else 0 for value, rows in zip(categoricals, self.tables, strict=True)
            ]
        return dense, sparse

    def build_model(self, size, seed, device):
        import torch

        from ._dlrm import Dlrm

        spec = SIZES[size]
        available = _available_memory()
        if available is not None and spec.table_bytes > MEMORY_HEADROOM * available:
            raise MemoryError(
                f"--model-size {size}: its embedding tables take {spec.table_bytes / 1e9:.1f} GB, more than "
                f"{MEMORY_HEADROOM:.0%} of the {available / 1e9:.1f} GB available here; use --model-size kaggle "
                "or small"
            )
        self.tables = spec.tables
        generator = torch.Generator().manual_seed(seed)
        model = Dlrm(spec.tables, spec.dim, spec.bottom, spec.top, generator)
        return model.to(device).eval()

    def infer(self, model, features):
        import numpy as np
        import torch

        device = next(model.parameters()).device
        dense = torch.from_numpy(np.concatenate([request[0] for request in features])).to(device)
        sparse = torch.from_numpy(np.concatenate([request[1] for request in features])).to(device)
        with torch.inference_mode():
            logits = model(dense, sparse).cpu().numpy()
        return np.split(logits, np.cumsum([len(request[0]) for request in features])[:-1])

    def postprocess(self, output):
        import numpy as np

        probabilities = 1.0 / (1.0 + np.exp(-output))
        k = min(TOP_K, len(probabilities))
        top = np.argpartition(probabilities, -k)[-k:]
        top = top[np.argsort(-probabilities[top])]
        return [[int(row), round(float(probabilities[row]), 6)] for row in top]

    def forward_flops(self, model, features):
        import torch

        from ...common.flops import torch_forward_flops
        from ._dlrm import Packed

        device = next(model.parameters()).device
        dense, sparse = (torch.from_numpy(array).to(device) for array in features)
        return torch_forward_flops(Packed(model), (dense, sparse))

    def describe(self, model):
        spec = model.spec
        return {
            "rows_per_request": ROWS_PER_REQUEST,
            "parameters": sum(parameter.numel() for parameter in model.parameters()),
            "table_rows": sum(spec["tables"]),
            "table_bytes": sum(spec["tables"]) * spec["dim"] * 4,
            **spec,
        }


def _available_memory():
    """Bytes of memory available to a new allocation (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


APP = Recommendation()
