"""The rate formulas of micro_gpu and the CPU references every result is checked against.

Pure functions of tensors (torch) and arrays (numpy), on any device: a check takes slices of the
GPU's tensors, brings them to the CPU and compares them with a reference computed there in float64
(or exactly, for integers and copies). The unit tests run them on CPU tensors. A mismatch raises
WorkloadFailed naming the benchmark and the error.
"""

import math

import numpy as np

from ..common.harness import WorkloadFailed
from .settings import GB, MIB, SGEMM_ALIGNMENT

FP32_UNIT_ROUNDOFF = 2.0**-24
# A float32 dot product of length n is off by about sqrt(n) * u * sum(|a_i * b_i|) (the probabilistic bound of
# rounding errors); this factor leaves a wide margin over it, while a wrong element (a bad index, garbage, a
# missing tile) is off by about the value itself and is caught.
SGEMM_ERROR_FACTOR = 16.0
# cuDNN may pick FFT or Winograd algorithms whose float32 error is larger than a direct sum's.
CONV_RELATIVE_TOLERANCE = 1e-4
SAMPLE_COUNT = 8  # rows, columns or elements taken from each of the start, the middle and the end
HISTOGRAM_CHUNK = 8 * MIB  # numpy's bincount widens its input to int64: bounded memory per chunk


# -- rates ----------------------------------------------------------------------------------------------------


def bandwidth_gbs(nbytes, milliseconds):
    """Decimal GB/s of moving `nbytes` in `milliseconds`."""
    return nbytes / (milliseconds / 1e3) / GB


def transpose_gbs(nbytes, milliseconds):
    """A transpose (or copy) of an `nbytes` matrix reads and writes it: 2 * nbytes moved."""
    return bandwidth_gbs(2 * nbytes, milliseconds)


def sgemm_gflops(n, milliseconds):
    """An n x n x n matrix product is n^3 multiply-adds: 2 n^3 floating-point operations."""
    return 2 * n**3 / (milliseconds / 1e3) / 1e9


def mpixels_per_second(height, width, milliseconds):
    return height * width / (milliseconds / 1e3) / 1e6


