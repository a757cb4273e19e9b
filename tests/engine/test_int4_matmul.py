"""The int4 block matmul (structgen.engine.kernels.int4_matmul), the native layers of a
4-bit GGUF file on CPU: the activations are quantized to int8 per block of 32 and the
products summed in integers. Its result is that computation's, up to float32 rounding;
it is the float matmul's within what rounding the activations can move it; and it is the
same bits on the AVX2 path and the portable one, for a row alone or beside others, on
one thread or two."""

from __future__ import annotations

import pytest
import torch

from structgen.engine.kernels import int4_matmul
from structgen.engine.models.quantization import Int4BlockLinear
from tests.engine.activation_blocks import activations, quantized_activations

EPS = torch.finfo(torch.float32).eps


def blocks(rows: int, cols: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (rows, cols), dtype=torch.uint8, generator=gen)
    scale = torch.rand(rows, cols // 32, generator=gen) * 0.02
    minimum = -8 * scale + torch.randn(rows, cols // 32, generator=gen) * 0.002
    dequantized = (q.double().reshape(rows, -1, 32) * scale.double()[..., None]
                   + minimum.double()[..., None]).reshape(rows, cols)
    return q, scale, minimum, dequantized


@pytest.mark.parametrize("rows,cols", [(960, 576), (64, 64), (136, 1536), (40, 96)])
@pytest.mark.parametrize("batch", [1, 3, 4, 9])
def test_it_computes_the_integer_products_of_the_quantized_activations(rows, cols, batch):
    q, scale, minimum, _ = blocks(rows, cols)
    x = activations(batch, cols)
    qx, d = quantized_activations(x)
    wq = q.double().reshape(rows, cols // 32, 32)
    integer_sums = torch.einsum("nbj,rbj->nrb", qx.double(), wq)  # exact
    scaled = scale.double()[None] * d.double()[:, None] * integer_sums  # [n, rows, blocks]
    minimums = minimum.double()[None] * (d.double() * qx.double().sum(-1))[:, None]
    expected = (scaled + minimums).sum(-1)
    got = int4_matmul.matmul(x, *int4_matmul.pack(q, scale, minimum))
    assert got.dtype == torch.float32 and got.shape == (batch, rows)
    # float32 rounding of each term and of the sums (the two kinds of term nearly cancel)
    bound = 4 * (cols // 32 + 8) * EPS * (scaled.abs() + minimums.abs()).sum(-1)
    assert ((got.double() - expected).abs() <= bound).all()


@pytest.mark.parametrize("batch", [1, 5])
def test_it_is_the_float_matmul_within_the_activations_rounding(batch):
    """Each activation moves by at most half its block's step d when quantized, so the
    result moves by at most sum over blocks of d / 2 * sum |w| from the exact product."""
    rows, cols = 296, 576
    q, scale, minimum, dequantized = blocks(rows, cols, seed=3)
    x = activations(batch, cols, seed=4)
    _, d = quantized_activations(x)
    exact = x.double() @ dequantized.T
    got = int4_matmul.matmul(x, *int4_matmul.pack(q, scale, minimum))
    w_abs = dequantized.abs().reshape(rows, cols // 32, 32).sum(-1)  # [rows, blocks]
    bound = (d.double() / 2) @ w_abs.T * (1 + 1e-3) + 8 * cols * EPS * (x.abs().double() @ dequantized.abs().T)
    assert ((got.double() - exact).abs() <= bound).all()
    assert ((got.double() - exact).norm() / exact.norm()) < 0.02


def test_a_row_is_the_same_bits_alone_beside_others_on_either_path_and_any_thread_count():
    q, scale, minimum, _ = blocks(1000, 576)
    weights = int4_matmul.pack(q, scale, minimum)
    x = activations(70, 576, seed=2)  # more than a tile of 64 rows
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        together = int4_matmul.matmul(x, *weights)
        alone = torch.cat([int4_matmul.matmul(x[i : i + 1], *weights) for i in range(70)])
        torch.set_num_threads(1)
        one_thread = int4_matmul.matmul(x, *weights)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(together, alone)
    assert torch.equal(together, one_thread)
    assert torch.equal(int4_matmul.matmul(x[:9], *weights, portable=True), together[:9])


def test_zero_blocks_of_activations_contribute_nothing():
    q, scale, minimum, _ = blocks(16, 128)
    x = torch.zeros(2, 128)
    x[1, 64:] = torch.linspace(-1, 1, 64)
    got = int4_matmul.matmul(x, *int4_matmul.pack(q, scale, minimum))
    assert torch.equal(got[0], torch.zeros(16))
    last_blocks_only = int4_matmul.matmul(x[1:, 64:], *int4_matmul.pack(q[:, 64:], scale[:, 2:], minimum[:, 2:]))
    assert torch.equal(got[1], last_blocks_only[0])


def test_packing_interleaves_eight_rows_and_unpacks_exactly():
    """Group g's block b is 128 bytes; in its m-th 32, bytes 4j..4j+3 hold row j's
    weights 8m..8m+3 (low nibbles) and 8m+4..8m+7 (high nibbles)."""
    q, scale, minimum, _ = blocks(16, 64, seed=5)
    packed, grouped_scale, grouped_minimum = int4_matmul.pack(q, scale, minimum)
    assert packed.shape == (2, 2, 128) and grouped_scale.shape == (2, 2, 8)
    g, b, m, j, t = 1, 1, 2, 5, 3
    byte = packed[g, b, 32 * m + 4 * j + t].item()
    row, first = 8 * g + j, 32 * b + 8 * m + t
    assert byte == q[row, first].item() | (q[row, first + 4].item() << 4)
    assert grouped_scale[g, b, j] == scale[row, b] and grouped_minimum[g, b, j] == minimum[row, b]
    assert torch.equal(int4_matmul.unpack(packed), q)
    assert torch.equal(int4_matmul.per_row(grouped_scale), scale)
    assert int4_matmul.fits_shape(960, 576) and not int4_matmul.fits_shape(964, 576)


def test_an_empty_batch_gives_no_rows():
    q, scale, minimum, _ = blocks(64, 64)
    assert int4_matmul.matmul(torch.zeros(0, 64), *int4_matmul.pack(q, scale, minimum)).shape == (0, 64)


def test_weights_it_cannot_read_are_refused_plainly():
    q, scale, minimum, _ = blocks(64, 64)
    packed, grouped_scale, grouped_minimum = int4_matmul.pack(q, scale, minimum)
    with pytest.raises(ValueError, match=r"float32 CPU scales of shape \(8, 2, 8\)"):
        int4_matmul.check_blocks(packed, grouped_scale[:, :1].contiguous(), grouped_minimum)
    with pytest.raises(ValueError, match="minimums"):
        int4_matmul.check_blocks(packed, grouped_scale, grouped_minimum.double())
    with pytest.raises(ValueError, match=r"uint8 CPU tensor of shape \(rows / 8, blocks, 128\)"):
        int4_matmul.check_blocks(q, grouped_scale, grouped_minimum)
    with pytest.raises(ValueError, match="width 64"):
        int4_matmul.matmul(torch.zeros(2, 32), packed, grouped_scale, grouped_minimum)


def test_the_layer_holds_the_blocks_as_given_and_keeps_the_input_shape_and_bias():
    q, scale, minimum, _ = blocks(48, 192, seed=6)
    bias = torch.randn(48)
    layer = Int4BlockLinear(q, scale, minimum, bias)
    in_float32 = q.float().reshape(48, 6, 32) * scale[..., None] + minimum[..., None]
    assert torch.equal(layer.dequantized(), in_float32.reshape(48, 192))
    x = activations(6, 192, seed=7).reshape(2, 3, 192)
    y = layer.forward(x)
    assert y.shape == (2, 3, 48)
    flat = int4_matmul.matmul(x.reshape(6, 192), *int4_matmul.pack(q, scale, minimum)) + bias
    assert torch.equal(y.reshape(6, 48), flat)
