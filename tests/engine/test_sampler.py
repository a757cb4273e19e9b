"""Tests for structgen.engine.sampler: greedy, filters, penalties, seeds, logprobs, masks."""

from __future__ import annotations

import math

import pytest
import torch

from structgen.engine.sampler import (
    Sampler,
    SamplerRow,
    apply_penalties,
    apply_temperature_and_filters,
    seeded_generator,
)
from structgen.engine.sampling_params import SamplingParams

NEG_INF = float("-inf")


def row(history=None, generator=None, **params) -> SamplerRow:
    return SamplerRow(SamplingParams(**params), list(history or []), generator)


def random_logits(batch: int, vocab: int, seed: int = 0, scale: float = 3.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, vocab, generator=generator) * scale


def kept(filtered_row: torch.Tensor) -> set[int]:
    return set(torch.nonzero(torch.isfinite(filtered_row)).flatten().tolist())


def sample_counts(logits_row: torch.Tensor, n: int, **params) -> torch.Tensor:
    """Token counts of n unseeded draws from one logits row, drawn as one batch."""
    torch.manual_seed(1234)
    out = Sampler().sample(logits_row.repeat(n, 1), [row(**params) for _ in range(n)])
    return torch.bincount(torch.tensor(out.token_ids), minlength=logits_row.numel())


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


# --------------------------------------------------------------------- greedy


def test_greedy_is_argmax_and_does_not_touch_the_logits():
    logits = random_logits(8, 500)
    before = logits.clone()
    out = Sampler().sample(logits, [row(temperature=0.0) for _ in range(8)])
    assert out.token_ids == logits.argmax(dim=-1).tolist()
    assert out.logprobs == [None] * 8
    assert torch.equal(logits, before)


def test_top_k_1_equals_greedy():
    logits = random_logits(16, 300, seed=3)
    torch.manual_seed(0)
    out = Sampler().sample(logits, [row(temperature=1.5, top_k=1) for _ in range(16)])
    assert out.token_ids == logits.argmax(dim=-1).tolist()


def test_mixed_batch_greedy_rows_stay_argmax():
    logits = random_logits(6, 200, seed=5)
    rows = [row(temperature=0.0 if i % 2 == 0 else 1.0) for i in range(6)]
    out = Sampler().sample(logits, rows)
    argmax = logits.argmax(dim=-1).tolist()
    assert [out.token_ids[i] for i in (0, 2, 4)] == [argmax[i] for i in (0, 2, 4)]


def test_empty_batch():
    out = Sampler().sample(torch.zeros(0, 10), [])
    assert out.token_ids == [] and out.logprobs == []


def test_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError):
        Sampler().sample(torch.zeros(2, 10), [row()])
    with pytest.raises(ValueError):
        Sampler().sample(torch.zeros(10), [row()])


# --------------------------------------------------------------------- distribution


def test_temperature_sampling_matches_softmax():
    logits_row = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    counts = sample_counts(logits_row, 30_000, temperature=0.7)
    # 5 degrees of freedom: P(chi2 > 30) < 1e-5, so this fails only on a real bias.
    assert chi_square(counts, torch.softmax(logits_row / 0.7, dim=0)) < 30
    # ...and it has the power to tell temperature 0.7 from temperature 1.
    assert chi_square(counts, torch.softmax(logits_row, dim=0)) > 300


def test_seeded_sampling_matches_softmax():
    logits_row = torch.tensor([[1.0, 0.0, -0.5, -2.0]])
    generator = torch.Generator().manual_seed(7)
    sampler = Sampler()
    draws = [
        sampler.sample(logits_row, [row(generator=generator)]).token_ids[0] for _ in range(4000)
    ]
    counts = torch.bincount(torch.tensor(draws), minlength=4)
    assert chi_square(counts, torch.softmax(logits_row[0], dim=0)) < 25


def test_masked_tokens_are_never_sampled():
    logits = random_logits(1, 50, seed=9, scale=1.0)
    allowed = [3, 17, 41]
    masked = torch.full_like(logits, NEG_INF)
    masked[0, allowed] = logits[0, allowed]
    counts = sample_counts(masked[0], 5000, temperature=2.0)
    assert set(torch.nonzero(counts).flatten().tolist()) == set(allowed)
    greedy = Sampler().sample(masked, [row(temperature=0.0)])
    assert greedy.token_ids == [allowed[int(logits[0, allowed].argmax())]]


def test_all_masked_row_raises_runtime_error():
    logits = random_logits(3, 20)
    logits[1] = NEG_INF
    for temperature in (0.0, 1.0):
        rows = [row(temperature=temperature, top_p=0.9, logprobs=2) for _ in range(3)]
        with pytest.raises(RuntimeError, match=r"rows \[1\]"):
            Sampler().sample(logits, rows)


