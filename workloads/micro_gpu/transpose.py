"""The matrix-transpose kernels of micro_gpu, in Triton (imported only when the transpose benchmark runs).

PyPI's CUDA torch brings Triton with it (torch 2.13.0 requires triton==3.7.1 on Linux). The variants
are listed in settings.TRANSPOSE_VARIANTS, which says how the CUDA sample's kernels map onto these:
- `_tile_kernel` moves one BLOCK_ROWS x BLOCK_COLS tile per program: loaded along the source's rows
  (coalesced) and, for a transpose, stored as tl.trans(tile) along the destination's rows, which Triton
  stages through shared memory (its layouts are swizzled against bank conflicts); without TRANSPOSE it is
  the copy that gives the bandwidth reference. DIAGONAL visits the tiles of each row of tiles in
  diagonal order.
- `_naive_kernel` reads a run of one row and writes it down a column: every store lands in another row
  of the destination, with no staging.
With TRITON_INTERPRET=1 set before this module is imported, the kernels run on CPU tensors (the tests).
"""

import triton
import triton.language as tl

from .settings import TRANSPOSE_VARIANTS


@triton.jit
def _tile_kernel(
    source,
    destination,
    rows,
    cols,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    TRANSPOSE: tl.constexpr,
    DIAGONAL: tl.constexpr,
):
    tile_row = tl.program_id(0)
    tile_col = tl.program_id(1)
    if DIAGONAL:
        tile_col = (tile_row + tile_col) % tl.num_programs(1)
    # int64 offsets: rows * cols may pass 2^31 elements.
    r = (tile_row * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)
    c = (tile_col * BLOCK_COLS + tl.arange(0, BLOCK_COLS)).to(tl.int64)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(source + r[:, None] * cols + c[None, :], mask=inside)
    if TRANSPOSE:
        tl.store(destination + c[:, None] * rows + r[None, :], tl.trans(tile), mask=tl.trans(inside))
    else:
        tl.store(destination + r[:, None] * cols + c[None, :], tile, mask=inside)


@triton.jit
def _naive_kernel(source, destination, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = (tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    inside = c < cols
    values = tl.load(source + row * cols + c, mask=inside)
    tl.store(destination + c * rows + row, values, mask=inside)


def output_shape(variant_name, rows, cols):
    return (rows, cols) if TRANSPOSE_VARIANTS[variant_name].kernel == "copy" else (cols, rows)


def launch(variant_name, source, destination):
    """Runs one variant on a contiguous 2D `source` into `destination` (shaped as output_shape says); asynchronous
    on a GPU, like any kernel launch."""
    variant = TRANSPOSE_VARIANTS[variant_name]
    rows, cols = source.shape
    if tuple(destination.shape) != output_shape(variant_name, rows, cols):
        raise ValueError(f"{variant_name}: destination is {tuple(destination.shape)} for a {rows}x{cols} source")
    if not (source.is_contiguous() and destination.is_contiguous()):
        raise ValueError(f"{variant_name}: source and destination must be contiguous")
    if variant.kernel == "naive":
        grid = (rows, triton.cdiv(cols, variant.block_cols))
        _naive_kernel[grid](source, destination, rows, cols, BLOCK=variant.block_cols, num_warps=variant.num_warps)
        return
    grid = (triton.cdiv(rows, variant.block_rows), triton.cdiv(cols, variant.block_cols))
    _tile_kernel[grid](
        source,
        destination,
        rows,
        cols,
        BLOCK_ROWS=variant.block_rows,
        BLOCK_COLS=variant.block_cols,
        TRANSPOSE=variant.kernel == "tiled",
        DIAGONAL=variant.diagonal,
        num_warps=variant.num_warps,
    )
