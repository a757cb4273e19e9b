"""float32 activations times 4-bit weights stored in blocks of 32 with a float32 scale
and minimum each (w = q * scale + minimum, q in 0..15: GGUF's Q4_0, Q4_1 and Q4_K as
decoded), into float32, on CPU: the native layers of a 4-bit GGUF file.

Owns the layout of the weights (`pack`, `unpack`, `per_row`: rows interleaved by eights)
and the call into the compiled kernel
(int4_rows.h, through `cpu_kernels`), which quantizes each activation row to int8 per
block of 32 and multiplies in integers, as llama.cpp does for these formats; the quality
guard (benchmarks/quality.py) measures what that costs. The kernel runs on torch's
OpenMP threads when the extension was built with OpenMP. A row's result is computed in
one fixed order, so it is the same bits whatever else the batch holds and whichever
thread computes it. Must not know about models or layers.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels.compiled import cpu_kernels, require

BLOCK = 32  # weights per scale and minimum
GROUP_ROWS = 8  # weight rows interleaved together
GROUP_BYTES = GROUP_ROWS * BLOCK // 2  # one block of a group


def fits_shape(rows: int, cols: int) -> bool:
    """Whether a layer of this shape can be held in the kernel's layout."""
    return rows % GROUP_ROWS == 0 and cols % BLOCK == 0 and rows > 0 and cols > 0


def pack(q: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor):
    """(packed, scales, minimums) in the kernel's layout, from q uint8 [rows, cols] values
    0..15 and scale, minimum [rows, cols / 32]: packed uint8 [rows / 8, blocks, 128], where
    in the m-th 32 bytes of a group's block, bytes 4j..4j+3 hold row j's weights 8m..8m+3
    (low nibbles) and 8m+4..8m+7 (high nibbles); scales and minimums float32
    [rows / 8, blocks, 8], a group's block's 8 rows side by side."""
    rows, cols = q.shape
    groups, blocks = rows // GROUP_ROWS, cols // BLOCK
    values = q.to(torch.uint8).reshape(groups, GROUP_ROWS, blocks, 4, 2, 4)  # [g, j, b, m, half, t]
    nibbles = values[..., 0, :] | (values[..., 1, :] << 4)  # [g, j, b, m, t]
    packed = nibbles.permute(0, 2, 3, 1, 4).reshape(groups, blocks, GROUP_BYTES).contiguous()
    return packed, interleaved(scale, groups), interleaved(minimum, groups)


def interleaved(per_row: torch.Tensor, groups: int) -> torch.Tensor:
    """[rows, blocks] -> [rows / 8, blocks, 8] float32."""
    return per_row.float().reshape(groups, GROUP_ROWS, -1).permute(0, 2, 1).contiguous()


def per_row(grouped: torch.Tensor) -> torch.Tensor:
    """The inverse of `interleaved`: [rows / 8, blocks, 8] -> [rows, blocks]."""
    groups, blocks, _ = grouped.shape
    return grouped.permute(0, 2, 1).reshape(groups * GROUP_ROWS, blocks)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The weights of `pack`'s layout: uint8 [rows, cols] values 0..15."""
    groups, blocks, _ = packed.shape
    nibbles = packed.reshape(groups, blocks, 4, GROUP_ROWS, 4)  # [g, b, m, j, t]
    values = torch.stack([nibbles & 0x0F, nibbles >> 4], dim=4)  # [g, b, m, j, half, t]
    return values.permute(0, 3, 1, 2, 4, 5).reshape(groups * GROUP_ROWS, blocks * BLOCK)


def check_blocks(packed: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> None:
    """Refuse weights the kernel cannot read, saying what is wrong with them."""
    if (packed.dtype != torch.uint8 or packed.dim() != 3 or packed.shape[2] != GROUP_BYTES
            or packed.device.type != "cpu" or not packed.is_contiguous()):
        raise ValueError(f"packed int4 weights must be a contiguous uint8 CPU tensor of shape (rows / "
                         f"{GROUP_ROWS}, blocks, {GROUP_BYTES}) (`int4_matmul.pack`), got {packed.dtype} "
                         f"{tuple(packed.shape)} on {packed.device}")
    expected = (*packed.shape[:2], GROUP_ROWS)
    for name, tensor in (("scales", scale), ("minimums", minimum)):
        if (tuple(tensor.shape) != expected or tensor.dtype != torch.float32 or tensor.device.type != "cpu"
                or not tensor.is_contiguous()):
            raise ValueError(f"packed int4 weights of shape {tuple(packed.shape)} need contiguous float32 CPU "
                             f"{name} of shape {expected}; got {tensor.dtype} {tuple(tensor.shape)}")


def matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor,
           portable: bool = False) -> torch.Tensor:
    """x [n, k] float32 @ w [rows, k].T -> [n, rows] float32 (w as `pack` holds it).

    `portable`: the plain C path even where AVX2 is there (the tests compare the two)."""
    require()
    rows, k = packed.shape[0] * GROUP_ROWS, packed.shape[1] * BLOCK
    if x.dim() != 2 or x.shape[1] != k or x.device.type != "cpu":
        raise ValueError(f"activations of shape {tuple(x.shape)} on {x.device} cannot multiply int4 block weights "
                         f"of width {k} on CPU")
    x = x.detach().to(torch.float32).contiguous()
    out = torch.empty(x.shape[0], rows, dtype=torch.float32)
    if x.shape[0] == 0:
        return out
    cpu_kernels.int4_matmul_rows(packed.data_ptr(), scale.data_ptr(), minimum.data_ptr(), x.data_ptr(),
                                 out.data_ptr(), rows, k, x.shape[0], portable)
    return out
