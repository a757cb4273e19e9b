"""The compiled automaton's way to its states' token masks (`flat.FlatDFA` mixes it in).

Owns: `FlatTokens`, where a plain state (none of the shortcuts of `tokens.py` applies:
most states) is done whole in one compiled call, its own row included
(`token_kernels.plain_tokens`), since the Python steps around a walk cost as much as the
walk of a state that allows few tokens; a state that loops or has free bytes takes one
more call once its slice is looked up (`SlicedWalk`, `token_kernels.sliced_tokens`); the
walk builds the rows it stops at itself and goes on. Also owns the masks of many states
in one call ahead of decoding (`plain_tables`, then `sliced_tables` for those of them
one sliced walk finds), and `BodyExits`: a state inside a JSON string
without bounds (`flat_kernels.body_exit` recognizes it from its items) allows what every
such state allows -- the tokens that stay inside the string or end with its closing
quote, found once per vocabulary -- and the tokens that close the string and go on,
walked from the state after the quote through a trie of what they read there: its own
row, the rows of its multi-byte characters and escapes, and the walk of their ~1,700
trie nodes are not needed. A state counting the characters of a string under a
maxLength that only a long token could reach (`SHORT_TWIN_BYTES`, or the longest of
`SHORT_TWIN_CUTS` that holds) takes its twin's mask for the short tokens and walks the
long ones without building rows (`token_kernels.sliced_tokens` with `stepping`).
Must not know about the engine or the matcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from structgen.automata import kernels
from structgen.automata.nfa import LazyNFA
from structgen.automata.token_trie import LoopSlice, TokenTrie
from structgen.automata.tokens import StateTokens, TableTokens
from structgen.grammar import ir
from structgen.grammar.charset import json_body_ir


# What `token_kernels.plain_tokens` returns for a state that is not plain (see there).
(NOT_PLAIN_LOOP, NOT_PLAIN_FREE, NOT_PLAIN_WIDE, NOT_PLAIN_FAILED, NOT_PLAIN_BODY, NOT_PLAIN_TWIN,
 NOT_PLAIN_SHORT_TWIN) = -1, -2, -3, -4, -5, -6, -7
# A counted state whose count can bind within the longest token but not within this
# many bytes takes its twin's mask for the tokens of at most this many bytes and walks
# only the longer ones (155 of SmolLM2's 49,152): a full walk from such a state builds
# the rows of every count its tokens reach, ~3,000 states in one step of a word-count
# pattern under a maxLength of 100, while its twin's mask is shared by every count.
SHORT_TWIN_BYTES = 16
# ... and where its count cannot bind within a longer cut either, the longest of these
# that holds is used: the long tokens are walked without rows, a few microseconds a
# byte, so that a count 19 characters into a maxLength of 100 walks SmolLM2's 7 tokens
# over 64 bytes rather than its 155 over 16 (that mask 4.6 -> 1.9 ms).
SHORT_TWIN_CUTS = (64, 48, 32, 24)


@dataclass(frozen=True)
class BodyExits:
    """For one vocabulary, what each token does from inside a JSON string without
    bounds (the body `json_body_ir`, in a state `flat_kernels.body_exit` recognizes): `words`
    (`count` of them) are the tokens that stay inside or end with the closing quote --
    allowed in every such string; `rests` is a trie of the tokens that close the string
    and go on, each under the bytes it has after that quote. Such a state's mask is
    `words` and the tokens of `rests` allowed from the state after its closing quote:
    a short walk, where the body's own walk builds a dozen rows per string (its row,
    each multi-byte character's middles, the escapes) and walks ~1,700 trie nodes."""

    words: np.ndarray
    count: int
    rests: TokenTrie


class SlicedWalk(NamedTuple):
    """How one state's mask is found by a single walk (`FlatTokens.sliced_walk`): the
    tokens of a slice (`words`, `count` of them) allowed unwalked, then `trie` (the
    tokens outside the slice) walked from state `start`; EOS added where the trie has
    it and `start` accepts. A state that loops walks the rest of its loop set's
    `LoopSlice` (or the whole trie, `count` 0); one with free bytes, the rest of their
    slice; one inside a JSON string, the `BodyExits` rests from the state after its
    closing quote (`closed`). `rows_built` and `closed`: as in StateTokens."""

    trie: TokenTrie
    words: np.ndarray
    count: int
    start: int
    rows_built: bool
    closed: int


