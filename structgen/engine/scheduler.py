"""Iteration-level scheduling: which tokens of which requests run in the next step.

Every step has a token budget. Running requests come first (one token each when
decoding; a chunk when a prompt is still being prefilled or a jump-forward span was
appended), then waiting requests in arrival order, whose prompts are cut into chunks
that fit the budget (chunked prefill). A new request first takes its longest cached
prefix from the block manager. When the cache has no room for a running request's next
tokens, the newest running request is preempted: its blocks are freed and it goes back
to the front of the waiting queue to be recomputed later. A request that waits for
its grammar (a late mask, or the bytes a jump-forward appends; engine.masks) has nothing
to compute and is skipped.

Owns the queues and block tables; never runs the model or samples.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from structgen.engine.block_manager import BlockManager
from structgen.engine.request import Request, Status


@dataclass
class ScheduledChunk:
    request: Request
    num_new_tokens: int  # tokens from request.num_computed_tokens on

    @property
    def samples(self) -> bool:
        """Whether this chunk reaches the request's last token, so a token is sampled."""
        return self.request.num_computed_tokens + self.num_new_tokens == self.request.num_tokens

    @property
    def is_decode(self) -> bool:
        """One token past the prompt. A prompt's one remaining token (after a prefix-cache
        hit or a chunk) is a prefill, so that it is computed as a cold prefill computes it."""
        return self.num_new_tokens == 1 and self.request.num_computed_tokens >= self.request.num_prompt_tokens


@dataclass
class SchedulerOutput:
    chunks: list[ScheduledChunk]  # decodes (`ScheduledChunk.is_decode`) first
    preempted: list[Request]

    @property
    def num_tokens(self) -> int:
        return sum(c.num_new_tokens for c in self.chunks)


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int):
        self.blocks = blocks
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        preempted: list[Request] = []
        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            if request.sits_out:  # nothing to compute until its grammar has answered
                index += 1
                continue
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if self._reserve_or_preempt(request, num_new, preempted):
                chunks.append(ScheduledChunk(request, num_new))
                budget -= num_new
                index += 1
            else:
                break  # the request preempted itself: nothing newer is left running
        if not preempted:
            budget = self._admit_waiting(budget, chunks)
        chunks.sort(key=lambda c: not c.is_decode)  # stable: decodes first
        return SchedulerOutput(chunks, preempted)

    def _reserve_or_preempt(self, request: Request, num_new: int, preempted: list[Request]) -> bool:
        """Reserve cache slots for `num_new` more tokens, preempting the newest running
        requests until they fit. False if `request` itself had to be preempted."""
        while not self._reserve(request, num_new):
            victim = self.running.pop()
            self._preempt(victim)
            preempted.append(victim)
            if victim is request:
                return False
        return True

    def _admit_waiting(self, budget: int, chunks: list[ScheduledChunk]) -> int:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]
            if request.sits_out:  # (preempted while its jump was worked out)
                break
            if not request.block_table:
                self._take_cached_prefix(request)
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if not self._reserve(request, num_new):
                self._release(request)  # wait with nothing held
                break
            self.waiting.popleft()
            request.status = Status.RUNNING
            if request.metrics.first_scheduled_time is None:
                request.metrics.first_scheduled_time = time.monotonic()
            self.running.append(request)
            chunks.append(ScheduledChunk(request, num_new))
            budget -= num_new
        return budget

    def _take_cached_prefix(self, request: Request) -> None:
        bm = self.blocks
        bm.block_hashes_of(request.all_token_ids, request.block_hashes)
        # At least the last token is always computed: its logits are needed.
        max_blocks = (request.num_tokens - 1) // bm.block_size
        first_time = request.metrics.first_scheduled_time is None
        blocks = bm.match_prefix(request.block_hashes, max_blocks,
                                 request.num_prompt_tokens if first_time else 0)
        request.block_table = blocks
        request.num_computed_tokens = len(blocks) * bm.block_size
        request.num_registered_blocks = len(blocks)
        if first_time:
            request.num_cached_tokens = request.num_computed_tokens

    def _reserve(self, request: Request, num_new: int) -> bool:
        bs = self.blocks.block_size
        needed = -(-(request.num_computed_tokens + num_new) // bs) - len(request.block_table)
        if needed <= 0:
            return True
        new_blocks = self.blocks.allocate(needed)
        if new_blocks is None:
            return False
        request.block_table.extend(new_blocks)
        return True

    def _preempt(self, request: Request) -> None:
        self._release(request)
        request.status = Status.WAITING
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def _release(self, request: Request) -> None:
        self.blocks.free(request.block_table)
        request.block_table = []
        request.num_computed_tokens = 0
        request.num_registered_blocks = 0

    def on_computed(self, chunk: ScheduledChunk) -> None:
        """After the step ran: the chunk's K/V is cached; offer newly full blocks."""
        request = chunk.request
        request.num_computed_tokens += chunk.num_new_tokens
        bm = self.blocks
        full = request.num_computed_tokens // bm.block_size
        if full > request.num_registered_blocks and bm.enable_prefix_caching:
            bm.block_hashes_of(request.all_token_ids[: full * bm.block_size], request.block_hashes)
            for i in range(request.num_registered_blocks, full):
                bm.register_full_block(request.block_table[i], request.block_hashes[i])
        request.num_registered_blocks = max(request.num_registered_blocks, full)

    def finish(self, request: Request) -> None:
        """Remove a request from whichever queue holds it and free its blocks."""
        if request.status is Status.RUNNING:
            self.running.remove(request)
        elif request.status is Status.WAITING:
            try:
                self.waiting.remove(request)
            except ValueError:
                pass
        self._release(request)
        request.status = Status.FINISHED
