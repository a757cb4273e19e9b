"""KV-cache block bookkeeping: allocation, reference counts and the prefix cache.

A block holds `block_size` consecutive tokens of one or more sequences (more than one
when a cached prefix is shared). A full block is identified by a hash chain over its
tokens and everything before them, so equal prefixes map to equal hashes. Blocks whose
reference count drops to zero go to the back of a free queue but stay findable by hash
until they are reused; allocation takes from the front (least recently freed first),
which evicts cached blocks LRU. Block 0 is the null block: never handed out, always
zero, it pads block tables. Blocks handed out are listed in `fresh_blocks` until the
engine has zeroed them (their stale tail must never hold another request's inf/NaN).
Owns block ids only; the tensors live in `kv_cache.py`.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence


def hash_block(parent: bytes | None, tokens: Sequence[int]) -> bytes:
    """Hash of a full block given its parent block's hash (None for the first block).

    A cryptographic digest, not Python's `hash`: a collision would hand one request
    another's keys and values, and tuple hashes can be collided on purpose."""
    data = array("q", tokens).tobytes()
    return hashlib.blake2b((parent or b"") + data, digest_size=16).digest()


@dataclass
class BlockStats:
    total: int
    used: int  # referenced by at least one sequence
    free: int  # unreferenced (includes cached)
    cached: int  # unreferenced but still holding a reusable prefix
    prefix_queries: int  # prompt tokens looked up in the prefix cache
    prefix_hits: int  # of those, tokens found cached

    @property
    def hit_rate(self) -> float:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0


NULL_BLOCK = 0


class BlockManager:
    """Blocks 1..num_blocks are allocatable; the cache tensors hold num_blocks + 1."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1:
            raise ValueError("the KV cache needs at least one block")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_counts = [0] * (num_blocks + 1)
        self.block_hashes: list[bytes | None] = [None] * (num_blocks + 1)
        self.cached_blocks: dict[bytes, int] = {}  # hash -> block id
        self.free_queue: OrderedDict[int, None] = OrderedDict((b, None) for b in range(1, num_blocks + 1))
        self.fresh_blocks: list[int] = []
        self.prefix_queries = 0
        self.prefix_hits = 0

    # -- prefix cache -------------------------------------------------------------

    def block_hashes_of(self, tokens: Sequence[int], known: list[bytes]) -> list[bytes]:
        """Extend `known` (hashes of the first blocks) to every full block of `tokens`."""
        bs = self.block_size
        for i in range(len(known), len(tokens) // bs):
            parent = known[-1] if known else None
            known.append(hash_block(parent, tokens[i * bs:(i + 1) * bs]))
        return known

    def match_prefix(self, hashes: Sequence[bytes], max_blocks: int, num_tokens: int) -> list[int]:
        """Take a reference to the longest run of cached blocks for `hashes[:max_blocks]`.

        `num_tokens` is the prompt length the lookup is for (hit-rate statistics)."""
        found: list[int] = []
        if self.enable_prefix_caching:
            for h in hashes[:max_blocks]:
                block = self.cached_blocks.get(h)
                if block is None:
                    break
                found.append(block)
            for block in found:
                self._take(block)
        self.prefix_queries += num_tokens
        self.prefix_hits += len(found) * self.block_size
        return found

    def register_full_block(self, block: int, block_hash: bytes) -> None:
        """Make a block that just became full findable by its hash."""
        if not self.enable_prefix_caching or self.block_hashes[block] is not None:
            return
        if block_hash in self.cached_blocks:
            return  # an identical block is already cached; this one stays private
        self.block_hashes[block] = block_hash
        self.cached_blocks[block_hash] = block

    # -- allocation -----------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def allocate(self, count: int) -> list[int] | None:
        """`count` fresh blocks (evicting cached ones LRU), or None if there are not enough."""
        if count > len(self.free_queue):
            return None
        blocks = []
        for _ in range(count):
            block, _ = self.free_queue.popitem(last=False)
            self._evict(block)
            self.ref_counts[block] = 1
            blocks.append(block)
        self.fresh_blocks.extend(blocks)
        return blocks

    def free(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each block; tail blocks are queued first so that they are
        evicted before the prefix blocks other requests are more likely to share."""
        for block in reversed(blocks):
            self.ref_counts[block] -= 1
            assert self.ref_counts[block] >= 0, f"block {block} freed twice"
            if self.ref_counts[block] == 0:
                self.free_queue[block] = None

    def _take(self, block: int) -> None:
        if self.ref_counts[block] == 0:
            del self.free_queue[block]
        self.ref_counts[block] += 1

    def _evict(self, block: int) -> None:
        block_hash = self.block_hashes[block]
        if block_hash is not None:
            self.block_hashes[block] = None
            if self.cached_blocks.get(block_hash) == block:
                del self.cached_blocks[block_hash]

    def reset_prefix_cache(self) -> None:
        """Forget every cached block that no sequence uses."""
        for block in list(self.free_queue):
            self._evict(block)

    def stats(self) -> BlockStats:
        free = len(self.free_queue)
        cached = sum(1 for b in self.free_queue if self.block_hashes[b] is not None)
        return BlockStats(self.num_blocks, self.num_blocks - free, free, cached,
                          self.prefix_queries, self.prefix_hits)