class FlatTokens(TableTokens):
    """`TableTokens` for `flat.FlatDFA` (through its `run`, `flat` and `lock`), most
    of each mask in compiled code."""

    def state_tokens(self, trie: TokenTrie, sid: int, tokens_of=None, siblings: dict | None = None,
                     twin_tokens=None, known: tuple | None = None) -> StateTokens:
        """See TableTokens.state_tokens. A plain state in one compiled call; the others
        from what that call found (`known`, where `plain_tables` made it: the state's
        row is built, and `twin_tokens` is given)."""
        if known is not None:
            allowed, free, closed = known
        else:
            with self.lock:
                allowed, words, free, closed = self.run(
                    kernels.token_kernels.plain_tokens, lambda: _plain_inputs(self, trie, twin_tokens is not None) + (sid,))
        if allowed >= 0:  # a plain state, done in one compiled call
            return StateTokens(words=words.view(np.int32), num_allowed=allowed)
        if allowed == NOT_PLAIN_TWIN:  # a count that cannot bind within a token: the twin's mask
            shared = twin_tokens(closed)
            return StateTokens(words=shared.words, num_allowed=shared.num_allowed, rows_built=False)
        if allowed == NOT_PLAIN_SHORT_TWIN:  # ... within a short token: the twin's for those
            cut = self.short_twin_cut(sid, trie.longest)
            return _sliced_flat(self, _short_twin_walk(trie, sid, twin_tokens(closed), cut), stepping=True)
        walk, _ = self.sliced_walk(trie, sid, (allowed, free, closed))
        if walk is not None:
            return _sliced_flat(self, walk)
        return self._walked_state_tokens(trie, sid, None, tokens_of, siblings)

    def short_twin_cut(self, sid: int, longest: int) -> int:
        """For a NOT_PLAIN_SHORT_TWIN state, the longest cut (of SHORT_TWIN_CUTS, under
        `longest`, else SHORT_TWIN_BYTES) within which its count cannot bind."""
        for cut in SHORT_TWIN_CUTS:
            if cut < longest and self.twin_of(sid, cut) >= 0:
                return cut
        return SHORT_TWIN_BYTES

    def sliced_walk(self, trie: TokenTrie, sid: int, known: tuple) -> tuple["SlicedWalk | None", tuple]:
        """See TableTokens.sliced_walk: for a state inside a JSON string (`BodyExits`),
        one that loops, and one with free bytes whose slice is built. Looks the slice up
        (`TokenTrie.loop_slice`, which counts the sighting): where free bytes have none,
        the known it returns sends `state_tokens` the long way without a second look."""
        allowed, free, closed = known
        if allowed == NOT_PLAIN_BODY:
            exits = self.body_exits(trie)
            return SlicedWalk(exits.rests, exits.words, exits.count, closed, False, closed), known
        if allowed not in (NOT_PLAIN_LOOP, NOT_PLAIN_FREE):
            return None, known
        free_bytes = allowed == NOT_PLAIN_FREE
        piece = trie.loop_slice(free if free_bytes else self.loops[sid])
        if piece is not None:
            return SlicedWalk(piece.rest, piece.words, piece.count, sid, not free_bytes, -1), known
        if not free_bytes:  # a loop set with too few tokens: the whole trie
            return SlicedWalk(trie, trie.no_words, 0, sid, True, -1), known
        # Free bytes without a slice (their set was just sighted): nothing for the
        # walk to look up again -- a second sighting would build the slice.
        return None, (NOT_PLAIN_WIDE, free, closed)

    def sliced_tables(self, trie: TokenTrie, walks: list["SlicedWalk"]) -> list[StateTokens]:
        """The masks of many `SlicedWalk`s in one compiled call
        (`token_kernels.sliced_tokens_many`), in their order."""
        kind_of: dict[int, int] = {}  # a walked trie's id -> its place in `tries`
        tries, slice_words, slice_counts = [], [], []
        for walk in walks:
            if kind_of.setdefault(id(walk.trie), len(tries)) == len(tries):
                tries.append(_trie_arrays(walk.trie))
                slice_words.append(walk.words)
                slice_counts.append(walk.count)
        kinds = np.fromiter((kind_of[id(walk.trie)] for walk in walks), dtype=np.int64, count=len(walks))
        starts = np.fromiter((walk.start for walk in walks), dtype=np.int64, count=len(walks))
        eos_flags = np.fromiter((walk.trie.eos_ids.size > 0 for walk in walks), dtype=np.uint8, count=len(walks))
        allowed = np.zeros(len(walks), dtype=np.int64)
        words = np.empty((len(walks), slice_words[0].size), dtype=np.uint32)
        done = np.zeros(1, dtype=np.int64)
        with self.lock:
            self.run(kernels.token_kernels.sliced_tokens_many, lambda: (
                self.table, self.expanded, self.loops, self.accepting, tries, slice_words,
                np.asarray(slice_counts, dtype=np.int64), trie.eos_words.view(np.uint32), kinds, starts, eos_flags, allowed,
                words, done))
        masks = words.view(np.int32)
        return [StateTokens(words=masks[k], num_allowed=n, rows_built=walk.rows_built, closed=walk.closed)
                for k, (n, walk) in enumerate(zip(allowed.tolist(), walks))]

    def plain_tables(self, trie: TokenTrie, sids: list[int]) -> list[StateTokens | tuple]:
        """`state_tokens` of many states at once (one compiled call for all,
        `token_kernels.plain_tokens_many`), for those that are plain; for the others, what
        that call found about them, (NOT_PLAIN_..., free bytes, aux), for
        `state_tokens(known=...)` to go on from. For work done ahead of decoding
        (`warmup`), where the Python steps around each state's call cost as much as its
        mask."""
        states = np.asarray(sids, dtype=np.int64)
        allowed = np.zeros(states.size, dtype=np.int64)
        words = np.empty((states.size, trie.eos_words.size), dtype=np.uint32)  # (each row cleared there)
        free = np.zeros((states.size, 4), dtype=np.uint64)
        aux = np.zeros(states.size, dtype=np.int64)
        done = np.zeros(1, dtype=np.int64)
        with self.lock:
            self.run(kernels.token_kernels.plain_tokens_many,
                     lambda: _plain_inputs(self, trie, True) + (states, allowed, words, free, aux, done))
        masks = words.view(np.int32)
        return [StateTokens(words=masks[k], num_allowed=n) if n >= 0 else (n, free[k], int(aux[k]))
                for k, n in enumerate(allowed.tolist())]

    def walk_trie(self, trie: TokenTrie, nodes: np.ndarray, states: np.ndarray, words: np.ndarray) -> int:
        """See TableTokens.walk_trie: the walk builds the rows it stops at itself
        (`flat_kernels.expand_rows`) and goes on, instead of returning to Python for each."""
        with self.lock:
            return self.run(kernels.token_kernels.walk_building, lambda: (
                self.table, self.expanded, self.loops, self.accepting, trie.edge_start, trie.edge_byte,
                trie.edge_child, trie.token_start, trie.token_ids, trie.subtree_end, trie.below, nodes, states,
                words))

    @classmethod
    def vocabulary_tables(cls, trie: TokenTrie) -> None:
        """Make what masks share across grammars for one vocabulary, once: its BodyExits
        and its tokens cut at each short-twin length (~1 ms each), so that no decoding
        step pays for them."""
        cls.body_exits(trie)
        for cut in (SHORT_TWIN_BYTES, *SHORT_TWIN_CUTS):
            if cut < trie.longest:
                trie.length_split(cut)

    @classmethod
    def body_exits(cls, trie: TokenTrie) -> BodyExits | None:
        """The BodyExits of a vocabulary (made on first use, ~0.2 s: the compiler makes
        them before its budget starts; None where no token goes on after a string's
        closing quote)."""
        return trie.shared("body_exits", cls._make_body_exits)

    @classmethod
    def _make_body_exits(cls, trie: TokenTrie) -> BodyExits | None:
        """BodyExits from the automaton of `json_body_ir() '"'`: its body state's mask, and
        for each token it does not allow that has a quote, where its path passes the state
        after the closing quote (the rest after that point is what the token must still
        read), walked one call each. For SmolLM2: 48,769 tokens inside or closing, 125
        going on (a trie of 66 nodes)."""
        dfa = cls(LazyNFA(ir.seq(json_body_ir(), ir.lit('"'))))
        dfa.flat.body_node = -1  # this automaton's body state is the one computed the long way
        body = dfa.start
        inside = dfa.state_tokens(trie, body)
        closed = dfa.walk(body, b'"')
        words = inside.words.view(np.uint32).copy()
        text, end, length = trie.token_text, trie.token_text_end, trie.token_length
        owner = np.repeat(np.arange(end.size), length)
        rests = []
        for t in np.unique(owner[text == ord('"')]).tolist():
            tid = int(trie.token_ids[t])
            if (words[tid >> 5] >> (tid & 31)) & 1:
                continue
            data = text[end[t] - length[t]: end[t]].tobytes()
            passed = np.flatnonzero(dfa.path(body, data) == closed)
            if passed.size:  # (before the end: a token that ends there is allowed)
                rests.append((data[passed[0]:], tid))
        if not rests:
            return None
        return BodyExits(words=words, count=inside.num_allowed, rests=TokenTrie.of_tokens(rests, trie.vocab_size, ()))


