"""One generation request as the engine tracks it, and what the engine reports about it.

A `Request` holds its tokens (prompt followed by output), how many of them have K/V in
the cache (`num_computed_tokens`), the cache blocks it owns, and its sampling state.
The scheduler moves it between queues; the engine appends tokens and finishes it.
Nothing here touches tensors or block allocation.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from structgen.engine.sampling_params import SamplingParams


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class RequestMetrics:
    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    num_sampled_tokens: int = 0  # output tokens the model decoded one by one
    num_forced_tokens: int = 0  # output tokens appended by jump-forward (net)
    num_jumps: int = 0
    mask_time_s: float = 0.0  # filling this request's grammar masks
    compile_time_s: float = 0.0  # waiting for its grammar to compile (0 on a cache hit)


class Request:
    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 detokenizer: Any = None):
        self.request_id = request_id
        self.params = params
        self.all_token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_computed_tokens = 0
        self.block_table: list[int] = []
        self.block_hashes: list[bytes] = []  # of full blocks of all_token_ids
        self.num_registered_blocks = 0  # full blocks offered to the prefix cache
        self.num_cached_tokens = 0  # prompt tokens found in the prefix cache
        self.num_preemptions = 0
        self.status = Status.WAITING
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None
        self.generator = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
        self.detokenizer = detokenizer
        self.logprobs: list[Any] = []
        self.metrics = RequestMetrics(arrival_time=time.monotonic())
        # Constrained decoding: a Matcher (see structgen.matcher) whose mask is applied
        # to this request's logits and which accepts every sampled token.
        self.matcher: Any = None
        self.jump_forward = False
        self.grammar_future: Any = None  # a Future of the grammar while it compiles
        # Its mask for the current grammar state (engine.masks): the job filling it, the
        # row it fills, and the logits row kept while the request waits for a late one.
        self.mask_job: Any = None
        self.mask_row: Any = None
        self.held_logits: torch.Tensor | None = None
        self.jump_job: Any = None  # the forced bytes of its grammar state, being worked out
        self.error: str | None = None
        self.num_sent_tokens = 0  # output tokens already reported by step()
        self.num_sent_logprobs = 0

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.all_token_ids[: self.num_prompt_tokens]

    @property
    def output_token_ids(self) -> list[int]:
        return self.all_token_ids[self.num_prompt_tokens:]

    @property
    def num_output_tokens(self) -> int:
        return len(self.all_token_ids) - self.num_prompt_tokens

    @property
    def awaiting_mask(self) -> bool:
        """Its logits are computed but its mask was late: it sits out until the mask is ready."""
        return self.held_logits is not None

    @property
    def sits_out(self) -> bool:
        """Waiting for its grammar beside the batch: a late mask, or the bytes its grammar
        forces next (a jump-forward), whose automaton rows are still being built."""
        return self.held_logits is not None or self.jump_job is not None

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    def remove_last_tokens(self, count: int, block_size: int) -> None:
        """Drop the last `count` output tokens (a jump-forward re-tokenized them). Their
        K/V, if computed, is recomputed later; the blocks they sit in must be private
        (not registered in the prefix cache), which `Engine._jump_forward` ensures."""
        if count:
            del self.all_token_ids[-count:]
            self.num_computed_tokens = min(self.num_computed_tokens, self.num_tokens)
            del self.block_hashes[self.num_tokens // block_size:]
            self.num_sent_tokens = min(self.num_sent_tokens, self.num_output_tokens)

    def append_tokens(self, token_ids: list[int]) -> None:
        """Add output tokens; their K/V is computed in a later step. Sampled tokens come
        one at a time; a jump-forward appends a forced span at once, which the scheduler
        then runs as a prefill chunk."""
        self.all_token_ids.extend(token_ids)


@dataclass
class RequestOutput:
    """A request's state as reported by `Engine.step()` (deltas) or `generate()` (final)."""

    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int]  # every output token so far
    text: str  # output text so far (complete characters; stop strings removed)
    new_token_ids: list[int] = field(default_factory=list)  # since the previous report
    new_text: str = ""
    finished: bool = False
    finish_reason: str | None = None  # "stop", "length" or "abort"
    stop_reason: str | int | None = None  # the stop string or stop token id that matched
    logprobs: list[Any] | None = None  # TokenLogprobs per output token, when requested
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    metrics: RequestMetrics | None = None
    error: str | None = None  # why the request failed (finish_reason "error")

    @property
    def incomplete(self) -> bool:
        """True when a constrained output was cut off (max_tokens or the context) before
        its structure was complete: the text is a prefix, not a valid document."""
        return self.finish_reason in ("length", "abort", "error")
