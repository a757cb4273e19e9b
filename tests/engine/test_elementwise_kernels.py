"""The element-wise layer ops (structgen.engine.kernels.elementwise_torch / _triton).

The torch functions are held to transformers' own Llama modules (LlamaRMSNorm, the
rotate-half RoPE, SiLU-gated MLP activation) in float32 and bf16; the Triton kernels,
interpreted on CPU (`TRITON_INTERPRET=1`, in a fresh pytest process, as in
test_attention_kernels) and compiled on a GPU, are held to the torch functions: equal
in float32 up to float rounding, and within one bf16 rounding step in bf16.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from structgen.engine.kernels import elementwise_torch as ops_torch
from tests.engine.interpreted import assert_passes_interpreted

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
HAS_TRITON = importlib.util.find_spec("triton") is not None
KERNEL_DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"
EPS = 1e-5


def rope_cache(max_positions: int, head_dim: int, theta: float = 10000.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def hf_rotate(x, cos_table, sin_table, positions):
    """transformers' apply_rotary_pos_emb on [T, heads, dim] (its rotate_half)."""
    cos = cos_table[positions].unsqueeze(1).to(x.dtype)
    sin = sin_table[positions].unsqueeze(1).to(x.dtype)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def random(shape, dtype, seed, scale=1.0):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_rms_norm_matches_transformers(dtype):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x, weight = random((7, 96), dtype, 0, 3.0), random(96, dtype, 1)
    norm = LlamaRMSNorm(96, eps=EPS).to(dtype)
    norm.weight.data.copy_(weight)
    expected = norm(x)
    actual = ops_torch.rms_norm(x, weight, EPS)
    assert actual.dtype == dtype
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5) if dtype == torch.float32 \
        else torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    total, normed = ops_torch.add_rms_norm(x, random((7, 96), dtype, 2), weight, EPS)
    torch.testing.assert_close(normed, ops_torch.rms_norm(total, weight, EPS), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_rotate_matches_transformers(dtype):
    cos, sin = rope_cache(64, 32)
    positions = torch.tensor([0, 5, 63, 17])
    x = random((4, 6, 32), dtype, 3)
    actual = ops_torch.rotate(x, ops_torch.rope_tables(cos, sin, positions, dtype))
    # One rounding fewer than transformers' three bf16 ops: a bf16 step apart at most.
    tolerance = {torch.float32: 1e-6, torch.bfloat16: 1e-2}[dtype]
    torch.testing.assert_close(actual, hf_rotate(x, cos, sin, positions), rtol=tolerance, atol=tolerance)


def test_torch_silu_mul_matches_gated_mlp():
    gate_up = random((5, 2 * 40), torch.bfloat16, 4, 2.0)
    gate, up = gate_up[:, :40], gate_up[:, 40:]
    torch.testing.assert_close(ops_torch.silu_mul(gate_up), torch.nn.functional.silu(gate) * up, rtol=0, atol=0)


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="needs Triton; not recursive")
def test_triton_kernels_interpreted():
    assert_passes_interpreted(__file__)


@pytest.mark.skipif(INTERPRETED or not HAS_TRITON, reason="compiles the real (not interpreted) kernels")
def test_triton_kernels_compile_for_gpu():
    from structgen.engine.kernels import elementwise_triton as ops
    from tests.engine.test_attention_kernels import compile_for_gpu

    bf16 = {name: "*bf16" for name in ("x_ptr", "delta_ptr", "weight_ptr", "sum_ptr", "out_ptr", "gate_up_ptr")}
    compile_for_gpu(ops._rms_norm_kernel, bf16, {"HAS_DELTA": True, "BLOCK": 4096}, float_args=("eps",))
    compile_for_gpu(ops._rotate_kernel, {**bf16, "positions_ptr": "*i64", "cos_ptr": "*fp32", "sin_ptr": "*fp32"},
                    {"HALF": 64, "BLOCK_H": 64, "BLOCK_HALF": 64})
    compile_for_gpu(ops._silu_mul_kernel, bf16, {"BLOCK": 1024})


# Shapes: SmolLM2-135M's hidden (576, not a power of two), an odd small one, and the
# 8B shape's rows; head layouts with q and k heads side by side.
NORM_SHAPES = [(1, 576), (9, 96), (3, 4096), (0, 64)]
ROPE_SHAPES = [(1, 12, 64), (7, 5, 32), (4, 40, 128), (3, 3, 80)]
# One rounding step of the output dtype apart at most -- except bf16 under the
# interpreter, whose float32 -> bf16 cast truncates (numpy has no bf16) where a GPU
# rounds to nearest: two steps there. fp16 rounds correctly in both.
KERNEL_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCE = {
    torch.float32: dict(rtol=2e-6, atol=2e-6),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2) if INTERPRETED else dict(rtol=8e-3, atol=8e-3),
}