def _plain_inputs(dfa: FlatTokens, trie: TokenTrie, twins: bool) -> tuple:
    """What `token_kernels.plain_tokens` and `plain_tokens_many` take after the IR and store arrays
    and before their states: the rows (read afresh at each call, as a call that grows
    them replaces them), the trie, the JSON string body, EOS, and what the twin check
    needs (`twins`: whether to make it)."""
    body = dfa.flat.body_node if dfa.flat.body_node >= 0 and dfa.body_exits(trie) is not None else -1
    longest = trie.longest if twins and dfa.flat.has_counted else 0
    shorter = SHORT_TWIN_BYTES if longest > SHORT_TWIN_BYTES else 0
    return (dfa.table, dfa.expanded, dfa.loops, dfa.accepting, trie.edge_start, trie.edge_byte, trie.edge_child,
            trie.token_start, trie.token_ids, trie.subtree_end, trie.below, body, trie.eos_words.view(np.uint32),
            dfa.flat.g_counted, dfa.flat.node_twin, longest, shorter)


def _short_twin_walk(trie: TokenTrie, sid: int, twin: StateTokens, cut: int) -> SlicedWalk:
    """The walk of a NOT_PLAIN_SHORT_TWIN state: its twin's tokens of at most `cut`
    bytes, unwalked, then the longer tokens walked from the state."""
    split = trie.length_split(cut)
    words = twin.words.view(np.uint32) & split.short
    return SlicedWalk(split.long, words, int(np.bitwise_count(words).sum()), sid, False, -1)


def _trie_arrays(trie: TokenTrie) -> tuple:
    """A trie's arrays in the order the token kernels take them."""
    return (trie.edge_start, trie.edge_byte, trie.edge_child, trie.token_start, trie.token_ids, trie.subtree_end,
            trie.below)


def _sliced_flat(dfa: FlatTokens, walk: SlicedWalk, stepping: bool = False) -> StateTokens:
    """One `SlicedWalk`'s mask in one compiled call (`token_kernels.sliced_tokens`):
    its slice's tokens, then the walk of its trie from its state, EOS added from the
    trie's (none in the rests of `BodyExits`). `stepping`: the walk builds no row, for
    a trie of few tokens."""
    trie = walk.trie
    with dfa.lock:
        allowed, words = dfa.run(kernels.token_kernels.sliced_tokens, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting) + _trie_arrays(trie) + (
            walk.words, walk.count, trie.eos_words.view(np.uint32), stepping, walk.start))
    return StateTokens(words=words.view(np.int32), num_allowed=allowed, rows_built=walk.rows_built, closed=walk.closed)
