"""The KV block manager alone (structgen.engine.block_manager), with no model and no
tokenizer: block ids handed out and freed, reference counts, the prefix cache (hash
chains, sharing, LRU eviction, reset) and its statistics."""

from __future__ import annotations

import pytest

from structgen.engine.block_manager import NULL_BLOCK, BlockManager, hash_block

BS = 4  # tokens per block


def cached(bm: BlockManager, tokens: list[int]) -> list[int]:
    """Blocks holding `tokens` (whole blocks), allocated, registered and freed again:
    unreferenced but findable by hash, as a finished request leaves them."""
    hashes = bm.block_hashes_of(tokens, [])
    blocks = bm.allocate(len(hashes))
    for block, block_hash in zip(blocks, hashes):
        bm.register_full_block(block, block_hash)
    bm.free(blocks)
    return blocks


def test_hashes_chain_over_everything_before_a_block():
    first = hash_block(None, [1, 2, 3, 4])
    assert hash_block(None, [1, 2, 3, 4]) == first
    assert hash_block(first, [5, 6, 7, 8]) != hash_block(None, [5, 6, 7, 8])
    assert hash_block(None, [1, 2, 3, 5]) != first


def test_block_hashes_of_covers_full_blocks_only_and_extends_what_is_known():
    bm = BlockManager(8, BS)
    tokens = list(range(11))  # two full blocks and three tokens
    hashes = bm.block_hashes_of(tokens, [])
    assert hashes == [hash_block(None, tokens[:4]), hash_block(hashes[0], tokens[4:8])]
    known = hashes[:1]
    assert bm.block_hashes_of(tokens, known) is known and known == hashes
    other = bm.block_hashes_of([0, 1, 2, 3, 9, 9, 9, 9], [])
    assert other[0] == hashes[0] and other[1] != hashes[1]  # equal prefixes, equal hashes


def test_needs_a_block():
    with pytest.raises(ValueError):
        BlockManager(0, BS)


def test_allocate_hands_out_every_block_but_the_null_block_once():
    bm = BlockManager(5, BS)
    blocks = bm.allocate(5)
    assert sorted(blocks) == [1, 2, 3, 4, 5] and NULL_BLOCK not in blocks
    assert bm.fresh_blocks == blocks  # to be zeroed by the engine
    assert all(bm.ref_counts[b] == 1 for b in blocks) and bm.ref_counts[NULL_BLOCK] == 0
    assert bm.num_free_blocks == 0
    stats = bm.stats()
    assert (stats.total, stats.used, stats.free, stats.cached) == (5, 5, 0, 0)


def test_allocate_is_all_or_nothing():
    bm = BlockManager(3, BS)
    assert bm.allocate(2) is not None
    assert bm.allocate(2) is None
    assert bm.num_free_blocks == 1 and len(bm.fresh_blocks) == 2
    assert bm.allocate(1) is not None and bm.allocate(1) is None


def test_free_returns_blocks_and_refuses_a_double_free():
    bm = BlockManager(4, BS)
    blocks = bm.allocate(3)
    bm.free(blocks)
    assert bm.num_free_blocks == 4 and all(bm.ref_counts[b] == 0 for b in blocks)
    assert bm.stats().used == 0
    with pytest.raises(AssertionError, match="freed twice"):
        bm.free(blocks[:1])


def test_freed_tail_blocks_are_reused_before_prefix_blocks():
    bm = BlockManager(3, BS)
    head, middle, tail = bm.allocate(3)
    bm.free([head, middle, tail])
    assert bm.allocate(3) == [tail, middle, head]


def test_least_recently_freed_blocks_are_reused_first():
    bm = BlockManager(3, BS)
    a, b, c = bm.allocate(3)
    bm.free([b])
    bm.free([a])
    bm.free([c])
    assert bm.allocate(3) == [b, a, c]


