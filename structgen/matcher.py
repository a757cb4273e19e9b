"""Compiled grammars and the per-sequence matchers the engine drives.

Owns: `CompiledGrammar` (immutable to its users, shared by every request with the same
grammar; holds the lazy DFA and the per-state token tables, filled in on first visit under
a lock) and `Matcher` (one per sequence: a stack of DFA states, so rollback is exact).
A state's table is what its automaton computes (`state_tokens`); which tables are
computed ahead of decoding is `warmup.py`'s. Must not import the engine; engines use only
the Matcher methods below.
"""

from __future__ import annotations

import threading
from typing import Iterable

import numpy as np

from structgen import warmup
from structgen.automata.dfa import DEAD, TableDFA
from structgen.automata.example import covering_example
from structgen.automata.token_trie import bitmask_words, token_trie
from structgen.automata.tokens import StateTokens

_TERMINATED = -3  # pushed on the state stack when EOS is accepted
_QUOTE = ord('"')
MAX_TOKEN_TABLES = 20_000  # cached masks per grammar before the compile cache rebuilds it
# Past this many, a grammar still in use forgets its oldest masks as it computes new ones
# (its matchers recompute one they need again): it works on without growing.
TABLE_CAP = 2 * MAX_TOKEN_TABLES
TABLE_OVERHEAD_BYTES = 400  # a StateTokens object, its dict entry and a few next states
NEAR_DEPTH = 2  # a first visit computes at most this many near states' tables first


def allocate_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """A zeroed int32 bitmask buffer, `ceil(vocab_size / 32)` words per row.
    Bit (id % 32) of word (id // 32) set means token `id` is allowed."""
    return np.zeros((batch_size, bitmask_words(vocab_size)), dtype=np.int32)


