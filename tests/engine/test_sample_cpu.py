"""Random sampling in C (structgen.engine.kernels.sample_cpu), the CPU path of rows that
ask for a temperature alone: it picks where a float64 reference of the same rule picks,
never a masked token, the same token on the AVX2 and the portable path and alone or in
a batch; the sampler sends such rows there and the others to torch's filters, and both
paths draw from the softmax at the temperature."""

from __future__ import annotations

import pytest
import torch

from structgen.engine.kernels import sample_cpu
from structgen.engine.sampler import Sampler, SamplerRow
from structgen.engine.sampling_params import SamplingParams

pytestmark = pytest.mark.skipif(not sample_cpu.fits(torch.zeros(1, 1)), reason="the C kernels are not built")

NEG_INF = float("-inf")


def rows_of_logits(batch: int, vocab: int, seed: int = 0) -> torch.Tensor:
    logits = torch.randn(batch, vocab, generator=torch.Generator().manual_seed(seed)) * 3
    logits[:, ::7] = NEG_INF  # masked tokens, as a grammar leaves them
    return logits


def reference(logits, temperatures, uniforms):
    """The rule in float64 over torch's own exponential: the first token whose cumulative
    weight exceeds uniform * total."""
    largest = logits.max(dim=1, keepdim=True).values
    weights = torch.exp((logits.double() - largest.double()) / temperatures.double()[:, None])
    cumulative = weights.cumsum(dim=1)
    return torch.searchsorted(cumulative, (uniforms[:, None] * cumulative[:, -1:]), right=True).squeeze(1)


def draw(logits, temperatures, uniforms, portable=False):
    return sample_cpu.sample(logits, logits.max(dim=1).values, temperatures, uniforms, portable=portable)


def test_it_picks_where_the_float64_rule_picks():
    logits = rows_of_logits(400, 5000)
    temperatures = torch.linspace(0.3, 2.0, 400)
    uniforms = torch.rand(400, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got, expected = draw(logits, temperatures, uniforms), reference(logits, temperatures, uniforms)
    # the weights differ from the reference's by float32 roundings of the exponential: a pick
    # can move only to a neighbour, and only when the target lies within them of a boundary
    differ = (got != expected).nonzero().flatten()
    assert len(differ) <= 2
    assert all(abs(int(got[i]) - int(expected[i])) <= 7 for i in differ)


def test_masked_tokens_are_never_picked_even_at_the_ends_of_the_interval():
    logits = rows_of_logits(6, 3000, seed=2)
    logits[:, -1] = NEG_INF  # the last token masked, where a target of the whole total would land
    logits[3] = NEG_INF
    logits[3, 1500] = 0.0  # one allowed token
    uniforms = torch.tensor([0.0, 1.0 - 2**-53, 0.5, 1.0 - 2**-53, 1e-300, 0.999999], dtype=torch.float64)
    tokens = draw(logits, torch.full((6,), 0.8), uniforms)
    for row, token in enumerate(tokens.tolist()):
        assert logits[row, token] != NEG_INF
    assert tokens[3] == 1500


def test_a_row_is_the_same_alone_in_a_batch_and_on_either_path():
    logits = rows_of_logits(33, 49152, seed=3)
    temperatures = torch.full((33,), 0.7)
    uniforms = torch.rand(33, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    together = draw(logits, temperatures, uniforms)
    alone = torch.cat([draw(logits[i : i + 1], temperatures[i : i + 1], uniforms[i : i + 1]) for i in range(33)])
    assert torch.equal(together, alone)
    assert torch.equal(draw(logits, temperatures, uniforms, portable=True), together)


def test_a_row_with_no_allowed_token_picks_nothing():
    logits = torch.full((1, 64), NEG_INF)
    assert draw(logits, torch.ones(1), torch.full((1,), 0.5, dtype=torch.float64)).tolist() == [-1]


@pytest.mark.parametrize("in_c", [True, False])
def test_both_paths_draw_from_the_softmax_at_the_temperature(in_c, monkeypatch):
    if not in_c:
        monkeypatch.setattr(sample_cpu, "fits", lambda logits: False)
    logits_row = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0, NEG_INF])
    torch.manual_seed(1234)
    n = 30_000
    rows = [SamplerRow(SamplingParams(temperature=0.7), []) for _ in range(n)]
    tokens = torch.tensor(Sampler().sample(logits_row.repeat(n, 1), rows).token_ids)
    counts = torch.bincount(tokens, minlength=7).double()
    assert counts[6] == 0
    expected = torch.softmax(logits_row[:6] / 0.7, dim=0).double() * n
    assert float(((counts[:6] - expected) ** 2 / expected).sum()) < 30  # 5 degrees of freedom: P < 1e-5


def test_the_sampler_sends_filtered_rows_to_torch_and_keeps_their_sets(monkeypatch):
    calls = []
    real = sample_cpu.sample
    monkeypatch.setattr(sample_cpu, "sample", lambda logits, *a, **k: calls.append(logits.shape[0]) or real(logits, *a, **k))
    logits = rows_of_logits(6, 2000, seed=5)
    params = [SamplingParams(temperature=0.9), SamplingParams(temperature=0.9, top_k=5),
              SamplingParams(temperature=0.0), SamplingParams(temperature=1.2, top_p=0.5),
              SamplingParams(temperature=0.5), SamplingParams(temperature=0.9, min_p=0.5)]
    out = Sampler().sample(logits, [SamplerRow(p, []) for p in params])
    assert calls == [2]  # rows 0 and 4 alone
    assert out.token_ids[1] in logits[1].topk(5).indices.tolist()
    assert out.token_ids[2] == int(logits[2].argmax())
    assert all(logits[row, token] != NEG_INF for row, token in enumerate(out.token_ids))


def test_largest_gives_what_torch_max_gives_ties_masks_and_nan_included():
    logits = rows_of_logits(9, 1003, seed=6)
    logits[1, [5, 700, 1001]] = 50.0  # a tie: the first holder
    logits[2] = NEG_INF  # all masked: torch gives token 0
    logits[3, 998] = float("nan")
    logits[4, 2] = float("nan")
    logits[4, 900] = float("inf")
    logits[5, 1002] = 99.0  # in the tail past the last whole vector
    values, tokens = sample_cpu.largest(logits)
    expected_values, expected_tokens = logits.max(dim=-1)
    assert torch.equal(tokens, expected_tokens)
    assert torch.equal(values.isnan(), expected_values.isnan())
    assert torch.equal(values[~values.isnan()], expected_values[~expected_values.isnan()])
    portable_values, portable_tokens = sample_cpu.largest(logits, portable=True)
    assert torch.equal(portable_tokens, tokens) and torch.equal(portable_values.isnan(), values.isnan())
