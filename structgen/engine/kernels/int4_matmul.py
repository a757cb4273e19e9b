"""float32 activations times 4-bit weights stored in blocks of 32 with a float32 scale
and minimum each (w = q * scale + minimum, q in 0..15: GGUF's Q4_0, Q4_1 and Q4_K as
decoded), into float32, on CPU: the native layers of a 4-bit GGUF file.

Owns the packing of the weights (`pack`, `unpack`) and the call into the compiled kernel
(int4_rows.h, through `cpu_kernels`), which quantizes each activation row to int8 per
block of 32 and multiplies in integers, as llama.cpp does for these formats; the quality
guard (benchmarks/quality.py) measures what that costs. The kernel runs on torch's
OpenMP threads when the extension was built with OpenMP. A row's result is computed in
one fixed order, so it is the same bits whatever else the batch holds and whichever
thread computes it. Must not know about models or layers.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels import int8_matmul

BLOCK = 32  # weights per scale and minimum
WIDTH_MULTIPLE = 2 * BLOCK  # the blocks of a row go in pairs


def pack(q: torch.Tensor) -> torch.Tensor:
    """uint8 [rows, cols] values 0..15 -> uint8 [rows, cols / 2], the kernel's layout: the
    blocks in pairs, byte j of a pair holding weight j of its first block (low nibble)
    and weight j of its second (high nibble)."""
    rows, cols = q.shape
    pairs = q.to(torch.uint8).reshape(rows, cols // WIDTH_MULTIPLE, 2, BLOCK)
    return (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(rows, cols // 2).contiguous()


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of `pack`: uint8 [rows, cols] values 0..15."""
    rows, half = packed.shape
    pairs = packed.reshape(rows, half // BLOCK, 1, BLOCK)
    return torch.cat([pairs & 0x0F, pairs >> 4], dim=2).reshape(rows, 2 * half)


def check_blocks(packed: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor) -> None:
    """Refuse weights the kernel cannot read, saying what is wrong with them."""
    if packed.dtype != torch.uint8 or packed.dim() != 2 or packed.device.type != "cpu" or not packed.is_contiguous():
        raise ValueError(f"packed int4 weights must be a contiguous 2-d uint8 CPU tensor, got {packed.dtype} "
                         f"{tuple(packed.shape)} on {packed.device}")
    rows, half = packed.shape
    expected = (rows, 2 * half // BLOCK)
    for name, tensor in (("scales", scale), ("minimums", minimum)):
        if (2 * half % WIDTH_MULTIPLE or tuple(tensor.shape) != expected or tensor.dtype != torch.float32
                or tensor.device.type != "cpu" or not tensor.is_contiguous()):
            raise ValueError(f"packed int4 weights of shape {tuple(packed.shape)} need contiguous float32 CPU "
                             f"{name} of shape {expected} and a width that is a multiple of {WIDTH_MULTIPLE}; got "
                             f"{tensor.dtype} {tuple(tensor.shape)}")


def matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, minimum: torch.Tensor,
           portable: bool = False) -> torch.Tensor:
    """x [n, k] float32 @ w [rows, k].T -> [n, rows] float32 (packed [rows, k / 2]).

    `portable`: the plain C path even where AVX2 is there (the tests compare the two)."""
    int8_matmul.require()
    k = 2 * packed.shape[1]
    if x.dim() != 2 or x.shape[1] != k or x.device.type != "cpu":
        raise ValueError(f"activations of shape {tuple(x.shape)} on {x.device} cannot multiply int4 block weights "
                         f"of width {k} on CPU")
    x = x.detach().to(torch.float32).contiguous()
    out = torch.empty(x.shape[0], packed.shape[0], dtype=torch.float32)
    if x.shape[0] == 0:
        return out
    int8_matmul.cpu_kernels.int4_matmul_rows(packed.data_ptr(), scale.data_ptr(), minimum.data_ptr(), x.data_ptr(),
                                             out.data_ptr(), packed.shape[0], k, x.shape[0], portable)
    return out
