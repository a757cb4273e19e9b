"""The int8 block matmul (structgen.engine.kernels.int8_matmul), the layers and LM head of
a model whose GGUF file stores them in Q8_0, Q5_0 (a scale per block of 32), Q6_K or Q3_K
(a scale per half block of 16), or Q5_1 or Q5_K (a scale and a minimum per block): the
activations are quantized to int8 per block of 32 and the products summed in integers.
Its result is that computation's, up to float32 rounding; it is the float matmul's
within what rounding the activations can move it; and it is the same bits on the AVX2
path and the portable one, for a row alone or beside others, on one thread or two."""

from __future__ import annotations

import pytest
import torch

from structgen.engine.kernels import int8_matmul
from tests.engine.activation_blocks import activations, quantized_activations

EPS = torch.finfo(torch.float32).eps


# (scales per block, minimums): Q8_0 and Q5_0; Q6_K and Q3_K; Q5_1 and Q5_K; both, as a
# fused layer of Q5_K and Q6_K parts holds them
LAYOUTS = [(1, False), (2, False), (1, True), (2, True)]


def blocks(rows: int, cols: int, seed: int = 0, halves: int = 1, minimums: bool = False):
    """Random weights with a scale per block of 32 (halves 1) or per half block (2), and
    a minimum per block of 32 or none."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (rows, cols), dtype=torch.int8, generator=gen)  # -128 too, which Q8_0 allows
    scale = torch.rand(rows, cols // 32 * halves, generator=gen) * 0.02
    minimum = (torch.rand(rows, cols // 32, generator=gen) - 0.5) * 2.0 if minimums else None
    dequantized = (q.double().reshape(rows, scale.shape[1], -1) * scale.double()[..., None]).reshape(rows, -1, 32)
    if minimums:
        dequantized = dequantized + minimum.double()[..., None]
    return q, scale, minimum, dequantized.reshape(rows, cols)


def packed(q, scale, minimum):
    """The arguments of `int8_matmul.matmul` after x: packed, scales, rows, and minimums."""
    weights, scales = int8_matmul.pack(q, scale)
    return dict(packed=weights, scales=scales, rows=q.shape[0],
                minimums=None if minimum is None else int8_matmul.pack_per_block(minimum))


def product(x, q, scale, minimum=None, portable=False):
    return int8_matmul.matmul(x, **packed(q, scale, minimum), portable=portable)


@pytest.mark.parametrize("rows,cols", [(1000, 576), (64, 32), (130, 2048), (43, 96)])
@pytest.mark.parametrize("batch", [1, 3, 4, 9])
@pytest.mark.parametrize("halves,minimums", LAYOUTS)
def test_it_computes_the_integer_products_of_the_quantized_activations(rows, cols, batch, halves, minimums):
    """Per part: scale * d * the exact integer sum; per block, with minimums: minimum * s,
    s = d * the sum of the block's quantized activations."""
    q, scale, minimum, _ = blocks(rows, cols, halves=halves, minimums=minimums)
    x = activations(batch, cols)
    qx, d = quantized_activations(x)
    parts = cols // 32 * halves
    integer_sums = torch.einsum("npj,rpj->nrp", qx.double().reshape(batch, parts, -1),
                                q.double().reshape(rows, parts, -1))  # exact, per part with a scale
    d_parts = d.double().repeat_interleave(halves, dim=1)
    terms = scale.double()[None] * d_parts[:, None] * integer_sums  # [n, rows, parts]
    if minimums:
        s = d.double() * qx.double().reshape(batch, cols // 32, 32).sum(-1)  # [n, blocks]
        terms = torch.cat([terms, minimum.double()[None] * s[:, None]], dim=-1)
    expected = terms.sum(-1)
    got = product(x, q, scale, minimum)
    assert got.dtype == torch.float32 and got.shape == (batch, rows)
    bound = 4 * (terms.shape[-1] + 8) * EPS * terms.abs().sum(-1)  # float32 rounding of each term and of the sum
    assert ((got.double() - expected).abs() <= bound).all()


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("halves,minimums", LAYOUTS)
def test_it_is_the_float_matmul_within_the_activations_rounding(batch, halves, minimums):
    """Each activation moves by at most half its block's step d when quantized, so the
    result moves by at most sum over blocks of d / 2 * sum |w| from the exact product
    (a minimum's term, minimum * d * sum(qx), is that of its share of each weight)."""
    rows, cols = 296, 576
    q, scale, minimum, dequantized = blocks(rows, cols, seed=3, halves=halves, minimums=minimums)
    x = activations(batch, cols, seed=4)
    _, d = quantized_activations(x)
    exact = x.double() @ dequantized.T
    got = product(x, q, scale, minimum)
    w_abs = dequantized.abs().reshape(rows, cols // 32, 32).sum(-1)  # [rows, blocks]
    bound = (d.double() / 2) @ w_abs.T * (1 + 1e-3) + 8 * cols * EPS * (x.abs().double() @ dequantized.abs().T)
    assert ((got.double() - exact).abs() <= bound).all()
    assert ((got.double() - exact).norm() / exact.norm()) < 0.02


@pytest.mark.parametrize("halves,minimums", LAYOUTS)
def test_a_row_is_the_same_bits_alone_beside_others_on_either_path_and_any_thread_count(halves, minimums):
    q, scale, minimum, _ = blocks(4099, 576, halves=halves, minimums=minimums)  # a last group of 3 rows
    weights = packed(q, scale, minimum)
    x = activations(70, 576, seed=2)  # more than a tile of 64 rows
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        together = int8_matmul.matmul(x, **weights)
        alone = torch.cat([int8_matmul.matmul(x[i : i + 1], **weights) for i in range(70)])
        torch.set_num_threads(1)
        one_thread = int8_matmul.matmul(x, **weights)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(together, alone)
    assert torch.equal(together, one_thread)
    assert torch.equal(int8_matmul.matmul(x[:9], **weights, portable=True), together[:9])


def test_packing_interleaves_eight_rows_and_unpacks_exactly():
    """Group g's block b is 256 bytes; in its m-th 32, bytes 4j..4j+3 hold row j's weights
    4m..4m+3. Rows past the last are zeros."""
    q, scale, minimum, _ = blocks(13, 64, seed=5, minimums=True)
    packed, scales = int8_matmul.pack(q, scale)
    minimums = int8_matmul.pack_per_block(minimum)
    assert packed.shape == (2, 2, 256) and scales.shape == (2, 2, 8) and minimums.shape == (2, 2, 8)
    g, b, m, j, t = 1, 1, 6, 4, 3
    assert packed[g, b, 32 * m + 4 * j + t] == q[8 * g + j, 32 * b + 4 * m + t]
    assert scales[g, b, j] == scale[8 * g + j, b] and minimums[g, b, j] == minimum[8 * g + j, b]
    assert not packed[1, :, :].view(2, 8, 8, 4)[:, :, 5:, :].any() and not scales[1, :, 5:].any()
    assert not minimums[1, :, 5:].any()
    assert torch.equal(int8_matmul.unpack(packed, 13), q)
    assert torch.equal(int8_matmul.per_row(scales, 13), scale)
    assert torch.equal(int8_matmul.per_row(minimums, 13), minimum)


@pytest.mark.parametrize("halves,minimums", LAYOUTS)
def test_lookup_gives_the_dequantized_rows_exactly(halves, minimums):
    """Each q times its scale, plus its block's minimum: the float32 operations of GGUF's
    own dequantization."""
    q, scale, minimum, _ = blocks(21, 64, seed=6, halves=halves, minimums=minimums)
    weights = packed(q, scale, minimum)
    ids = torch.tensor([20, 0, 7, 8, 7])
    expected = (q.float().reshape(21, 2 * halves, -1) * scale[..., None]).reshape(21, 2, 32)
    if minimums:
        expected = expected + minimum[..., None]
    got = int8_matmul.lookup(weights["packed"], weights["scales"], ids, weights["minimums"])
    assert torch.equal(got, expected.reshape(21, 64)[ids])


def test_half_block_scales_go_after_each_other_per_block():
    """With a scale per half block, a group's block b has 16 scales: its first half's 8 (row
    order), then its second's."""
    q, scale, _, _ = blocks(13, 64, seed=7, halves=2)
    packed, scales = int8_matmul.pack(q, scale)
    assert scales.shape == (2, 4, 8) and int8_matmul.halves_of(packed, scales) == 2
    g, b, h, j = 1, 1, 1, 3
    assert scales[g, 2 * b + h, j] == scale[8 * g + j, 2 * b + h]
    assert torch.equal(int8_matmul.per_row(scales, 13), scale)


def test_an_empty_batch_gives_no_rows():
    q, scale, minimum, _ = blocks(64, 64, minimums=True)
    assert product(torch.zeros(0, 64), q, scale).shape == (0, 64)
    assert product(torch.zeros(0, 64), q, scale, minimum).shape == (0, 64)


def test_weights_it_cannot_read_are_refused_plainly():
    q, scale, minimum, _ = blocks(64, 64, halves=2, minimums=True)
    arguments = packed(q, scale, minimum)
    with pytest.raises(ValueError, match=r"minimums of shape \(8, 2, 8\)"):
        int8_matmul.matmul(torch.zeros(1, 64), **{**arguments, "minimums": arguments["scales"]})  # one per half
    q, scale, _, _ = blocks(64, 64)
    with pytest.raises(ValueError, match="multiple of 32"):
        int8_matmul.pack(q[:, :48].contiguous(), scale)
    with pytest.raises(ValueError, match=r"scales of shape \(64, 2\) or \(64, 4\)"):
        int8_matmul.pack(q, scale[:, :1])
    with pytest.raises(ValueError, match="2-d int8 CPU tensor"):
        int8_matmul.pack(q.float(), scale)
    weights, scales = int8_matmul.pack(q, scale)
    with pytest.raises(ValueError, match=r"float32 CPU scales of shape \(8, 2, 8\) or \(8, 4, 8\)"):
        int8_matmul.check_blocks(weights, scales[:, :1].contiguous(), 64)
    with pytest.raises(ValueError, match=r"int8 CPU tensor of shape \(groups, blocks, 256\)"):
        int8_matmul.check_blocks(q, scales, 64)
    with pytest.raises(ValueError, match="do not fill"):
        int8_matmul.check_blocks(weights, scales, 56)
    with pytest.raises(ValueError, match="width 64"):
        int8_matmul.matmul(torch.zeros(2, 32), weights, scales, 64)
