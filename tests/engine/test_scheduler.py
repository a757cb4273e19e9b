"""The scheduler alone (structgen.engine.scheduler) on a real block manager, with no model
and no tokenizer: a step is played by hand (what ran is marked computed, a request whose
chunk reached its last token gets one new token). Checked: admission in arrival order up
to `max_num_seqs`, the token budget and chunked prefill, decodes first, preemption of the
newest request when blocks run out, prefix-cache reuse, requests that sit out, and
freeing."""

from __future__ import annotations

from dataclasses import dataclass

from structgen.engine.block_manager import BlockManager
from structgen.engine.request import Request, Status
from structgen.engine.sampling_params import SamplingParams
from structgen.engine.scheduler import Scheduler

BS = 4  # tokens per block


def make(num_blocks: int = 16, max_num_seqs: int = 8, budget: int = 64,
         prefix_caching: bool = True) -> Scheduler:
    return Scheduler(BlockManager(num_blocks, BS, prefix_caching), max_num_seqs, budget)


def request(name: str, prompt: list[int]) -> Request:
    return Request(name, prompt, SamplingParams())


@dataclass
class Played:
    """What one step ran, read before the step changed the requests."""

    chunks: list[tuple[str, int]]  # (request id, new tokens), in batch order
    sampled: list[str]  # the requests whose chunk reached their last token
    preempted: list[Request]
    num_tokens: int  # the step's token count, against the budget


def step(scheduler: Scheduler) -> Played:
    """One engine step without a model: schedule, mark every chunk computed, and give each
    request whose chunk reached its last token one sampled token."""
    out = scheduler.schedule()
    played = Played([(c.request.request_id, c.num_new_tokens) for c in out.chunks],
                    [c.request.request_id for c in out.chunks if c.samples], out.preempted, out.num_tokens)
    for chunk in out.chunks:
        scheduler.on_computed(chunk)
        if chunk.request.request_id in played.sampled:
            chunk.request.append_tokens([0])
    return played


def full_cache(prefix_caching: bool) -> tuple[Scheduler, Request, Request]:
    """Two 8-token requests prefilled into a cache of four blocks: the next token of either
    needs a block that is not there."""
    scheduler = make(num_blocks=4, prefix_caching=prefix_caching)
    a, b = request("a", list(range(8))), request("b", list(range(10, 18)))
    scheduler.add(a)
    scheduler.add(b)
    step(scheduler)
    return scheduler, a, b


def test_requests_are_admitted_in_arrival_order_up_to_max_num_seqs():
    scheduler = make(max_num_seqs=2)
    a, b, c = request("a", [1, 2, 3]), request("b", [4, 5]), request("c", [6])
    for r in (a, b, c):
        scheduler.add(r)
    assert step(scheduler).chunks == [("a", 3), ("b", 2)]
    assert scheduler.running == [a, b] and list(scheduler.waiting) == [c]
    assert a.status is Status.RUNNING and c.status is Status.WAITING
    assert a.metrics.first_scheduled_time is not None and c.metrics.first_scheduled_time is None
    scheduler.finish(a)
    assert step(scheduler).chunks == [("b", 1), ("c", 1)]
    assert scheduler.running == [b, c] and not scheduler.waiting


def test_a_long_prompt_is_prefilled_in_chunks_that_fit_the_budget():
    scheduler = make(budget=4)
    r = request("r", list(range(10)))
    scheduler.add(r)
    chunks = []
    for _ in range(3):
        out = scheduler.schedule()
        chunks.append((out.chunks[0].num_new_tokens, out.chunks[0].samples))
        scheduler.on_computed(out.chunks[0])
    assert chunks == [(4, False), (4, False), (2, True)]
    assert r.num_computed_tokens == 10 and len(r.block_table) == 3


def test_the_budget_is_shared_and_decodes_come_first():
    scheduler = make(budget=6)
    a, b = request("a", list(range(4))), request("b", list(range(10, 15)))
    scheduler.add(a)
    scheduler.add(b)
    first = step(scheduler)
    assert first.chunks == [("a", 4), ("b", 2)] and first.num_tokens == 6
    second = step(scheduler)
    assert second.chunks == [("a", 1), ("b", 3)]  # a decodes, b finishes its prompt
    assert second.sampled == ["a", "b"]


def test_blocks_are_reserved_for_exactly_the_tokens_scheduled():
    scheduler = make()
    r = request("r", list(range(9)))
    scheduler.add(r)
    step(scheduler)
    assert len(r.block_table) == 3 and r.num_computed_tokens == 9
    for _ in range(3):  # tokens 10 to 12 still fit the third block
        step(scheduler)
        assert len(r.block_table) == 3
    step(scheduler)
    assert len(r.block_table) == 4 and scheduler.blocks.stats().used == 4


def test_the_newest_running_request_is_preempted_when_blocks_run_out():
    scheduler, a, b = full_cache(prefix_caching=False)
    assert scheduler.blocks.num_free_blocks == 0
    scheduler.add(request("c", [1]))
    out = step(scheduler)
    assert out.chunks == [("a", 1)] and out.preempted == [b]
    assert b.status is Status.WAITING and scheduler.waiting[0] is b  # first to come back
    assert (b.block_table, b.num_computed_tokens, b.num_preemptions) == ([], 0, 1)
    assert b.num_tokens == 9  # its prompt and its output token, recomputed later
    assert len(a.block_table) == 3 and scheduler.blocks.stats().used == 3


