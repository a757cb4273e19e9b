"""From byte automata to token masks: which token ids a DFA state allows, and where each leads.

Owns: the per-vocabulary token byte matrix (built once per vocabulary and shared by every
grammar), the vectorized walk of all tokens through a lazy DFA from one state, and the
packed int32 bitmask rows. Must not know about the engine; knows vocabularies only through
`token_bytes`, `special_ids`, `eos_token_ids` and `vocab_size`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from structgen.automata.dfa import LazyDFA


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_ids(token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """int32 words, bit (id % 32) of word (id // 32) set for each id."""
    nwords = bitmask_words(vocab_size)
    if token_ids.size < 4096:
        words = np.zeros(nwords, dtype=np.uint32)
        ids = token_ids.astype(np.int64)
        np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
        return words.view(np.int32)
    nbits = nwords * 32
    flags = np.zeros(nbits, dtype=bool)
    flags[token_ids] = True
    return np.packbits(flags, bitorder="little").view("<u4").astype(np.uint32).view(np.int32)


class TokenMatrix:
    """All normal (non-special, non-empty) tokens of a vocabulary as a byte matrix,
    sorted by length so that "tokens longer than j" is a suffix of the rows."""

    def __init__(self, vocab):
        lengths = []
        ids = []
        special = set(vocab.special_ids)
        for tid, data in enumerate(vocab.token_bytes):
            if data and tid not in special:
                ids.append(tid)
                lengths.append(len(data))
        order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
        self.token_ids = np.asarray(ids, dtype=np.int64)[order]
        self.lengths = np.asarray(lengths, dtype=np.int64)[order]
        self.max_len = int(self.lengths[-1]) if len(self.lengths) else 0
        mat = np.zeros((len(self.token_ids), max(self.max_len, 1)), dtype=np.uint8)
        for row, tid in enumerate(self.token_ids.tolist()):
            data = vocab.token_bytes[tid]
            mat[row, : len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.matrix = mat
        # Column j as its own contiguous array: the walk gathers one column per step.
        self.columns = [np.ascontiguousarray(mat[:, j]) for j in range(mat.shape[1])]
        # Rows by first byte: a state that admits few first bytes walks only those rows.
        first = self.columns[0] if len(self.token_ids) else np.zeros(0, np.uint8)
        self.rows_by_first_byte = [np.flatnonzero(first == b) for b in range(256)]
        self.count_by_first_byte = np.array([len(r) for r in self.rows_by_first_byte])
        # Which byte values occur in each token (and in its bytes after the first), as
        # 256-bit sets (4 x uint64): lets a walk skip tokens whose (remaining) bytes all
        # loop on the state they are in -- the bodies of JSON strings, digit runs, keys
        # past the declared names -- which end where they began.
        self.presence = self._byte_presence(start=0)
        self.tail_presence = self._byte_presence(start=1)
        self.slices: dict[tuple[bytes, bytes], "Slice"] = {}
        self.tails_inside: dict[bytes, np.ndarray] = {}
        self.vocab_size = vocab.vocab_size
        self.eos_ids = np.asarray(sorted(vocab.eos_token_ids), dtype=np.int64)

    def _byte_presence(self, start: int) -> np.ndarray:
        presence = np.zeros((len(self.token_ids), 4), dtype=np.uint64)
        for j in range(start, len(self.columns)):
            rows = np.flatnonzero(self.lengths > j)
            byte = self.columns[j][rows].astype(np.uint64)
            words = (byte >> np.uint64(6)).astype(np.int64)
            np.bitwise_or.at(presence, (rows, words), np.uint64(1) << (byte & np.uint64(63)))
        return presence


def _tails_inside(tm: TokenMatrix, loops: np.ndarray) -> np.ndarray:
    """For every row: whether the token's bytes after the first are all in `loops`.
    One pass over the vocabulary per distinct loop set, shared by every state and
    grammar that has it (the bodies of strings and keys have a handful of them)."""
    key = np.packbits(loops).tobytes()
    cached = tm.tails_inside.get(key)
    if cached is None:
        cached = ~(tm.tail_presence & _outside_bits(loops)).any(axis=1)
        with _MATRICES_LOCK:
            if len(tm.tails_inside) < 256:
                tm.tails_inside[key] = cached
    return cached


def _outside_bits(loops: np.ndarray) -> np.ndarray:
    """The bytes NOT in a 256-entry boolean set, as 4 x uint64, ready to test token
    byte sets against: `(presence & outside).any(axis=1)` is False for tokens inside."""
    return ~np.packbits(loops, bitorder="little").view("<u8")


_MATRICES: dict[str, TokenMatrix] = {}
_MATRICES_LOCK = threading.Lock()


def token_matrix(vocab) -> TokenMatrix:
    """The shared TokenMatrix of a vocabulary (built once per vocabulary fingerprint)."""
    key = vocab.fingerprint
    with _MATRICES_LOCK:
        tm = _MATRICES.get(key)
        if tm is None:
            tm = TokenMatrix(vocab)
            _MATRICES[key] = tm
        return tm


@dataclass(frozen=True)
class StateTokens:
    """What one DFA state allows: the packed mask (EOS included when accepting).
    The next state of an allowed token is found by walking its bytes through the DFA
    table, whose rows on that path the mask computation has already built; the matcher
    remembers each walk's end in `next_state` (allowed, non-EOS tokens only)."""

    words: np.ndarray
    num_allowed: int
    next_state: dict[int, int] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Slice:
    """For states with the same first-byte set and self-loop byte set: the tokens made
    only of self-loop bytes (allowed, ending where they began: `inside_*`) and the rows
    that must still be walked. Shared by every such state of every grammar."""

    walk_rows: np.ndarray
    inside_ids: np.ndarray
    inside_words: np.ndarray


def _slice(tm: TokenMatrix, first_ok: np.ndarray, loops: np.ndarray) -> Slice:
    key = (np.packbits(first_ok).tobytes(), np.packbits(loops).tobytes())
    cached = tm.slices.get(key)
    if cached is not None:
        return cached
    n = len(tm.token_ids)
    if tm.count_by_first_byte[first_ok].sum() * 4 < n:
        buckets = [tm.rows_by_first_byte[b] for b in np.flatnonzero(first_ok)]
        rows = np.sort(np.concatenate(buckets)) if buckets else np.zeros(0, np.int64)
    else:
        rows = np.flatnonzero(first_ok[tm.columns[0]])
    inside = np.zeros(0, np.int64)
    if loops.any():
        outside = _outside_bits(loops)
        stays = ~(tm.presence[rows] & outside).any(axis=1)
        inside, rows = rows[stays], rows[~stays]
    inside_ids = tm.token_ids[inside]
    result = Slice(rows, inside_ids, pack_ids(inside_ids, tm.vocab_size))
    with _MATRICES_LOCK:
        if len(tm.slices) < 4096:
            tm.slices[key] = result
    return result


def walk_tokens(dfa: LazyDFA, tm: TokenMatrix, sid: int) -> tuple[Slice, np.ndarray, np.ndarray]:
    """Run every token from state `sid`. Returns the state's slice (tokens that loop on
    `sid` without being walked) and (token ids, end states) of the walked tokens that stay
    inside the language. Vectorized: one gather per byte position."""
    dfa.expand(sid)
    row = dfa.table[sid]
    piece = _slice(tm, row >= 0, row == sid)
    rows = piece.walk_rows
    states = row[tm.columns[0][rows]]
    done_rows, done_states = [], []
    for j in range(1, tm.max_len + 1):
        # rows (sorted by length) that end at byte j are a prefix of `rows`.
        k = int(np.searchsorted(tm.lengths[rows], j, side="right"))
        if k:
            done_rows.append(rows[:k])
            done_states.append(states[:k])
            rows, states = rows[k:], states[k:]
        if rows.size == 0 or j == tm.max_len:
            break
        dfa.ensure_expanded(states)
        if j == 1 and rows.size > 512:
            rows, states = _finish_looping(dfa, tm, rows, states, done_rows, done_states)
        states = dfa.table[states, tm.columns[j][rows]]
        keep = states >= 0
        rows, states = rows[keep], states[keep]
    if not done_rows:
        return piece, np.zeros(0, np.int64), np.zeros(0, np.int32)
    return piece, tm.token_ids[np.concatenate(done_rows)], np.concatenate(done_states)


def _finish_looping(dfa, tm, rows, states, done_rows, done_states):
    """After the first byte: tokens whose remaining bytes all loop on the state they
    reached end there. Checked for the states many tokens reached (e.g. the body of a
    key after its opening quote); the other rows are returned to be walked on."""
    counts = np.bincount(states)
    for state in np.flatnonzero(counts > 256).tolist():
        loops = dfa.table[state] == state
        if not loops.any():
            continue
        here = np.flatnonzero(states == state)
        stays = here[_tails_inside(tm, loops)[rows[here]]]
        done_rows.append(rows[stays])
        done_states.append(states[stays])
        keep = np.ones(rows.size, dtype=bool)
        keep[stays] = False
        rows, states = rows[keep], states[keep]
    return rows, states


def state_tokens(dfa: LazyDFA, tm: TokenMatrix, sid: int) -> StateTokens:
    piece, ids, ends = walk_tokens(dfa, tm, sid)
    extra = ids
    if dfa.accepting[sid] and tm.eos_ids.size:
        extra = np.concatenate([ids, tm.eos_ids])
    words = pack_ids(extra, tm.vocab_size)
    if piece.inside_ids.size:
        words = words | piece.inside_words
    return StateTokens(words=words, num_allowed=int(extra.size + piece.inside_ids.size))
