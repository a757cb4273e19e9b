"""From byte automata to token masks: which token ids a DFA state allows.

Owns: the per-vocabulary token trie (built once per vocabulary and shared by every
grammar), the compiled walk of that trie through a lazy DFA from one state, and the
packed int32 bitmask rows. Must not know about the engine; knows vocabularies only
through `token_bytes`, `special_ids`, `eos_token_ids` and `vocab_size`.

The walk is the first-visit cost of every grammar state, so it runs as machine code
(token_kernels.pyx, a C extension built when the package is installed): a depth-first walk of the trie in which a token is allowed when the DFA
survives all its bytes. These keep it short:
  * a trie node is visited once however many tokens share its prefix, and a dead
    transition prunes the whole subtree below it;
  * where the DFA state at a node loops on every byte that occurs below the node (the
    body of a JSON string, a digit run), every token below it is allowed and ends in
    that same state: the subtree is taken whole, as one range of tokens in trie order;
  * a state that loops on many bytes (every JSON string body loops on the same ones)
    allows at once every token made only of those bytes: that set is packed once per
    vocabulary and loop set (`LoopSlice`), and the walk goes through a small trie of
    the remaining tokens only, instead of the ~100k nodes of the whole vocabulary;
  * a state that does not loop but sends all those bytes on to one state, and that
    one again to one state (the characters of a string with a maxLength, or a
    pattern's `[0-9A-Za-z]{8}`, one count after another), allows the tokens of that
    slice up to the run's length: they are
    taken by length from the slice, and only the other tokens are walked (`run_of`);
  * a state that does not loop but reads any string of some bytes without dying (the
    name of an undeclared property at a prefix of the declared names: each letter goes
    on in the names' trie or leaves it for the free rest, `LazyDFA.free_bytes`) allows
    every token of that set's slice without walking it, and walks only the others; an
    allowed token's path is followed when it is accepted (`dfa.walk`);
  * a state whose row differs from another state's on a few bytes only (a prefix of a
    declared key against the free rest of an undeclared one, where the names are not
    all ASCII) copies that state's mask and walks only the subtrees of those first
    bytes (`near_state`).
  * a state inside a JSON string without bounds (`flat_kernels.body_exit` recognizes it from
    its items) allows what every such state allows -- the tokens that stay inside the
    string or end with its closing quote, found once per vocabulary -- and the tokens
    that close the string and go on, walked from the state after the quote through a
    trie of what they read there (`BodyExits`): its own row, the rows of its multi-byte
    characters and escapes, and the walk of their ~1,700 trie nodes are not needed.
The DFA is lazy: the walk stops at states whose rows are not built yet and hands them
back; they are expanded in Python and the walk resumes from where it stopped. Over a
compiled automaton (`flat.FlatDFA`) the walk builds those rows itself and goes on, and
a plain state (none of the shortcuts above applies: most states) is done whole in one
compiled call, its own row included (`token_kernels.plain_tokens`): the Python steps around a walk
cost as much as the walk of a state that allows few tokens. A state that loops or has
free bytes takes one more call, once its slice is looked up (`token_kernels.sliced_tokens`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from structgen.automata import kernels
from structgen.automata.dfa import DEAD, LazyDFA
from structgen.automata.flat import FlatDFA
from structgen.automata.nfa import LazyNFA
from structgen.grammar import ir
from structgen.grammar.charset import json_body_ir


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

    def __init__(self, tokens: list[tuple[bytes, int]], vocab_size: int, eos_ids):
        tokens = sorted(tokens)
        token_bytes = np.frombuffer(b"".join(data for data, _ in tokens), dtype=np.uint8).copy()
        token_end = np.cumsum([len(data) for data, _ in tokens], dtype=np.int64)
        token_ids = np.asarray([tid for _, tid in tokens], dtype=np.int32)
        self._build(token_bytes, token_end, token_ids, vocab_size, eos_ids)

    @classmethod
    def _of_sorted(cls, token_bytes: np.ndarray, token_end: np.ndarray, token_ids: np.ndarray, vocab_size: int,
                   eos_ids) -> "TokenTrie":
        """The trie of tokens already sorted by their bytes, given as arrays (a subset of
        another trie's: no Python object per token)."""
        trie = cls.__new__(cls)
        trie._build(token_bytes, token_end, token_ids, vocab_size, eos_ids)
        return trie

    def _build(self, token_bytes: np.ndarray, token_end: np.ndarray, token_ids: np.ndarray, vocab_size: int,
               eos_ids) -> None:
        kernels.require()
        parent_arr, byte_arr, node_of_token = kernels.token_kernels.trie_nodes(token_bytes, token_end)
        n_nodes = parent_arr.size
        self.token_ids = token_ids
        self.token_start = np.searchsorted(node_of_token, np.arange(n_nodes + 1)).astype(np.int32)
        # Children as CSR edges grouped by parent; preorder already lists them in byte order.
        children = np.argsort(parent_arr[1:], kind="stable") + 1
        self.edge_start = np.searchsorted(parent_arr[children], np.arange(n_nodes + 1)).astype(np.int32)
        self.edge_child = children.astype(np.int32)
        self.edge_byte = byte_arr[children]
        self.subtree_end, self.below = kernels.token_kernels.subtree_facts(parent_arr, byte_arr)
        self.root_child = np.full(256, -1, dtype=np.int64)  # the node of each first byte
        first = slice(self.edge_start[0], self.edge_start[1])
        self.root_child[self.edge_byte[first]] = self.edge_child[first]
        self.vocab_size = vocab_size
        self.eos_ids = np.asarray(sorted(eos_ids), dtype=np.int64)
        self.eos_words = pack_ids(self.eos_ids, vocab_size)
        self.no_words = np.zeros(bitmask_words(vocab_size), dtype=np.uint32)  # an empty mask, only copied from
        self._token_bytes, self._token_end = token_bytes, token_end  # sorted: what LoopSlices are cut from
        self._token_length = np.diff(token_end, prepend=0)
        self.longest = int(self._token_length.max()) if self._token_length.size else 0  # bytes
        self._slices: dict[bytes, LoopSlice | None] = {}
        self._sightings: dict[bytes, int] = {}
        self._built = 0
        self._rest_built = 0  # tokens in the rest tries of the slices built
        self._slices_lock = threading.Lock()
        self._body_exits: list = []  # [BodyExits or None] once made (`body_exits`)
        self._body_lock = threading.Lock()

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
        return cls(tokens, vocab.vocab_size, vocab.eos_token_ids)

    def loop_slice(self, loops: np.ndarray) -> "LoopSlice | None":
        """The LoopSlice of a loop set (4 x u64), or None where it does not pay: a loop
        set seen only once (a one-off pattern), one few tokens stay inside, or one that
        leaves too many tokens outside."""
        key = loops.tobytes()
        got = self._slices.get(key)
        if got is not None or key in self._slices:
            return got
        with self._slices_lock:
            if key in self._slices:
                return self._slices[key]
            if len(self._sightings) >= LOOP_SLICE_MAX_SIGHTINGS:
                self._sightings.clear()  # a server compiling ever new patterns: forget old counts
            seen = self._sightings[key] = self._sightings.get(key, 0) + 1
            if seen < LOOP_SLICE_SIGHTINGS or self._built >= LOOP_SLICE_MAX_BUILT:
                return None  # without a slice the walk covers the whole trie: slower, same mask
            inside = kernels.token_kernels.made_of(self._token_bytes, self._token_end, loops)
            count = int(inside.sum())
            got = None
            rest_count = inside.size - count
            if (count >= LOOP_SLICE_MIN_TOKENS and rest_count <= LOOP_SLICE_MAX_REST
                    and self._rest_built + rest_count <= LOOP_SLICE_MAX_REST_TOTAL):
                lengths = self._token_length[inside]
                by_length = np.argsort(lengths, kind="stable")
                got = LoopSlice(
                    words=pack_ids(self.token_ids[inside], self.vocab_size).view(np.uint32),
                    count=count,
                    rest=self._subtrie(~inside),
                    ids_by_length=self.token_ids[inside][by_length],
                    length_start=np.searchsorted(lengths[by_length], np.arange(RUN_MAX + 2)),
                    long=self._subtrie(inside & (self._token_length > RUN_MAX)),
                )
            self._slices[key] = got
            if got is not None:
                self._built += 1
                self._rest_built += rest_count
            return got

    def body_exits(self) -> "BodyExits | None":
        """This vocabulary's BodyExits (made on first use, ~0.2 s: the compiler's code
        warm-up does it; None where no token goes on after a string's closing quote)."""
        if not self._body_exits:
            with self._body_lock:
                if not self._body_exits:
                    self._body_exits.append(_body_exits(self))
        return self._body_exits[0]

    def _subtrie(self, keep: np.ndarray) -> "TokenTrie":
        """The trie of the tokens `keep` selects (a mask in this trie's token order)."""
        lengths = self._token_length
        return TokenTrie._of_sorted(self._token_bytes[np.repeat(keep, lengths)], np.cumsum(lengths[keep]),
                                    self.token_ids[keep], self.vocab_size, self.eos_ids.tolist())


LOOP_SLICE_SIGHTINGS = 2  # build a loop set's slice the second time a first visit meets it
LOOP_SLICE_MIN_TOKENS = 1000  # below this the whole-trie walk is as fast
# A trie of the other tokens is built in compiled code (~0.2 us a token, 7 ms for the
# 33,633 tokens that are not only letters and digits): past this many, building it would
# cost more than the walks it saves.
LOOP_SLICE_MAX_REST = 40_000
# Bounds for a long-running server that meets ever new loop sets (user patterns): a built
# slice holds the trie of up to LOOP_SLICE_MAX_REST tokens (~120 bytes a token: 4 MB for
# the letters and digits), and the slices of a vocabulary hold LOOP_SLICE_MAX_REST_TOTAL
# tokens at most (~60 MB); past a cap, walks go through the whole trie as they did
# before slices.
LOOP_SLICE_MAX_REST_TOTAL = 500_000
LOOP_SLICE_MAX_BUILT = 64
LOOP_SLICE_MAX_SIGHTINGS = 4096


# A counted run (see `run_of`) is followed for at most this many bytes; the few tokens
# made only of its bytes that are longer are walked (`LoopSlice.long`).
RUN_MAX = 16


@dataclass(frozen=True)
class LoopSlice:
    """For one loop set L of one vocabulary: the packed tokens made only of bytes in L
    (every state looping on L allows them, and stays where it is), and a trie of all
    the other tokens, the only ones such a state's walk must still look at.

    For counted runs (`run_of`), the tokens made of L by length: `ids_by_length`, with
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


def _body_exits(trie: TokenTrie) -> BodyExits | None:
    """BodyExits from the automaton of `json_body_ir() '"'`: its body state's mask, and
    for each token it does not allow that has a quote, where its path passes the state
    after the closing quote (the rest after that point is what the token must still
    read), walked one call each. For SmolLM2: 48,769 tokens inside or closing, 125
    going on (a trie of 66 nodes)."""
    dfa = FlatDFA(LazyNFA(ir.seq(json_body_ir(), ir.lit('"'))))
    dfa.flat.body_node = -1  # this automaton's body state is the one computed the long way
    body = dfa.start
    inside = state_tokens(dfa, trie, body)
    closed = dfa.walk(body, b'"')
    words = inside.words.view(np.uint32).copy()
    owner = np.repeat(np.arange(trie._token_end.size), trie._token_length)
    rests = []
    for t in np.unique(owner[trie._token_bytes == ord('"')]).tolist():
        tid = int(trie.token_ids[t])
        if (words[tid >> 5] >> (tid & 31)) & 1:
            continue
        data = trie._token_bytes[trie._token_end[t] - trie._token_length[t]: trie._token_end[t]].tobytes()
        passed = np.flatnonzero(dfa.path(body, data) == closed)
        if passed.size:  # (before the end: a token that ends there is allowed)
            rests.append((data[passed[0]:], tid))
    if not rests:
        return None
    return BodyExits(words=words, count=inside.num_allowed, rests=TokenTrie(rests, trie.vocab_size, ()))


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


@dataclass(frozen=True)
class StateTokens:
    """What one DFA state allows: the packed mask (EOS included when accepting).
    The next state of an allowed token is found by walking its bytes through the DFA
    table, whose rows on that path the mask computation has already built; the matcher
    remembers each walk's end in `next_state` (allowed, non-EOS tokens only)."""

    words: np.ndarray
    num_allowed: int
    next_state: dict[int, int] = field(default_factory=dict, compare=False)
    # False when some allowed tokens were taken whole, unwalked (`LazyDFA.free_bytes`):
    # the rows on their paths may not be built, so the matcher follows them by `dfa.walk`.
    rows_built: bool = True
    # For a state inside a JSON string body (`_body_flat`): the state after its closing
    # quote. With the state's loops (`flat_kernels.known_loops`), the matcher follows a token
    # of the string, or one that closes it, without a row of the state.
    closed: int = DEAD


# A state whose row differs from another's on at most this many bytes starts from that
# state's mask (see `near_state`).
NEAR_MAX_BYTES = 12


def dominant_target(dfa: LazyDFA, sid: int) -> tuple[int, int] | None:
    """(t, n): the state t that most of `sid`'s bytes lead to, and how many bytes do;
    None when few bytes leave `sid` (its plain walk is short anyway)."""
    target, count, live = kernels.token_kernels.dominant_of(dfa.table[sid])
    if live <= 2 * NEAR_MAX_BYTES:
        return None
    return int(target), int(count)


def near_state(dfa: LazyDFA, sid: int, dominant: tuple[int, int] | None, sibling: int | None = None) -> tuple[int, np.ndarray] | None:
    """(t, bytes) where state t's row equals `sid`'s except on those few bytes, or None.

    t is the state most of `sid`'s bytes lead to (`dominant`), or else `sibling`: the
    last state computed that leads most bytes to the same state without being near it.
    Inside a key of an object that allows undeclared properties, the state after the
    prefix "na" of a declared "name" sends every byte but "m" to the free rest of the
    key, and so does that free state itself: a token not starting with "m" does the
    same from both states. Such prefix states are most of the costly first visits of
    MaskBench's schemas. The start of a key differs from the free rest on the first
    letter of every declared name still to come, but from the start of the previous key
    (its sibling) on the first letter of the property just written only."""
    if dominant is None:
        return None
    t = dominant[0]
    if t == sid:
        return None  # it loops on most bytes: its LoopSlice is the shortcut
    dfa.expand(t)  # may grow (replace) the table: index it afresh
    row = dfa.table[sid]
    differ = np.flatnonzero(dfa.table[t] != row)
    if differ.size > NEAR_MAX_BYTES and sibling is not None:
        t, differ = sibling, np.flatnonzero(dfa.table[sibling] != row)
    return (t, differ) if differ.size <= NEAR_MAX_BYTES else None


# A counted run needs this many bytes leading on together: a JSON string's characters,
# or a pattern's class of letters and digits (`[0-9A-Za-z]{8}`, 62 bytes).
RUN_MIN_BYTES = 16
_RUN_BLOCKED, _RUN_BROKEN, _RUN_DEAD, _RUN_FULL = range(4)  # how `token_kernels.run` ended


def run_of(dfa: LazyDFA, trie: TokenTrie, sid: int, dominant: tuple[int, int] | None) -> tuple[LoopSlice, int] | None:
    """(slice, n) where `sid` starts a counted run on a byte set L, or None.

    The characters of a string with a maxLength do not loop: each one leads to the
    next count's state. But all the bytes of L (the plain characters) lead to ONE
    state (`dominant`), and from it again to one state, and so on: a token made only
    of L with k <= n bytes is allowed, and one with n < k <= RUN_MAX bytes is not (the
    run dies there; when n == RUN_MAX it goes on and the longer tokens are walked).
    L's LoopSlice then gives those tokens by length, and only the other tokens are
    walked -- instead of the whole vocabulary at every count."""
    if dominant is None or dominant[1] < RUN_MIN_BYTES or dominant[0] == sid:
        return None  # few bytes lead on together, or a loop (its LoopSlice is the shortcut)
    members = dfa.table[sid] == dominant[0]
    piece = trie.loop_slice(np.packbits(members, bitorder="little").view("<u8"))
    if piece is None:
        return None
    members = np.flatnonzero(members).astype(np.int64)
    while True:
        length, stop, how = kernels.token_kernels.run(dfa.table, dfa.expanded, sid, members, RUN_MAX)
        if how != _RUN_BLOCKED:
            break
        dfa.expand(stop)
    return (piece, length) if how != _RUN_BROKEN else None


def state_tokens(dfa: LazyDFA, trie: TokenTrie, sid: int, tokens_of=None, siblings: dict | None = None,
                 twin_tokens=None, known: tuple | None = None) -> StateTokens:
    """The tokens DFA state `sid` allows, expanding the DFA rows the walk needs.
    `tokens_of(t)`, when given, returns the (cached) StateTokens of another state: a
    state near one (`near_state`) copies that state's mask and walks only the first
    bytes where the two differ. `siblings` (kept by the caller, who caches every table
    this returns) maps a dominant target to the last state computed with it that was
    not near it. `twin_tokens(t)`, when given, returns the (cached) StateTokens of a
    state's twin (`FlatDFA.twin_of`), whose mask a state with one takes, without rows.
    `known`: what `plain_tables` found about a state that is not plain (its row built,
    with twin_tokens given), for a FlatDFA."""
    if known is not None:
        allowed, free, closed = known
    elif isinstance(dfa, FlatDFA):
        with dfa._lock:
            allowed, words, free, closed = dfa.run(
                kernels.token_kernels.plain_tokens, lambda: _plain_inputs(dfa, trie, twin_tokens is not None) + (sid,))
    if isinstance(dfa, FlatDFA):
        if allowed >= 0:  # a plain state, done in one compiled call
            return StateTokens(words=words.view(np.int32), num_allowed=allowed)
        if allowed == NOT_PLAIN_TWIN:  # a count that cannot bind within a token: the twin's mask
            shared = twin_tokens(closed)
            return StateTokens(words=shared.words, num_allowed=shared.num_allowed, rows_built=False)
        if allowed == NOT_PLAIN_BODY:
            return _body_flat(dfa, trie.body_exits(), closed)
        if allowed != NOT_PLAIN_WIDE:  # a loop or free bytes: the slice's tokens, then one walk of the rest
            piece = trie.loop_slice(free if allowed == NOT_PLAIN_FREE else dfa.loops[sid])
            if piece is not None or allowed == NOT_PLAIN_LOOP:
                return _sliced_flat(dfa, trie, sid, piece, free_bytes=allowed == NOT_PLAIN_FREE)
        # Free bytes without a slice (their set was just sighted), or none: nothing for
        # the lines below to look up again -- a second sighting would build the slice.
        free = None
    else:
        dfa.expand(sid)
        free = dfa.free_bytes(sid)
    piece = trie.loop_slice(free) if free is not None else None
    if piece is not None:
        return _walked_tokens(dfa, trie, sid, None, free_piece=piece)
    dominant = dominant_target(dfa, sid)
    key = dominant[0] if siblings is not None and dominant is not None and dominant[0] != sid else None
    sibling = siblings.get(key) if key is not None else None
    near = near_state(dfa, sid, dominant, sibling) if tokens_of is not None else None
    if near is not None:
        table = _near_tokens(dfa, trie, sid, near, tokens_of)
    else:
        table = _walked_tokens(dfa, trie, sid, dominant)
    if key is not None and (near is None or near[0] != key):  # not near its dominant target:
        siblings[key] = sid  # the candidate for the next such state
    return table


def plain_tables(dfa: FlatDFA, trie: TokenTrie, sids: list[int]) -> list[StateTokens | tuple]:
    """`state_tokens` of many states at once (one compiled call for all,
    `token_kernels.plain_tokens_many`), for those that are plain; for the others, what that call
    found about them, (NOT_PLAIN_..., free bytes, aux), for `state_tokens(known=...)` to
    go on from. For work done ahead of decoding (`CompiledGrammar.warm`), where the
    Python steps around each state's call cost as much as its mask."""
    states = np.asarray(sids, dtype=np.int64)
    allowed = np.zeros(states.size, dtype=np.int64)
    words = np.zeros((states.size, trie.eos_words.size), dtype=np.uint32)
    free = np.zeros((states.size, 4), dtype=np.uint64)
    aux = np.zeros(states.size, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    with dfa._lock:
        dfa.run(kernels.token_kernels.plain_tokens_many, lambda: _plain_inputs(dfa, trie, True) + (states, allowed, words, free, aux, done))
    masks = words.view(np.int32)
    return [StateTokens(words=masks[k], num_allowed=n) if n >= 0 else (n, free[k], int(aux[k]))
            for k, n in enumerate(allowed.tolist())]


def _plain_inputs(dfa: FlatDFA, trie: TokenTrie, twins: bool) -> tuple:
    """What `token_kernels.plain_tokens` and `plain_tokens_many` take after the IR and store arrays
    and before their states: the rows (read afresh at each call, as a call that grows
    them replaces them), the trie, the JSON string body, EOS, and what the twin check
    needs (`twins`: whether to make it)."""
    body = dfa.flat.body_node if dfa.flat.body_node >= 0 and trie.body_exits() is not None else -1
    longest = trie.longest if twins and dfa.flat.has_counted else 0
    return (dfa.table, dfa.expanded, dfa.loops, dfa.accepting, trie.edge_start, trie.edge_byte, trie.edge_child,
            trie.token_start, trie.token_ids, trie.subtree_end, trie.below, body, trie.eos_words.view(np.uint32),
            dfa.flat.g_counted, dfa.flat.node_twin, longest)


def _sliced_flat(dfa: FlatDFA, trie: TokenTrie, sid: int, piece: LoopSlice | None, free_bytes: bool) -> StateTokens:
    """`_walked_tokens` in one compiled call, for a state whose row is built and that
    loops or has free bytes: the tokens of `piece` (its slice), then a walk of the
    others -- of the whole trie without a slice (a loop set with too few tokens)."""
    words, count, rest = (piece.words, piece.count, piece.rest) if piece is not None else (trie.no_words, 0, trie)
    with dfa._lock:
        allowed, words = dfa.run(kernels.token_kernels.sliced_tokens, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting, rest.edge_start, rest.edge_byte, rest.edge_child,
            rest.token_start, rest.token_ids, rest.subtree_end, rest.below, words, count,
            trie.eos_words.view(np.uint32), sid))
    return StateTokens(words=words.view(np.int32), num_allowed=allowed, rows_built=not free_bytes)


def _body_flat(dfa: FlatDFA, exits: BodyExits, closed: int) -> StateTokens:
    """The mask of a state inside a JSON string without bounds whose closing quote leads
    to state `closed`: the tokens every such state allows, and those of `exits.rests`
    allowed from `closed`, walked in `token_kernels.sliced_tokens` (without EOS: the rests' trie has
    none). The rows on the allowed tokens' paths are not all built: the state's own may
    not be, nor its multi-byte characters' and escapes'."""
    rests = exits.rests
    with dfa._lock:
        allowed, words = dfa.run(kernels.token_kernels.sliced_tokens, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting, rests.edge_start, rests.edge_byte, rests.edge_child,
            rests.token_start, rests.token_ids, rests.subtree_end, rests.below, exits.words, exits.count,
            rests.eos_words.view(np.uint32), closed))
    return StateTokens(words=words.view(np.int32), num_allowed=allowed, rows_built=False, closed=closed)


