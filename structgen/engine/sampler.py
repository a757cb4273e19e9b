"""Token sampling for one decode step: a batch of logits rows in, one token id per row out.

This module owns what happens to a row of logits after the grammar mask and before the
token is handed back to the engine: frequency/presence penalties, temperature, the
min-p / top-k / top-p filters, greedy or random choice, and the log-probabilities that
are returned to the user. It must not touch the KV cache, the scheduler, matchers or the
tokenizer, and it never modifies the logits tensor it is given.

Order of operations, per row (the order vLLM's V1 sampler uses):

1. log-probabilities, when requested: `log_softmax` of the logits exactly as received
   (after the grammar mask; before penalties, temperature and filters);
2. penalties (OpenAI): `logit -= frequency_penalty * count + presence_penalty * (count > 0)`,
   counting the row's generated tokens only (not the prompt);
3. temperature 0: argmax, done. Otherwise divide by the temperature, then
4. min-p: drop tokens with `p < min_p * p_max`;
5. top-k: keep the tokens whose logit is at least the k-th largest (ties with the k-th
   are kept, as in vLLM and transformers);
6. top-p: keep the smallest set of most likely tokens whose probability, renormalized
   over what min-p and top-k left, reaches top_p (and any token tied with the last one);
7. sample from the softmax of what is left.

min-p and top-k keep a prefix of the tokens sorted by probability and only compare
probability ratios, so they commute with each other; only top-p's mass depends on the
filters applied before it.

Randomness: each sampled row takes exactly one uniform number per step and picks the
token where it falls in the cumulative distribution (float64 cumulative sums, so even a
flat 50k-token distribution is sampled without visible rounding bias). On CPU, rows that
ask for a temperature alone are drawn by one C call (`kernels.sample_cpu`, its own
exponential, the same rule) instead of torch's ops. A row with a
`generator` (a seeded request) draws that number from its own generator, whatever else is
in the batch, so its tokens depend only on its seed and its own logits; rows without one
use the global torch RNG. One uniform per row, rather than one exponential per token for
an `argmax(p / E)` race, keeps the random number generation negligible on CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from structgen.engine.kernels import sample_cpu
from structgen.engine.sampling_params import SamplingParams

__all__ = [
    "Sampler",
    "SamplerOutput",
    "SamplerRow",
    "TokenLogprobs",
    "apply_penalties",
    "apply_temperature_and_filters",
    "seeded_generator",
]

_NEG_INF = float("-inf")
# Top-p first looks for its cut among this many most likely tokens (CPU only).
_TOP_P_CANDIDATES = 1024


@dataclass
class TokenLogprobs:
    """The sampled token's log-probability and the most likely alternatives, most likely first."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class SamplerRow:
    """One sequence of the batch: its parameters, its generated tokens so far, its RNG."""

    params: SamplingParams
    output_token_ids: list[int]
    generator: torch.Generator | None = None


@dataclass
class SamplerOutput:
    """One token per row, and its log-probabilities where the row asked for them."""

    token_ids: list[int]
    logprobs: list[TokenLogprobs | None]


def seeded_generator(params: SamplingParams, device: torch.device | str) -> torch.Generator | None:
    """The private generator of a seeded request (None when it has no seed), on `device`."""
    if params.seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(params.seed)
    return generator


