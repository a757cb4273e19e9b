"""A lazily determinized DFA over bytes, backed by a dense numpy transition table.

Owns: subset construction on demand (a DFA state is a set of NFA items, `item_sets`,
built the first time something steps into it), the `[states, 256]` int32 table the token
walker reads, per state the bytes that loop on it (a 256-bit set), accepting flags and
forced byte spans. A state part-way through a literal gets its row together with those
of the states after its next bytes (one exit each), so a walk does not stop at every
byte. A state inside the name of an undeclared property copies the row that every
prefix of the declared names shares and patches the few bytes where it differs.
Thread-safe: one lock (`lock`) guards expansion; readers only look at rows already
marked expanded.
Reads its NFA (`nfa.LazyNFA`, which imports this module for its lexemes' DFA) only
through the object it is given. Its states' token masks are `tokens.TableTokens`, mixed
in; it must not know about vocabularies or the engine.
"""

from __future__ import annotations

import threading

import numpy as np

from structgen.automata.item_sets import ACCEPT, union
from structgen.automata.spares import AHEAD_AT, Spares, empty
from structgen.automata.tokens import TableTokens
from structgen.errors import GrammarTooLargeError

DEAD = -1  # no transition: the byte leaves the language
LITERAL_CHAIN = 16  # rows built at once for the bytes ahead in a literal (a token's length)


# A built state's table row (256 int32), loops (4 x u64), expanded and accepting flags.
TABLE_BYTES_PER_STATE = 256 * 4 + 4 * 8 + 2
# The Python automaton's item set and its interning entry for a state (an estimate).
PYTHON_STATE_BYTES = 600


class TableDFA:
    """The dense table of a lazily built DFA and what is read from it: `table[s]` is
    state s's row once `expanded[s]`, `loops[s]` the bytes that lead back to s (4 x
    u64; before the row is built, those a walk has found so far, see
    `flat_kernels.walk_entry`), `accepting[s]`; walks, exits and forced bytes. A subclass builds the rows
    (`expand`) and counts its states."""

    def __init__(self, max_states: int, initial_states: int = 64):
        self.max_states = max_states
        self.lock = threading.RLock()
        self.table = np.empty((initial_states, 256), dtype=np.int32)  # a row is set when its state is expanded
        self.expanded = np.zeros(initial_states, dtype=bool)
        self.loops = np.zeros((initial_states, 4), dtype=np.uint64)  # bytes b with table[s, b] == s
        self.accepting = np.zeros(initial_states, dtype=bool)
        self._forced: dict[int, bytes] = {}
        self._has_exits: dict[int, bool] = {}
        self.spares = Spares()  # the next growth's arrays, made ahead (see `_grow`)

    def expand(self, sid: int) -> None:
        """Build the table row of state `sid` (idempotent; readers of built rows take no
        lock)."""
        if self.expanded[sid]:
            return
        with self.lock:
            if not self.expanded[sid]:
                self._build_row(sid)

    def _build_row(self, sid: int) -> None:
        """Write state `sid`'s row and mark it expanded (under the lock)."""
        raise NotImplementedError

    def example_made(self) -> None:
        """The grammar has made and keeps its example: an automaton that reads its IR
        for nothing else lets it go (`flat.FlatDFA`)."""

    def free_bytes(self, sid: int) -> np.ndarray | None:
        """Bytes every string of which state `sid` reads without leaving the language,
        where that is more than its loops (4 x u64), or None."""
        return None

    def nbytes(self) -> int:
        """Memory of the states built so far: their rows and per-state flags (a subclass
        adds what it keeps besides). Pages of rows never built are not counted: they are
        never written, so they take no memory."""
        return self.num_states * TABLE_BYTES_PER_STATE

    def too_many_states(self) -> GrammarTooLargeError:
        return GrammarTooLargeError(f"grammar automaton grew past {self.max_states:,} states while decoding")

    def _grow(self) -> None:
        """Double the per-state arrays. The new rows of the table are left unwritten:
        a row is read only once `expanded` says it is built, and writing them here would
        touch (fault in) every page of the new block at once. The table is the spare made
        ahead for it where there is one (`_room_ahead`)."""
        size = self.table.shape[0]
        table = self.spares.take("table", (2 * size, 256), np.int32)
        if table is None:  # not ready, or it filled in one call: have the next made at once
            table = empty((2 * size, 256), np.int32)
            self.spares.prepare("table", (4 * size, 256), np.int32, 4 * table.nbytes, touched_rows=2 * size)
        table[:size] = self.table
        self.table = table
        self.expanded = np.concatenate([self.expanded, np.zeros(size, bool)])
        self.loops = np.concatenate([self.loops, np.zeros((size, 4), np.uint64)])
        self.accepting = np.concatenate([self.accepting, np.zeros(size, bool)])

    def _room_ahead(self, states: int) -> None:
        """With `states` built, have the next table made in the background once this one
        is most of the way to full (the pages its growth copies into, touched there)."""
        size = len(self.table)
        if states >= AHEAD_AT * size:
            self.spares.prepare("table", (2 * size, 256), np.int32, 2 * self.table.nbytes, touched_rows=size)

    def _store_loops(self, sid: int) -> None:
        """Record, from its table row, the bytes on which state `sid` steps to itself."""
        self.loops[sid] = np.packbits(self.table[sid] == sid, bitorder="little").view("<u8")

    def step(self, sid: int, byte: int) -> int:
        self.expand(sid)
        return int(self.table[sid, byte])

    def walk(self, sid: int, data: bytes) -> int:
        for b in data:
            if sid < 0:
                return DEAD
            sid = self.step(sid, b)
        return sid

    def path(self, sid: int, data: bytes, max_items: int | None = None) -> np.ndarray:
        """The states after each prefix of `data` from `sid`: path[i] after data[:i]
        (path[0] is `sid`), DEAD from where the bytes leave the language. `max_items`:
        GrammarTooLargeError rather than build a state of more items (the compiled
        automaton's `path`; this one's states are bounded by its NFA's only)."""
        path = np.full(len(data) + 1, DEAD, dtype=np.int64)
        path[0] = sid
        for i, b in enumerate(data):
            if sid < 0:
                break
            sid = path[i + 1] = self.step(sid, b)
        return path

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

    def forced_bytes(self, sid: int, limit: int = 4096, built_only: bool = False) -> bytes | None:
        """Bytes every continuation from `sid` must start with (empty if accepting
        or if more than one byte may come next). built_only: None where a row on the way
        is not built yet (building one can take long: the row of a 20,000-value enum's
        start took 0.17 s)."""
        cached = self._forced.get(sid)
        if cached is not None:
            return cached
        out = bytearray()
        cur = sid
        while cur >= 0 and len(out) < limit and not self.accepting[cur]:
            if built_only and not self.expanded[cur]:
                return None
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


