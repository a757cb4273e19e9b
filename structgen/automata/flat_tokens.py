"""The compiled automaton's way to its states' token masks (`flat.FlatDFA` mixes it in).

Owns: `FlatTokens`, where a plain state (none of the shortcuts of `tokens.py` applies:
most states) is done whole in one compiled call, its own row included
(`token_kernels.plain_tokens`), since the Python steps around a walk cost as much as the
walk of a state that allows few tokens; a state that loops or has free bytes takes one
more call once its slice is looked up (`token_kernels.sliced_tokens`); the walk builds
the rows it stops at itself and goes on. Also owns the masks of many states in one call
ahead of decoding (`plain_tables`), and `BodyExits`: a state inside a JSON string
without bounds (`flat_kernels.body_exit` recognizes it from its items) allows what every
such state allows -- the tokens that stay inside the string or end with its closing
quote, found once per vocabulary -- and the tokens that close the string and go on,
walked from the state after the quote through a trie of what they read there: its own
row, the rows of its multi-byte characters and escapes, and the walk of their ~1,700
trie nodes are not needed.
Must not know about the engine or the matcher.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from structgen.automata import kernels
from structgen.automata.nfa import LazyNFA
from structgen.automata.token_trie import LoopSlice, TokenTrie
from structgen.automata.tokens import StateTokens, TableTokens
from structgen.grammar import ir
from structgen.grammar.charset import json_body_ir


# What `token_kernels.plain_tokens` returns for a state that is not plain (see there).
NOT_PLAIN_LOOP, NOT_PLAIN_FREE, NOT_PLAIN_WIDE, NOT_PLAIN_FAILED, NOT_PLAIN_BODY, NOT_PLAIN_TWIN = -1, -2, -3, -4, -5, -6


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
        if allowed == NOT_PLAIN_BODY:
            return _body_flat(self, self.body_exits(trie), closed)
        if allowed != NOT_PLAIN_WIDE:  # a loop or free bytes: the slice's tokens, then one walk of the rest
            piece = trie.loop_slice(free if allowed == NOT_PLAIN_FREE else self.loops[sid])
            if piece is not None or allowed == NOT_PLAIN_LOOP:
                return _sliced_flat(self, trie, sid, piece, free_bytes=allowed == NOT_PLAIN_FREE)
        # Free bytes without a slice (their set was just sighted), or none: nothing for
        # the walk to look up again -- a second sighting would build the slice.
        return self._walked_state_tokens(trie, sid, None, tokens_of, siblings)

    def plain_tables(self, trie: TokenTrie, sids: list[int]) -> list[StateTokens | tuple]:
        """`state_tokens` of many states at once (one compiled call for all,
        `token_kernels.plain_tokens_many`), for those that are plain; for the others, what
        that call found about them, (NOT_PLAIN_..., free bytes, aux), for
        `state_tokens(known=...)` to go on from. For work done ahead of decoding
        (`warmup`), where the Python steps around each state's call cost as much as its
        mask."""
        states = np.asarray(sids, dtype=np.int64)
        allowed = np.zeros(states.size, dtype=np.int64)
        words = np.zeros((states.size, trie.eos_words.size), dtype=np.uint32)
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
    return (dfa.table, dfa.expanded, dfa.loops, dfa.accepting, trie.edge_start, trie.edge_byte, trie.edge_child,
            trie.token_start, trie.token_ids, trie.subtree_end, trie.below, body, trie.eos_words.view(np.uint32),
            dfa.flat.g_counted, dfa.flat.node_twin, longest)


def _sliced_flat(dfa: FlatTokens, trie: TokenTrie, sid: int, piece: LoopSlice | None, free_bytes: bool) -> StateTokens:
    """`tokens._walked_tokens` in one compiled call, for a state whose row is built and that
    loops or has free bytes: the tokens of `piece` (its slice), then a walk of the
    others -- of the whole trie without a slice (a loop set with too few tokens)."""
    words, count, rest = (piece.words, piece.count, piece.rest) if piece is not None else (trie.no_words, 0, trie)
    with dfa.lock:
        allowed, words = dfa.run(kernels.token_kernels.sliced_tokens, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting, rest.edge_start, rest.edge_byte, rest.edge_child,
            rest.token_start, rest.token_ids, rest.subtree_end, rest.below, words, count,
            trie.eos_words.view(np.uint32), sid))
    return StateTokens(words=words.view(np.int32), num_allowed=allowed, rows_built=not free_bytes)


def _body_flat(dfa: FlatTokens, exits: BodyExits, closed: int) -> StateTokens:
    """The mask of a state inside a JSON string without bounds whose closing quote leads
    to state `closed`: the tokens every such state allows, and those of `exits.rests`
    allowed from `closed`, walked in `token_kernels.sliced_tokens` (without EOS: the rests' trie has
    none). The rows on the allowed tokens' paths are not all built: the state's own may
    not be, nor its multi-byte characters' and escapes'."""
    rests = exits.rests
    with dfa.lock:
        allowed, words = dfa.run(kernels.token_kernels.sliced_tokens, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting, rests.edge_start, rests.edge_byte, rests.edge_child,
            rests.token_start, rests.token_ids, rests.subtree_end, rests.below, exits.words, exits.count,
            rests.eos_words.view(np.uint32), closed))
    return StateTokens(words=words.view(np.int32), num_allowed=allowed, rows_built=False, closed=closed)
