"""The int8 block matmul (structgen.engine.kernels.int8_matmul), the LM head of a
model whose GGUF file stores it in Q8_0: its result is the float matmul's with the
dequantized weights up to the order of the sums, and the same bits on the AVX2 path
and the portable one, for a row alone or beside others."""

from __future__ import annotations

import pytest
import torch

from structgen.engine.kernels import int8_matmul


def blocks(rows: int, cols: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, (rows, cols), dtype=torch.int8, generator=gen)
    scale = torch.rand(rows, cols // 32, generator=gen) * 0.02
    dequantized = (q.float().reshape(rows, -1, 32) * scale[..., None]).reshape(rows, cols)
    return q, scale, dequantized


@pytest.mark.parametrize("rows,cols", [(1000, 576), (64, 32), (130, 2048)])
@pytest.mark.parametrize("batch", [1, 3, 4, 9])
def test_it_multiplies_as_the_dequantized_weight(rows, cols, batch):
    q, scale, dequantized = blocks(rows, cols)
    x = torch.randn(batch, cols, generator=torch.Generator().manual_seed(1))
    expected = x.double() @ dequantized.double().T
    got = int8_matmul.matmul(x, q, scale)
    assert got.dtype == torch.float32 and got.shape == (batch, rows)
    # float32 sums of `cols` products: a few units in the last place of the largest partial sums
    bound = 8 * cols * torch.finfo(torch.float32).eps * (x.abs().double() @ dequantized.abs().double().T)
    assert ((got.double() - expected).abs() <= bound).all()


def test_a_row_is_the_same_bits_alone_beside_others_and_on_either_path():
    q, scale, _ = blocks(4099, 576)
    x = torch.randn(7, 576, generator=torch.Generator().manual_seed(2))
    together = int8_matmul.matmul(x, q, scale)
    alone = torch.cat([int8_matmul.matmul(x[i : i + 1], q, scale) for i in range(7)])
    assert torch.equal(together, alone)
    assert torch.equal(int8_matmul.matmul(x, q, scale, portable=True), together)


def test_an_empty_batch_gives_no_rows():
    q, scale, _ = blocks(64, 64)
    assert int8_matmul.matmul(torch.zeros(0, 64), q, scale).shape == (0, 64)


def test_weights_it_cannot_read_are_refused_plainly():
    q, scale, _ = blocks(64, 64)
    with pytest.raises(ValueError, match="multiple of 32"):
        int8_matmul.check_blocks(q[:, :48].contiguous(), scale)
    with pytest.raises(ValueError, match=r"float32 CPU scales of shape \(64, 2\)"):
        int8_matmul.check_blocks(q, scale[:, :1])
    with pytest.raises(ValueError, match="2-d int8 CPU tensor"):
        int8_matmul.check_blocks(q.float(), scale)
    with pytest.raises(ValueError, match="width 64"):
        int8_matmul.matmul(torch.zeros(2, 32), q, scale)
