"""float32 activations times int8 weights stored in blocks of 32 with a float32 scale
each (GGUF's Q8_0 and Q5_0: w = q * scale), or one per half block of 16 (Q6_K, Q3_K),
and optionally a float32 minimum per block of 32 (Q5_1, Q5_K: w = q * scale + minimum),
into float32, on CPU: the layers and LM head of a model whose file stores them so.

Owns the layout of the weights (`pack`, `unpack`, `per_row`, `lookup`: rows interleaved
by eights) and the call into the compiled kernel (int8_rows.h, through `cpu_kernels`),
which quantizes each activation row to int8 per block of 32 and multiplies in integers,
as llama.cpp does for Q8_0; the quality guard (benchmarks/quality.py) measures what that
costs. The kernel runs on torch's OpenMP threads when the extension was built with
OpenMP. A row's result is computed in one fixed order, so it is the same bits whatever
else the batch holds and whichever thread computes it. Must not know about models or
layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structgen.engine.kernels.compiled import cpu_kernels, require

BLOCK = 32  # weights per block of the layout (per scale, or per two with HALVES)
HALVES = 2  # scales per block where each half block has its own (GGUF's Q6_K: 16 weights each)
GROUP_ROWS = 8  # weight rows interleaved together
GROUP_BYTES = GROUP_ROWS * BLOCK  # one block of a group
LANE = 4  # weights of one row side by side in a group's block


def check_rows(q: torch.Tensor, scale: torch.Tensor) -> None:
    """Refuse row-major blocks (GGUF's) that `pack` cannot read, saying what is wrong."""
    if q.dtype != torch.int8 or q.dim() != 2 or q.device.type != "cpu":
        raise ValueError(f"int8 block weights must be a 2-d int8 CPU tensor, got {q.dtype} {tuple(q.shape)} on "
                         f"{q.device}")
    rows, cols = q.shape
    shapes = [(rows, cols // BLOCK * halves) for halves in (1, HALVES)]
    if cols % BLOCK or cols == 0 or rows == 0 or tuple(scale.shape) not in shapes:
        raise ValueError(f"int8 block weights of shape {tuple(q.shape)} need a width that is a positive multiple "
                         f"of {BLOCK} and scales of shape {shapes[0]} or {shapes[1]}; got {tuple(scale.shape)}")


def pack(q: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed, scales) in the kernel's layout, from q int8 [rows, cols] and scale
    [rows, cols / 32] (or [rows, cols / 16]: a scale per half block): packed int8
    [groups, blocks, 256], where in the m-th 32 bytes of a group's block, bytes 4j..4j+3
    hold row j's weights 4m..4m+3; scales float32 [groups, blocks, 8] (or
    [groups, 2 * blocks, 8], each block's halves in turn). Rows past the last (up to a
    multiple of 8) are zeros. Minimums [rows, cols / 32] take the scales' layout
    (`pack_per_block`)."""
    check_rows(q, scale)
    rows, cols = q.shape
    padding = -rows % GROUP_ROWS
    groups, blocks = (rows + padding) // GROUP_ROWS, cols // BLOCK
    q = F.pad(q, (0, 0, 0, padding))
    lanes = q.reshape(groups, GROUP_ROWS, blocks, BLOCK // LANE, LANE)  # [g, j, b, m, t]
    packed = lanes.permute(0, 2, 3, 1, 4).reshape(groups, blocks, GROUP_BYTES).contiguous()
    return packed, pack_per_block(scale)


def pack_per_block(values: torch.Tensor) -> torch.Tensor:
    """Per-row floats [rows, parts] (scales or minimums) in the kernel's layout: float32
    [groups, parts, 8], rows past the last zeros."""
    rows, parts = values.shape
    padding = -rows % GROUP_ROWS
    values = F.pad(values.float(), (0, 0, 0, padding))
    return values.reshape(-1, GROUP_ROWS, parts).permute(0, 2, 1).contiguous()


def unpack(packed: torch.Tensor, rows: int) -> torch.Tensor:
    """The weights of `pack`'s layout: int8 [rows, cols]."""
    groups, blocks, _ = packed.shape
    lanes = packed.reshape(groups, blocks, BLOCK // LANE, GROUP_ROWS, LANE)  # [g, b, m, j, t]
    return lanes.permute(0, 3, 1, 2, 4).reshape(groups * GROUP_ROWS, blocks * BLOCK)[:rows]


def per_row(scales: torch.Tensor, rows: int) -> torch.Tensor:
    """The scales (or minimums) of `pack`'s layout: float32 [rows, blocks] (or [rows, 2 * blocks])."""
    groups, parts, _ = scales.shape
    return scales.permute(0, 2, 1).reshape(groups * GROUP_ROWS, parts)[:rows]


def halves_of(packed: torch.Tensor, scales: torch.Tensor) -> int:
    """Scales per block of `pack`'s layout: 1, or HALVES."""
    return scales.shape[1] // packed.shape[1]


def lookup(packed: torch.Tensor, scales: torch.Tensor, ids: torch.Tensor,
           minimums: torch.Tensor | None = None) -> torch.Tensor:
    """Rows `ids` of the weights, dequantized to float32 [len(ids), cols]: each q times
    its scale (plus its block's minimum), float32 operations as GGUF's own dequantization
    computes them."""
    groups, blocks, _ = packed.shape
    parts = scales.shape[1]
    group, row = ids // GROUP_ROWS, ids % GROUP_ROWS
    lanes = packed.view(groups, blocks, BLOCK // LANE, GROUP_ROWS, LANE)[group, :, :, row, :]  # [n, b, m, t]
    q = lanes.reshape(ids.shape[0], parts, BLOCK * blocks // parts).float()
    scaled = (q * scales[group, :, row][..., None]).reshape(ids.shape[0], blocks, BLOCK)
    if minimums is not None:
        scaled = scaled + minimums[group, :, row][..., None]
    return scaled.reshape(ids.shape[0], blocks * BLOCK)


def check_blocks(packed: torch.Tensor, scales: torch.Tensor, rows: int,
                 minimums: torch.Tensor | None = None) -> None:
    """Refuse packed weights the kernel cannot read, saying what is wrong with them."""
    if (packed.dtype != torch.int8 or packed.dim() != 3 or packed.shape[2] != GROUP_BYTES
            or packed.device.type != "cpu" or not packed.is_contiguous()):
        raise ValueError(f"packed int8 weights must be a contiguous int8 CPU tensor of shape (groups, blocks, "
                         f"{GROUP_BYTES}) (`int8_matmul.pack`), got {packed.dtype} {tuple(packed.shape)} on "
                         f"{packed.device}")
    groups, blocks, _ = packed.shape
    expected = [(groups, blocks * halves, GROUP_ROWS) for halves in (1, HALVES)]
    if (tuple(scales.shape) not in expected or scales.dtype != torch.float32 or scales.device.type != "cpu"
            or not scales.is_contiguous()):
        raise ValueError(f"packed int8 weights of shape {tuple(packed.shape)} need contiguous float32 CPU scales "
                         f"of shape {expected[0]} or {expected[1]}; got {scales.dtype} {tuple(scales.shape)}")
    if minimums is not None and (tuple(minimums.shape) != expected[0] or minimums.dtype != torch.float32
                                 or minimums.device.type != "cpu" or not minimums.is_contiguous()):
        raise ValueError(f"packed int8 weights of shape {tuple(packed.shape)} need contiguous float32 CPU minimums "
                         f"of shape {expected[0]}; got {minimums.dtype} {tuple(minimums.shape)}")
    if not 0 < rows <= packed.shape[0] * GROUP_ROWS or rows <= (packed.shape[0] - 1) * GROUP_ROWS:
        raise ValueError(f"{rows} rows do not fill the {packed.shape[0]} groups of 8 of packed int8 weights")


def matmul(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, rows: int,
           portable: bool = False, minimums: torch.Tensor | None = None) -> torch.Tensor:
    """x [n, k] float32 @ w [rows, k].T -> [n, rows] float32 (w as `pack` holds it, with
    `minimums` per block where given, in `pack_per_block`'s layout).

    `portable`: the plain C path even where AVX2 is there (the tests compare the two)."""
    require()
    check_blocks(packed, scales, rows, minimums)
    k = packed.shape[1] * BLOCK
    if x.dim() != 2 or x.shape[1] != k or x.device.type != "cpu":
        raise ValueError(f"activations of shape {tuple(x.shape)} on {x.device} cannot multiply int8 block weights "
                         f"of width {k} on CPU")
    x = x.detach().to(torch.float32).contiguous()
    out = torch.empty(x.shape[0], rows, dtype=torch.float32)
    if x.shape[0] == 0:
        return out
    cpu_kernels.matmul_rows(packed.data_ptr(), scales.data_ptr(), x.data_ptr(), out.data_ptr(), rows, k,
                            x.shape[0], portable, halves_of(packed, scales),
                            0 if minimums is None else minimums.data_ptr())
    return out