def test_not_strict_an_all_masked_row_gets_minus_one_and_the_others_their_tokens():
    logits = random_logits(3, 20)
    logits[1] = NEG_INF
    for temperature in (0.0, 1.0):
        rows = [row(temperature=temperature, top_p=0.9, logprobs=2) for _ in range(3)]
        out = Sampler().sample(logits, rows, strict=False)
        assert out.token_ids[1] == -1
        assert all(0 <= out.token_ids[i] < 20 for i in (0, 2))
        assert out.logprobs[0].token_id == out.token_ids[0]


def test_nan_row_raises_runtime_error():
    logits = random_logits(2, 20)
    logits[0, 5] = float("nan")
    with pytest.raises(RuntimeError, match=r"rows \[0\]"):
        Sampler().sample(logits, [row(), row()])


def test_tiny_temperature_does_not_overflow():
    logits = torch.tensor([[30.0, 29.0, -5.0]])
    out = Sampler().sample(logits, [row(temperature=1e-30, top_p=0.5, min_p=0.1)])
    assert out.token_ids == [0]


# --------------------------------------------------------------------- filters


def test_top_k_keeps_exactly_the_k_largest():
    logits = torch.tensor([[0.1, 5.0, -2.0, 3.0, 4.0, 1.0]])
    filtered = apply_temperature_and_filters(logits, [SamplingParams(top_k=3)])
    assert kept(filtered[0]) == {1, 3, 4}


def test_top_k_keeps_ties_with_the_kth():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.0]])
    filtered = apply_temperature_and_filters(logits, [SamplingParams(top_k=2)])
    assert kept(filtered[0]) == {1, 2, 3}


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([0.05, 0.4, 0.1, 0.25, 0.2])
    logits = probs.log().unsqueeze(0)
    cases = {0.3: {1}, 0.6: {1, 3}, 0.8: {1, 3, 4}, 0.9: {1, 3, 4, 2}, 0.99: {0, 1, 2, 3, 4}}
    for top_p, expected in cases.items():
        filtered = apply_temperature_and_filters(logits, [SamplingParams(top_p=top_p)])
        assert kept(filtered[0]) == expected, top_p


def test_top_p_applies_after_temperature():
    probs = torch.tensor([0.5, 0.3, 0.2])
    logits = probs.log().unsqueeze(0)
    # At temperature 0.5 the probabilities are ~[0.66, 0.24, 0.10]: 0.65 needs one token.
    filtered = apply_temperature_and_filters(logits, [SamplingParams(top_p=0.65, temperature=0.5)])
    assert kept(filtered[0]) == {0}
    filtered = apply_temperature_and_filters(logits, [SamplingParams(top_p=0.65)])
    assert kept(filtered[0]) == {0, 1}


def test_min_p_drops_below_fraction_of_max():
    probs = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05])
    logits = probs.log().unsqueeze(0)
    filtered = apply_temperature_and_filters(logits, [SamplingParams(min_p=0.3)])
    assert kept(filtered[0]) == {0, 1, 2}  # threshold 0.12
    filtered = apply_temperature_and_filters(logits, [SamplingParams(min_p=0.2)])
    assert kept(filtered[0]) == {0, 1, 2, 3}  # threshold 0.08


def test_top_p_mass_is_renormalized_after_top_k_and_min_p():
    probs = torch.tensor([0.3, 0.25, 0.2, 0.15, 0.1])
    logits = probs.log().unsqueeze(0)
    # top_p 0.6 needs 3 tokens of all five (0.3 + 0.25 = 0.55 < 0.6) but only 2 once the
    # mass is renormalized over the top 3 ((0.3 + 0.25) / 0.75 = 0.73).
    assert kept(apply_temperature_and_filters(logits, [SamplingParams(top_p=0.6)])[0]) == {0, 1, 2}
    top3 = SamplingParams(top_p=0.6, top_k=3)
    assert kept(apply_temperature_and_filters(logits, [top3])[0]) == {0, 1}
    min_p = SamplingParams(top_p=0.6, min_p=0.6)  # min-p keeps 0.3, 0.25, 0.2
    assert kept(apply_temperature_and_filters(logits, [min_p])[0]) == {0, 1}


def test_filters_vectorize_over_rows_with_different_settings():
    probs = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05])
    logits = probs.log().repeat(5, 1)
    params = [
        SamplingParams(),
        SamplingParams(top_k=2),
        SamplingParams(top_p=0.8),
        SamplingParams(min_p=0.3),
        SamplingParams(top_k=4, top_p=0.85, min_p=0.2),
    ]
    filtered = apply_temperature_and_filters(logits, params)
    expected = [{0, 1, 2, 3, 4}, {0, 1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}]
    assert [kept(r) for r in filtered] == expected
    # Top-k alone (no sort path) with rows that disable it.
    filtered = apply_temperature_and_filters(
        logits[:3], [SamplingParams(top_k=2), SamplingParams(), SamplingParams(top_k=-1)]
    )
    assert [kept(r) for r in filtered] == [{0, 1}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}]


