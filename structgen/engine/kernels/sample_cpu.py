"""Random sampling of float32 logits rows on CPU in one C call (sample_rows.h, through
`cpu_kernels`), for the rows that ask for a temperature and nothing else: each token
weighs e^((logit - the row's largest) / temperature), masked tokens nothing, and the
row's uniform picks the first token whose cumulative weight (float64) exceeds its share
of the total. One pass computes the weights and their sums, a second finds the token; no
[rows, vocab] tensor is made, where torch's path made four (their page faults and
passes were 13-36 ms of a 64-row step on 2 cores, this is 1.3 ms). Also each row's
largest logit and its token, which torch's max over rows took 3.8 ms for.

Owns the check that lets rows take this path (`fits`) and the call; `sampler` decides
which rows go here. Must not know about requests or sampling parameters.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels.compiled import cpu_kernels  # None where not built: torch's path runs


def fits(logits: torch.Tensor) -> bool:
    """Whether the C path takes these logits: float32 rows on CPU, each contiguous."""
    return (cpu_kernels is not None and logits.dtype is torch.float32 and logits.is_cpu and logits.dim() == 2
            and logits.stride(1) == 1)


def largest(logits: torch.Tensor, portable: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, tokens): each row's largest logit and the first token holding it, or NaN
    and its token where the row has one -- what `logits.max(dim=-1)` gives, in one pass
    (`fits(logits)` must hold)."""
    rows, vocab = logits.shape
    values, tokens = torch.empty(rows, dtype=torch.float32), torch.empty(rows, dtype=torch.int64)
    if rows and vocab:
        cpu_kernels.largest(logits.data_ptr(), rows, vocab, logits.stride(0), values.data_ptr(), tokens.data_ptr(),
                            portable)
    return values, tokens


def sample(logits: torch.Tensor, largest: torch.Tensor, temperatures: torch.Tensor, uniforms: torch.Tensor,
           portable: bool = False) -> torch.Tensor:
    """int64 [rows]: each row's token (`fits(logits)` must hold; `largest` the rows'
    finite maxima, `temperatures` > 0, `uniforms` float64 in [0, 1))."""
    rows, vocab = logits.shape
    largest = largest.to(torch.float32).contiguous()
    temperatures = temperatures.to(torch.float32).contiguous()
    uniforms = uniforms.to(torch.float64).contiguous()
    tokens = torch.empty(rows, dtype=torch.int64)
    if rows:
        cpu_kernels.sample_rows(logits.data_ptr(), rows, vocab, logits.stride(0), largest.data_ptr(),
                                temperatures.data_ptr(), uniforms.data_ptr(), tokens.data_ptr(), portable)
    return tokens