def test_a_registered_block_outlives_its_owner_and_is_found_by_hash():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    blocks = cached(bm, tokens)
    stats = bm.stats()
    assert (stats.used, stats.cached) == (0, 2)
    hashes = bm.block_hashes_of(tokens, [])
    assert bm.match_prefix(hashes, max_blocks=2, num_tokens=9) == blocks
    assert all(bm.ref_counts[b] == 1 for b in blocks) and bm.num_free_blocks == 6
    stats = bm.stats()
    assert (stats.used, stats.cached, stats.prefix_queries, stats.prefix_hits) == (2, 0, 9, 8)
    assert stats.hit_rate == pytest.approx(8 / 9)


def test_a_prefix_match_is_the_longest_cached_run_within_max_blocks():
    bm = BlockManager(8, BS)
    tokens = list(range(12))
    blocks = cached(bm, tokens)
    hashes = bm.block_hashes_of(tokens, [])
    assert bm.match_prefix(hashes, max_blocks=2, num_tokens=12) == blocks[:2]
    other = bm.block_hashes_of(tokens[:4] + [99, 99, 99, 99] + tokens[8:], [])
    assert bm.match_prefix(other, max_blocks=3, num_tokens=12) == blocks[:1]  # stops at the first miss
    assert bm.match_prefix(bm.block_hashes_of([7] * 8, []), max_blocks=2, num_tokens=8) == []
    assert bm.stats().prefix_hits == 3 * BS


def test_sharers_hold_a_cached_block_until_the_last_one_frees_it():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    hashes = bm.block_hashes_of(tokens, [])
    owner = bm.allocate(2)
    for block, block_hash in zip(owner, hashes):
        bm.register_full_block(block, block_hash)
    sharer = bm.match_prefix(hashes, max_blocks=2, num_tokens=8)
    assert sharer == owner and [bm.ref_counts[b] for b in owner] == [2, 2]
    bm.free(owner)
    assert [bm.ref_counts[b] for b in owner] == [1, 1] and bm.stats().used == 2
    bm.free(sharer)
    assert bm.stats().used == 0 and bm.stats().cached == 2


def test_an_identical_block_registered_twice_stays_private():
    bm = BlockManager(8, BS)
    block_hash = hash_block(None, [1, 2, 3, 4])
    first, second = bm.allocate(2)
    bm.register_full_block(first, block_hash)
    bm.register_full_block(second, block_hash)
    assert bm.cached_blocks == {block_hash: first}
    assert bm.block_hashes[second] is None
    bm.register_full_block(first, hash_block(None, [5, 6, 7, 8]))  # already registered
    assert bm.cached_blocks == {block_hash: first}


def test_reusing_a_cached_block_evicts_it_from_the_cache():
    bm = BlockManager(2, BS)
    tokens = list(range(8))
    cached(bm, tokens)
    assert bm.allocate(1) is not None  # the tail block goes first
    hashes = bm.block_hashes_of(tokens, [])
    assert bm.stats().cached == 1
    assert bm.match_prefix(hashes[1:], max_blocks=1, num_tokens=4) == []
    assert len(bm.match_prefix(hashes, max_blocks=2, num_tokens=8)) == 1
    assert bm.allocate(1) is None


def test_reset_forgets_unused_cached_blocks_only():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    cached(bm, tokens)
    hashes = bm.block_hashes_of(tokens, [])
    in_use = bm.match_prefix(hashes[:1], max_blocks=1, num_tokens=4)
    bm.reset_prefix_cache()
    assert bm.stats().cached == 0
    assert bm.match_prefix(hashes, max_blocks=2, num_tokens=8) == in_use


def test_without_prefix_caching_nothing_is_registered_or_found():
    bm = BlockManager(8, BS, enable_prefix_caching=False)
    tokens = list(range(8))
    cached(bm, tokens)
    assert bm.cached_blocks == {} and bm.stats().cached == 0
    assert bm.match_prefix(bm.block_hashes_of(tokens, []), max_blocks=2, num_tokens=8) == []
    assert (bm.stats().prefix_queries, bm.stats().prefix_hits) == (8, 0)
