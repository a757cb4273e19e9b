"""RMSNorm of float32 rows on CPU, with the residual add before it, in one C call
(rms_norm_rows.h through `cpu_kernels`): a decode step runs two per layer, and torch's
own rms_norm costs 20-35 us on a short row, where this costs a few.

Owns the checks that let a call take this path (`fits`) and the call; `elementwise_torch`
decides when to use it. Must not know about layers or the KV cache.
"""

from __future__ import annotations

import torch

try:
    from structgen.engine.kernels import cpu_kernels
except ImportError:  # extensions not built: `fits` says no and torch's path runs
    cpu_kernels = None


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