class LazyDFA(TableTokens, TableDFA):
    """The Python automaton: subset construction over a `nfa.LazyNFA`'s items; its
    states' token masks are the walk of `tokens.TableTokens`."""

    def __init__(self, nfa, *, max_states: int = 200_000):
        """nfa: the `nfa.LazyNFA` whose item sets are this automaton's states."""
        super().__init__(max_states)
        self.nfa = nfa
        self._sets: list[frozenset[int]] = []
        self._index: dict[frozenset[int], int] = {}
        self._base_rows: dict[int, tuple[list, np.ndarray, set[int]]] = {}
        self._free: dict[int, np.ndarray | None] = {}
        self.start = self._intern(nfa.start) if nfa.start else DEAD

    @property
    def num_states(self) -> int:
        return len(self._sets)

    def nbytes(self) -> int:
        return super().nbytes() + self.num_states * PYTHON_STATE_BYTES

    def state_of(self, nfa_states: frozenset) -> int:
        """The DFA state of a set of NFA items (interned)."""
        with self.lock:
            return self._intern(nfa_states)

    def _intern(self, nfa_states: frozenset[int]) -> int:
        sid = self._index.get(nfa_states)
        if sid is not None:
            return sid
        sid = len(self._sets)
        if sid >= self.max_states:
            raise self.too_many_states()
        if sid >= self.table.shape[0]:
            self._grow()
        self._sets.append(nfa_states)
        self._index[nfa_states] = sid
        if ACCEPT in nfa_states:  # most states are not: skip the numpy store (zeroed)
            self.accepting[sid] = True
        return sid

    def _build_row(self, sid: int) -> None:
        items = self._sets[sid]
        if len(items) == 1:
            chain = self.nfa.literal_chain(next(iter(items)), LITERAL_CHAIN)
            if chain:
                self._expand_chain(sid, chain)
                return
        parts = self.nfa.row_parts(items)
        if parts is not None:
            self._expand_parts(sid, *parts)
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
            self._store_loops(sid)
        self.expanded[sid] = True

    def _expand_parts(self, sid: int, base: list, replaced: list, points: list) -> None:
        """The row of a state inside the name of an undeclared property (`LazyNFA.row_parts`):
        a copy of the row of the moves it shares with every other prefix, changed on the
        few bytes where it differs. Building it from the moves would intern the same
        dozen targets (one per kind of UTF-8 lead byte) again for every prefix."""
        row, base_states = self._base_row(base)
        row = row.copy()
        at: dict[int, list[frozenset]] = {}
        for byte, target in replaced:
            at[byte] = [target] if target else []
        for byte, target in points:
            targets = at.get(byte)
            if targets is None:
                targets = at[byte] = [self._sets[row[byte]]] if row[byte] >= 0 else []
            targets.append(target)
        loops = sid in base_states
        for byte, targets in at.items():
            if not targets:
                row[byte] = DEAD
                continue
            nxt = self._intern(targets[0] if len(targets) == 1 else union(targets))
            row[byte] = nxt
            loops = loops or nxt == sid
        self.table[sid] = row  # after interning, which may grow (replace) self.table
        if loops:
            self._store_loops(sid)
        self.expanded[sid] = True

    def _base_row(self, base: list) -> tuple[np.ndarray, set[int]]:
        """The row of a shared moves list and the states in it, interned once (keyed by
        the list, kept alive)."""
        got = self._base_rows.get(id(base))
        if got is None:
            row = np.full(256, DEAD, dtype=np.int32)
            for lo, hi, target in base:
                row[lo : hi + 1] = self._intern(target)
            got = self._base_rows[id(base)] = (base, row, set(row[row >= 0].tolist()))
        return got[1], got[2]

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
                self._store_loops(states[i])
        self.expanded[rows] = True

    def free_bytes(self, sid: int) -> np.ndarray | None:
        """Bytes every string of which state `sid` reads without leaving the language,
        as 4 x u64 (like `loops`), where its items vouch for more than its loops (the
        name of an undeclared property: any plain text, though each letter of a declared
        name leads to a state of its own); None otherwise."""
        if sid in self._free:
            return self._free[sid]
        self.expand(sid)  # its loops are known once its row is built
        bits = self.nfa.free_bytes(self._sets[sid])
        free = None
        if bits:
            free = np.array([(bits >> (64 * w)) & 0xFFFF_FFFF_FFFF_FFFF for w in range(4)], dtype=np.uint64)
            if not (free & ~self.loops[sid]).any():
                free = None  # no more than its loops: the LoopSlice path covers it
        self._free[sid] = free
        return free