def _walked_tokens(dfa: LazyDFA, trie: TokenTrie, sid: int, dominant,
                   free_piece: LoopSlice | None = None) -> StateTokens:
    """`sid`'s mask from a walk of the trie, or of the part a LoopSlice or a counted
    run leaves to walk. `free_piece`: the LoopSlice of bytes `sid` reads any string of
    without looping (`LazyDFA.free_bytes`); its tokens are allowed unwalked."""
    eos_words, eos_count = trie.eos_words, trie.eos_ids.size
    piece = free_piece or (trie.loop_slice(dfa.loops[sid]) if dfa.loops[sid].any() else None)
    run = run_of(dfa, trie, sid, dominant) if piece is None else None
    nodes = np.zeros(1, dtype=np.int64)
    states = np.full(1, sid, dtype=np.int64)
    if piece is not None:  # its tokens are allowed; walk the others only
        words, allowed, trie = piece.words.copy(), piece.count, piece.rest
    elif run is not None:  # the tokens of the run's bytes up to its length; walk the others
        piece, length = run
        words, allowed = piece.up_to(length).copy(), int(piece.length_start[length + 1])
        if length == RUN_MAX:
            allowed += _walk_from(dfa, piece.long, nodes, states, words)
        trie = piece.rest
    else:
        words, allowed = np.zeros(bitmask_words(trie.vocab_size), dtype=np.uint32), 0
    allowed += _walk_from(dfa, trie, nodes, states, words)
    words = words.view(np.int32)
    if dfa.accepting[sid] and eos_count:
        words |= eos_words
        allowed += eos_count
    return StateTokens(words=words, num_allowed=allowed, rows_built=free_piece is None)