class Sampler:
    """Stateless: everything a step needs comes in `sample`'s arguments."""

    def sample(self, logits: torch.Tensor, rows: Sequence[SamplerRow], strict: bool = True) -> SamplerOutput:
        """One token per row of `logits` ([batch, vocab], masked tokens at -inf).

        Raises RuntimeError when a row has no finite maximum (every token masked, or NaN /
        +inf logits): there is nothing meaningful to sample there. strict=False: such a
        row gets token -1 instead (an engine fails that request alone).
        """
        _check_shapes(logits, rows)
        logits = logits.float()
        logprob_rows = [i for i, row in enumerate(rows) if row.params.logprobs is not None]
        raw_logprobs = _raw_logprobs(logits, logprob_rows)

        penalized_rows = [i for i, row in enumerate(rows) if row.params.has_penalties]
        if penalized_rows:
            logits = _penalize_rows(logits, rows, penalized_rows)

        row_max, token_ids = sample_cpu.largest(logits) if sample_cpu.fits(logits) else logits.max(dim=-1)
        sampled_rows = [i for i, row in enumerate(rows) if not row.params.greedy]
        if sampled_rows:
            sampled = _sample_random(
                _rows_of(logits, sampled_rows),
                _rows_of(row_max, sampled_rows),
                _rows_of(token_ids, sampled_rows),
                [rows[i] for i in sampled_rows],
            )
            token_ids = _with_rows(token_ids, sampled_rows, sampled)
        token_ids = token_ids.masked_fill(~torch.isfinite(row_max), -1)

        pending_logprobs = _gather_logprobs(raw_logprobs, token_ids, logprob_rows, rows)
        ids = token_ids.tolist()
        if strict:
            _raise_on_invalid_rows(ids)
        return SamplerOutput(ids, _build_logprobs(pending_logprobs, logprob_rows, ids))


def apply_penalties(logits: torch.Tensor, rows: Sequence[SamplerRow]) -> torch.Tensor:
    """`logits` with each row's frequency/presence penalties applied (a new tensor)."""
    _check_shapes(logits, rows)
    penalized_rows = [i for i, row in enumerate(rows) if row.params.has_penalties]
    if not penalized_rows:
        return logits.float().clone()
    return _penalize_rows(logits.float(), rows, penalized_rows)


def apply_temperature_and_filters(
    logits: torch.Tensor, params: Sequence[SamplingParams]
) -> torch.Tensor:
    """Temperature-scaled logits with min-p, top-k, top-p applied (dropped tokens at -inf).

    Rows are shifted so that their maximum is 0 before dividing, which keeps a tiny
    temperature from overflowing. For rows with temperature > 0 only.
    """
    logits = logits.float()
    row_max = logits.max(dim=-1).values
    return _scale_and_filter(logits, row_max, params)


# --------------------------------------------------------------------- checks


def _check_shapes(logits: torch.Tensor, rows: Sequence[SamplerRow]) -> None:
    if logits.dim() != 2:
        raise ValueError(f"logits must be [batch, vocab], got shape {tuple(logits.shape)}")
    if logits.shape[0] != len(rows):
        raise ValueError(f"{logits.shape[0]} logits rows for {len(rows)} sampler rows")


def _raise_on_invalid_rows(ids: list[int]) -> None:
    if min(ids, default=0) >= 0:
        return
    bad = [i for i, token in enumerate(ids) if token < 0]
    raise RuntimeError(
        f"cannot sample batch rows {bad}: no finite logit (every token masked to -inf, "
        "or the logits contain NaN/+inf)"
    )


