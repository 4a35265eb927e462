"""Model FLOPs per sample, counted from the model itself, and model-FLOP utilisation (MFU).

Only the matrix work counts (convolutions, dense/linear layers, recurrent gates): it is what
the hardware peak measures and more than 99% of a CNN's arithmetic; normalisation, activations
and pooling are left out, as is usual for MFU. One multiply-add is 2 FLOPs. A training step
costs 3 forward passes (the backward pass computes gradients for activations and for weights,
each as much matrix work as the forward pass), an inference step 1.

Frameworks are imported only inside the functions that walk their models.
"""

import math

from .peak import run_peak
from .record import metric

TRAINING_PASSES = 3


def keras_forward_flops(model, sequence_length=None):
    """FLOPs of one sample through a built Keras 3 model (Sequential or functional), by layer.

    ``sequence_length`` fills an unknown time dimension (token inputs of variable length).
    """
    total = 0
    for layer in _keras_layers(model):
        total += _keras_layer_flops(layer, sequence_length)
    return total


def _keras_layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            yield from _keras_layers(layer)
        else:
            yield layer


def _known(shape, sequence_length):
    """A symbolic shape without its batch dimension, unknown sizes replaced by ``sequence_length``."""
    dims = list(shape[1:])
    if any(dim is None for dim in dims):
        if sequence_length is None:
            raise ValueError(f"shape {tuple(shape)} has an unknown dimension: pass sequence_length")
        dims = [sequence_length if dim is None else dim for dim in dims]
    return dims


def _keras_layer_flops(layer, sequence_length):
    kind = type(layer).__name__
    if kind in ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D"):
        out = _known(layer.output.shape, sequence_length)
        kernel = layer.kernel.shape  # (*window, in_channels / groups, filters) or depthwise (*window, in, mult)
        macs_per_output = math.prod(kernel[:-1]) if kind != "DepthwiseConv2D" else math.prod(kernel[:-2])
        return 2 * math.prod(out) * macs_per_output
    if kind == "Dense":
        out = _known(layer.output.shape, sequence_length)
        return 2 * math.prod(out) * layer.kernel.shape[0]
    if kind in ("LSTM", "GRU", "SimpleRNN"):
        steps, features = _known(layer.input.shape, sequence_length)
        cell = layer.cell
        gates = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}[kind]
        # Each step: input and recurrent kernels for every gate.
        return 2 * steps * (features + cell.units) * gates * cell.units
    return 0


_RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def torch_forward_flops(model, example):
    """FLOPs of one forward pass of ``model`` on ``example`` (one sample or a batch), counted by
    PyTorch's own FlopCounterMode; divide by the batch size for per-sample figures.

    FlopCounterMode does not see inside the fused recurrent kernels (aten::lstm and friends),
    so recurrent layers are counted from their shapes, as keras_forward_flops does."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    recurrent = []

    def count_recurrent(module, inputs, _output):
        sequence = inputs[0]
        if isinstance(sequence, torch.nn.utils.rnn.PackedSequence):
            steps_times_batch = int(sequence.data.shape[0])
        else:
            steps = sequence.shape[1] if sequence.dim() == 3 else 1
            steps_times_batch = int(sequence.shape[0] * steps)
        gates = _RNN_GATES[type(module).__name__] * module.hidden_size
        directions = 2 if module.bidirectional else 1
        features = module.input_size
        for _ in range(module.num_layers):
            recurrent.append(2 * steps_times_batch * directions * (features + module.hidden_size) * gates)
            features = module.hidden_size * directions

    hooks = [
        module.register_forward_hook(count_recurrent)
        for module in model.modules()
        if type(module).__name__ in _RNN_GATES and isinstance(module, torch.nn.RNNBase)
    ]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(example)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return counter.get_total_flops() + sum(recurrent)


def utilisation_metrics(samples_per_sec, forward_flops, passes, peak_flops):
    """The record's FLOP metrics for a run at ``samples_per_sec``: model FLOPs per sample
    (``passes`` forward passes of ``forward_flops``), achieved FLOP/s and, given a peak in FLOP/s,
    the peak and MFU; FLOP figures in GFLOP."""
    per_sample = forward_flops * passes
    achieved = samples_per_sec * per_sample
    metrics = [
        metric("model_flops", per_sample / 1e9, "GFLOP/sample"),
        metric("achieved_flops", achieved / 1e9, "GFLOP/s"),
    ]
    if peak_flops:
        metrics += [metric("peak_flops", peak_flops / 1e9, "GFLOP/s"), metric("mfu", achieved / peak_flops, "ratio")]
    return metrics


def training_flop_metrics(samples_per_sec, count, peak_gflops, framework, dtype, threads, metadata, passes=None):
    """The FLOP metrics of a finished run, taken after its `elapsed`: a training run (``passes`` None:
    TRAINING_PASSES forward passes a sample) or an inference run (``passes`` 1).

    ``count()`` gives (forward FLOPs of one sample, the device it trained on); the peak comes
    from run_peak (``peak_gflops`` is the --peak-gflops argument), its provenance into
    ``metadata``. When counting or the peak fails: no FLOP metrics and the reason in
    ``metadata["utilisation_error"]``, so the training run measured before stays valid."""
    try:
        forward, device = count()
        peak = run_peak(peak_gflops, framework, dtype, device, threads, metadata)
    except Exception as error:  # noqa: BLE001 - any failure here must not discard the run's record
        metadata["utilisation_error"] = f"{type(error).__name__}: {error}"
        return []
    return utilisation_metrics(samples_per_sec, forward, TRAINING_PASSES if passes is None else passes, peak)