def _near_tokens(dfa: LazyDFA, trie: TokenTrie, sid: int, near, tokens_of) -> StateTokens:
    """`sid`'s mask from that of state t: a token whose first byte b has
    table[sid, b] == table[t, b] goes through the same states from both, so it is
    allowed from `sid` exactly when it is from t; the tokens of the other first bytes
    are cleared and walked from `sid`."""
    t, differ = near
    near_tokens = tokens_of(t)
    words = near_tokens.words.view(np.uint32).copy()
    eos_words = trie.eos_words.view(np.uint32)
    words &= ~eos_words
    nodes, states = [], []
    for b in differ.tolist():
        child = int(trie.root_child[b])
        if child < 0:
            continue
        kernels.token_kernels.deny(words, trie.token_ids, trie.token_start[child], trie.token_start[trie.subtree_end[child]])
        nxt = int(dfa.table[sid, b])
        if nxt >= 0:
            kernels.token_kernels.allow(words, trie.token_ids, trie.token_start[child], trie.token_start[child + 1])
            if trie.subtree_end[child] > child + 1:
                nodes.append(child)
                states.append(nxt)
    if nodes:
        _walk_from(dfa, trie, np.asarray(nodes, dtype=np.int64), np.asarray(states, dtype=np.int64), words)
    if dfa.accepting[sid]:
        words |= eos_words
    return StateTokens(words=words.view(np.int32), num_allowed=int(np.bitwise_count(words).sum()),
                       rows_built=near_tokens.rows_built)