def _index_tensor(indices: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(indices, dtype=torch.long, device=device)


def _rows_of(tensor: torch.Tensor, indices: list[int]) -> torch.Tensor:
    """The rows at `indices` (increasing, distinct), without a copy when that is all of them."""
    if len(indices) == tensor.shape[0]:
        return tensor
    # Advanced indexing, not index_select: with 2 busy CPU threads, index_select of
    # [32, 49152] rows measured 125 ms against 8 ms.
    return tensor[_index_tensor(indices, tensor.device)]


def _with_rows(tensor: torch.Tensor, indices: list[int], rows: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` whose rows at `indices` (increasing, distinct) are `rows`."""
    if len(indices) == tensor.shape[0]:
        return rows
    return tensor.index_copy(0, _index_tensor(indices, tensor.device), rows)


def _per_row(values: list[float], device: torch.device) -> torch.Tensor:
    """A [n, 1] float32 column, one value per row, to broadcast against [n, vocab]."""
    return torch.tensor(values, dtype=torch.float32, device=device).unsqueeze(1)


# --------------------------------------------------------------------- penalties


def _penalize_rows(
    logits: torch.Tensor, rows: Sequence[SamplerRow], penalized_rows: list[int]
) -> torch.Tensor:
    vocab_size = logits.shape[1]
    histories = [rows[i].output_token_ids for i in penalized_rows]
    longest = max(map(len, histories))
    if longest == 0:
        return logits
    device = logits.device
    # Pad with an extra id (vocab_size) whose count lands in a column that is cut off.
    padded = [list(h) + [vocab_size] * (longest - len(h)) for h in histories]
    history = torch.tensor(padded, dtype=torch.long, device=device)
    counts = torch.zeros((len(histories), vocab_size + 1), dtype=torch.float32, device=device)
    counts.scatter_add_(1, history, torch.ones_like(history, dtype=torch.float32))
    counts = counts[:, :vocab_size]

    frequency = _per_row([rows[i].params.frequency_penalty for i in penalized_rows], device)
    presence = _per_row([rows[i].params.presence_penalty for i in penalized_rows], device)
    penalty = frequency * counts + presence * (counts > 0)
    return _with_rows(logits, penalized_rows, _rows_of(logits, penalized_rows) - penalty)


# --------------------------------------------------------------------- random sampling


def _sample_random(
    logits: torch.Tensor, row_max: torch.Tensor, argmax_ids: torch.Tensor, rows: list[SamplerRow]
) -> torch.Tensor:
    uniforms = _uniforms([row.generator for row in rows], logits.device)
    params = [row.params for row in rows]
    plain = [i for i, p in enumerate(params) if _temperature_only(p, logits.shape[1])]
    if plain and sample_cpu.fits(logits):
        # Rows with no finite maximum get -1 later; give the kernel a finite one meanwhile.
        largest = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        picked = sample_cpu.sample(_rows_of(logits, plain), _rows_of(largest, plain),
                                   _per_row([params[i].temperature for i in plain], logits.device).squeeze(1),
                                   _rows_of(uniforms, plain))
        # A row whose every weight is 0 (no finite logit) has nothing to pick: its argmax stands.
        picked = torch.where(picked >= 0, picked, _rows_of(argmax_ids, plain))
        chosen = set(plain)
        rest = [i for i in range(len(rows)) if i not in chosen]
        if not rest:
            return picked
        tokens = _with_rows(argmax_ids, plain, picked)
        rest_tokens = _sample_filtered(_rows_of(logits, rest), _rows_of(row_max, rest), _rows_of(argmax_ids, rest),
                                       [params[i] for i in rest], _rows_of(uniforms, rest))
        return _with_rows(tokens, rest, rest_tokens)
    return _sample_filtered(logits, row_max, argmax_ids, params, uniforms)


def _temperature_only(params: SamplingParams, vocab_size: int) -> bool:
    """Whether a row asks for nothing but a temperature (no min-p, top-k or top-p)."""
    return params.min_p <= 0.0 and not 0 < params.top_k < vocab_size and params.top_p >= 1.0


def _sample_filtered(
    logits: torch.Tensor, row_max: torch.Tensor, argmax_ids: torch.Tensor, params: list[SamplingParams],
    uniforms: torch.Tensor,
) -> torch.Tensor:
    filtered = _scale_and_filter(logits, row_max, params)
    weights = filtered.exp_()  # unnormalized: rows are max-shifted, the top token weighs 1
    return _invert_cumulative(weights, uniforms, argmax_ids)


def _invert_cumulative(
    weights: torch.Tensor, uniforms: torch.Tensor, argmax_ids: torch.Tensor
) -> torch.Tensor:
    """Per row, the first token whose cumulative weight exceeds uniform * total weight."""
    cumulative = torch.cumsum(weights, dim=-1, dtype=torch.float64)
    targets = uniforms.unsqueeze(1) * cumulative[:, -1:]
    picked = torch.searchsorted(cumulative, targets, right=True)
    picked = picked.clamp_(max=weights.shape[1] - 1)
    # That token has positive weight unless rounding interferes (uniform * total rounding up
    # to total, or a GPU parallel scan that is not exactly monotone); then take the top token
    # rather than ever return a masked one.
    positive = weights.gather(1, picked) > 0
    return torch.where(positive, picked, argmax_ids.unsqueeze(1)).squeeze(1)


def _uniforms(generators: list[torch.Generator | None], device: torch.device) -> torch.Tensor:
    """One float64 uniform in [0, 1) per row: seeded rows from their own generator."""
    count = len(generators)
    seeded = [(i, g) for i, g in enumerate(generators) if g is not None]
    if len(seeded) < count:
        uniforms = torch.rand(count, dtype=torch.float64, device=device)
    else:
        uniforms = torch.empty(count, dtype=torch.float64, device=device)
    if seeded:
        # A generator lives on one device: draw there, then move the draws.
        own = [torch.rand((), dtype=torch.float64, generator=g, device=g.device) for _, g in seeded]
        positions = _index_tensor([i for i, _ in seeded], device)
        uniforms = uniforms.index_copy(0, positions, torch.stack(own).to(device))
    return uniforms


def _scale_and_filter(
    logits: torch.Tensor, row_max: torch.Tensor, params: Sequence[SamplingParams]
) -> torch.Tensor:
    device = logits.device
    temperature = _per_row([p.temperature for p in params], device)
    # In place on the fresh difference: on CPU, every new [rows, vocab] buffer costs.
    scaled = (logits - row_max.unsqueeze(1)).div_(temperature)
    scaled = _apply_min_p(scaled, [p.min_p for p in params])
    return _apply_top_k_top_p(scaled, [p.top_k for p in params], [p.top_p for p in params])


def _apply_min_p(scaled: torch.Tensor, min_p: list[float]) -> torch.Tensor:
    """Drop p < min_p * p_max; rows are max-shifted, so that is `scaled < log(min_p)`."""
    if not any(m > 0.0 for m in min_p):
        return scaled
    log_min_p = _per_row(min_p, scaled.device).log()  # log(0) = -inf drops nothing
    return scaled.masked_fill_(scaled < log_min_p, _NEG_INF)


def _apply_top_k_top_p(scaled: torch.Tensor, top_k: list[int], top_p: list[float]) -> torch.Tensor:
    """Drop tokens below each row's top-k / top-p cut (a logit value: ties with it stay)."""
    vocab_size = scaled.shape[1]
    k_enabled = [0 < k < vocab_size for k in top_k]
    p_enabled = [p < 1.0 for p in top_p]
    if not any(k_enabled) and not any(p_enabled):
        return scaled
    largest_k = max((k for k, on in zip(top_k, k_enabled) if on), default=1)
    count = largest_k
    if any(p_enabled):
        # On CPU a full sort costs ~5 ms per 50k-token row; the top candidates nearly always
        # hold top_p of the mass. On GPU the sort is cheap and a check would cost a sync.
        count = max(largest_k, _TOP_P_CANDIDATES) if scaled.device.type == "cpu" else vocab_size
    cuts = _cuts(scaled, min(count, vocab_size), top_k, k_enabled, top_p, p_enabled)
    if cuts is None:
        cuts = _cuts(scaled, vocab_size, top_k, k_enabled, top_p, p_enabled)
    return scaled.masked_fill_(scaled < cuts, _NEG_INF)


def _cuts(
    scaled: torch.Tensor,
    count: int,
    top_k: list[int],
    k_enabled: list[bool],
    top_p: list[float],
    p_enabled: list[bool],
) -> torch.Tensor | None:
    """[rows, 1] smallest logit each row keeps, judged from its `count` largest logits;
    None when top-p needs more than `count` tokens in some row."""
    device = scaled.device
    if count < scaled.shape[1]:
        largest = scaled.topk(count, dim=-1).values
    else:
        largest = scaled.sort(dim=-1, descending=True).values  # faster than a full topk
    cuts = torch.full((scaled.shape[0], 1), _NEG_INF, device=device)
    if any(k_enabled):
        kth = [k - 1 if on else 0 for k, on in zip(top_k, k_enabled)]
        kth_largest = largest.gather(1, _index_tensor(kth, device).unsqueeze(1))
        cuts = torch.where(_flags(k_enabled, device), kth_largest, cuts)
        largest.masked_fill_(largest < cuts, _NEG_INF)
    if not any(p_enabled):
        return cuts

    weights = largest.exp().double()  # rows are max-shifted: the top token weighs 1
    total = weights.sum(dim=-1, keepdim=True)
    if count < scaled.shape[1] and not all(k_enabled):
        # Rows without top-k keep tokens outside the candidates: their mass counts too.
        whole_row = scaled.exp().sum(dim=-1, keepdim=True, dtype=torch.float64)
        total = torch.where(_flags(k_enabled, device), total, whole_row)
    mass_so_far = weights.cumsum(dim=-1) / total
    threshold = torch.tensor(top_p, dtype=torch.float64, device=device).unsqueeze(1)
    p_on = _flags(p_enabled, device)
    if count < scaled.shape[1] and not bool((~p_on | (mass_so_far[:, -1:] >= threshold)).all()):
        return None
    # A token stays while the tokens ranked above it hold less than top_p of the mass.
    kept = 1 + (mass_so_far[:, :-1] < threshold).sum(dim=-1, keepdim=True)
    top_p_cut = largest.gather(1, kept - 1)
    return torch.where(p_on, torch.maximum(cuts, top_p_cut), cuts)


def _flags(values: list[bool], device: torch.device) -> torch.Tensor:
    """A [n, 1] bool column, one flag per row."""
    return torch.tensor(values, dtype=torch.bool, device=device).unsqueeze(1)


# --------------------------------------------------------------------- log-probabilities


def _raw_logprobs(logits: torch.Tensor, logprob_rows: list[int]) -> torch.Tensor | None:
    if not logprob_rows:
        return None
    return torch.log_softmax(_rows_of(logits, logprob_rows), dim=-1)


def _gather_logprobs(
    raw_logprobs: torch.Tensor | None,
    token_ids: torch.Tensor,
    logprob_rows: list[int],
    rows: Sequence[SamplerRow],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]] | None:
    """Queue the device work for the logprobs (chosen token's, top-k); no transfer yet."""
    if raw_logprobs is None:
        return None
    # Invalid rows carry -1; clamp so gather stays in range (their logprobs mean nothing).
    chosen = _rows_of(token_ids, logprob_rows).clamp(min=0)
    chosen_logprob = raw_logprobs.gather(1, chosen.unsqueeze(1)).squeeze(1)
    top_counts = [rows[i].params.logprobs for i in logprob_rows]
    top_values, top_ids = raw_logprobs.topk(max(top_counts), dim=-1)
    return chosen_logprob, top_values, top_ids, top_counts


def _build_logprobs(
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]] | None,
    logprob_rows: list[int],
    token_ids: list[int],
) -> list[TokenLogprobs | None]:
    result: list[TokenLogprobs | None] = [None] * len(token_ids)
    if pending is None:
        return result
    chosen_logprob, top_values, top_ids, top_counts = pending
    for row, logprob, values, ids, count in zip(
        logprob_rows, chosen_logprob.tolist(), top_values.tolist(), top_ids.tolist(), top_counts
    ):
        top = list(zip(ids[:count], values[:count]))
        result[row] = TokenLogprobs(token_ids[row], logprob, top)
    return result