def test_a_preempted_request_waits_with_nothing_held_until_it_fits():
    scheduler, a, b = full_cache(prefix_caching=False)
    step(scheduler)  # b is preempted
    out = step(scheduler)  # b needs three blocks for its 9 tokens; one is free
    assert out.chunks == [("a", 1)] and not out.preempted
    assert b.block_table == [] and b.status is Status.WAITING
    scheduler.finish(a)
    out = step(scheduler)
    assert out.chunks == [("b", 9)] and out.sampled == ["b"]
    assert b.status is Status.RUNNING and b.num_preemptions == 1


def test_a_request_that_cannot_grow_alone_preempts_itself():
    scheduler = make(num_blocks=2)
    r = request("r", list(range(8)))
    scheduler.add(r)
    step(scheduler)
    out = step(scheduler)
    assert out.chunks == [] and out.preempted == [r]
    assert r.status is Status.WAITING and r.block_table == [] and scheduler.blocks.stats().used == 0


def test_preemption_frees_tail_blocks_first_so_the_prefix_stays_cached():
    scheduler, a, b = full_cache(prefix_caching=True)
    b_prefix, b_tail = b.block_table
    step(scheduler)  # a takes b's tail block
    assert a.block_table[-1] == b_tail
    bm = scheduler.blocks
    assert bm.cached_blocks.get(b.block_hashes[0]) == b_prefix
    assert b.block_hashes[1] not in bm.cached_blocks
    queries = bm.stats().prefix_queries
    step(scheduler)  # b finds its prefix but no room for the rest, and lets the prefix go
    assert b.block_table == [] and bm.stats().used == 3 and bm.stats().cached == 1
    scheduler.finish(a)
    step(scheduler)
    assert b.block_table[0] == b_prefix and b.num_computed_tokens == 9
    assert bm.stats().prefix_queries == queries  # a recompute is not a new prompt
    assert b.num_cached_tokens == 0


def test_a_new_request_shares_the_cached_blocks_of_a_running_one():
    scheduler = make()
    a = request("a", list(range(10)))
    scheduler.add(a)
    step(scheduler)
    b = request("b", list(range(8)) + [50, 51, 52])
    scheduler.add(b)
    out = step(scheduler)
    assert out.chunks == [("a", 1), ("b", 3)]
    assert b.block_table[:2] == a.block_table[:2] and b.block_table[2] != a.block_table[2]
    assert [scheduler.blocks.ref_counts[x] for x in b.block_table] == [2, 2, 1]
    assert (b.num_cached_tokens, b.num_computed_tokens) == (8, 11)
    stats = scheduler.blocks.stats()
    assert (stats.prefix_queries, stats.prefix_hits) == (10 + 11, 8)


def test_cached_blocks_serve_after_their_owner_finished():
    scheduler = make()
    a = request("a", list(range(10)))
    scheduler.add(a)
    step(scheduler)
    prefix = a.block_table[:2]
    scheduler.finish(a)
    assert scheduler.blocks.stats().used == 0 and scheduler.blocks.stats().cached == 2
    b = request("b", list(range(10)))
    scheduler.add(b)
    assert step(scheduler).chunks == [("b", 2)]
    assert b.block_table[:2] == prefix and b.num_cached_tokens == 8


def test_the_last_prompt_token_is_always_computed():
    scheduler = make()
    a = request("a", list(range(8)))
    scheduler.add(a)
    step(scheduler)
    scheduler.finish(a)
    b = request("b", list(range(8)))  # both blocks are cached
    scheduler.add(b)
    out = step(scheduler)
    assert out.chunks == [("b", 4)] and out.sampled == ["b"]
    assert b.num_cached_tokens == 4


def test_without_prefix_caching_nothing_is_shared():
    scheduler = make(prefix_caching=False)
    a = request("a", list(range(10)))
    scheduler.add(a)
    step(scheduler)
    b = request("b", list(range(10)))
    scheduler.add(b)
    assert step(scheduler).chunks == [("a", 1), ("b", 10)]
    assert not set(a.block_table) & set(b.block_table)


def test_a_request_that_sits_out_is_skipped_and_holds_back_admission():
    scheduler = make()
    a, b = request("a", [1, 2, 3]), request("b", [4, 5])
    scheduler.add(a)
    step(scheduler)
    a.jump_job = object()  # its grammar is working out forced bytes
    scheduler.add(b)
    assert step(scheduler).chunks == [("b", 2)]
    a.jump_job = None
    scheduler.finish(b)
    c = request("c", [6])
    c.jump_job = object()
    scheduler.add(c)
    scheduler.add(request("d", [7]))
    assert step(scheduler).chunks == [("a", 1)]  # c heads the queue and d waits behind it
    assert [r.request_id for r in scheduler.waiting] == ["c", "d"]


def test_finish_frees_blocks_from_either_queue():
    scheduler = make(max_num_seqs=1)
    a, b = request("a", list(range(6))), request("b", list(range(5)))
    scheduler.add(a)
    scheduler.add(b)
    step(scheduler)
    assert scheduler.blocks.stats().used == 2
    scheduler.finish(b)
    scheduler.finish(a)
    assert a.status is b.status is Status.FINISHED
    assert not scheduler.has_unfinished() and scheduler.blocks.stats().used == 0
    assert a.block_table == [] and a.num_computed_tokens == 0
