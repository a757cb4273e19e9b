"""The element-wise parts of a decoder layer in torch: RMSNorm (with the residual add
before it), rotary embeddings and SiLU-gated MLP activation.

The CPU path and the oracle of `elementwise_triton`, which has the same functions
with the same rounding. On CPU, float32 norms go to `norm_cpu`'s C kernel (torch's
rms_norm is slow on the short rows of a decode step), and so does float32 RoPE (one
call for three ops), and so does the float32 SiLU-gated activation; elsewhere torch
computes them. Rounding follows the reference
implementations: norms are computed in float32 and cast back before the weight
multiplies, every bf16/fp16 op rounds its result. Owns only this math; never touches
the KV cache or the weights' layout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from structgen.engine.kernels import norm_cpu


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension, computed in float32."""
    if norm_cpu.fits(x, weight):
        return norm_cpu.rms_norm(x, weight, eps)
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)  # one fused op
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual + delta, RMSNorm of that sum): a layer's skip connection and the next
    norm, which the Triton version does in one pass."""
    if residual.shape == delta.shape and norm_cpu.fits(residual, weight) and norm_cpu.fits(delta, weight):
        return norm_cpu.add_rms_norm(residual, delta, weight, eps)
    total = residual + delta
    return total, rms_norm(total, weight, eps)


def rope_tables(cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """What `rotate` needs for a step, looked up once: cos and signed sin [T, 1, head_dim]
    at the step's positions, from float32 tables [max_positions, head_dim] whose two
    halves are equal (rotate-half layout). The sin table's first half is negated so that
    rotating half of a vector is one `roll`."""
    half = sin.shape[-1] // 2
    sin = sin[positions]
    sin = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1)
    return cos[positions].unsqueeze(1).to(dtype), sin.unsqueeze(1).to(dtype)


def rotate(x: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate-half RoPE of x [T, heads, head_dim]: x*cos + [-x2, x1]*sin, written as
    x*cos + roll(x)*signed_sin. Returns a new tensor."""
    cos, signed_sin = tables
    if norm_cpu.rope_fits(x, cos, signed_sin):
        return norm_cpu.rope(x, cos, signed_sin)
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for gate_up [T, 2 * intermediate] = [gate | up]."""
    if norm_cpu.silu_fits(gate_up):
        return norm_cpu.silu_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up
