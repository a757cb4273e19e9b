"""From a table DFA's state to its token mask: which token ids the state allows.

Owns: `StateTokens` (a state's packed mask and what the matcher follows its tokens by),
the shortcuts that keep a first visit's walk short, and `TableTokens`, the way any table
DFA computes its states' masks; the Python automaton (`dfa.LazyDFA`) takes it as it is,
the compiled one (`flat.FlatDFA`) through `flat_tokens.FlatTokens`, which does most states
in one compiled call. Must not know about the engine, nor about a vocabulary beyond its
`token_trie.TokenTrie`.

The walk is the first-visit cost of every grammar state, so it runs as machine code
(token_kernels.pyx, a C extension built when the package is installed): a depth-first
walk of the trie in which a token is allowed when the DFA survives all its bytes. These
keep it short:
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
The DFA is lazy: the walk stops at states whose rows are not built yet and hands them
back; they are expanded in Python and the walk resumes from where it stopped (a compiled
automaton's walk builds them itself, `FlatTokens.walk_trie`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from structgen.automata import kernels
from structgen.automata.token_trie import RUN_MAX, LoopSlice, TokenTrie, bitmask_words


@dataclass(slots=True)
class StateTokens:
    """What one DFA state allows: the packed mask (EOS included when accepting).
    The next state of an allowed token is found by walking its bytes through the DFA
    table, whose rows on that path the mask computation has already built; the matcher
    remembers each walk's end in `next_state` (allowed, non-EOS tokens only).
    Not changed once made but for `next_state`; not frozen, as a frozen dataclass takes
    twice as long to make, and a warm-up makes tens of thousands."""

    words: np.ndarray
    num_allowed: int
    next_state: dict[int, int] = field(default_factory=dict, compare=False)
    # False when some allowed tokens were taken whole, unwalked (`LazyDFA.free_bytes`):
    # the rows on their paths may not be built, so the matcher follows them by `dfa.walk`.
    rows_built: bool = True
    # For a state inside a JSON string body (`flat_tokens`): the state after its closing
    # quote (-1 for any other state). With the state's loops (`flat_kernels.known_loops`),
    # the matcher follows a token of the string, or one that closes it, without a row of
    # the state.
    closed: int = -1


# A state whose row differs from another's on at most this many bytes starts from that
# state's mask (see `near_state`).
NEAR_MAX_BYTES = 12


def dominant_target(dfa: TableTokens, sid: int) -> tuple[int, int] | None:
    """(t, n): the state t that most of `sid`'s bytes lead to, and how many bytes do;
    None when few bytes leave `sid` (its plain walk is short anyway)."""
    target, count, live = kernels.token_kernels.dominant_of(dfa.table[sid])
    if live <= 2 * NEAR_MAX_BYTES:
        return None
    return int(target), int(count)


def near_state(dfa: TableTokens, sid: int, dominant: tuple[int, int] | None, sibling: int | None = None) -> tuple[int, np.ndarray] | None:
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


def run_of(dfa: TableTokens, trie: TokenTrie, sid: int, dominant: tuple[int, int] | None) -> tuple[LoopSlice, int] | None:
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


class TableTokens:
    """The token masks of a table DFA's states, mixed into the automaton classes: each
    computes a state's mask through its own `state_tokens`. This one is the Python
    automaton's: build the state's row, then walk the trie (`walk_trie`), expanding the
    rows the walk stops at. It reads the automaton's table interface (`dfa.TableDFA`):
    `table`, `expanded`, `loops`, `accepting`, `expand`, `free_bytes`."""

    def state_tokens(self, trie: TokenTrie, sid: int, tokens_of=None, siblings: dict | None = None,
                     twin_tokens=None, known: tuple | None = None) -> StateTokens:
        """The tokens state `sid` allows, expanding the rows the walk needs.
        `tokens_of(t)`, when given, returns the (cached) StateTokens of another state: a
        state near one (`near_state`) copies that state's mask and walks only the first
        bytes where the two differ. `siblings` (kept by the caller, who caches every table
        this returns) maps a dominant target to the last state computed with it that was
        not near it. `twin_tokens(t)`: the (cached) StateTokens of a state's twin, and
        `known`: what `plain_tables` found about the state; for automata that have them
        (`flat_tokens.FlatTokens`)."""
        self.expand(sid)
        return self._walked_state_tokens(trie, sid, self.free_bytes(sid), tokens_of, siblings)

    def plain_tables(self, trie: TokenTrie, sids: list[int]) -> list:
        """What can be found about many states at once ahead of decoding, one entry per
        state, for `state_tokens(known=...)` (or the StateTokens itself): nothing here."""
        return [None] * len(sids)

    def sliced_walk(self, trie: TokenTrie, sid: int, known):
        """(walk, known): where what `plain_tables` found (`known`) shows that one walk
        from a slice finds the state's mask, that walk, for `sliced_tables` to do with
        others in one call; else (None, what `state_tokens(known=...)` goes on from).
        Here none: (None, known)."""
        return None, known

    def sliced_tables(self, trie: TokenTrie, walks: list) -> list[StateTokens]:
        """The masks of the walks `sliced_walk` gave, in their order."""
        raise NotImplementedError("this automaton gives no sliced walks")

    def walk_trie(self, trie: TokenTrie, nodes: np.ndarray, states: np.ndarray, words: np.ndarray) -> int:
        """Run `token_kernels.walk_table` from (node, state) pairs, expanding the rows it
        stops at, until done; returns how many tokens it allowed (their bits set in
        `words`)."""
        allowed = 0
        while nodes.size:
            count, nodes, states = kernels.token_kernels.walk_table(
                self.table, self.expanded, self.loops, trie.edge_start, trie.edge_byte, trie.edge_child,
                trie.token_start, trie.token_ids, trie.subtree_end, trie.below, nodes, states, words,
            )
            allowed += count
            for state in set(states.tolist()):
                self.expand(state)
        return allowed

    def _walked_state_tokens(self, trie: TokenTrie, sid: int, free: np.ndarray | None, tokens_of,
                             siblings: dict | None) -> StateTokens:
        """`state_tokens` by a walk, for a state whose row is built: unwalked the slice
        of its `free` bytes, or from a near state's mask, or with its loop or counted
        run taken from a slice."""
        piece = trie.loop_slice(free) if free is not None else None
        if piece is not None:
            return _walked_tokens(self, trie, sid, None, free_piece=piece)
        dominant = dominant_target(self, sid)
        key = dominant[0] if siblings is not None and dominant is not None and dominant[0] != sid else None
        sibling = siblings.get(key) if key is not None else None
        near = near_state(self, sid, dominant, sibling) if tokens_of is not None else None
        if near is not None:
            table = _near_tokens(self, trie, sid, near, tokens_of)
        else:
            table = _walked_tokens(self, trie, sid, dominant)
        if key is not None and (near is None or near[0] != key):  # not near its dominant target:
            siblings[key] = sid  # the candidate for the next such state
        return table


def _walked_tokens(dfa: TableTokens, trie: TokenTrie, sid: int, dominant,
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
            allowed += dfa.walk_trie(piece.long, nodes, states, words)
        trie = piece.rest
    else:
        words, allowed = np.zeros(bitmask_words(trie.vocab_size), dtype=np.uint32), 0
    allowed += dfa.walk_trie(trie, nodes, states, words)
    words = words.view(np.int32)
    if dfa.accepting[sid] and eos_count:
        words |= eos_words
        allowed += eos_count
    return StateTokens(words=words, num_allowed=allowed, rows_built=free_piece is None)


def _near_tokens(dfa: TableTokens, trie: TokenTrie, sid: int, near, tokens_of) -> StateTokens:
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
        dfa.walk_trie(trie, np.asarray(nodes, dtype=np.int64), np.asarray(states, dtype=np.int64), words)
    if dfa.accepting[sid]:
        words |= eos_words
    return StateTokens(words=words.view(np.int32), num_allowed=int(np.bitwise_count(words).sum()),
                       rows_built=near_tokens.rows_built)
