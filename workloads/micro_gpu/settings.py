"""What micro_gpu measures and at which sizes by default (stdlib only: --check-args reads it)."""

from typing import NamedTuple

MIB = 2**20
GB = 1e9  # bandwidths are in decimal GB/s, as the CUDA samples and the vendors' data sheets give them

BENCHMARKS = ("transfer", "sgemm", "conv2d", "histogram", "transpose")
DEFAULT_DEVICE = "cuda:0"
DEFAULT_TRANSFER_MB = 256  # MiB per host<->device and device<->device copy
DEFAULT_MEMORY_FRACTION = 0.25  # of the GPU's total memory, for SGEMM's three matrices
MAX_MEMORY_FRACTION = 0.9  # the CUDA context, cuBLAS workspace and the allocator need the rest
SGEMM_ALIGNMENT = 256  # the SGEMM size is rounded down to a multiple of this (whole tiles for cuBLAS)
DEFAULT_CONV_SIZE = 8192  # a single-channel square fp32 image
DEFAULT_CONV_KERNEL = 7
DEFAULT_HISTOGRAM_MB = 64  # MiB of random bytes: the study's 64M bytes
HISTOGRAM_BINS = (64, 256)  # the CUDA sample's histogram64 (top 6 bits of each byte) and histogram256
DEFAULT_TRANSPOSE_SIZE = 8192  # a square fp32 matrix: 256 MiB, far beyond any GPU's caches
DEFAULT_REPEATS = 10
DEFAULT_WARMUP = 2


class TransposeVariant(NamedTuple):
    """One kernel of the transpose benchmark (micro_gpu/transpose.py)."""

    kernel: str  # copy | naive | tiled
    block_rows: int  # the tile each Triton program moves: rows x cols of the source
    block_cols: int
    diagonal: bool  # tiles visited in diagonal order (the CUDA sample's remedy for partition camping)
    num_warps: int
    description: str


# The CUDA SDK's transpose sample has copy, copySharedMem, naive, coalesced, noBankConflicts, coarse/fine-grained
# and diagonal kernels. In Triton, shared memory is the compiler's: a tile loaded from rows and stored transposed
# (tl.trans) is staged through shared memory with a swizzled (bank-conflict free) layout chosen by Triton. So the
# sample's coalesced, shared-memory and no-bank-conflict kernels are all the `tiled_*` kernel here, which differ
# by tile shape; `naive` reads rows and writes columns with no staging at all; `copy` is the bandwidth reference.
TRANSPOSE_VARIANTS = {
    "copy": TransposeVariant(
        "copy", 64, 64, False, 4, "64x64 tiles copied without transposing: the bandwidth reference"
    ),
    "naive": TransposeVariant(
        "naive", 1, 1024, False, 4, "each program reads 1024 elements of a row and writes them down a column (strided)"
    ),
    "tiled_16x16": TransposeVariant("tiled", 16, 16, False, 1, "16x16 tiles stored transposed via shared memory"),
    "tiled_32x32": TransposeVariant(
        "tiled", 32, 32, False, 4, "32x32 tiles (the CUDA sample's TILE_DIM) stored transposed via shared memory"
    ),
    "tiled_64x64": TransposeVariant("tiled", 64, 64, False, 8, "64x64 tiles stored transposed via shared memory"),
    "tiled_32x32_diagonal": TransposeVariant(
        "tiled", 32, 32, True, 4, "tiled_32x32 with the tiles of each row of tiles visited in diagonal order"
    ),
}
