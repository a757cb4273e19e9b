"""A lazily determinized DFA over bytes, backed by a dense numpy transition table.

Owns: subset construction on demand (a DFA state is a set of NFA states, built the
first time something steps into it), the `[states, 256]` int32 table the token walker
reads, per state the bytes that loop on it (a 256-bit set), accepting flags and forced
byte spans. A state part-way through a literal gets its row together with those of the
states after its next bytes (one exit each), so a walk does not stop at every byte.
Thread-safe: one lock guards expansion; readers only look at rows already marked
expanded.
Must not know about tokens or the engine.
"""

from __future__ import annotations

import threading

import numpy as np

from structgen.automata.nfa import ACCEPT, LazyNFA
from structgen.errors import GrammarTooLargeError

DEAD = -1  # no transition: the byte leaves the language
UNEXPANDED = -2  # row not built yet (internal)
LITERAL_CHAIN = 16  # rows built at once for the bytes ahead in a literal (a token's length)


class LazyDFA:
    def __init__(self, nfa: LazyNFA, *, max_states: int = 200_000):
        self.nfa = nfa
        self.max_states = max_states
        self._sets: list[frozenset[int]] = []
        self._index: dict[frozenset[int], int] = {}
        self._lock = threading.RLock()
        self.table = np.full((64, 256), UNEXPANDED, dtype=np.int32)
        self.expanded = np.zeros(64, dtype=bool)
        self.loops = np.zeros((64, 4), dtype=np.uint64)  # bytes b with table[s, b] == s
        self.accepting = np.zeros(64, dtype=bool)
        self._forced: dict[int, bytes] = {}
        self._has_exits: dict[int, bool] = {}
        self.start = self._intern(nfa.start) if nfa.start else DEAD

    @property
    def num_states(self) -> int:
        return len(self._sets)

    def state_of(self, nfa_states: frozenset) -> int:
        """The DFA state of a set of NFA items (interned)."""
        with self._lock:
            return self._intern(nfa_states)

    def _intern(self, nfa_states: frozenset[int]) -> int:
        sid = self._index.get(nfa_states)
        if sid is not None:
            return sid
        sid = len(self._sets)
        if sid >= self.max_states:
            raise GrammarTooLargeError(
                f"grammar automaton grew past {self.max_states:,} states while decoding"
            )
        if sid >= self.table.shape[0]:
            grow = self.table.shape[0]
            self.table = np.concatenate([self.table, np.full((grow, 256), UNEXPANDED, np.int32)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, bool)])
            self.loops = np.concatenate([self.loops, np.zeros((grow, 4), np.uint64)])
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, bool)])
        self._sets.append(nfa_states)
        self._index[nfa_states] = sid
        self.accepting[sid] = ACCEPT in nfa_states
        return sid

    def expand(self, sid: int) -> None:
        """Build the table row of DFA state `sid` (idempotent)."""
        if self.expanded[sid]:
            return
        with self._lock:
            if self.expanded[sid]:
                return
            items = self._sets[sid]
            if len(items) == 1:
                chain = self.nfa.literal_chain(next(iter(items)), LITERAL_CHAIN)
                if chain:
                    self._expand_chain(sid, chain)
                    return
            pieces = [(lo, hi, self._intern(target)) for lo, hi, target in self.nfa.successors(items)]
            row = self.table[sid]  # after interning, which may grow (replace) self.table
            row[:] = DEAD
            loops = False
            for lo, hi, nxt in pieces:
                if lo == hi:
                    row[lo] = nxt
                else:
                    row[lo : hi + 1] = nxt
                loops = loops or nxt == sid
            if loops:
                self.loops[sid] = np.packbits(row == sid, bitorder="little").view("<u8")
            self.expanded[sid] = True

    def _expand_chain(self, sid: int, chain: list[tuple[int, frozenset]]) -> None:
        """Rows of a state part-way through a literal and of the states after its next
        bytes, at once: each has one exit. The walk of a token through a long key would
        otherwise stop at every byte to have the next row built."""
        states = [sid]
        for _, target in chain:
            nxt = self._intern(target)
            states.append(nxt)
            if self.expanded[nxt]:
                break
        n = len(states) - 1  # states[:n] get rows: states[i] --chain[i] byte--> states[i + 1]
        rows = np.asarray(states[:n], dtype=np.int64)
        table = self.table  # after interning, which may grow (replace) self.table
        table[rows] = DEAD
        table[rows, [byte for byte, _ in chain[:n]]] = states[1:]
        for i in range(n):
            if states[i + 1] == states[i]:  # a literal looping back onto itself
                self.loops[states[i]] = np.packbits(table[states[i]] == states[i], bitorder="little").view("<u8")
        self.expanded[rows] = True

    def step(self, sid: int, byte: int) -> int:
        self.expand(sid)
        return int(self.table[sid, byte])

    def walk(self, sid: int, data: bytes) -> int:
        for b in data:
            if sid < 0:
                return DEAD
            sid = self.step(sid, b)
        return sid

    def has_exits(self, sid: int) -> bool:
        cached = self._has_exits.get(sid)
        if cached is None:
            self.expand(sid)
            cached = self._has_exits[sid] = bool((self.table[sid] >= 0).any())
        return cached

    def known_has_exits(self, sid: int) -> bool | None:
        """`has_exits(sid)` if already computed, else None (safe without the lock)."""
        return self._has_exits.get(sid)

    def known_forced_bytes(self, sid: int) -> bytes | None:
        """`forced_bytes(sid)` if already computed, else None (safe without the lock)."""
        return self._forced.get(sid)

    def forced_bytes(self, sid: int, limit: int = 4096) -> bytes:
        """Bytes every continuation from `sid` must start with (empty if accepting
        or if more than one byte may come next)."""
        cached = self._forced.get(sid)
        if cached is not None:
            return cached
        out = bytearray()
        cur = sid
        while cur >= 0 and len(out) < limit and not self.accepting[cur]:
            self.expand(cur)
            exits = np.flatnonzero(self.table[cur] >= 0)
            if exits.size != 1:
                break
            b = int(exits[0])
            out.append(b)
            cur = int(self.table[cur, b])
        result = bytes(out)
        self._forced[sid] = result
        return result