def reference_kept(logits_row: torch.Tensor, params: SamplingParams) -> set[int]:
    """The filters written out plainly, in float64, from a full sort."""
    probs = torch.softmax(logits_row.double() / params.temperature, dim=0)
    keep = torch.isfinite(logits_row) & (probs >= params.min_p * probs.max())
    ranked = torch.sort(probs, descending=True).values
    if 0 < params.top_k < probs.numel():
        keep &= probs >= ranked[params.top_k - 1]
    if params.top_p < 1.0:
        remaining = torch.sort(probs * keep, descending=True).values
        mass = torch.cumsum(remaining, dim=0) / remaining.sum()
        needed = int((mass < params.top_p).sum()) + 1
        keep &= probs >= remaining[needed - 1]
    return set(torch.nonzero(keep).flatten().tolist())


@pytest.mark.parametrize("scale", [4.0, 0.05], ids=["peaked", "flat"])
def test_filters_match_a_plain_reference_on_a_large_vocabulary(scale, monkeypatch):
    import structgen.engine.sampler as sampler_module

    vocab = 5000
    logits = random_logits(6, vocab, seed=31, scale=scale)
    params = [
        SamplingParams(top_p=0.9),
        SamplingParams(top_p=0.95, temperature=0.7),
        SamplingParams(top_p=0.8, top_k=2000),
        SamplingParams(top_p=0.9, min_p=0.001, temperature=1.3),
        SamplingParams(top_k=300),
        SamplingParams(),
    ]
    candidate_counts = []
    real_cuts = sampler_module._cuts

    def spy(scaled, count, *args):
        candidate_counts.append(count)
        return real_cuts(scaled, count, *args)

    monkeypatch.setattr(sampler_module, "_cuts", spy)
    filtered = apply_temperature_and_filters(logits, params)
    for i, p in enumerate(params):
        assert kept(filtered[i]) == reference_kept(logits[i], p), p
    # Peaked rows are decided from the top candidates; flat ones need the full sort.
    expected_counts = [2000] if scale == 4.0 else [2000, vocab]
    assert candidate_counts == expected_counts


def test_filters_keep_masked_tokens_masked():
    logits = torch.tensor([[NEG_INF, 1.0, NEG_INF, 0.5, 0.0]])
    for params in (
        SamplingParams(top_k=10),
        SamplingParams(top_p=0.999),
        SamplingParams(min_p=0.01),
    ):
        assert kept(apply_temperature_and_filters(logits, [params])[0]) == {1, 3, 4}


def test_sampled_tokens_stay_inside_the_filtered_set():
    probs = torch.tensor([0.35, 0.3, 0.2, 0.1, 0.05])
    counts = sample_counts(probs.log(), 4000, top_p=0.6, temperature=1.0)
    assert set(torch.nonzero(counts).flatten().tolist()) == {0, 1}
    counts = sample_counts(probs.log(), 4000, top_k=3)
    assert set(torch.nonzero(counts).flatten().tolist()) == {0, 1, 2}
    counts = sample_counts(probs.log(), 4000, min_p=0.5)
    assert set(torch.nonzero(counts).flatten().tolist()) == {0, 1, 2}


# --------------------------------------------------------------------- penalties


def test_penalties_follow_the_openai_formula_exactly():
    logits = random_logits(3, 10, seed=11)
    history = [4, 4, 4, 7, 2, 7]
    rows = [
        row(history, frequency_penalty=0.5),
        row(history, presence_penalty=1.5),
        row(history, frequency_penalty=-0.25, presence_penalty=0.75),
    ]
    penalized = apply_penalties(logits, rows)
    counts = torch.bincount(torch.tensor(history), minlength=10).float()
    for i, r in enumerate(rows):
        p = r.params
        expected = logits[i] - (p.frequency_penalty * counts + p.presence_penalty * (counts > 0))
        assert torch.equal(penalized[i], expected)


def test_penalties_leave_unpenalized_rows_and_masks_alone():
    logits = random_logits(2, 10, seed=12)
    logits[0, 4] = NEG_INF
    rows = [row([4, 4, 1], frequency_penalty=-2.0), row([4, 1])]
    penalized = apply_penalties(logits, rows)
    assert penalized[0, 4] == NEG_INF
    assert torch.equal(penalized[1], logits[1])