def sgemm_size(total_bytes, fraction):
    """The largest n, a multiple of SGEMM_ALIGNMENT, whose three n x n float32 matrices fit in `fraction` of
    `total_bytes`; 0 when not even one aligned size fits."""
    n = math.isqrt(int(total_bytes * fraction) // (3 * 4))
    return n - n % SGEMM_ALIGNMENT


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def sample_indices(length, count=SAMPLE_COUNT):
    """Sorted distinct indices from the start, the middle and the end of range(length)."""
    middle = max(0, length // 2 - count // 2)
    picked = {*range(min(count, length)), *range(middle, min(middle + count, length))}
    picked |= set(range(max(0, length - count), length))
    return sorted(picked)


def _fail(benchmark, problem):
    raise WorkloadFailed(f"{benchmark}: the GPU result differs from the CPU reference: {problem}")


def _cpu(tensor):
    return tensor.detach().to("cpu")


# -- copies ---------------------------------------------------------------------------------------------------


def check_copy(benchmark, source, copy, count=SAMPLE_COUNT * 1024):
    """`copy` equals `source` (any devices, same shape) on its first, middle and last `count` elements and on
    a strided sample across the whole tensor; exact."""
    import torch

    if tuple(source.shape) != tuple(copy.shape):
        _fail(benchmark, f"shape {tuple(copy.shape)} instead of {tuple(source.shape)}")
    flat_source, flat_copy = source.reshape(-1), copy.reshape(-1)
    length = flat_source.numel()
    stride = max(1, length // (count or 1))
    slices = [slice(0, count), slice(max(0, length // 2 - count // 2), length // 2 + count // 2)]
    slices += [slice(max(0, length - count), length), slice(0, length, stride)]
    for part in slices:
        expected, got = _cpu(flat_source[part]), _cpu(flat_copy[part])
        if not torch.equal(expected, got):
            index = int((expected != got).nonzero()[0, 0])
            where = part.start + index * (part.step or 1)
            _fail(benchmark, f"element {where} is {got[index].item()}, the source holds {expected[index].item()}")


# -- SGEMM ----------------------------------------------------------------------------------------------------


def check_sgemm(a, b, c, rows=None, cols=None):
    """c == a @ b (square or not, float32, any device) on the sampled rows x columns, within float32's rounding
    error: the reference is a[rows, :] @ b[:, cols] in float64 on the CPU."""
    import torch

    rows = sample_indices(c.shape[0]) if rows is None else rows
    cols = sample_indices(c.shape[1]) if cols is None else cols
    a_rows = _cpu(a[rows, :]).double()
    b_cols = _cpu(b[:, cols]).double()
    expected = a_rows @ b_cols
    got = _cpu(c[rows][:, cols]).double()
    inner = a.shape[1]
    tolerance = SGEMM_ERROR_FACTOR * math.sqrt(inner) * FP32_UNIT_ROUNDOFF * (a_rows.abs() @ b_cols.abs())
    error = (got - expected).abs()
    bad = (error > tolerance) | ~torch.isfinite(got)
    if bool(bad.any()):
        i, j = (int(index) for index in bad.nonzero()[0])
        _fail(
            "sgemm",
            f"C[{rows[i]}, {cols[j]}] is {got[i, j].item():.6g}, the float64 reference {expected[i, j].item():.6g} "
            f"(error {error[i, j].item():.3g} > tolerance {tolerance[i, j].item():.3g}; "
            f"{int(bad.sum())} of {bad.numel()} sampled elements off)",
        )


# -- 2D convolution -------------------------------------------------------------------------------------------


def conv2d_crop_reference(image, weight, top, left, height, width):
    """The `height` x `width` crop at (top, left) of conv2d(image, weight, padding=k // 2) (torch's
    cross-correlation: no flip, zeros outside the image), in float64 with numpy. `image` is 2D (or
    1 x 1 x H x W), `weight` k x k with k odd; only the crop's neighbourhood leaves the device."""
    image = image.reshape(image.shape[-2], image.shape[-1])
    weight = _cpu(weight.reshape(weight.shape[-2], weight.shape[-1])).double().numpy()
    k = weight.shape[0]
    pad = k // 2
    first_row, first_col = max(0, top - pad), max(0, left - pad)
    last_row, last_col = min(image.shape[0], top + height + pad), min(image.shape[1], left + width + pad)
    padded = np.zeros((height + 2 * pad, width + 2 * pad))
    neighbourhood = _cpu(image[first_row:last_row, first_col:last_col]).double().numpy()
    row_offset, col_offset = first_row - (top - pad), first_col - (left - pad)
    padded[row_offset : row_offset + neighbourhood.shape[0], col_offset : col_offset + neighbourhood.shape[1]] = (
        neighbourhood
    )
    result = np.zeros((height, width))
    magnitude = np.zeros((height, width))
    for i in range(k):
        for j in range(k):
            window = padded[i : i + height, j : j + width]
            result += weight[i, j] * window
            magnitude += abs(weight[i, j]) * np.abs(window)
    return result, magnitude


def conv_crops(height, width, crop=32):
    """(top, left, crop height, crop width) of the crops checked: both corners (the zero padding) and the centre."""
    crop_height, crop_width = min(crop, height), min(crop, width)
    corners = [
        (0, 0),
        (height - crop_height, width - crop_width),
        ((height - crop_height) // 2, (width - crop_width) // 2),
    ]
    return [(top, left, crop_height, crop_width) for top, left in corners]


def check_conv2d(image, weight, output):
    """output == conv2d(image, weight, padding=k // 2) on the crops of conv_crops, within float32 rounding."""
    output = output.reshape(output.shape[-2], output.shape[-1])
    for top, left, height, width in conv_crops(*output.shape):
        expected, magnitude = conv2d_crop_reference(image, weight, top, left, height, width)
        got = _cpu(output[top : top + height, left : left + width]).double().numpy()
        tolerance = CONV_RELATIVE_TOLERANCE * magnitude + 1e-30
        bad = ~(np.abs(got - expected) <= tolerance)  # NaN is bad too
        if bad.any():
            i, j = (int(index) for index in np.argwhere(bad)[0])
            _fail(
                "conv2d",
                f"output[{top + i}, {left + j}] is {got[i, j]:.6g}, the float64 reference {expected[i, j]:.6g} "
                f"(tolerance {tolerance[i, j]:.3g}; {int(bad.sum())} of {bad.size} elements off in the "
                f"{height}x{width} crop at ({top}, {left}))",
            )


# -- histograms -----------------------------------------------------------------------------------------------


def _shift(bins):
    if bins not in (2**bits for bits in range(1, 9)):
        raise ValueError(f"byte histograms have a power of two from 2 to 256 bins, got {bins}")
    return 8 - int(math.log2(bins))


def histogram_counts(data, bins):
    """Counts of a uint8 tensor's bytes in `bins` bins of equal width (bin = byte >> (8 - log2 bins): the CUDA
    sample's histogram64 keeps each byte's top 6 bits), on the tensor's device."""
    import torch

    shift = _shift(bins)
    return torch.bincount(data >> shift if shift else data, minlength=bins)


def reference_histogram(array, bins):
    """The same counts with numpy, in chunks; int64."""
    shift = _shift(bins)
    counts = np.zeros(bins, dtype=np.int64)
    for start in range(0, array.size, HISTOGRAM_CHUNK):
        chunk = array[start : start + HISTOGRAM_CHUNK]
        counts += np.bincount(chunk >> shift if shift else chunk, minlength=bins)
    return counts


def check_histogram(data, counts, bins):
    """counts == the histogram of all of `data` (uint8, any device) computed by numpy on the CPU; exact."""
    benchmark = f"histogram ({bins} bins)"
    got = _cpu(counts).numpy().astype(np.int64)
    if got.shape != (bins,):
        _fail(benchmark, f"{got.shape[0]} bins instead of {bins}")
    expected = reference_histogram(_cpu(data).reshape(-1).numpy(), bins)
    if not np.array_equal(got, expected):
        wrong = np.flatnonzero(got != expected)
        _fail(
            benchmark,
            f"{wrong.size} bins differ, first bin {wrong[0]}: {got[wrong[0]]} instead of {expected[wrong[0]]} "
            f"(total {int(got.sum())} of {int(expected.sum())} bytes counted)",
        )


# -- transposes -----------------------------------------------------------------------------------------------


def check_transpose(benchmark, source, result, transposed=True):
    """result == source.t() (or source, for a copy), exactly, on sampled rows and columns of the result."""
    import torch

    expected_shape = (source.shape[1], source.shape[0]) if transposed else tuple(source.shape)
    if tuple(result.shape) != expected_shape:
        _fail(benchmark, f"shape {tuple(result.shape)} instead of {expected_shape}")
    reference = source.t() if transposed else source
    rows, cols = sample_indices(result.shape[0]), sample_indices(result.shape[1])
    for name, expected, got, index_of in (
        ("row", reference[rows, :], result[rows, :], lambda i, j: (rows[i], j)),
        ("column", reference[:, cols], result[:, cols], lambda i, j: (i, cols[j])),
    ):
        expected, got = _cpu(expected), _cpu(got)
        if not torch.equal(expected, got):
            i, j = (int(index) for index in (expected != got).nonzero()[0])
            r, c = index_of(i, j)
            _fail(
                benchmark,
                f"result[{r}, {c}] is {got[i, j].item()} instead of {expected[i, j].item()} (sampled {name}s)",
            )
