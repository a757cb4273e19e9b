"""The C RMSNorm of float32 rows on CPU (structgen.engine.kernels.norm_cpu), which
elementwise_torch takes for a decode step's norms: it matches torch's rms_norm to
float32 rounding, adds the residual first when asked, reads each row alone, and is
left out for what it cannot take."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structgen.engine.kernels import elementwise_torch, norm_cpu


def rows(shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen) * 3


@pytest.mark.parametrize("shape", [(1, 576), (7, 64), (3, 4, 64)])
def test_it_matches_torchs_rms_norm(shape):
    x, weight = rows(shape), rows(shape[-1:], seed=1)
    assert norm_cpu.fits(x, weight)
    got = norm_cpu.rms_norm(x, weight, 1e-5)
    assert got.shape == x.shape
    assert torch.allclose(got, F.rms_norm(x, weight.shape, weight, 1e-5), rtol=1e-6, atol=1e-6)


def test_the_residual_is_added_first_and_returned():
    residual, delta, weight = rows((5, 64)), rows((5, 64), seed=2), rows((64,), seed=3)
    total, normed = norm_cpu.add_rms_norm(residual, delta, weight, 1e-6)
    assert torch.equal(total, residual + delta)
    assert torch.allclose(normed, F.rms_norm(residual + delta, (64,), weight, 1e-6), rtol=1e-6, atol=1e-6)
    assert torch.equal(normed, norm_cpu.rms_norm(total, weight, 1e-6))


def test_a_row_is_normed_alone():
    x, weight = rows((6, 64)), rows((64,), seed=1)
    together = norm_cpu.rms_norm(x, weight, 1e-5)
    assert torch.equal(together, torch.cat([norm_cpu.rms_norm(x[i : i + 1], weight, 1e-5) for i in range(6)]))


def test_what_it_cannot_take_goes_to_torch():
    x, weight = rows((4, 64)), rows((64,), seed=1)
    assert not norm_cpu.fits(x.to(torch.bfloat16), weight)
    assert not norm_cpu.fits(x[:, ::2], weight[:32])  # not contiguous
    assert not norm_cpu.fits(x, weight[:32])
    half = x.to(torch.bfloat16)  # the torch path still gives the norm, of the rounded rows
    expected = F.rms_norm(half.float(), weight.shape, weight, 1e-5)
    assert torch.allclose(elementwise_torch.rms_norm(half, weight, 1e-5).float(), expected, rtol=2**-7, atol=1e-2)


def test_c_rope_rotates_strided_rows_as_torchs_ops_do():
    """q and k heads sliced from a fused qkv row (a token stride wider than the heads)."""
    gen = torch.Generator().manual_seed(4)
    tokens, heads, dim = 5, 6, 64
    qkv = torch.randn(tokens, (heads + 2) * dim, generator=gen)
    x = qkv[:, : heads * dim].view(tokens, heads, dim)
    angles = torch.rand(tokens, 1, dim // 2, generator=gen) * 6
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    signed_sin = torch.cat([-sin[..., : dim // 2], sin[..., dim // 2 :]], -1)
    assert norm_cpu.rope_fits(x, cos, signed_sin)
    expected = torch.addcmul(x * cos, x.roll(dim // 2, dims=-1), signed_sin)
    got = norm_cpu.rope(x, cos, signed_sin)
    assert got.is_contiguous() and torch.allclose(got, expected, rtol=0, atol=1e-6)
    assert not norm_cpu.rope_fits(x.double(), cos, signed_sin)
    assert not norm_cpu.rope_fits(x.transpose(0, 1), cos, signed_sin)