class TestTritonInterpreted:
    # Collected in the TRITON_INTERPRET=1 process that test_triton_kernels_interpreted starts,
    # and on a machine with a GPU, where the kernels run compiled.
    __test__ = INTERPRETED or KERNEL_DEVICE == "cuda"

    @staticmethod
    def ops():
        from structgen.engine.kernels import elementwise_triton

        return elementwise_triton

    @pytest.mark.parametrize("dtype", KERNEL_DTYPES)
    @pytest.mark.parametrize("shape", NORM_SHAPES)
    def test_add_rms_norm(self, shape, dtype):
        x, delta = random(shape, dtype, 0, 3.0), random(shape, dtype, 1)
        weight = random(shape[1], dtype, 2)
        total, normed = self.ops().add_rms_norm(*(t.to(KERNEL_DEVICE) for t in (x, delta, weight)), EPS)
        expected_total, expected = ops_torch.add_rms_norm(x, delta, weight, EPS)
        if dtype == torch.bfloat16 and INTERPRETED:  # the truncating cast (see TOLERANCE)
            torch.testing.assert_close(total.cpu(), expected_total, **TOLERANCE[dtype])
        else:  # one rounding of an exact sum: equal
            assert torch.equal(total.cpu(), expected_total)
        torch.testing.assert_close(normed.cpu(), expected, **TOLERANCE[dtype])
        alone = self.ops().rms_norm(x.to(KERNEL_DEVICE), weight.to(KERNEL_DEVICE), EPS)
        torch.testing.assert_close(alone.cpu(), ops_torch.rms_norm(x, weight, EPS), **TOLERANCE[dtype])

    def test_rms_norm_of_strided_heads(self):
        """Qwen3's per-head q norm: a [T, heads, dim] view into a wider row."""
        qkv = random((4, 3 * 64), torch.float32, 5)
        heads = qkv[:, :128].view(4, 2, 64)
        weight = random(64, torch.float32, 6)
        actual = self.ops().rms_norm(heads.to(KERNEL_DEVICE), weight.to(KERNEL_DEVICE), EPS)
        torch.testing.assert_close(actual.cpu(), ops_torch.rms_norm(heads, weight, EPS), **TOLERANCE[torch.float32])

    @pytest.mark.parametrize("dtype", KERNEL_DTYPES)
    @pytest.mark.parametrize("shape", ROPE_SHAPES)
    def test_rotate_in_place_of_a_wider_row(self, shape, dtype):
        tokens, heads, dim = shape
        cos, sin = rope_cache(300, dim)
        positions = torch.randint(0, 300, (tokens,), generator=torch.Generator().manual_seed(7))
        row = random((tokens, (heads + 2) * dim), dtype, 8)  # q and k heads, then v: untouched
        expected = ops_torch.rotate(row[:, : heads * dim].view(tokens, heads, dim),
                                    ops_torch.rope_tables(cos, sin, positions, dtype))
        on_device = row.to(KERNEL_DEVICE)
        view = on_device[:, : heads * dim].view(tokens, heads, dim)
        tables = self.ops().rope_tables(cos.to(KERNEL_DEVICE), sin.to(KERNEL_DEVICE), positions.to(KERNEL_DEVICE),
                                        dtype)
        assert self.ops().rotate(view, tables).data_ptr() == view.data_ptr()
        torch.testing.assert_close(view.cpu(), expected, **TOLERANCE[dtype])
        assert torch.equal(on_device[:, heads * dim :].cpu(), row[:, heads * dim :])

    @pytest.mark.parametrize("dtype", KERNEL_DTYPES)
    @pytest.mark.parametrize("tokens, width", [(1, 1536), (5, 40), (2, 3000), (0, 8)])
    def test_silu_mul(self, tokens, width, dtype):
        gate_up = random((tokens, 2 * width), dtype, 9, 3.0)
        actual = self.ops().silu_mul(gate_up.to(KERNEL_DEVICE))
        torch.testing.assert_close(actual.cpu(), ops_torch.silu_mul(gate_up), **TOLERANCE[dtype])

    def test_rejects_a_strided_last_dimension(self):
        x = random((4, 64), torch.float32, 10).to(KERNEL_DEVICE)
        with pytest.raises(ValueError, match="contiguous"):
            self.ops().silu_mul(x[:, ::2])