def _walk_from(dfa: LazyDFA, trie: TokenTrie, nodes: np.ndarray, states: np.ndarray, words: np.ndarray) -> int:
    """Run `token_kernels.walk_table` from (node, state) pairs, expanding the rows it stops at, until done;
    returns how many tokens it allowed."""
    if isinstance(dfa, FlatDFA):
        return _walk_from_flat(dfa, trie, nodes, states, words)
    allowed = 0
    while nodes.size:
        count, nodes, states = kernels.token_kernels.walk_table(
            dfa.table, dfa.expanded, dfa.loops, trie.edge_start, trie.edge_byte, trie.edge_child,
            trie.token_start, trie.token_ids, trie.subtree_end, trie.below, nodes, states, words,
        )
        allowed += count
        for state in set(states.tolist()):
            dfa.expand(state)
    return allowed


def _walk_from_flat(dfa: FlatDFA, trie: TokenTrie, nodes: np.ndarray, states: np.ndarray, words: np.ndarray) -> int:
    """`_walk_from` over a compiled automaton: the walk builds the rows it stops at
    itself (`flat_kernels.expand_rows`) and goes on, instead of returning to Python for each."""
    with dfa._lock:
        return dfa.run(kernels.token_kernels.walk_building, lambda: (
            dfa.table, dfa.expanded, dfa.loops, dfa.accepting, trie.edge_start, trie.edge_byte, trie.edge_child,
            trie.token_start, trie.token_ids, trie.subtree_end, trie.below, nodes, states, words))


# What `token_kernels.plain_tokens` returns for a state that is not plain (see there).
NOT_PLAIN_LOOP, NOT_PLAIN_FREE, NOT_PLAIN_WIDE, NOT_PLAIN_FAILED, NOT_PLAIN_BODY, NOT_PLAIN_TWIN = -1, -2, -3, -4, -5, -6
