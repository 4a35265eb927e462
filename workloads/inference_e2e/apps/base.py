"""The interface every app of inference_e2e implements, and the registry that names them.

An app is one of Samani et al.'s (2022) end-to-end inference jobs: it reads its requests from files
in a published format, and splits each request's work into three phases that the workload times
separately (workloads/inference_e2e/runner.py drives them under MLPerf loadgen, Offline scenario):

    raw = app.load(data_dir, count)                 # untimed: the files' bytes into memory (loadgen's QSL)
    model = app.build_model(size, seed, device)     # untimed, before any preprocess: pre-processing may
                                                    # depend on the size (RS hashes into its tables)
    features = app.preprocess(raw[i].data)          # phase "pre", per request
    outputs = app.infer(model, [features, ...])     # phase "inference", per batch of batch_size requests
    result = app.postprocess(outputs[j])            # phase "post", per request

An app module (``apps/<name>.py``) is importable with the standard library only: ``--check-args``
reads ``APP``'s attributes and calls ``validate`` without any framework. Frameworks (and numpy)
are imported inside the methods that need them, which run after the workload has sized the
framework's thread pools (the workload does that from ``framework``, the app never does).
Each module ends with ``APP = TheAppClass()``; ``APPS`` below maps the app's name to its module.

Errors: ``validate`` and ``load`` raise ``DatasetError`` (workloads/datasets/base.py) whose message
names the bad file and why ("…/0003.JPEG: not a JPEG file (starts with b'GIF8')"), and the command
that writes a stand-in. ``preprocess`` may raise anything on a request it cannot decode: the
workload adds the request's ``source`` (its file) to the message.
"""

import importlib
from typing import Any, NamedTuple

from ..settings import OFFLINE

# app name -> module under workloads.inference_e2e.apps; imported only when the app is asked for.
APPS = {"ic": "ic", "rs": "rs", "sr": "sr", "nlp": "nlp"}
FRAMEWORKS = ("tensorflow", "torch")


class RawRequest(NamedTuple):
    """One request as read from its file(s), before any pre-processing."""

    source: str  # where it came from, for error messages: a path, or "path:line" for a row of a file
    data: Any  # the raw payload: the file's bytes, a text row, a JSON object...


class App:
    """Base class of the apps; a subclass sets the class attributes and implements the methods."""

    name = ""  # the --app value: "ic", "rs", "sr", "nlp"
    description = ""  # one line for --help: task, model, data format
    framework = ""  # one of FRAMEWORKS: the workload sizes its threads and seeds it
    # The other frameworks the app's model is written in: framework -> the app (a subclass) that runs on it.
    # ``--framework`` picks one (IC: ResNet-50 in PyTorch too, for hosts whose TensorFlow sees no GPU).
    alternatives: dict = {}
    # False: preprocess/infer/postprocess cannot be told apart (an app whose model takes raw input);
    # --timing inference_only is then refused at --check-args.
    can_separate_phases = True
    sizes = ()  # model sizes --model-size accepts, the default first ("small", "large"...)
    default_requests = 1000  # the study's request count; --requests scales it
    default_batch_size = 32
    request_unit = "samples"  # what one request is, for messages ("images", "rows", "utterances")
    dataset = ""  # the record's "data" label: the format read ("imagenet-jpeg", "criteo-tsv"...)
    data_format = ""  # what --data-dir must hold, for messages ("train/<class>/*.JPEG")
    generator = ""  # the command that writes a stand-in set: "python -m workloads.datasets.X ..."
    # MLPerf's minimums for a result, per loadgen scenario, of the MLPerf benchmark the app re-runs
    # (settings.offline_minimums): a run below them is recorded scaled-down.
    mlperf: dict = {}

    @property
    def frameworks(self):
        """Every framework the app runs on, its own first."""
        return (self.framework, *self.alternatives)

    def on(self, framework):
        """The app as it runs on ``framework`` (None: its own); KeyError for one it is not written in."""
        if framework in (None, self.framework):
            return self
        return self.alternatives[framework]

    def mlperf_minimums(self, scenario=OFFLINE):
        """MLPerf's minimums (settings.MlperfMinimums) of ``scenario``; None where MLPerf has no such benchmark."""
        return self.mlperf.get(scenario)

    def validate(self, data_dir, count):
        """Check, with the standard library only and quickly, that ``data_dir`` holds at least ``count``
        requests in the app's format; raise DatasetError naming the file that is wrong and why."""
        raise NotImplementedError

    def load(self, data_dir, count):
        """The first ``count`` requests, as a list of RawRequest, read into memory; DatasetError when
        the directory does not hold them (fewer, malformed)."""
        raise NotImplementedError

    def preprocess(self, data):
        """One request's raw ``data`` -> its features (the model's input for one request, host memory)."""
        raise NotImplementedError

    def build_model(self, size, seed, device):
        """The model of ``size`` (one of ``sizes``) with random weights drawn from ``seed``, in inference mode,
        on ``device``: "cpu" or "cuda" (the workload resolved it; a TensorFlow app places its work on /GPU:0
        or /CPU:0 accordingly). The workload seeds the framework before; the app seeds what it draws itself."""
        raise NotImplementedError

    def infer(self, model, features):
        """One batch: a list of features -> a list of outputs, one per request, in order. Stacking the batch,
        moving it to the device and the outputs back to host memory are part of it, so that the batch's work
        is done when this returns. The workload calls it once untimed on the first batch first (warm-up:
        graph tracing, allocations)."""
        raise NotImplementedError

    def postprocess(self, output):
        """One request's output -> its result: a small JSON-serialisable value (top-5 classes, a transcript...)."""
        raise NotImplementedError

    def forward_flops(self, model, features):
        """FLOPs of one forward pass of one request given its ``features`` (common/flops.py's
        keras_forward_flops / torch_forward_flops count them), or None when unknown."""
        return None

    def describe(self, model):
        """Metadata about the built model for the record (parameters, sizes); {} by default."""
        return {}


def get_app(name):
    """The APP of app ``name``; KeyError for a name APPS does not list."""
    module = importlib.import_module(f"{__package__}.{APPS[name]}")
    return module.APP