class CompiledGrammar:
    """A grammar compiled for one vocabulary. Thread-safe; create matchers with `matcher()`."""

    def __init__(self, kind: str, source: str, dfa: TableDFA, vocab, stats: dict | None = None,
                 example: bytes | None = None):
        self.kind = kind
        self._example = example  # computed where the IR was (a compile worker), else on first use
        self.source = source
        self.vocab = vocab
        self.dfa = dfa
        self.stats = dict(stats or {})
        self._trie = token_trie(vocab)
        self._tables: dict[int, StateTokens] = {}
        self._siblings: dict[int, int] = {}  # near candidates, see tokens.near_state
        self._lock = threading.Lock()
        # What its matchers read at every step (never written to after this):
        self.eos_token_ids = frozenset(vocab.eos_token_ids)
        self.token_bytes = vocab.token_bytes
        self.eos_words = self._trie.eos_words  # the mask after EOS, shared per vocabulary
        self.empty_words = np.zeros_like(self.eos_words)  # the mask of a dead state

    @property
    def vocab_size(self) -> int:
        return self.vocab.vocab_size

    @property
    def exhausted(self) -> bool:
        """Grown to half its state budget, or holding many token tables: a grammar shared
        for a long time (json_object behind a server, a recursive schema reaching ever new
        nesting) is then rebuilt fresh by the compile cache instead of failing or growing
        without bound. Matchers already running keep using this one, and the half left
        is theirs: a matcher nested d levels deep may need d new states to close them."""
        return self.dfa.num_states >= 0.5 * self.dfa.max_states or len(self._tables) >= MAX_TOKEN_TABLES

    def matcher(self) -> "Matcher":
        return Matcher(self)

    def nbytes(self) -> int:
        """Memory this grammar holds: its automaton's built part and its cached masks."""
        return self.dfa.nbytes() + len(self._tables) * (self.eos_words.nbytes + TABLE_OVERHEAD_BYTES)

    def tokens_of(self, sid: int) -> StateTokens:
        """The token table of DFA state `sid`, computed on first use and cached."""
        table = self._tables.get(sid)
        if table is None:
            with self._lock, self.dfa.lock:
                table = self._table(sid, 0)
        return table

    def _table(self, sid: int, depth: int, known: tuple | None = None) -> StateTokens:
        """tokens_of under the lock. A state may start from the table of a near state
        (tokens.near_state), computed first if need be; the depth bound keeps two states
        near each other from asking for one another forever. `known`: see
        `TableTokens.state_tokens`."""
        table = self._tables.get(sid)
        if table is None:
            near = (lambda t: self._table(t, depth + 1)) if depth < NEAR_DEPTH else None
            table = self.dfa.state_tokens(self._trie, sid, near, self._siblings, lambda t: self._table(t, depth),
                                          known)
            self._keep(sid, table)
        return table

    def _keep(self, sid: int, table: StateTokens) -> None:
        """Cache a table computed under the lock."""
        self._tables[sid] = table
        if len(self._tables) > TABLE_CAP:
            del self._tables[next(iter(self._tables))]  # the oldest (dicts keep insertion order)

    def example(self) -> bytes:
        """An output of this grammar that takes every optional part once (or a prefix
        of one, where the example stops early; see `automata.example`)."""
        if self._example is None:
            nfa = self.dfa.nfa
            self._example = covering_example(nfa.root, nfa) if nfa is not None else b""
            self.dfa.example_made()
        return self._example

    def warm(self, data: bytes, offsets: Iterable[int], budget_s: float) -> int:
        """Compute now the token tables of the states after `data[:i]` for each i in
        `offsets`, within `budget_s`; returns how many were computed (`warmup.warm`)."""
        return warmup.warm(self, data, offsets, budget_s)

    def grown_to(self, share: float) -> bool:
        """Whether this grammar holds `share` of its state budget or of its table budget."""
        return self.dfa.num_states >= share * self.dfa.max_states or len(self._tables) >= share * MAX_TOKEN_TABLES

    def compute_tables(self, sids: list[int]) -> int:
        """The token tables of those of `sids` not computed yet, at once where the
        automaton can (`plain_tables`: the plain states in one compiled call), then the
        others (`_compute_others`); returns how many were computed."""
        sids = [sid for sid in sids if sid not in self._tables]
        with self._lock, self.dfa.lock:
            found = self.dfa.plain_tables(self._trie, sids) if sids else []
            others = []
            for sid, table in zip(sids, found):  # first: the others may start from them (near_state)
                if isinstance(table, StateTokens):
                    self._tables.setdefault(sid, table)
                else:
                    others.append((sid, table))
            self._compute_others(others)
        return len(sids)

    def _compute_others(self, others: list[tuple[int, tuple | None]]) -> None:
        """The tables of (state, what `plain_tables` found) in their order, under the
        lock: each run of states one sliced walk finds (`sliced_walk`) in one compiled
        call (`sliced_tables`), the others one by one (`_table`). A run is done before
        the next other state starts, which may ask for those tables (a twin, a near
        state) and must find the rows they built."""
        walks, walked = [], []
        for sid, known in others:
            if sid in self._tables or sid in walked:
                continue
            walk, known = self.dfa.sliced_walk(self._trie, sid, known)
            if walk is not None:
                walks.append(walk)
                walked.append(sid)
                continue
            self._keep_walked(walked, walks)
            self._table(sid, 0, known)
        self._keep_walked(walked, walks)

    def _keep_walked(self, sids: list[int], walks: list) -> None:
        """Compute and cache the tables of `walks` (of states `sids`), then empty both lists."""
        if walks:
            for sid, table in zip(sids, self.dfa.sliced_tables(self._trie, walks)):
                self._keep(sid, table)
            sids.clear()
            walks.clear()

    def forced_bytes(self, sid: int, built_only: bool = False) -> bytes | None:
        cached = self.dfa.known_forced_bytes(sid)  # asked every step: skip the lock when known
        if cached is not None:
            return cached
        with self.dfa.lock:
            return self.dfa.forced_bytes(sid, built_only=built_only)

    def has_exits(self, sid: int) -> bool:
        cached = self.dfa.known_has_exits(sid)
        if cached is not None:
            return cached
        with self.dfa.lock:
            return self.dfa.has_exits(sid)

    def accepts_bytes(self, data: bytes) -> bool:
        """Whether `data` is a complete sentence of the grammar (byte level)."""
        with self.dfa.lock:
            sid = self.dfa.walk(self.dfa.start, data)
        return sid >= 0 and bool(self.dfa.accepting[sid])

    def __repr__(self) -> str:
        return f"CompiledGrammar(kind={self.kind!r}, states={self.dfa.num_states})"


