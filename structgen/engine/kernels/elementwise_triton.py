"""The element-wise parts of a decoder layer as Triton kernels: `elementwise_torch`'s
functions, with its rounding, in one launch each.

Why: a batch-1 decode step of an 8B model reads ~15 GB of weights in a few ms, and
every small kernel between the matmuls costs a few microseconds whatever its size. In
torch a bf16 RMSNorm is seven kernels and the residual add before it another, RoPE
three to four plus the per-step table lookups, SiLU-and-multiply two: about twenty
per layer, over a third of the step's time at 32 layers. Here the residual add and
the norm after it are one kernel, RoPE rotates q and k in place in one, and the MLP
activation is one.

Owns only these kernels and their launchers; same contract as the torch functions
(except that `rotate` writes its input in place and returns it). On CPU they run under
Triton's interpreter (`TRITON_INTERPRET=1`, set before this module is imported).
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs ship without Triton
    triton = None
    tl = None

_SILU_BLOCK = 1024  # activations per program


def _jit(fn):
    return triton.jit(fn) if triton is not None else fn


# ---------------------------------------------------------------------------------
# Kernels


@_jit
def _rms_norm_kernel(
    x_ptr, delta_ptr, weight_ptr, sum_ptr, out_ptr,
    stride_x, stride_delta, stride_sum, stride_out,
    num_cols, eps,
    HAS_DELTA: tl.constexpr, BLOCK: tl.constexpr,
):
    """One row: [sum = x + delta, stored,] out = weight * (sum / rms(sum)), the division
    in float32 and rounded to the input dtype before the weight multiplies."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < num_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_DELTA:
        delta = tl.load(delta_ptr + row * stride_delta + cols, mask=mask, other=0.0)
        x = (x.to(tl.float32) + delta.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(sum_ptr + row * stride_sum + cols, x, mask=mask)
    x32 = x.to(tl.float32)
    mean_square = tl.sum(x32 * x32, axis=0) / num_cols
    normed = (x32 * tl.rsqrt(mean_square + eps)).to(x_ptr.dtype.element_ty)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    out = weight.to(tl.float32) * normed.to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@_jit
def _rotate_kernel(
    x_ptr, positions_ptr, cos_ptr, sin_ptr,
    stride_token, stride_head, stride_table,
    num_heads,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    """Every head of one token, in place: [x1, x2] -> [x1*c - x2*s, x2*c + x1*s], with
    c and s rounded to x's dtype and x*c rounded before the sum (as `rotate` in torch)."""
    token = tl.program_id(0).to(tl.int64)
    position = tl.load(positions_ptr + token).to(tl.int64)
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (heads < num_heads) & (cols < HALF)
    dtype = x_ptr.dtype.element_ty
    cos = tl.load(cos_ptr + position * stride_table + cols, mask=cols < HALF, other=0.0)
    sin = tl.load(sin_ptr + position * stride_table + cols, mask=cols < HALF, other=0.0)
    cos = cos.to(dtype).to(tl.float32)
    sin = sin.to(dtype).to(tl.float32)
    first = x_ptr + token * stride_token + heads * stride_head + cols
    x1 = tl.load(first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(first + HALF, mask=mask, other=0.0).to(tl.float32)
    out1 = (x1 * cos).to(dtype).to(tl.float32) - x2 * sin
    out2 = (x2 * cos).to(dtype).to(tl.float32) + x1 * sin
    tl.store(first, out1.to(dtype), mask=mask)
    tl.store(first + HALF, out2.to(dtype), mask=mask)


@_jit
def _silu_mul_kernel(
    gate_up_ptr, out_ptr, stride_in, stride_out, width,
    BLOCK: tl.constexpr,
):
    """out = silu(gate) * up for one block of one row; silu rounded before the product."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < width
    gate = tl.load(gate_up_ptr + row * stride_in + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + row * stride_in + width + cols, mask=mask, other=0.0).to(tl.float32)
    dtype = out_ptr.dtype.element_ty
    activated = (gate / (1.0 + tl.exp(-gate))).to(dtype).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (activated * up).to(dtype), mask=mask)


# ---------------------------------------------------------------------------------
# Launchers


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension (see `elementwise_torch.rms_norm`)."""
    rows = x.reshape(-1, x.shape[-1])
    out = torch.empty_like(rows)
    _launch_norm(rows, None, weight, None, out, eps)
    return out.view(x.shape)


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual + delta, RMSNorm of the sum) for [T, hidden] tensors, in one kernel."""
    total = torch.empty_like(residual)
    out = torch.empty_like(residual)
    _launch_norm(residual, delta, weight, total, out, eps)
    return total, out


def _launch_norm(x, delta, weight, total, out, eps: float) -> None:
    num_rows, num_cols = x.shape
    if num_rows == 0:
        return
    _require_unit_stride(x, delta, total, out)
    has_delta = delta is not None
    if not has_delta:  # the kernel reads neither: any tensor fills the arguments
        delta = total = x
    block = triton.next_power_of_2(num_cols)
    _rms_norm_kernel[(num_rows,)](
        x, delta, weight, total, out,
        x.stride(0), delta.stride(0), total.stride(0), out.stride(0),
        num_cols, eps,
        HAS_DELTA=has_delta, BLOCK=block, num_warps=min(max(block // 512, 1), 8),
    )


def rope_tables(cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What `rotate` needs for a step: the float32 tables themselves and the positions
    (the kernel looks them up, so a step pays for no table gathers)."""
    return cos, sin, positions


def rotate(x: torch.Tensor, tables) -> torch.Tensor:
    """Rotate-half RoPE of x [T, heads, head_dim] (last dimension contiguous), in place."""
    cos, sin, positions = tables
    tokens, heads, head_dim = x.shape
    if tokens == 0:
        return x
    _require_unit_stride(x)
    half = head_dim // 2
    _rotate_kernel[(tokens,)](
        x, positions, cos, sin,
        x.stride(0), x.stride(1), cos.stride(0),
        heads,
        HALF=half, BLOCK_H=triton.next_power_of_2(heads), BLOCK_HALF=triton.next_power_of_2(half),
    )
    return x


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for gate_up [T, 2 * intermediate] = [gate | up]."""
    tokens, width = gate_up.shape[0], gate_up.shape[1] // 2
    out = gate_up.new_empty((tokens, width))
    if tokens == 0:
        return out
    _require_unit_stride(gate_up)
    _silu_mul_kernel[(tokens, triton.cdiv(width, _SILU_BLOCK))](
        gate_up, out, gate_up.stride(0), out.stride(0), width, BLOCK=_SILU_BLOCK,
    )
    return out


def _require_unit_stride(*tensors) -> None:
    for t in tensors:
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"last dimension must be contiguous, got strides {t.stride()}")
