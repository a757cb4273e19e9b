"""The element-wise steps of a layer on CPU in float32, one C call each (through
`cpu_kernels`): RMSNorm with the residual add before it (rms_norm_rows.h; a decode step
runs two per layer, and torch's own rms_norm costs 20-35 us on a short row, where this
costs a few), rotate-half RoPE (rope_and_cache.h; one call for torch's three), and the
SiLU-gated activation (silu_mul_rows.h; the one `fused_step`'s one-call step chains, so
that both paths give the same bits).

Owns the checks that let a call take this path (`fits`, `rope_fits`, `silu_fits`) and the calls;
`elementwise_torch` decides when to use them. Must not know about layers or the KV cache.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels.compiled import cpu_kernels  # None where not built: torch's path runs


def fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the C path takes these: float32, contiguous, on CPU, rows as wide as weight."""
    return (cpu_kernels is not None and x.dtype is torch.float32 and weight.dtype is torch.float32
            and x.is_cpu and weight.is_cpu and x.is_contiguous() and weight.is_contiguous()
            and weight.dim() == 1 and x.shape[-1] == weight.shape[0])


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension (`fits(x, weight)` must hold)."""
    out = torch.empty_like(x)
    width = weight.shape[0]
    cpu_kernels.rms_norm(x.data_ptr(), 0, 0, weight.data_ptr(), out.data_ptr(), x.numel() // width, width, eps)
    return out


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual + delta, its RMSNorm) (`fits` must hold for both, of one shape)."""
    total, out = torch.empty_like(residual), torch.empty_like(residual)
    width = weight.shape[0]
    cpu_kernels.rms_norm(residual.data_ptr(), delta.data_ptr(), total.data_ptr(), weight.data_ptr(),
                         out.data_ptr(), residual.numel() // width, width, eps)
    return total, out


def rope_fits(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> bool:
    """Whether the C RoPE takes these: float32 on CPU, x [tokens, heads, dim] with each
    token's heads contiguous (any token stride), tables [tokens, 1, dim] contiguous."""
    return (cpu_kernels is not None and x.dtype is torch.float32 and x.is_cpu and x.dim() == 3
            and x.shape[-1] % 2 == 0 and x.stride(2) == 1 and x.stride(1) == x.shape[2]
            and cos.dtype is torch.float32 and signed_sin.dtype is torch.float32 and cos.is_contiguous()
            and signed_sin.is_contiguous() and cos.shape == signed_sin.shape == (x.shape[0], 1, x.shape[2]))


def rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x into a new contiguous tensor (`rope_fits` must hold)."""
    tokens, heads, dim = x.shape
    out = torch.empty(tokens, heads, dim, dtype=torch.float32)
    cpu_kernels.rope(x.data_ptr(), x.stride(0), out.data_ptr(), cos.data_ptr(), signed_sin.data_ptr(), tokens,
                     heads, dim)
    return out


def silu_fits(gate_up: torch.Tensor) -> bool:
    """Whether the C activation takes this: float32 [T, 2 * width], contiguous, on CPU."""
    return (cpu_kernels is not None and gate_up.dtype is torch.float32 and gate_up.is_cpu and gate_up.dim() == 2
            and gate_up.shape[1] % 2 == 0 and gate_up.is_contiguous())


def silu_mul(gate_up: torch.Tensor, portable: bool = False) -> torch.Tensor:
    """silu(gate) * up for gate_up [T, 2 * width] = [gate | up] (`silu_fits` must hold);
    `portable`: the plain C path even where AVX2 is there (the tests compare the two)."""
    tokens, width = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(tokens, width, dtype=torch.float32)
    cpu_kernels.silu_mul(gate_up.data_ptr(), out.data_ptr(), tokens, width, portable)
    return out