def test_penalties_apply_to_greedy_rows():
    logits = torch.tensor([[2.0, 1.5, 0.0]])

    def greedy(history, **penalties):
        return Sampler().sample(logits, [row(history, temperature=0.0, **penalties)]).token_ids

    assert greedy([0]) == [0]
    assert greedy([0], presence_penalty=1.0) == [1]  # 2.0 - 1.0 < 1.5
    assert greedy([0, 0], frequency_penalty=0.2) == [0]  # 2.0 - 0.4 > 1.5
    assert greedy([0, 0, 0], frequency_penalty=0.2) == [1]  # 2.0 - 0.6 < 1.5


# --------------------------------------------------------------------- seeds


def decode_steps(seed_position: int, others: list[SamplerRow], steps: int = 25) -> list[int]:
    """Sample a seeded row for `steps` steps inside a batch of `others` (fixed per-row logits)."""
    seeded = row(temperature=1.0, top_p=0.95, frequency_penalty=0.3, seed=42)
    seeded.generator = seeded_generator(seeded.params, "cpu")
    batch = list(others)
    batch.insert(seed_position, seeded)
    sampler = Sampler()
    torch.manual_seed(seed_position)  # unseeded rows see different global randomness
    for step in range(steps):
        logits = torch.stack(
            [random_logits(1, 400, seed=1000 * step + 7, scale=1.0)[0]] * len(batch)
        )
        noise = random_logits(len(batch), 400, seed=step, scale=0.5)
        noise[seed_position] = 0.0  # only the seeded row's logits are fixed
        out = sampler.sample(logits + noise, batch)
        for r, token in zip(batch, out.token_ids):
            r.output_token_ids.append(token)
    return seeded.output_token_ids


def test_seeded_row_is_independent_of_the_batch():
    alone = decode_steps(0, [])
    assert len(set(alone)) > 5  # the draws are random, not a constant
    other_seed = row(seed=7, temperature=0.8)
    other_seed.generator = seeded_generator(other_seed.params, "cpu")
    others = [row(temperature=0.0), row(temperature=1.3, top_k=5), other_seed, row(min_p=0.1)]
    assert decode_steps(2, others) == alone
    others_again = [row(temperature=0.0), row(temperature=1.3, top_k=5), row(min_p=0.1)]
    assert decode_steps(3, list(reversed(others_again))) == alone


def test_different_seeds_differ_and_unseeded_rows_use_the_global_rng():
    logits = random_logits(1, 1000, seed=1, scale=0.1)

    def draws(seed):
        generator = torch.Generator().manual_seed(seed)
        return [
            Sampler().sample(logits, [row(generator=generator)]).token_ids[0] for _ in range(10)
        ]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    torch.manual_seed(5)
    first = Sampler().sample(logits.repeat(10, 1), [row() for _ in range(10)]).token_ids
    torch.manual_seed(5)
    assert Sampler().sample(logits.repeat(10, 1), [row() for _ in range(10)]).token_ids == first


def test_seeded_generator():
    assert seeded_generator(SamplingParams(), "cpu") is None
    a = seeded_generator(SamplingParams(seed=3), "cpu")
    b = seeded_generator(SamplingParams(seed=3), "cpu")
    assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b))


# --------------------------------------------------------------------- logprobs


def test_logprobs_are_log_softmax_of_the_received_logits():
    logits = random_logits(3, 50, seed=21)
    logits[0, :10] = NEG_INF  # a grammar mask, applied before the sampler
    rows = [
        row(logprobs=5, temperature=0.0, presence_penalty=2.0, history=[1, 2]),
        row(logprobs=0, temperature=0.3, top_k=3),
        row(temperature=1.0),
    ]
    out = Sampler().sample(logits, rows)
    reference = torch.log_softmax(logits, dim=-1)
    assert out.logprobs[2] is None
    for i in (0, 1):
        lp = out.logprobs[i]
        assert lp.token_id == out.token_ids[i]
        assert lp.logprob == pytest.approx(float(reference[i, lp.token_id]), abs=1e-6)
        assert len(lp.top) == rows[i].params.logprobs
        values, ids = reference[i].topk(rows[i].params.logprobs)
        assert [t for t, _ in lp.top] == ids.tolist()
        assert [v for _, v in lp.top] == pytest.approx(values.tolist(), abs=1e-6)
    top_values = [v for _, v in out.logprobs[0].top]
    assert top_values == sorted(top_values, reverse=True)
    assert all(t >= 10 for t, _ in out.logprobs[0].top)


def test_logprobs_of_masked_alternatives_are_minus_infinity():
    logits = torch.tensor([[NEG_INF, 0.0, NEG_INF, math.log(3.0)]])
    out = Sampler().sample(logits, [row(temperature=0.0, logprobs=3)])
    lp = out.logprobs[0]
    assert lp.token_id == 3 and lp.logprob == pytest.approx(math.log(0.75))
    assert lp.top[:2] == [(3, pytest.approx(math.log(0.75))), (1, pytest.approx(math.log(0.25)))]
    assert lp.top[2][1] == NEG_INF
