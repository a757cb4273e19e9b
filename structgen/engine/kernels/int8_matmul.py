"""float32 activations times int8 weights stored in blocks of 32 with a float32 scale
each (GGUF's Q8_0: w = q * scale), into float32, on CPU: the LM head of a model whose
file stores it so.

Owns the call into the compiled kernel (int8_rows.h, through `cpu_kernels`, built from
cpu_kernels.pyx when the package is installed), with the GIL released. A row's result is computed in one fixed order,
so it is the same bits whatever else the batch holds. Must not know about models or
layers.

The kernel splits the weight rows over torch's own OpenMP threads (the extension is built
with OpenMP where the compiler has it, and links the libgomp torch has loaded). A pool of
our own lost to torch's: between a step's torch ops its workers keep spinning, and a
second thread of ours only shared a core with one of them (2.4 ms against 2.2 on one
thread for the embedded model's head, in a decode loop on 2 cores); on torch's pool the
head takes 1.5 ms.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels.compiled import cpu_kernels, require

BLOCK = 32  # weights per scale


def check_blocks(q: torch.Tensor, scale: torch.Tensor) -> None:
    """Refuse weights the kernel cannot read, saying what is wrong with them."""
    if q.dtype != torch.int8 or q.dim() != 2 or q.device.type != "cpu" or not q.is_contiguous():
        raise ValueError(f"int8 block weights must be a contiguous 2-d int8 CPU tensor, got {q.dtype} "
                         f"{tuple(q.shape)} on {q.device}")
    rows, cols = q.shape
    if (cols % BLOCK or tuple(scale.shape) != (rows, cols // BLOCK) or scale.dtype != torch.float32
            or scale.device.type != "cpu" or not scale.is_contiguous()):
        raise ValueError(f"int8 block weights of shape {tuple(q.shape)} need contiguous float32 CPU scales of "
                         f"shape ({rows}, {cols // BLOCK}) and a width that is a multiple of {BLOCK}; got "
                         f"{scale.dtype} {tuple(scale.shape)}")


def matmul(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, portable: bool = False) -> torch.Tensor:
    """x [n, k] float32 @ (q * scale per block of 32) [rows, k].T -> [n, rows] float32.

    `portable`: the plain C path even where AVX2 is there (the tests compare the two)."""
    require()
    check_blocks(q, scale)
    if x.dim() != 2 or x.shape[1] != q.shape[1] or x.device.type != "cpu":
        raise ValueError(f"activations of shape {tuple(x.shape)} on {x.device} cannot multiply int8 block weights "
                         f"of width {q.shape[1]} on CPU")
    x = x.detach().to(torch.float32).contiguous()
    out = torch.empty(x.shape[0], q.shape[0], dtype=torch.float32)
    if x.shape[0] == 0:
        return out
    cpu_kernels.matmul_rows(q.data_ptr(), scale.data_ptr(), x.data_ptr(), out.data_ptr(), q.shape[0], q.shape[1],
                            x.shape[0], portable)
    return out