class Matcher:
    """Per-sequence grammar state. Not thread-safe (one sequence, one thread)."""

    __slots__ = ("grammar", "_stack", "_words")

    def __init__(self, grammar: CompiledGrammar):
        self.grammar = grammar
        self._stack = [grammar.dfa.start]
        self._words = len(grammar.eos_words)

    # --------------------------------------------------------------- masks

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write this sequence's allowed-token bits into `bitmask[row]` (int32 words)."""
        if not isinstance(bitmask, np.ndarray):
            bitmask = bitmask.numpy()  # a CPU torch tensor: shares memory
        state = self._stack[-1]
        if state == _TERMINATED:
            words = self.grammar.eos_words
        elif state == DEAD:
            words = self.grammar.empty_words
        else:
            words = self.grammar.tokens_of(state).words
        bitmask[row, : self._words] = words
        if bitmask.shape[1] > self._words:  # a wider logits row: its extra ids never allowed
            bitmask[row, self._words :] = 0

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed token ids as an array (debugging and tests; not the hot path)."""
        mask = allocate_bitmask(1, self.grammar.vocab_size)
        self.fill_bitmask(mask, 0)
        bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")
        return np.flatnonzero(bits)

    # --------------------------------------------------------------- advancing

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the grammar does not allow it."""
        state = self._stack[-1]
        if state < 0:
            return False
        grammar = self.grammar
        table = grammar.tokens_of(state)
        known = table.next_state.get(token_id)  # an allowed token seen here before
        if known is not None:
            self._stack.append(known)
            return True
        if token_id < 0 or (token_id >> 5) >= self._words:
            return False
        if not (int(table.words[token_id >> 5]) >> (token_id & 31)) & 1:
            return False
        if token_id in grammar.eos_token_ids:
            self._stack.append(_TERMINATED)
            return True
        if table.rows_built:
            # The mask computation built every table row on this token's path, and rows
            # are never changed once built, so this walk needs no lock.
            rows = grammar.dfa.table
            for byte in grammar.token_bytes[token_id]:
                state = rows[state, byte]
            state = int(state)
        else:  # allowed without a walk (tokens.StateTokens.rows_built): follow its path,
            # through the table while its rows are built (no row changes once built), the
            # bytes a state without a row is known to loop on (a string's body: see
            # flat_kernels.known_loops) and the closing quote of a string this state is in; from
            # where none of these holds, in one compiled call. (`expanded` is read first:
            # a table grown since holds every row it marks.)
            built = grammar.dfa.expanded
            rows, loops, data = grammar.dfa.table, grammar.dfa.loops, grammar.token_bytes[token_id]
            start, closed = state, table.closed
            at = 0
            while at < len(data) and state >= 0:
                byte = data[at]
                if built[state]:
                    state = rows[state, byte]
                elif byte == _QUOTE and state == start and closed >= 0:
                    state = closed
                elif not (int(loops[state, byte >> 6]) >> (byte & 63)) & 1:
                    break
                at += 1
            state = int(state)
            if at < len(data):
                with grammar.dfa.lock:
                    state = grammar.dfa.walk(state, data[at:])
        table.next_state[token_id] = state  # one dict store: safe beside other threads
        self._stack.append(state)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (e.g. a forced span) as one step; False and no change
        if they leave the language. Rolled back as one unit by `rollback(1)`."""
        state = self._stack[-1]
        if state < 0:
            return False
        with self.grammar.dfa.lock:
            nxt = self.grammar.dfa.walk(state, data)
        if nxt < 0:
            return False
        self._stack.append(nxt)
        return True

    def rollback(self, n_tokens: int) -> None:
        """Undo the last `n_tokens` accepted tokens (exact)."""
        if n_tokens < 0 or n_tokens > len(self._stack) - 1:
            raise ValueError(f"cannot roll back {n_tokens} tokens; {len(self._stack) - 1} accepted")
        if n_tokens:
            del self._stack[-n_tokens:]

    def reset(self) -> None:
        del self._stack[1:]

    # --------------------------------------------------------------- queries

    def is_accepting(self) -> bool:
        """The output so far is a complete sentence (EOS would be allowed now)."""
        state = self._stack[-1]
        return state == _TERMINATED or (state >= 0 and bool(self.grammar.dfa.accepting[state]))

    def is_terminated(self) -> bool:
        """Nothing but stopping is possible: EOS was accepted, or the output is complete
        and the grammar allows no further byte."""
        state = self._stack[-1]
        if state == _TERMINATED:
            return True
        return self.is_accepting() and not self.grammar.has_exits(state)

    def forced_bytes(self, built_only: bool = False) -> bytes | None:
        """Bytes every continuation must start with (jump-forward appends them).
        built_only: None where that needs a row not built yet (TableDFA.forced_bytes)."""
        state = self._stack[-1]
        if state < 0:
            return b""
        return self.grammar.forced_bytes(state, built_only)

    @property
    def num_accepted(self) -> int:
        return len(self._stack) - 1
