"""The C RMSNorm of float32 rows on CPU (structgen.engine.kernels.norm_cpu), which
elementwise_torch takes for a decode step's norms: it matches torch's rms_norm to
float32 rounding, adds the residual first when asked, reads each row alone, and is
left out for what it cannot take."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize("tokens,width", [(1, 1536), (5, 40), (70, 1536)])
def test_the_c_silu_mul_is_within_two_float32_steps_of_the_exact_one(tokens, width):
    gate_up = rows((tokens, 2 * width), seed=4) * 2
    gate_up[0, :6] = torch.tensor([0.0, -0.0, 100.0, -100.0, 88.5, -87.5])  # the clamped range and zeros
    assert norm_cpu.silu_fits(gate_up)
    got = norm_cpu.silu_mul(gate_up)
    gate, up = gate_up.double().chunk(2, dim=-1)
    exact = gate / (1 + torch.exp(-gate)) * up
    assert got.shape == (tokens, width) and got.dtype == torch.float32
    # silu rounded, then the product rounded, from an exponential within ~1 step; below
    # g = -88 the exponential is clamped, which leaves |g * up| * e^-88 at most
    bound = 2.5 * torch.finfo(torch.float32).eps * exact.abs() + (gate * up).abs() * np.exp(-87.0)
    assert ((got.double() - exact).abs() <= bound).all()
    assert torch.equal(norm_cpu.silu_mul(gate_up, portable=True), got)  # the same bits on either path


def test_elementwise_silu_mul_takes_the_c_path_for_float32_only():
    gate_up = rows((3, 128), seed=5)
    assert torch.equal(elementwise_torch.silu_mul(gate_up), norm_cpu.silu_mul(gate_up))
    assert not norm_cpu.silu_fits(gate_up.bfloat16())
    assert not norm_cpu.silu_fits(gate_up[:, :-1])  # no [gate | up] halves
