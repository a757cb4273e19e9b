"""A vocabulary's tokens as a byte trie, and the slices of it that the token walk reads.

Owns: `TokenTrie` (built once per vocabulary and shared by every grammar; `token_trie`),
its `LoopSlice`s (the tokens made only of a loop set's bytes, packed, and a trie of the
others; made on `offstep`'s thread), the tables the automata derive from a vocabulary
once (`TokenTrie.shared`), and the packed int32 bitmask rows. Knows vocabularies only through `token_bytes`,
`special_ids`, `eos_token_ids` and `vocab_size`. Must not know about automata, their
states or the engine: `tokens.py` walks a state's automaton through this trie.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from structgen.automata import kernels, offstep


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_ids(token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """int32 words, bit (id % 32) of word (id // 32) set for each id."""
    words = np.zeros(bitmask_words(vocab_size), dtype=np.uint32)
    ids = np.asarray(token_ids, dtype=np.int64)
    np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
    return words.view(np.int32)


class TokenTrie:
    """Tokens as a byte trie: the normal (non-special, non-empty) tokens of a vocabulary,
    or (for a `LoopSlice`) a subset of them.

    Nodes are numbered in depth-first preorder with children in byte order, so the
    tokens of a subtree are one contiguous range of `token_ids` (the tokens sorted by
    their bytes): node n's own tokens are `token_ids[token_start[n]:token_start[n+1]]`
    and everything strictly below it is `token_ids[token_start[n+1]:token_start[end[n]]]`.
    """

    def __init__(self, token_text: np.ndarray, token_text_end: np.ndarray, token_ids: np.ndarray, vocab_size: int,
                 eos_ids):
        """The trie of tokens sorted by their bytes, given as arrays: their bytes joined
        (`token_text`, uint8), where each one's bytes end in it, and their ids. See
        `of_tokens` for a list of (bytes, id) in any order."""
        kernels.require()
        parent_arr, byte_arr, node_of_token = kernels.token_kernels.trie_nodes(token_text, token_text_end)
        n_nodes = parent_arr.size
        self.token_ids = token_ids
        self.token_start = np.zeros(n_nodes + 1, dtype=np.int32)  # tokens of the nodes before each
        np.cumsum(np.bincount(node_of_token, minlength=n_nodes), out=self.token_start[1:])
        self.edge_start, self.edge_child = kernels.token_kernels.trie_edges(parent_arr)
        self.edge_byte = byte_arr[self.edge_child]
        self.subtree_end, self.below = kernels.token_kernels.subtree_facts(parent_arr, byte_arr)
        self.root_child = np.full(256, -1, dtype=np.int64)  # the node of each first byte
        first = slice(self.edge_start[0], self.edge_start[1])
        self.root_child[self.edge_byte[first]] = self.edge_child[first]
        self.vocab_size = vocab_size
        self.eos_ids = np.asarray(sorted(eos_ids), dtype=np.int64)
        self.eos_words = pack_ids(self.eos_ids, vocab_size)
        self.no_words = np.zeros(bitmask_words(vocab_size), dtype=np.uint32)  # an empty mask, only copied from
        self.token_text, self.token_text_end = token_text, token_text_end  # what LoopSlices are cut from
        self.token_length = np.diff(token_text_end, prepend=0)
        self.longest = int(self.token_length.max()) if self.token_length.size else 0  # bytes
        self._slices: dict[bytes, LoopSlice | None] = {}
        self._sightings: dict[bytes, int] = {}
        self._built = 0  # slices made or being made
        self._making: dict[bytes, int] = {}  # loop sets whose slice is being made: the pid that asked
        self._rest_built = 0  # tokens in the rest tries of the slices built
        self._slices_lock = threading.Lock()
        self._shared: dict[str, Any] = {}  # see `shared`
        self._shared_lock = threading.Lock()

    @classmethod
    def of_tokens(cls, tokens: list[tuple[bytes, int]], vocab_size: int, eos_ids) -> "TokenTrie":
        """The trie of (bytes, id) pairs, in any order."""
        tokens = sorted(tokens)
        token_text = np.frombuffer(b"".join(data for data, _ in tokens), dtype=np.uint8).copy()
        token_text_end = np.cumsum([len(data) for data, _ in tokens], dtype=np.int64)
        token_ids = np.asarray([tid for _, tid in tokens], dtype=np.int32)
        return cls(token_text, token_text_end, token_ids, vocab_size, eos_ids)

    def token_starts(self, data: bytes, restarts: list[int]) -> list[int]:
        """Where tokens start when `data` is cut greedily into the longest tokens, the
        cutting starting afresh at each offset in `restarts` (sorted): the offsets a
        tokenizer most likely ends a token at, that is, the states a decode visits."""
        codes = np.frombuffer(bytes(data), dtype=np.uint8)
        return kernels.token_kernels.greedy_starts(self.edge_start, self.edge_byte, self.edge_child, self.token_start, codes,
                              np.asarray(restarts, dtype=np.int64)).tolist()

    @classmethod
    def of_vocabulary(cls, vocab) -> "TokenTrie":
        special = set(vocab.special_ids)
        tokens = [(data, tid) for tid, data in enumerate(vocab.token_bytes) if data and tid not in special]
        return cls.of_tokens(tokens, vocab.vocab_size, vocab.eos_token_ids)

    def loop_slice(self, loops: np.ndarray) -> "LoopSlice | None":
        """The LoopSlice of a loop set (4 x u64), or None where there is none: a loop set
        seen only once (a one-off pattern), one whose slice is still being made, one few
        tokens stay inside, or one that leaves too many tokens outside. The second time a
        loop set is seen, its slice is made in the background (`offstep`): making it
        takes ~4 ms (the trie of the ~37,000 other tokens, for the letters), which the
        step that saw it would wait for, while a walk of the whole trie in its place
        takes ~0.2 ms."""
        key = loops.tobytes()
        got = self._slices.get(key)
        if got is not None or key in self._slices:
            return got
        with self._slices_lock:
            if key in self._slices:
                return self._slices[key]
            if self._making.get(key) == os.getpid():  # (a job of a parent process did not cross a fork)
                return None
            if len(self._sightings) >= LOOP_SLICE_MAX_SIGHTINGS:
                self._sightings.clear()  # a server compiling ever new patterns: forget old counts
            seen = self._sightings[key] = self._sightings.get(key, 0) + 1
            if seen < LOOP_SLICE_SIGHTINGS or self._built >= LOOP_SLICE_MAX_BUILT:
                return None  # without a slice the walk covers the whole trie: slower, same mask
            self._built += 1  # counted now, so that the cap holds while jobs are queued
            self._making[key] = os.getpid()
        offstep.executor().submit(self._make_slice, key, loops.copy())
        return None

    def wait_for_slices(self) -> None:
        """Return once the slices asked for so far are made (tests; a benchmark's set-up)."""
        offstep.executor().submit(lambda: None).result()  # one thread: the jobs before it are done

    def _make_slice(self, key: bytes, loops: np.ndarray) -> None:
        made = None
        try:
            made = self._slice_of(loops)
        finally:  # whatever happened, the loop set is no longer being made
            with self._slices_lock:
                self._making.pop(key, None)
                self._slices[key] = made
                if made is None:
                    self._built -= 1

    def _slice_of(self, loops: np.ndarray) -> "LoopSlice | None":
        inside = kernels.token_kernels.made_of(self.token_text, self.token_text_end, loops)
        count = int(inside.sum())
        rest_count = inside.size - count
        if count < LOOP_SLICE_MIN_TOKENS or rest_count > LOOP_SLICE_MAX_REST:
            return None
        with self._slices_lock:
            if self._rest_built + rest_count > LOOP_SLICE_MAX_REST_TOTAL:
                return None
            self._rest_built += rest_count
        lengths = self.token_length[inside]
        by_length = np.argsort(lengths, kind="stable")
        return LoopSlice(
            words=pack_ids(self.token_ids[inside], self.vocab_size).view(np.uint32),
            count=count,
            rest=self._subtrie(~inside),
            ids_by_length=self.token_ids[inside][by_length],
            length_start=np.searchsorted(lengths[by_length], np.arange(RUN_MAX + 2)),
            long=self._subtrie(inside & (self.token_length > RUN_MAX)),
        )

    def shared(self, key: str, make: Callable[["TokenTrie"], Any]) -> Any:
        """`make(self)`, made on first use and kept: a table an automaton derives from
        this vocabulary once and shares between grammars (`key` names it)."""
        if key not in self._shared:
            with self._shared_lock:
                if key not in self._shared:
                    self._shared[key] = make(self)
        return self._shared[key]

    def length_split(self, n: int) -> "LengthSplit":
        """This vocabulary's tokens cut at n bytes (made on first use and kept)."""
        return self.shared(f"length_split_{n}", lambda _: LengthSplit(
            short=pack_ids(self.token_ids[self.token_length <= n], self.vocab_size),
            long=self._subtrie(self.token_length > n)))

    def _subtrie(self, keep: np.ndarray) -> "TokenTrie":
        """The trie of the tokens `keep` selects (a mask in this trie's token order)."""
        lengths = self.token_length
        return TokenTrie(self.token_text[np.repeat(keep, lengths)], np.cumsum(lengths[keep]), self.token_ids[keep],
                         self.vocab_size, self.eos_ids.tolist())


@dataclass(frozen=True)
class LengthSplit:
    """A vocabulary's tokens cut at a length: `short`, packed, those of at most that
    many bytes (no EOS), and `long`, the trie of the longer ones (with the EOS ids)."""

    short: np.ndarray
    long: TokenTrie


LOOP_SLICE_SIGHTINGS = 2  # build a loop set's slice the second time a first visit meets it
LOOP_SLICE_MIN_TOKENS = 1000  # below this the whole-trie walk is as fast
# A trie of the other tokens is built in compiled code (~0.06 us a token, 2.1 ms for the
# 37,489 tokens that are not only lowercase letters and underscores): past this many,
# building it would cost more than the walks it saves.
LOOP_SLICE_MAX_REST = 40_000
# Bounds for a long-running server that meets ever new loop sets (user patterns): a built
# slice holds the trie of up to LOOP_SLICE_MAX_REST tokens (~120 bytes a token: 4 MB for
# the letters and digits), and the slices of a vocabulary hold LOOP_SLICE_MAX_REST_TOTAL
# tokens at most (~60 MB); past a cap, walks go through the whole trie as they did
# before slices.
LOOP_SLICE_MAX_REST_TOTAL = 500_000
LOOP_SLICE_MAX_BUILT = 64
LOOP_SLICE_MAX_SIGHTINGS = 4096


# A counted run (see `tokens.run_of`) is followed for at most this many bytes; the few tokens
# made only of its bytes that are longer are walked (`LoopSlice.long`).
RUN_MAX = 16


@dataclass(frozen=True)
class LoopSlice:
    """For one loop set L of one vocabulary: the packed tokens made only of bytes in L
    (every state looping on L allows them, and stays where it is), and a trie of all
    the other tokens, the only ones such a state's walk must still look at.

    For counted runs (`tokens.run_of`), the tokens made of L by length: `ids_by_length`, with
    those of length n at `length_start[n]:length_start[n+1]` (n <= RUN_MAX), and a trie
    of the longer ones."""

    words: np.ndarray
    count: int
    rest: TokenTrie
    ids_by_length: np.ndarray
    length_start: np.ndarray
    long: TokenTrie
    _up_to: dict = field(default_factory=dict, compare=False)

    def up_to(self, n: int) -> np.ndarray:
        """Packed tokens made only of L with at most n bytes (n <= RUN_MAX; cached)."""
        got = self._up_to.get(n)
        if got is None:
            got = np.zeros_like(self.words)
            kernels.token_kernels.allow(got, self.ids_by_length, 0, self.length_start[n + 1])
            self._up_to[n] = got
        return got


_TRIES: dict[str, TokenTrie] = {}
_TRIES_LOCK = threading.Lock()


def token_trie(vocab) -> TokenTrie:
    """The shared TokenTrie of a vocabulary (built once per vocabulary fingerprint)."""
    key = vocab.fingerprint
    with _TRIES_LOCK:
        trie = _TRIES.get(key)
        if trie is None:
            trie = TokenTrie.of_vocabulary(vocab)
            _TRIES[key] = trie
        return trie
