"""The integer kernels' activation blocks, computed in torch as the kernels compute them
(activation_blocks.h), for the int8 and int4 matmul tests."""

from __future__ import annotations

import torch


def quantized_activations(x: torch.Tensor):
    """The kernel's int8 blocks of x, computed here in float32 as it does: d = max|x| / 127,
    q = x * (1 / d) rounded to nearest even."""
    n, k = x.shape
    xb = x.reshape(n, k // 32, 32)
    d = xb.abs().amax(dim=-1) / 127.0
    inverse = torch.where(d != 0, 1.0 / d, torch.zeros_like(d))
    return torch.round(xb * inverse[..., None]), d


def activations(n: int, k: int, seed: int = 1) -> torch.Tensor:
    x = torch.randn(n, k, generator=torch.Generator().manual_seed(seed))
    x[:, 5] *= 20  # an outlier channel, as real hidden states have
    return x
