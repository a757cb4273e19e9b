"""A lazy DFA whose closures and rows are built in compiled code (numba).

Owns: the flattening of an `ir.Node` graph into arrays (`FlatIR`), and `FlatDFA`, a
lazily determinized automaton over it with the table interface of `dfa.LazyDFA`
(`table`, `expanded`, `loops`, `accepting`, `expand`). The semantics are those of
`nfa.LazyNFA`: an item is a leaf (a byte of a `Bytes`, a `ByteSet`) with an interned
continuation (a chain of frames: the rest of a Concat, its last item, the next
iteration of a Repeat, the next state of a Graph), `Ref`s are entered with the
continuation they were reached with (a pushdown automaton), and a DFA state is a set of
items. Only the representation differs: nodes, frames, items and item sets are
integers in arrays and typed dicts, so building a row -- the closures of what each
byte leads to, their unions, interning them as states -- runs as machine code instead
of as Python objects (a first visit of a grammar state builds ~10 rows, ~100 us each in
Python: most of the time of the slowest mask steps).

`Members` (objects in any order) are entered like a Graph whose state -- the mask of
entries written and the member count -- is computed instead of listed (2^n of them):
it is the index of the frame. A mask too wide for that index (an object of more than
~60 properties) is interned instead, as a chain of frames holding its words
(`_wide_mask`). What it does not take: IRs past MAX_FLAT_NODES, and `Members` with a
count bound past 2^24; it says so (`FlatUnsupported`) and the compiler keeps the Python
automaton. A `Stepper` is flattened as its `plain()` Graph,
and lexemes as the basic nodes they are (the Python automaton's key-prefix rows and
shared lexeme DFA do not apply here). Free bytes do: where a closure passes a graph
state that declares some (`ir.Graph.free`, the trie of a StringExcept), it adds a marker
item (a negative leaf: the row of `bitsets` holding them), which reads no byte and
tells `FlatDFA.free_bytes` what the state takes unwalked. A graph that counts characters
(`ir.Counted`: a pattern under a maxLength) is flattened with its twin, which does not
count; `FlatDFA.twin_of` rewrites a state whose count cannot bind within a token into the
twin's state, whose mask it shares.

The compiler's default (STRUCTGEN_AUTOMATON=python selects the Python one). The IR is
flattened at compile time, in Python; nodes that several grammars share are flattened
once per process (`SHARED`). The store is numpy arrays grown by the Python side between
calls (`FlatDFA.run`); the token walk drives `expand_rows` from compiled code
(`tokens._walk_building`).
Must not know about tokens, vocabularies or the engine.
"""

from __future__ import annotations

import hashlib
import pathlib
import threading

import numba
import numpy as np

from numba.core import cgutils, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from structgen.automata.dfa import DEAD, TableDFA
from structgen.automata.nfa import MAX_RULE_NESTING, MAX_STATE_ITEMS, LazyNFA, too_ambiguous
from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.charset import json_body_ir

K_BYTES, K_BYTESET, K_CONCAT, K_ALT, K_REPEAT, K_GRAPH, K_REF, K_MEMBERS = range(8)
F_C, F_L, F_R, F_G, F_M = 1, 2, 3, 4, 5  # frame kinds: rest of a Concat, last item, Repeat, Graph state, Members state
F_W = 6  # a word of a wide Members mask: never a continuation, only a mask's handle (`_wide_mask`)
OP_ENTER, OP_RESUME, OP_GRAPH, OP_MEMBERS = 0, 1, 2, 3  # closure work items
# A Members node's record in `kids`, after its entries' first and later forms (n each);
# R_WORDS is 0 where the mask fits the state's index, else its number of words, and the
# required entries' mask follows it, in one word or in R_WORDS of them:
R_CLOSE_NONE, R_CLOSE_SOME, R_EXTRA_FIRST, R_EXTRA_LATER, R_MIN, R_MAX, R_WORDS, R_REQUIRED = range(8)
MASK_BITS = 62  # entries per word of a Members mask (a narrow mask is one word)
MAX_MEMBERS_CAP_BITS = 24  # a wide mask's handle (a frame id) times the count's cap stays in an int64
DONE = 0  # the empty continuation (frame 0)
# Per graph state of a graph that counts characters (`ir.Counted`): its twin graph's
# node and the twin state (-1, -1 where it has none), its count, and its zone's top.
G_TWIN_NODE, G_TWIN_STATE, G_COUNT, G_ZONE_TOP = range(4)
G_COUNTED_FIELDS = 4
ACCEPT = 0  # item 0: the whole input matched (the smallest id: first in a sorted set)
MAX_FLAT_NODES = 200_000  # past this the IR is flattened too slowly for a compile
# numba's cache keys a function's machine code by its own bytecode, not by the compiled
# functions of other modules it calls and links in: code elsewhere that calls into
# this module (tokens._walk_building) puts this stamp in its key, or an edit of this
# file would leave it running the old rows from the cache.
CODE_STAMP = int.from_bytes(hashlib.sha256(pathlib.Path(__file__).read_bytes()).digest()[:7], "big")


class FlatUnsupported(Exception):
    """The IR uses a node kind the flat automaton does not take (the caller keeps the
    Python one)."""


class _Block:
    """Flattened nodes (see FlatIR for the fields) as numpy arrays, the id of each IR
    node object, and which nodes and graph states are live. Immutable once made.

    `raw` holds the fields as flattened; the attributes are what the compiled code
    takes, which wants no empty array (a block without graphs gets a dummy state)."""

    def __init__(self, ids: dict[int, int], bitset_of: dict[tuple, int], raw: tuple[np.ndarray, ...],
                 known: "_Block | None"):
        self.ids = ids
        self.bitset_of = bitset_of  # ranges (or ("bits", n)) -> row of `bitsets`
        self.raw = raw
        (kind, a, b, c, kids, data, bitsets, g_final, g_edge_end, g_dst, g_label, g_free, g_counted, node_twin) = raw
        self.num_nodes, self.num_graph_states = kind.size, g_final.size
        self.kind, self.a, self.b, self.c, self.kids = kind, a, b, c, kids
        self.node_twin = node_twin if node_twin.size else np.full(1, -1, np.int64)
        self.data = data if data.size else np.zeros(1, np.uint8)
        self.bitsets = bitsets if bitsets.shape[0] else np.zeros((1, 4), np.uint64)
        self.g_final, self.g_free, self.g_counted = g_final, g_free, g_counted
        self.g_edge_start = np.concatenate([np.zeros(1, dtype=np.int64), g_edge_end])
        if not g_final.size:
            self.g_final, self.g_free = np.zeros(1, np.bool_), np.full(1, -1, np.int64)
            self.g_counted = np.full((1, G_COUNTED_FIELDS), -1, np.int64)
            self.g_edge_start = np.zeros(2, np.int64)
        self.g_dst, self.g_label = (g_dst, g_label) if g_dst.size else (np.zeros(1, np.int64), np.zeros(1, np.int64))
        # Liveness: settled for the nodes of `known` (which this block starts with),
        # worked out here for the others only.
        if known is None or known.num_nodes == self.num_nodes:  # nothing to work out
            self.nonempty = known.nonempty if known is not None else np.zeros(0, np.bool_)
            self.g_live = known.g_live if known is not None else np.zeros(1, np.bool_)
        else:
            self.nonempty, self.g_live = _liveness(
                kind, a, b, c, kids, self.g_final, self.g_edge_start, self.g_dst, self.g_label,
                known.nonempty[: known.num_nodes], known.g_live[: known.num_graph_states])


_EMPTY_BLOCK = _Block({}, {}, (
    *(np.zeros(0, dtype=np.int64) for _ in range(5)), np.zeros(0, dtype=np.uint8), np.zeros((0, 4), dtype=np.uint64),
    np.zeros(0, dtype=np.bool_), *(np.zeros(0, dtype=np.int64) for _ in range(4)),
    np.zeros((0, G_COUNTED_FIELDS), dtype=np.int64), np.zeros(0, dtype=np.int64),
), None)


class _Flattener:
    """Flattens the nodes reachable from some roots that `base` does not hold, after
    it: their ids and pool offsets continue where the base's end."""

    def __init__(self, base: _Block):
        self.base = base
        raw = base.raw
        self._first = raw[0].size  # the first id (and so on) this flattener gives
        self._kids0, self._data0, self._bitsets0 = raw[4].size, raw[5].size, raw[6].shape[0]
        self._graph0, self._edges0 = raw[7].size, raw[9].size
        self.ids: dict[int, int] = {}
        self.bitset_of: dict[tuple, int] = {}
        self.kind: list[int] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.c: list[int] = []
        self.kids: list[int] = []
        self.data = bytearray()
        self.bitsets: list[tuple[int, int, int, int]] = []
        self.g_final: list[bool] = []
        self.g_edge_end: list[int] = []  # per graph state, one past its last edge
        self.g_dst: list[int] = []
        self.g_label: list[int] = []
        self.g_free: list[int] = []  # per graph state, the row of `bitsets` of its free bytes, or -1
        self.g_counted: list[tuple[int, ...]] = []  # per graph state, see G_COUNTED_FIELDS
        self.node_twin: list[int] = []  # per node, a bounded Repeat's twin (`ir.Repeat.twin`), or -1

    def id_of(self, node: ir.Node) -> int:
        key = id(node)
        got = self.ids.get(key)
        return self.base.ids[key] if got is None else got

    def new_nodes(self, root: ir.Node, limit: int) -> tuple[list[ir.Node], list[ir.Stepper]]:
        """The nodes reachable from `root` that have no id yet, and the Steppers among
        them (kept apart: a Stepper takes the id of its plain() form)."""
        order: list[ir.Node] = []
        steppers: list[ir.Stepper] = []
        met: set[int] = set()
        known, base = self.ids, self.base.ids
        pending = [root]
        while pending:  # iteratively: IR trees nest deep
            node = pending.pop()
            key = id(node)
            if key in known or key in base or key in met:
                continue
            met.add(key)
            if isinstance(node, ir.Stepper):
                steppers.append(node)
                pending.append(node.plain())
                continue
            if isinstance(node, ir.Members) and _wide(node) and (node.cap + 1).bit_length() > MAX_MEMBERS_CAP_BITS:
                raise FlatUnsupported(f"objects in any order with {len(node.firsts)} properties and up to {node.cap}")
            if len(order) >= limit:
                raise FlatUnsupported(f"more than {limit:,} IR nodes")
            order.append(node)
            pending.extend(_children(node))
        return order, steppers

    def add(self, nodes: list[ir.Node], steppers: list[ir.Stepper]) -> None:
        """Give `nodes` the next ids and `steppers` their plain forms' ids, then fill in
        the nodes' fields: rules may refer to themselves, so every id must exist before
        any node lists its children."""
        start = len(self.kind)
        for offset, node in enumerate(nodes):
            self.ids[id(node)] = self._first + start + offset
        for stepper in steppers:
            self.ids[id(stepper)] = self.id_of(stepper.plain())
        n = len(nodes)
        self.kind += [0] * n
        self.a += [0] * n
        self.b += [0] * n
        self.c += [-1] * n
        self.node_twin += [-1] * n
        for offset, node in enumerate(nodes):
            self._fill(start + offset, node)

    def _fill(self, i: int, node: ir.Node) -> None:
        """Write node `node`'s fields at index i of the own lists."""
        if isinstance(node, ir.Bytes):
            self.kind[i] = K_BYTES
            self.a[i], self.b[i] = self._data0 + len(self.data), len(node.data)
            self.data += node.data
        elif isinstance(node, ir.ByteSet):
            self.kind[i] = K_BYTESET
            self.a[i] = self._bitset_row(node.ranges)
        elif isinstance(node, (ir.Concat, ir.Alt)):
            self.kind[i] = K_CONCAT if isinstance(node, ir.Concat) else K_ALT
            self.a[i], self.b[i] = self._kids0 + len(self.kids), len(node.items)
            self.kids += [self.id_of(k) for k in node.items]
        elif isinstance(node, ir.Repeat):
            self.kind[i] = K_REPEAT
            self.a[i], self.b[i] = self.id_of(node.item), node.min
            self.c[i] = -1 if node.max is None else node.max
            if node.twin is not None:
                self.node_twin[i] = self.id_of(node.twin)
        elif isinstance(node, ir.Graph):
            self.kind[i] = K_GRAPH
            self.a[i], self.b[i], self.c[i] = self._graph0 + len(self.g_final), node.start, node.num_states
            finals = set(node.finals)
            edges: list[list] = [[] for _ in range(node.num_states)]
            for src, dst, label in node.edges:
                edges[src].append((dst, -1 if label is None else self.id_of(label)))
            counted = node.counted
            twin = -1 if counted is None else self.id_of(counted.twin)
            for state in range(node.num_states):
                if counted is None or counted.twin_state[state] < 0:
                    self.g_counted.append((-1, -1, 0, 0))
                else:
                    self.g_counted.append((twin, counted.twin_state[state], counted.count[state], counted.zone_top))
                self.g_final.append(state in finals)
                self.g_free.append(self._bits_row(node.free[state]) if node.free and node.free[state] else -1)
                for dst, label in edges[state]:
                    self.g_dst.append(dst)
                    self.g_label.append(label)
                self.g_edge_end.append(self._edges0 + len(self.g_dst))
        elif isinstance(node, ir.Ref):
            self.kind[i] = K_REF
            self.a[i] = self.id_of(node.target)
        elif isinstance(node, ir.Members):
            self.kind[i] = K_MEMBERS
            self.a[i], self.b[i], self.c[i] = self._kids0 + len(self.kids), len(node.firsts), node.cap
            self.kids += [self.id_of(k) for k in (*node.firsts, *node.laters, node.close_none, node.close_some)]
            self.kids += [-1 if k is None else self.id_of(k) for k in (node.extra_first, node.extra_later)]
            self.kids += [node.min_count, -1 if node.max_count is None else node.max_count]
            words = -(-len(node.firsts) // MASK_BITS) if _wide(node) else 0
            self.kids.append(words)
            self.kids += [node.required_mask >> (MASK_BITS * w) & ((1 << MASK_BITS) - 1) for w in range(max(words, 1))]
        else:
            raise FlatUnsupported(f"IR node {type(node).__name__}")

    def _bitset_row(self, ranges: tuple) -> int:
        """The row of `bitsets` holding the bytes of `ranges` (added if new)."""
        row = self.bitset_of.get(ranges)
        if row is None:
            row = self.base.bitset_of.get(ranges)
        if row is None:
            bits = 0
            for lo, hi in ranges:
                bits |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
            row = self._bits_row(bits, ranges)
        return row

    def _bits_row(self, bits: int, key=None) -> int:
        """The row of `bitsets` holding byte set `bits` (bit b for byte b), added if new."""
        key = key if key is not None else ("bits", bits)
        row = self.bitset_of.get(key)
        if row is None:
            row = self.base.bitset_of.get(key)
        if row is None:
            row = self.bitset_of[key] = self._bitsets0 + len(self.bitsets)
            self.bitsets.append(tuple((bits >> (64 * w)) & 0xFFFF_FFFF_FFFF_FFFF for w in range(4)))
        return row

    def block(self, with_ids: bool = True) -> _Block:
        """The base and the nodes added here, as one block. A block that no flattener
        will start from needs no ids (merging the shared block's is ~1 ms)."""
        own = (self.kind, self.a, self.b, self.c, self.kids, np.frombuffer(bytes(self.data), dtype=np.uint8),
               self.bitsets, self.g_final, self.g_edge_end, self.g_dst, self.g_label, self.g_free, self.g_counted,
               self.node_twin)
        raw = tuple(old if not len(new) else np.concatenate([old, np.asarray(new, dtype=old.dtype).reshape(-1, *old.shape[1:])])
                    for old, new in zip(self.base.raw, own))
        if not with_ids:
            return _Block({}, {}, raw, self.base)
        return _Block({**self.base.ids, **self.ids}, {**self.base.bitset_of, **self.bitset_of}, raw, self.base)


def _wide(node: ir.Members) -> bool:
    """Whether a Members node's states (mask, count) do not fit one int64 as
    mask * (cap + 1) + count: its mask is then interned (`_wide_mask`)."""
    return (len(node.firsts) + 1) + (node.cap + 1).bit_length() > 62


def _children(node: ir.Node) -> list[ir.Node]:
    if isinstance(node, (ir.Concat, ir.Alt)):
        return list(node.items)
    if isinstance(node, ir.Repeat):
        return [node.item] if node.twin is None else [node.item, node.twin]
    if isinstance(node, ir.Graph):
        twin = [] if node.counted is None else [node.counted.twin]
        return [lab for _, _, lab in node.edges if lab is not None] + twin
    if isinstance(node, ir.Ref):
        return [node.target]
    if isinstance(node, ir.Stepper):
        return [node.plain()]
    if isinstance(node, ir.Members):
        return node.children()
    return []


class FlatIR:
    """An IR graph as arrays: per node id its kind and three ints (a, b, c), with pools.

    BYTES a = offset in `data`, b = length;  BYTESET a = row of `bitsets` (4 x u64);
    CONCAT a = offset in `kids`, b = count;  ALT the same;
    REPEAT a = item, b = min, c = max (-1: unbounded);  REF a = target;
    GRAPH a = offset of its states in the graph pools, b = start state, c = states. Graph
    state g (offset + state) is final when `g_final[g]`; its edges are
    `g_edge_start[g]:g_edge_start[g + 1]` into `g_dst`, `g_label` (-1: epsilon);
    `g_free[g]`: the row of `bitsets` of its free bytes, or -1.
    MEMBERS a = offset in `kids` of its record, b = entries (n), c = cap on the count:
    the record is the n entries as first member, the n as later member, then the
    fields R_CLOSE_NONE ... R_REQUIRED (node ids, -1 for no extra member; min and max
    count, -1: no max; the mask's words and the required mask, see R_WORDS). Its state
    (mask, count) is mask * (cap + 1) + count, the mask its bits where they fit (entry i
    is bit i), else a handle (`_wide_mask`).
    `nonempty[n]`: the node's language has a string; `g_live[g]`: an end of the graph
    can be reached from state g. The automaton enters only such nodes and states, so
    every item can reach acceptance.

    The first ids are the nodes shared between grammars (`SHARED`), whether this one
    uses them or not; only the others are flattened here."""

    def __init__(self, root: ir.Node):
        flattener = _Flattener(SHARED.base())
        nodes, steppers = flattener.new_nodes(root, MAX_FLAT_NODES)
        flattener.add(nodes, steppers)
        self.root = flattener.id_of(root)
        SHARED.met(nodes, steppers)
        block = flattener.block(with_ids=False)
        self.num_nodes = block.num_nodes
        self.nonempty = block.nonempty
        self.has_free = bool((block.g_free >= 0).any())
        # (not in `arrays`: only the twin check reads them, `_twin_of` from `FlatDFA.twin_of`
        # and from a mask's call, `tokens.state_tokens`)
        self.g_counted, self.node_twin = block.g_counted, block.node_twin
        self.has_counted = bool((block.g_counted[:, G_TWIN_NODE] >= 0).any() or (block.node_twin >= 0).any())
        # The node of any JSON string body, where this IR has it: a state in such a body
        # takes its mask from tables made once per vocabulary (`_body_exit`).
        body = id(json_body_ir())
        self.body_node = flattener.ids.get(body, flattener.base.ids.get(body, -1))
        self.arrays = (
            block.kind, block.a, block.b, block.c, block.kids, block.data, block.bitsets, block.nonempty,
            block.g_final, block.g_edge_start, block.g_dst, block.g_label, block.g_live, block.g_free,
        )


class _SharedNodes:
    """The IR nodes that more than one grammar holds (the same objects: a JSON string's
    characters, number lexemes, the rules of any JSON value, memoized by the grammar
    builders), flattened once per process into a block every FlatIR starts with: about
    70% of the nodes of a JSON schema's IR are shared, and flattening is Python, a few
    us a node.

    A node is shared the second time a FlatIR meets it. The nodes met once are held
    (their ids must not be reused by other objects while counted) up to MAX_SIGHTINGS,
    then forgotten; the shared block stops growing at MAX_NODES, since every FlatIR
    copies it (~50 bytes a node) into its own arrays."""

    MAX_SIGHTINGS = 100_000
    MAX_NODES = 10_000

    def __init__(self):
        self._lock = threading.Lock()
        self._block = _EMPTY_BLOCK
        self._met_once: dict[int, ir.Node] = {}
        self._alive: list[ir.Node] = []  # the nodes whose ids the block holds

    def base(self) -> _Block:
        return self._block

    def met(self, nodes: list[ir.Node], steppers: list[ir.Stepper]) -> None:
        """Count the new nodes of a FlatIR; add to the block those met before whose
        descendants are all shared."""
        with self._lock:
            if self._block.num_nodes >= self.MAX_NODES:
                return
            if len(self._met_once) > self.MAX_SIGHTINGS:
                self._met_once.clear()
            again: dict[int, ir.Node] = {}
            for node in [*nodes, *steppers]:
                key = id(node)
                if key in self._block.ids:
                    continue
                if self._met_once.pop(key, None) is node:
                    again[key] = node
                else:
                    self._met_once[key] = node
            self._drop_unshared_below(again)
            if again:
                flattener = _Flattener(self._block)
                flattener.add([n for n in again.values() if not isinstance(n, ir.Stepper)],
                              [n for n in again.values() if isinstance(n, ir.Stepper)])
                self._alive += again.values()
                self._block = flattener.block()  # a new block: FlatIRs being built hold the old

    def _drop_unshared_below(self, again: dict[int, ir.Node]) -> None:
        """Remove from `again` every node with a descendant that is neither in the block
        nor in `again`: one pass that drops the nodes with an unshared child, then their
        parents in `again`, and so on upwards."""
        known = self._block.ids
        parents: dict[int, list[int]] = {}
        dropped: list[int] = []
        for key, node in again.items():
            for child in _children(node):
                child_key = id(child)
                if child_key in again:
                    parents.setdefault(child_key, []).append(key)
                elif child_key not in known:
                    dropped.append(key)
        while dropped:
            key = dropped.pop()
            if again.pop(key, None) is not None:
                dropped += parents.get(key, ())


SHARED = _SharedNodes()


@numba.njit(nogil=True, cache=True, inline="always")
def _bit_count(x):
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@numba.njit(nogil=True, cache=True)
def _members_live(a, b, kids, nonempty, x, words, count):
    """Whether Members node `x` can still be closed from state (mask `words`, count):
    every missing required entry has a value, and the count can land in min..max (see
    `LazyNFA.members_live`)."""
    n = b[x]
    record = a[x] + 2 * n
    missing = 0  # required entries not written yet
    open_ = 0  # entries not written yet that have a value
    for i in range(n):
        w, bit = i // MASK_BITS, np.int64(1) << (i % MASK_BITS)
        if words[w] & bit:
            continue
        has_value = nonempty[kids[a[x] + i]]
        if kids[record + R_REQUIRED + w] & bit:
            if not has_value:
                return False
            missing += 1
        if has_value:
            open_ += 1
    most = kids[record + R_MAX]
    if most >= 0 and count + missing > most:
        return False
    extra = kids[record + R_EXTRA_FIRST]
    return (extra >= 0 and nonempty[extra]) or count + open_ >= kids[record + R_MIN]


@numba.njit(nogil=True, cache=True)
def _liveness(kind, a, b, c, kids, g_final, g_edge_start, g_dst, g_label, known_nonempty, known_g_live):
    """Which nodes have a non-empty language, and from which graph states an end can be
    reached through edges whose labels do: a least fixpoint (rules may refer to
    themselves; `a: "x" a` alone produces nothing). Children are numbered after their
    parents, so a pass from the last node to the first settles a tree at once. The
    first nodes and graph states are settled already (`known_*`: a shared block, whose
    nodes refer to none after them)."""
    n, n0 = kind.size, known_nonempty.size
    nonempty = np.zeros(n, dtype=np.bool_)
    nonempty[:n0] = known_nonempty
    g_live = np.zeros(g_final.size, dtype=np.bool_)
    g_live[: known_g_live.size] = known_g_live
    changed = True
    while changed:
        changed = False
        for x in range(n - 1, n0 - 1, -1):
            k = kind[x]
            if k == K_GRAPH:
                base = a[x]
                grew = True
                while grew:
                    grew = False
                    for s in range(c[x]):
                        g = base + s
                        if g_live[g]:
                            continue
                        live = g_final[g]
                        for e in range(g_edge_start[g], g_edge_start[g + 1]):
                            if g_live[base + g_dst[e]] and (g_label[e] < 0 or nonempty[g_label[e]]):
                                live = True
                                break
                        if live:
                            g_live[g] = True
                            grew = changed = True
                value = g_live[base + b[x]]
            elif nonempty[x]:
                continue
            elif k == K_BYTES or k == K_BYTESET:
                value = True
            elif k == K_CONCAT:
                value = True
                for i in range(b[x]):
                    value = value and nonempty[kids[a[x] + i]]
            elif k == K_ALT:
                value = False
                for i in range(b[x]):
                    value = value or nonempty[kids[a[x] + i]]
            elif k == K_REPEAT:
                value = b[x] == 0 or nonempty[a[x]]
            elif k == K_MEMBERS:
                no_member = np.zeros(max(kids[a[x] + 2 * b[x] + R_WORDS], 1), np.int64)
                value = _members_live(a, b, kids, nonempty, x, no_member, 0)
            else:  # K_REF
                value = nonempty[a[x]]
            if value and not nonempty[x]:
                nonempty[x] = True
                changed = True
    return nonempty, g_live


# ----------------------------------------------------------------- the mutable store

# The store: every table one automaton grows, as numpy arrays (numba takes arrays from
# Python in ~0.1 us each; a typed dict or list costs ~10 us a call). `meta` holds the
# counts; one open-addressing hash table maps keys (tag, k1, k2, k3, k4) to ints.
# The compiled functions below that work a row take the arrays out of the `g` (IR) and
# `st` (store) tuples once and hand them to small helpers inlined into them
# (inline="always"): a helper called with a tuple, or a tuple element taken inside a
# loop, costs an atomic reference count increment and decrement per array, which was
# close to half of a row's time. The entries now hand the arrays on borrowed (no
# reference count to keep: `_borrowed`), which leaves each such count a call that tests
# a null pointer, but the helpers and loops stay as they were: a call is still a call.
M_FRAMES, M_ITEMS, M_SETS, M_SET_ITEMS, M_STATES, M_HASHED, M_FAILED = range(7)
# A call that cannot go on -- an array is full, or the grammar is too ambiguous or
# nests too deep -- records why in meta[M_FAILED] (`_fail`), writes nothing more, and
# returns up the chain to `FlatDFA.run`, which grows the array and runs it again or
# raises the error. Nothing here raises: numba leaks a reference to every array passed
# to a non-inlined function that an exception passes through, so each growth would pin
# the arrays it replaced for good. Growth codes are 1 + the count that is full.
GROW_FRAMES, GROW_ITEMS, GROW_SETS, GROW_SET_ITEMS, GROW_STATES, GROW_HASH = range(1, 7)
FAILED_AMBIGUOUS, FAILED_NESTING = 7, 8
(S_META, S_FRAMES, S_ITEMS, S_SET_START, S_SET_ITEMS, S_STATE_SET, S_STATE_NEXT, S_HASH) = range(8)
T_FRAME, T_ITEM, T_CLOSURE, T_SINGLE, T_STATE_OF_SET, T_STATE_HASH = range(6)
# Columns of a frame past its key (kind, node, index, parent), and of an item past its
# key (leaf, offset, frame, 0): what is worked out from them once (-1 until then).
FRAME_RESUMED = 4  # the set of items its resumption reaches
ITEM_TARGET, ITEM_TARGET_STATE = 4, 5  # the set the item's byte leads to, and its state
HASH_VALUE = 5  # a hash slot: tag, 4 keys, value (-1: empty), in one row (one cache line)


def _new_store() -> list[np.ndarray]:
    meta = np.zeros(8, dtype=np.int64)
    meta[M_FRAMES] = meta[M_ITEMS] = 1  # frame 0 is DONE, item 0 is ACCEPT
    return [
        meta,
        np.full((1024, 5), -1, dtype=np.int64),  # frames: kind, node, index, parent; resumed
        np.full((1024, 6), -1, dtype=np.int64),  # items: leaf, offset, frame, 0; target, its state
        np.zeros(1025, dtype=np.int64),  # set s is set_items[set_start[s]:set_start[s + 1]]
        np.zeros(8192, dtype=np.int64),
        np.zeros(1024, dtype=np.int64),  # state -> its set
        np.zeros(1024, dtype=np.int64),  # state -> older state with the same item hash (-1)
        np.full((8192, 6), -1, dtype=np.int64),  # hash slots: tag, keys, value
    ]


def _grown(store: list[np.ndarray], what: int) -> None:
    """Double the array a numba call ran out of (its count: `meta[what]`), in place in
    `store`."""
    if what == M_HASHED:
        old = store[S_HASH]
        store[S_HASH] = np.full((2 * old.shape[0], 6), -1, dtype=np.int64)
        _rehash(old, store[S_HASH])
        return
    index = {M_FRAMES: S_FRAMES, M_ITEMS: S_ITEMS, M_SETS: S_SET_START, M_SET_ITEMS: S_SET_ITEMS}.get(what)
    for i in (index,) if index is not None else (S_STATE_SET, S_STATE_NEXT):
        old = store[i]
        new = np.full((2 * old.shape[0], *old.shape[1:]), -1, dtype=np.int64)
        new[: old.shape[0]] = old
        store[i] = new


@numba.njit(nogil=True, cache=True, inline="always")
def _fail(meta, code):
    """Stop the call (see M_FAILED); the first reason stays."""
    if meta[M_FAILED] == 0:
        meta[M_FAILED] = code


@numba.njit(nogil=True, cache=True, inline="always")
def _slot(slots, tag, k1, k2, k3, k4):
    """The slot of a key in the hash table, or of the empty slot where it would go."""
    h = np.uint64(tag + 1) * np.uint64(0x9E3779B97F4A7C15)
    for k in (k1, k2, k3, k4):
        h = (h ^ np.uint64(k)) * np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    mask = slots.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    while slots[i, HASH_VALUE] >= 0:
        if slots[i, 0] == tag and slots[i, 1] == k1 and slots[i, 2] == k2 and slots[i, 3] == k3 and slots[i, 4] == k4:
            return i
        i = (i + 1) & mask
    return i


@numba.njit(nogil=True, cache=True, inline="always")
def _hget(slots, tag, k1, k2, k3, k4):
    """The value of a key, or -1."""
    return slots[_slot(slots, tag, k1, k2, k3, k4), HASH_VALUE]


@numba.njit(nogil=True, cache=True, inline="always")
def _hroom(meta, slots):
    """Whether the call may add a key: it has not failed, and one more key fits below
    half load (else it fails, to have the table grown)."""
    if 2 * (meta[M_HASHED] + 1) > slots.shape[0]:
        _fail(meta, GROW_HASH)
    return meta[M_FAILED] == 0


@numba.njit(nogil=True, cache=True, inline="always")
def _hset(meta, slots, i, tag, k1, k2, k3, k4, value):
    """Give a key its value at the slot `_slot` found for it (after `_hroom`)."""
    if slots[i, HASH_VALUE] < 0:
        meta[M_HASHED] += 1
        slots[i, 0], slots[i, 1], slots[i, 2], slots[i, 3], slots[i, 4] = tag, k1, k2, k3, k4
    slots[i, HASH_VALUE] = value


@numba.njit(nogil=True, cache=True, inline="always")
def _hput(meta, slots, tag, k1, k2, k3, k4, value):
    """Set a key's value (after `_hroom`)."""
    _hset(meta, slots, _slot(slots, tag, k1, k2, k3, k4), tag, k1, k2, k3, k4, value)


@numba.njit(nogil=True, cache=True)
def _rehash(slots, new_slots):
    for i in range(slots.shape[0]):
        if slots[i, HASH_VALUE] >= 0:
            new_slots[_slot(new_slots, slots[i, 0], slots[i, 1], slots[i, 2], slots[i, 3], slots[i, 4])] = slots[i]


@numba.njit(nogil=True, cache=True, inline="always")
def _row_of(meta, slots, rows, tag, k1, k2, k3, k4):
    """The id of the frame (`tag` = T_FRAME, `rows` the frames: kind, node, index,
    parent) or the item (T_ITEM, the items: leaf, offset, frame, 0) with these fields,
    added if new; 0 (a row that exists) once the call has failed."""
    count = M_FRAMES if tag == T_FRAME else M_ITEMS
    if not _hroom(meta, slots):  # before the slot is found: a growth moves the slots
        return 0
    slot = _slot(slots, tag, k1, k2, k3, k4)
    row = slots[slot, HASH_VALUE]
    if row < 0:
        row = meta[count]
        if row >= rows.shape[0]:
            _fail(meta, 1 + count)
            return 0
        rows[row, 0], rows[row, 1], rows[row, 2], rows[row, 3] = k1, k2, k3, k4
        meta[count] += 1
        _hset(meta, slots, slot, tag, k1, k2, k3, k4, row)
    return row


@numba.njit(nogil=True, cache=True, inline="always")
def _frame(meta, slots, frames, kind, node, index, parent):
    return _row_of(meta, slots, frames, T_FRAME, kind, node, index, parent)


@numba.njit(nogil=True, cache=True, inline="always")
def _item(meta, slots, items, leaf, offset, cont):
    return _row_of(meta, slots, items, T_ITEM, leaf, offset, cont, 0)


@numba.njit(nogil=True, cache=True, inline="always")
def _then(kind, a, b, c, kids, meta, slots, frames, concat, index, parent):
    """The continuation after item `index - 1` of a Concat (see `LazyNFA._then`)."""
    n = b[concat]
    if index >= n:
        return parent
    if index == n - 1:
        last = kids[a[concat] + index]
        if kind[last] == K_REPEAT and b[last] == 0 and c[last] < 0:
            return _frame(meta, slots, frames, F_R, last, 0, parent)
        return _frame(meta, slots, frames, F_L, last, 0, parent)
    return _frame(meta, slots, frames, F_C, concat, index, parent)


@numba.njit(nogil=True, cache=True, inline="always")
def _pool(meta, set_start, set_pool, items):
    """Store a sorted item array in the set pool; returns its set id (0 once the call
    has failed)."""
    ref, used = meta[M_SETS], meta[M_SET_ITEMS]
    if ref + 1 >= set_start.size:
        _fail(meta, GROW_SETS)
    elif used + items.size > set_pool.size:
        _fail(meta, GROW_SET_ITEMS)
    if meta[M_FAILED]:
        return 0
    set_pool[used : used + items.size] = items
    set_start[ref + 1] = used + items.size
    meta[M_SETS] += 1
    meta[M_SET_ITEMS] += items.size
    return ref


@numba.njit(nogil=True, cache=True, inline="always")
def _set_items(set_start, set_pool, ref):
    return set_pool[set_start[ref] : set_start[ref + 1]]


@numba.njit(nogil=True, cache=True, inline="always")
def _push(stack, top, op, x, y, cont, depth):
    """Push a closure work item on a growable array stack: (stack, new top)."""
    if top == stack.shape[0]:
        bigger = np.empty((2 * top, 5), dtype=np.int64)
        bigger[:top] = stack
        stack = bigger
    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4] = op, x, y, cont, depth
    return stack, top + 1


@numba.njit(nogil=True, cache=True, inline="always")
def _first_time(seen, count, op, x, y, cont):
    """Add a work item's key to a local open-addressing set (rows of 4, -2: empty):
    (set, count, whether it was new). Grows the set past half load."""
    cap = seen.shape[0]
    if 2 * (count + 1) > cap:
        bigger = np.full((2 * cap, 4), -2, dtype=np.int64)
        for i in range(cap):
            if seen[i, 0] != -2:
                j = _seen_slot(bigger, seen[i, 0], seen[i, 1], seen[i, 2], seen[i, 3])
                bigger[j] = seen[i]
        seen = bigger
    j = _seen_slot(seen, op, x, y, cont)
    if seen[j, 0] != -2:
        return seen, count, False
    seen[j, 0], seen[j, 1], seen[j, 2], seen[j, 3] = op, x, y, cont
    return seen, count + 1, True


@numba.njit(nogil=True, cache=True, inline="always")
def _seen_slot(seen, op, x, y, cont):
    h = (np.uint64(op + 7) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(x)
    h = (h * np.uint64(0xBF58476D1CE4E5B9)) ^ np.uint64(y)
    h = (h * np.uint64(0x94D049BB133111EB)) ^ np.uint64(cont)
    h = (h ^ (h >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
    mask = seen.shape[0] - 1
    i = np.int64((h >> np.uint64(17)) & np.uint64(mask))
    while seen[i, 0] != -2:
        if seen[i, 0] == op and seen[i, 1] == x and seen[i, 2] == y and seen[i, 3] == cont:
            return i
        i = (i + 1) & mask
    return i


@numba.njit(nogil=True, cache=True)
def _close(g, st, op0, node0, cont0, max_items, max_nesting):
    """The items reachable without a byte from one work item (enter `node0` then
    `cont0`, or resume `cont0`), pooled as a sorted set; returns its id. A worklist
    version of `LazyNFA._enter` / `_resume`. Each (op, node, state, continuation) is
    worked once, so each leaf item is met once: `out` needs no set -- but for the
    continuations whose resumption is known already (`_resumed`), whose items are copied
    in instead of worked out again, so the result is made unique where one was. Inside
    a string every state's closure resumes the string body's continuation: a character
    read, an escape or a multi-byte character finished. Returns 0 once the call has
    failed.

    Like `_expand`, it takes the arrays out of `g` and `st` once and hands helpers the
    arrays themselves: each use of a tuple's element costs an atomic reference count
    increment and decrement that the compiler cannot always drop."""
    kind, a, b, c, kids, nonempty = g[0], g[1], g[2], g[3], g[4], g[7]
    g_final, g_edge_start, g_dst, g_label, g_live, g_free = g[8], g[9], g[10], g[11], g[12], g[13]
    meta, frames, items, set_start, set_pool, slots = st[S_META], st[S_FRAMES], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS], st[S_HASH]
    stack = np.empty((64, 5), dtype=np.int64)  # (op, node, graph state, continuation, rules entered)
    stack, top = _push(stack, 0, op0, node0, 0, cont0, 0)
    seen = np.full((128, 4), -2, dtype=np.int64)
    count = 0
    out = np.empty(64, dtype=np.int64)
    n_out = 0
    spliced = False
    while top:
        if meta[M_FAILED]:
            return 0
        top -= 1
        op, x, y, cont, depth = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4]
        seen, count, new = _first_time(seen, count, op, x, y, cont)
        if not new:
            continue
        found = -1
        if op == OP_RESUME:
            if cont == DONE:
                found = ACCEPT
            elif frames[cont, FRAME_RESUMED] >= 0:  # worked out before: its items, without the work
                # (that set passed the nesting bound when it was worked out, from its own depth)
                known = _set_items(set_start, set_pool, frames[cont, FRAME_RESUMED])
                while n_out + known.size > out.size:
                    out = _doubled_out(out, n_out, max_items, meta)
                    if meta[M_FAILED]:
                        return 0
                out[n_out : n_out + known.size] = known
                n_out += known.size
                spliced = True
            else:
                fkind, fnode, findex, fparent = frames[cont, 0], frames[cont, 1], frames[cont, 2], frames[cont, 3]
                if fkind == F_C:
                    if findex < b[fnode]:
                        then = _then(kind, a, b, c, kids, meta, slots, frames, fnode, findex + 1, fparent)
                        stack, top = _push(stack, top, OP_ENTER, kids[a[fnode] + findex], 0, then, depth)
                    else:
                        stack, top = _push(stack, top, OP_RESUME, 0, 0, fparent, depth)
                elif fkind == F_L:
                    stack, top = _push(stack, top, OP_ENTER, fnode, 0, fparent, depth)
                elif fkind == F_R:
                    stack, top = _repeat(a, b, c, nonempty, meta, slots, frames, stack, top, fnode, findex, fparent, depth)
                elif fkind == F_M:
                    stack, top = _push(stack, top, OP_MEMBERS, fnode, findex, fparent, depth)
                else:
                    stack, top = _push(stack, top, OP_GRAPH, fnode, findex, fparent, depth)
        elif op == OP_GRAPH:
            gs = a[x] + y
            if g_free[gs] >= 0:  # a marker: the state's free bytes (see `_free_entry`)
                found = _item(meta, slots, items, -1 - g_free[gs], 0, cont)
            if g_final[gs]:
                stack, top = _push(stack, top, OP_RESUME, 0, 0, cont, depth)
            for e in range(g_edge_start[gs], g_edge_start[gs + 1]):
                if not g_live[a[x] + g_dst[e]] or (g_label[e] >= 0 and not nonempty[g_label[e]]):
                    continue  # an edge through an empty label, or to a state with no way out
                if g_label[e] < 0:
                    stack, top = _push(stack, top, OP_GRAPH, x, g_dst[e], cont, depth)
                else:
                    frame = _frame(meta, slots, frames, F_G, x, g_dst[e], cont)
                    stack, top = _push(stack, top, OP_ENTER, g_label[e], 0, frame, depth)
        elif op == OP_MEMBERS:
            stack, top = _members(a, b, c, kids, nonempty, meta, slots, frames, stack, top, x, y, cont, depth)
        else:  # OP_ENTER
            k = kind[x]
            if k == K_BYTES or k == K_BYTESET:
                found = _item(meta, slots, items, x, 0, cont)
            elif k == K_CONCAT:
                if b[x] == 0:
                    stack, top = _push(stack, top, OP_RESUME, 0, 0, cont, depth)
                else:
                    then = _then(kind, a, b, c, kids, meta, slots, frames, x, 1, cont)
                    stack, top = _push(stack, top, OP_ENTER, kids[a[x]], 0, then, depth)
            elif k == K_ALT:
                for i in range(b[x]):
                    if nonempty[kids[a[x] + i]]:
                        stack, top = _push(stack, top, OP_ENTER, kids[a[x] + i], 0, cont, depth)
            elif k == K_GRAPH:
                stack, top = _push(stack, top, OP_GRAPH, x, b[x], cont, depth)
            elif k == K_MEMBERS:
                stack, top = _push(stack, top, OP_MEMBERS, x, 0, cont, depth)
            elif k == K_REF:
                if nonempty[x]:
                    if depth >= max_nesting:
                        _fail(meta, FAILED_NESTING)
                        return 0
                    stack, top = _push(stack, top, OP_ENTER, a[x], 0, cont, depth + 1)
            else:  # K_REPEAT, entered afresh: no iteration done
                stack, top = _repeat(a, b, c, nonempty, meta, slots, frames, stack, top, x, 0, cont, depth)
        if found >= 0:
            if n_out == out.size:
                out = _doubled_out(out, n_out, max_items, meta)
                if meta[M_FAILED]:
                    return 0
            out[n_out] = found
            n_out += 1
    if meta[M_FAILED]:
        return 0
    found_items = out[:n_out].copy()
    found_items.sort()
    if spliced:  # a spliced set may hold items found another way too
        found_items = _sorted_unique(found_items)
    if found_items.size > max_items:
        _fail(meta, FAILED_AMBIGUOUS)
        return 0
    return _pool(meta, set_start, set_pool, found_items)


@numba.njit(nogil=True, cache=True, inline="always")
def _doubled_out(out, n_out, max_items, meta):
    """The closure's item array, twice as large; fails the call (too ambiguous) past
    twice the item budget (spliced sets may repeat items: the exact count is taken at
    the end)."""
    if n_out >= 2 * max_items:
        _fail(meta, FAILED_AMBIGUOUS)
        return out
    bigger = np.empty(2 * out.size, dtype=np.int64)
    bigger[:n_out] = out[:n_out]
    return bigger


@numba.njit(nogil=True, cache=True, inline="always")
def _sorted_unique(items):
    """A sorted array without its repeats (in place; a view of its front)."""
    n = 0
    for i in range(items.size):
        if n == 0 or items[i] != items[n - 1]:
            items[n] = items[i]
            n += 1
    return items[:n]


@numba.njit(nogil=True, cache=True, inline="always")
def _repeat(a, b, c, nonempty, meta, slots, frames, stack, top, x, done, cont, depth):
    """Push the moves of Repeat `x` with `done` iterations complete (saturated at min
    when unbounded), then `cont`: (stack, top)."""
    item, least, most = a[x], b[x], c[x]
    if (most < 0 or done < most) and nonempty[item]:
        nxt = min(done + 1, least) if most < 0 else done + 1
        stack, top = _push(stack, top, OP_ENTER, item, 0, _frame(meta, slots, frames, F_R, x, nxt, cont), depth)
    if done >= least:
        stack, top = _push(stack, top, OP_RESUME, 0, 0, cont, depth)
    return stack, top


@numba.njit(nogil=True, cache=True)
def _members(a, b, c, kids, nonempty, meta, slots, frames, stack, top, x, code, cont, depth):
    """Push the moves of Members `x` in state `code` (see FlatIR), then `cont`: each
    entry not written yet, the extra member, or the closing bracket once the required
    entries and the least count are in (`ir.Members.moves`). (stack, top)."""
    n, cap = b[x], c[x]
    record = a[x] + 2 * n
    n_words = kids[record + R_WORDS]
    mask, count = code // (cap + 1), code % (cap + 1)
    words = _wide_mask_words(frames, n_words, mask) if n_words else np.full(1, mask, np.int64)
    most = kids[record + R_MAX]
    if most < 0 or count < most:
        nxt_count = min(count + 1, cap)
        labels = a[x] if count == 0 else a[x] + n
        for i in range(n):
            label = kids[labels + i]
            w, bit = i // MASK_BITS, np.int64(1) << (i % MASK_BITS)
            if words[w] & bit or not nonempty[label]:
                continue
            words[w] |= bit
            if _members_live(a, b, kids, nonempty, x, words, nxt_count):
                nxt_mask = _wide_mask(meta, slots, frames, x, words) if n_words else words[0]
                if meta[M_FAILED]:
                    return stack, top
                frame = _frame(meta, slots, frames, F_M, x, nxt_mask * (cap + 1) + nxt_count, cont)
                stack, top = _push(stack, top, OP_ENTER, label, 0, frame, depth)
            words[w] ^= bit
        extra = kids[record + (R_EXTRA_FIRST if count == 0 else R_EXTRA_LATER)]
        if extra >= 0 and nonempty[extra] and _members_live(a, b, kids, nonempty, x, words, nxt_count):
            frame = _frame(meta, slots, frames, F_M, x, mask * (cap + 1) + nxt_count, cont)
            stack, top = _push(stack, top, OP_ENTER, extra, 0, frame, depth)
    close = kids[record + (R_CLOSE_NONE if count == 0 else R_CLOSE_SOME)]
    if count >= kids[record + R_MIN] and nonempty[close] and _all_required(kids, record, n, words):
        stack, top = _push(stack, top, OP_ENTER, close, 0, cont, depth)
    return stack, top


@numba.njit(nogil=True, cache=True, inline="always")
def _all_required(kids, record, n, words):
    """Whether mask `words` holds every required entry of a Members record."""
    for w in range((n + MASK_BITS - 1) // MASK_BITS):
        required = kids[record + R_REQUIRED + w]
        if words[w] & required != required:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _wide_mask(meta, slots, frames, x, words):
    """The handle of a wide mask of Members `x`: its words interned as a chain of F_W
    frames (node x, the word, the previous word's frame), the last word's frame. The
    empty mask, where every state of `x` starts, is 0 (DONE): it is never interned, so
    each mask has one handle."""
    handle = DONE
    for w in range(words.size):
        handle = _frame(meta, slots, frames, F_W, x, words[w], handle)
    return handle


@numba.njit(nogil=True, cache=True)
def _wide_mask_words(frames, n_words, handle):
    """The words of the wide mask whose handle is `handle` (see `_wide_mask`)."""
    words = np.zeros(n_words, dtype=np.int64)
    w = n_words - 1
    while handle != DONE:
        words[w] = frames[handle, 2]
        handle = frames[handle, 3]
        w -= 1
    return words


@numba.njit(nogil=True, cache=True, inline="always")
def _resumed(g, st, frames, cont, max_items, max_nesting):
    """The items reachable from resuming continuation `cont` (memoized on its frame)."""
    ref = frames[cont, FRAME_RESUMED]
    if ref < 0:
        ref = _close(g, st, OP_RESUME, 0, cont, max_items, max_nesting)
        if st[S_META][M_FAILED]:
            return 0
        frames[cont, FRAME_RESUMED] = ref
    return ref


@numba.njit(nogil=True, cache=True)
def _closure(g, st, node, cont, max_items, max_nesting):
    meta, slots = st[S_META], st[S_HASH]
    ref = _hget(slots, T_CLOSURE, node, cont, 0, 0)
    if ref < 0:
        ref = _close(g, st, OP_ENTER, node, cont, max_items, max_nesting)
        if not _hroom(meta, slots):
            return 0
        _hput(meta, slots, T_CLOSURE, node, cont, 0, 0, ref)
    return ref


@numba.njit(nogil=True, cache=True, inline="always")
def _single(meta, slots, set_start, set_pool, item):
    """The pooled set {item} (memoized per item)."""
    ref = _hget(slots, T_SINGLE, item, 0, 0, 0)
    if ref < 0:
        one = np.empty(1, dtype=np.int64)
        one[0] = item
        ref = _pool(meta, set_start, set_pool, one)
        if not _hroom(meta, slots):
            return 0
        _hput(meta, slots, T_SINGLE, item, 0, 0, 0, ref)
    return ref


@numba.njit(nogil=True, cache=True)
def _items_hash(items):
    h = np.uint64(14695981039346656037)
    for x in items:
        h = (h ^ np.uint64(x)) * np.uint64(1099511628211)
    return np.int64(h >> np.uint64(1))


@numba.njit(nogil=True, cache=True, inline="always")
def _intern(meta, slots, set_start, set_pool, state_set, state_next, accepting, items):
    """The state of a sorted item set (a new one if unseen; 0 once the call has failed)."""
    h = _items_hash(items)
    newest = _hget(slots, T_STATE_HASH, h, 0, 0, 0)
    sid = newest
    while sid >= 0:
        known = _set_items(set_start, set_pool, state_set[sid])
        if known.size == items.size and (known == items).all():
            return sid
        sid = state_next[sid]
    if not _hroom(meta, slots):
        return 0
    sid = meta[M_STATES]
    if sid >= state_set.size or sid >= accepting.size:
        _fail(meta, GROW_STATES)
        return 0
    ref = _pool(meta, set_start, set_pool, items)
    if meta[M_FAILED]:
        return 0
    state_set[sid] = ref
    state_next[sid] = newest
    meta[M_STATES] += 1
    _hput(meta, slots, T_STATE_HASH, h, 0, 0, 0, sid)
    accepting[sid] = items.size > 0 and items[0] == ACCEPT
    return sid


@numba.njit(nogil=True, cache=True, inline="always")
def _state_of_set(meta, slots, set_start, set_pool, state_set, state_next, accepting, ref):
    sid = _hget(slots, T_STATE_OF_SET, ref, 0, 0, 0)
    if sid < 0:
        items = _set_items(set_start, set_pool, ref).copy()
        sid = _intern(meta, slots, set_start, set_pool, state_set, state_next, accepting, items)
        if not _hroom(meta, slots):
            return 0
        _hput(meta, slots, T_STATE_OF_SET, ref, 0, 0, 0, sid)
    return sid


@numba.njit(nogil=True, cache=True)
def _item_target(g, st, it, max_items, max_nesting):
    """The set item `it` reaches once it has read its byte (memoized in its row). Not
    inlined: the loops over a state's items (`_expand`, `_step`, `_known_loops`) read a
    known target from the row themselves and call this for the first one only, as
    inlined code that takes `g` and `st` counts a reference up and down on each of
    their ~22 arrays at every item (an atomic add each, until 7b9dfc2 borrowed the
    arrays: with `_walk`'s pushes, ~40% of the reference counts of MaskBench's first
    visits, and those ~20% of their time). A call costs the same (each array argument
    is counted at entry and exit): rare calls only."""
    item_rows = st[S_ITEMS]
    target = item_rows[it, ITEM_TARGET]
    if target < 0:
        leaf, offset, cont = item_rows[it, 0], item_rows[it, 1], item_rows[it, 2]
        if g[0][leaf] == K_BYTES and offset + 1 < g[2][leaf]:
            item = _item(st[S_META], st[S_HASH], item_rows, leaf, offset + 1, cont)
            target = _single(st[S_META], st[S_HASH], st[S_SET_START], st[S_SET_ITEMS], item)
        else:
            target = _resumed(g, st, st[S_FRAMES], cont, max_items, max_nesting)
        if st[S_META][M_FAILED]:
            return 0
        item_rows[it, ITEM_TARGET] = target
    return target


@numba.njit(nogil=True, cache=True, inline="always")
def _reads(kind, a, data, bitsets, item_rows, it, byte):
    """Whether set item `it` reads `byte`: False for ACCEPT and a free-bytes marker,
    which read nothing. With its target (`_item_target`, unless it leads nowhere), what
    a step (`_step`) takes from each item."""
    if it == ACCEPT:
        return False
    leaf, offset = item_rows[it, 0], item_rows[it, 1]
    if leaf < 0:
        return False
    if kind[leaf] == K_BYTES:
        return data[a[leaf] + offset] == byte
    return (bitsets[a[leaf], byte >> 6] >> np.uint64(byte & 63)) & np.uint64(1) != 0


@numba.njit(nogil=True, cache=True, inline="always")
def _union_state(meta, slots, set_start, set_pool, state_set, state_next, accepting, refs, max_items):
    """The state of the union of the pooled sets `refs` (two or more)."""
    total = 0
    for ref in refs:
        total += set_start[ref + 1] - set_start[ref]
    merged = np.empty(total, dtype=np.int64)
    q = 0
    for ref in refs:
        part = _set_items(set_start, set_pool, ref)
        merged[q : q + part.size] = part
        q += part.size
    merged = np.unique(merged)
    if merged.size > max_items:
        _fail(meta, FAILED_AMBIGUOUS)
        return 0
    return _intern(meta, slots, set_start, set_pool, state_set, state_next, accepting, merged)


@numba.njit(nogil=True, cache=True)
def _expand(g, st, table, expanded, loops, accepting, sid, max_items, max_nesting):
    """Build the table row of state `sid`: per byte, the union of what its items reach.
    Items are grouped by target first (the characters of a string body all resume the
    same continuation), so a byte's targets are a bitmask over a few groups, and bytes
    with the same mask share one union. Writes nothing to the table until the row is
    complete, so a call that stops to have the store grown can be run again."""
    kind, a, data, bitsets = g[0], g[1], g[5], g[6]
    meta, item_rows, set_start, set_pool, state_set, state_next, slots = (
        st[S_META], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET], st[S_STATE_NEXT], st[S_HASH])
    items = _set_items(set_start, set_pool, state_set[sid]).copy()
    targets = np.empty(items.size, dtype=np.int64)
    single = np.empty(items.size, dtype=np.int64)  # the state of each group's target alone
    first_item = np.empty(items.size, dtype=np.int64)  # an item of each group
    bits = np.zeros((items.size, 4), dtype=np.uint64)
    m = 0
    for it in items:
        if it == ACCEPT or item_rows[it, 0] < 0:
            continue  # reads nothing (a free-bytes marker)
        target = item_rows[it, ITEM_TARGET]
        if target < 0:
            target = _item_target(g, st, it, max_items, max_nesting)
            if meta[M_FAILED]:
                return
        if set_start[target + 1] == set_start[target]:
            continue  # leads nowhere
        leaf, offset = item_rows[it, 0], item_rows[it, 1]
        group = 0
        while group < m and targets[group] != target:
            group += 1
        if group == m:
            targets[m], single[m], first_item[m] = target, item_rows[it, ITEM_TARGET_STATE], it
            m += 1
        if kind[leaf] == K_BYTES:
            byte = data[a[leaf] + offset]
            bits[group, byte >> 6] |= np.uint64(1) << np.uint64(byte & 63)
        else:
            for w in range(4):
                bits[group, w] |= bitsets[a[leaf], w]
    if meta[M_FAILED]:
        return
    if m <= 1:  # (most rows) one target at most: each byte read leads to its state
        state = DEAD
        if m == 1:
            state = single[0]
            if state < 0:
                state = _state_of_set(meta, slots, set_start, set_pool, state_set, state_next, accepting, targets[0])
                if meta[M_FAILED]:
                    return
                item_rows[first_item[0], ITEM_TARGET_STATE] = state
        table[sid, :] = DEAD
        loops[sid, :] = 0
        for w in range(4):
            x = bits[0, w] if m == 1 else np.uint64(0)
            while x:
                table[sid, w * 64 + trailing_zeros(x)] = state
                x &= x - np.uint64(1)
            if state == sid:
                loops[sid, w] = bits[0, w]
        expanded[sid] = True
        return
    row = np.full(256, DEAD, dtype=np.int32)
    # Per byte, the groups that read it: readers[reader_start[b]:reader_start[b + 1]], in
    # group order, made from the bits set in each group's byte set (as many steps as
    # bits set, where testing every group at every byte took 256 x m).
    reader_start = np.zeros(257, dtype=np.int64)
    for group in range(m):
        for w in range(4):
            x = bits[group, w]
            while x:
                reader_start[w * 64 + trailing_zeros(x) + 1] += 1
                x &= x - np.uint64(1)
    for byte in range(256):
        reader_start[byte + 1] += reader_start[byte]
    readers = np.empty(reader_start[256], dtype=np.int64)
    filled = reader_start[:256].copy()
    for group in range(m):
        for w in range(4):
            x = bits[group, w]
            while x:
                byte = w * 64 + trailing_zeros(x)
                readers[filled[byte]] = group
                filled[byte] += 1
                x &= x - np.uint64(1)
    union_masks = np.empty(256, dtype=np.uint64)  # masks of groups met (<= 64 groups) ...
    union_states = np.empty(256, dtype=np.int64)  # ... and the state of each
    n_unions = 0
    for byte in range(256):
        # (bounds, not a slice of `readers`: a view per byte is a reference counted up and down)
        lo, hi = reader_start[byte], reader_start[byte + 1]
        if hi == lo:
            continue
        if hi - lo == 1:
            group = readers[lo]
            if single[group] < 0:
                single[group] = _state_of_set(meta, slots, set_start, set_pool, state_set, state_next, accepting,
                                              targets[group])
                if meta[M_FAILED]:
                    return
                item_rows[first_item[group], ITEM_TARGET_STATE] = single[group]
            row[byte] = single[group]
            continue
        mask = np.uint64(0)
        for r in range(lo, hi):
            if readers[r] < 64:
                mask |= np.uint64(1) << np.uint64(readers[r])
        known = -1
        if m <= 64:
            for u in range(n_unions):
                if union_masks[u] == mask:
                    known = union_states[u]
                    break
        if known >= 0:
            row[byte] = known
            continue
        row[byte] = _union_state(meta, slots, set_start, set_pool, state_set, state_next, accepting,
                                 targets[readers[lo:hi]], max_items)
        if meta[M_FAILED]:
            return
        if m <= 64:
            union_masks[n_unions], union_states[n_unions] = mask, row[byte]
            n_unions += 1
    table[sid, :] = row
    loops[sid, :] = 0
    for byte in range(256):
        if row[byte] == sid:
            loops[sid, byte >> 6] |= np.uint64(1) << np.uint64(byte & 63)
    expanded[sid] = True


@numba.njit(nogil=True, cache=True)
def _step(g, st, accepting, sid, byte, max_items, max_nesting):
    """The state one byte leads to from `sid` (DEAD if none), without building `sid`'s
    row: the union of the targets of the items that read that byte -- the state the row
    would hold there. A token allowed unwalked (`TableDFA.free_bytes`) is followed this
    way: a state in the middle of it seldom needs its mask, so its row (one union per
    byte group; the rows inside a free key are the costliest) need not be built."""
    kind, a, data, bitsets = g[0], g[1], g[5], g[6]
    meta, item_rows, set_start, set_pool, state_set, state_next, slots = (
        st[S_META], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET], st[S_STATE_NEXT], st[S_HASH])
    items = _set_items(set_start, set_pool, state_set[sid]).copy()
    targets = np.empty(items.size, dtype=np.int64)
    first_item = -1  # an item of the first target
    n = 0
    for it in items:
        if not _reads(kind, a, data, bitsets, item_rows, it, byte):
            continue
        target = item_rows[it, ITEM_TARGET]
        if target < 0:
            target = _item_target(g, st, it, max_items, max_nesting)
            if meta[M_FAILED]:
                return DEAD
        if set_start[target + 1] == set_start[target]:
            continue  # leads nowhere
        known = False
        for k in range(n):
            known = known or targets[k] == target
        if not known:
            if n == 0:
                first_item = it
            targets[n] = target
            n += 1
    if n == 0 or meta[M_FAILED]:
        return DEAD
    if n == 1:
        state = item_rows[first_item, ITEM_TARGET_STATE]
        if state < 0:
            state = _state_of_set(meta, slots, set_start, set_pool, state_set, state_next, accepting, targets[0])
            if meta[M_FAILED]:
                return DEAD
            item_rows[first_item, ITEM_TARGET_STATE] = state
        return state
    state = _union_state(meta, slots, set_start, set_pool, state_set, state_next, accepting, targets[:n], max_items)
    return DEAD if meta[M_FAILED] else state


QUOTE = 0x22
BODY_FRAME_DEPTH = 4  # how far up an item's continuation a body's Repeat frame may be


@numba.njit(nogil=True, cache=True, inline="always")
def _reads_quote(kind, a, data, bitsets, item_rows, it, only):
    """Whether set item `it` is a leaf that reads the byte '"' (and, with `only`, no
    other byte)."""
    if it == ACCEPT or item_rows[it, 0] < 0:
        return False
    leaf, offset = item_rows[it, 0], item_rows[it, 1]
    if kind[leaf] == K_BYTES:
        return data[a[leaf] + offset] == QUOTE
    row = bitsets[a[leaf]]
    if only:
        return row[0] == np.uint64(1) << np.uint64(QUOTE) and row[1] == 0 and row[2] == 0 and row[3] == 0
    return (row[0] >> np.uint64(QUOTE)) & np.uint64(1) != 0


@numba.njit(nogil=True, cache=True)
def _body_exit(g, st, accepting, sid, body, max_items, max_nesting):
    """Where `sid` is a JSON string body's state -- exactly what resuming the Repeat
    `body` (`json_body_ir`) with some continuation P reaches, P reading a closing '"'
    and nothing else -- the state after that quote; else -1 (DEAD). From such a state
    a token goes exactly as from the body's state of the grammar `body '"'` up to the
    quote that closes the string, and from there as from the returned state: so its
    mask is that grammar's, made once per vocabulary, and a walk of the tokens' rests
    after the quote from the returned state (`tokens.BodyExits`). Builds no row of
    `sid` (the string's characters, escapes and multi-byte characters each have some);
    reads the items' continuations only."""
    kind, a, data, bitsets = g[0], g[1], g[5], g[6]
    meta, frames, item_rows, set_start, set_pool, state_set = (
        st[S_META], st[S_FRAMES], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET])
    frame = DONE
    for it in _set_items(set_start, set_pool, state_set[sid]):
        if it == ACCEPT or item_rows[it, 0] < 0:
            return DEAD
        cont = item_rows[it, 2]
        for _ in range(BODY_FRAME_DEPTH):
            if cont == DONE or (frames[cont, 0] == F_R and frames[cont, 1] == body):
                break
            cont = frames[cont, 3]
        if cont != DONE and frames[cont, 0] == F_R and frames[cont, 1] == body:
            frame = cont
            break
    if frame == DONE:
        return DEAD
    body_ref = _resumed(g, st, frames, frame, max_items, max_nesting)
    exit_ref = _resumed(g, st, frames, frames[frame, 3], max_items, max_nesting)
    if meta[M_FAILED]:
        return DEAD
    items = _set_items(set_start, set_pool, state_set[sid])
    resumed = _set_items(set_start, set_pool, body_ref)
    if resumed.size != items.size or not (resumed == items).all():
        return DEAD  # more than the body (another branch), or less
    exits = _set_items(set_start, set_pool, exit_ref)
    if exits.size == 0:
        return DEAD
    for it in exits:
        if not _reads_quote(kind, a, data, bitsets, item_rows, it, True):
            return DEAD
    for it in items:  # no character of the body reads a raw quote
        if _reads_quote(kind, a, data, bitsets, item_rows, it, False) and not (exits == it).any():
            return DEAD
    return _step(g, st, accepting, sid, QUOTE, max_items, max_nesting)


@numba.njit(nogil=True, cache=True, inline="always")
def _counted_frame(a, frames, g_counted, node_twin, frame):
    """The first frame up the chain from `frame` that counts characters -- a state of a
    graph that does (`ir.Counted`), an iteration of a Repeat with a twin -- and how many
    frames lie below it; (-1, 0) where none."""
    depth = 0
    while frame != DONE:
        fkind, fnode = frames[frame, 0], frames[frame, 1]
        if fkind == F_G and g_counted[a[fnode] + frames[frame, 2], G_TWIN_NODE] >= 0:
            return frame, depth
        if fkind == F_R and node_twin[fnode] >= 0:
            return frame, depth
        frame = frames[frame, 3]
        depth += 1
    return -1, 0


@numba.njit(nogil=True, cache=True)
def _twin_of(g, st, g_counted, node_twin, accepting, sid, longest):
    """The state that reads, for `longest` bytes, what state `sid` reads: each of its
    items whose continuation passes a counting frame in its zone continues from the
    twin's frame instead, the frames below it made again over the new one. A counted
    graph's state is in its zone where its count and `longest` stay within the zone's
    top (see `ir.Counted`; `longest` bytes are at most as many characters); a Repeat's
    iteration k (the one being read included) where k + `longest` stays within its
    max, and its twin goes on at iteration min(k, min). DEAD where that is not so: no
    item passes a counting frame, one passes one outside its zone, or the state holds
    ACCEPT or a free-bytes marker. Its mask is `sid`'s: see `FlatDFA.twin_of`."""
    a, b, c = g[1], g[2], g[3]
    meta, frames, item_rows, set_start, set_pool = st[S_META], st[S_FRAMES], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS]
    slots, state_set, state_next = st[S_HASH], st[S_STATE_SET], st[S_STATE_NEXT]
    items = _set_items(set_start, set_pool, state_set[sid])
    out = np.empty(items.size, dtype=np.int64)
    twinned = False
    for i in range(items.size):
        it = items[i]
        if it == ACCEPT or item_rows[it, 0] < 0:
            return DEAD
        frame = item_rows[it, 2]
        found, depth = _counted_frame(a, frames, g_counted, node_twin, frame)
        if found < 0:
            out[i] = it
            continue
        fkind, fnode, findex = frames[found, 0], frames[found, 1], frames[found, 2]
        if fkind == F_G:
            gs = a[fnode] + findex
            if g_counted[gs, G_COUNT] + longest > g_counted[gs, G_ZONE_TOP]:
                return DEAD
            twin_node, twin_index = g_counted[gs, G_TWIN_NODE], g_counted[gs, G_TWIN_STATE]
        else:
            if findex + longest > c[fnode]:
                return DEAD
            twin_node, twin_index = node_twin[fnode], min(findex, b[fnode])
        chain = np.empty(depth, dtype=np.int64)  # the frames below `found`, innermost first
        for d in range(depth):
            chain[d] = frame
            frame = frames[frame, 3]
        new = _frame(meta, slots, frames, fkind, twin_node, twin_index, frames[found, 3])
        for d in range(depth - 1, -1, -1):
            f = chain[d]
            new = _frame(meta, slots, frames, frames[f, 0], frames[f, 1], frames[f, 2], new)
        out[i] = _item(meta, slots, item_rows, item_rows[it, 0], item_rows[it, 1], new)
        if meta[M_FAILED]:
            return DEAD
        twinned = True
    if not twinned:
        return DEAD
    out.sort()
    twin = _intern(meta, slots, set_start, set_pool, state_set, state_next, accepting, _sorted_unique(out))
    return DEAD if meta[M_FAILED] else twin


@intrinsic
def _borrowed(typingctx, array):
    """`array` without its reference count: the same data, shape and strides, and no
    meminfo, so that numba's increments and decrements of it are no-ops (see
    `_ir_tuple`). Valid while the array it came from lives and is not replaced, which
    the entries below ensure: the arrays are their arguments, which the caller holds
    for the call, and nothing compiled replaces an array of the IR or the store."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        source = context.make_array(array)(context, builder, value=args[0])
        view = context.make_array(array)(context, builder)
        for field in ("parent", "nitems", "itemsize", "data", "shape", "strides"):
            setattr(view, field, getattr(source, field))
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        return view._getvalue()

    return array(array), codegen


@numba.njit(nogil=True, cache=True, inline="always")
def _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free):
    """`g`, the IR arrays, as the entries hand them on: borrowed (`_borrowed`). Each
    non-inlined function that takes `g` and `st` counts a reference to every one of
    their ~22 arrays at its entry and exit -- atomic increments, ~40% of the reference
    counts left after b9a9e67 in `_close`, `_step` and `_item_target` alone; on a
    borrowed array the count is a test of a null pointer."""
    return (_borrowed(kind), _borrowed(a), _borrowed(b), _borrowed(c), _borrowed(kids), _borrowed(data),
            _borrowed(bitsets), _borrowed(nonempty), _borrowed(g_final), _borrowed(g_edge_start), _borrowed(g_dst),
            _borrowed(g_label), _borrowed(g_live), _borrowed(g_free))


@numba.njit(nogil=True, cache=True, inline="always")
def _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7):
    """`st`, the store arrays, borrowed as in `_ir_tuple`."""
    return (_borrowed(s0), _borrowed(s1), _borrowed(s2), _borrowed(s3), _borrowed(s4), _borrowed(s5), _borrowed(s6),
            _borrowed(s7))


@numba.njit(nogil=True, cache=True, inline="always")
def _rows_borrowed(table, expanded, loops, accepting):
    """The per-state arrays (`TableDFA`), borrowed as in `_ir_tuple`: `_expand` and
    `_step` take them at every call."""
    return _borrowed(table), _borrowed(expanded), _borrowed(loops), _borrowed(accepting)


# Entry points called from Python take each array as its own argument (numba types a
# tuple argument anew at every call).
@numba.njit(nogil=True, cache=True)
def _expand_entry(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free,
                  s0, s1, s2, s3, s4, s5, s6, s7, table, expanded, loops, accepting, sid, max_items, max_nesting):
    g = _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free)
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    table, expanded, loops, accepting = _rows_borrowed(table, expanded, loops, accepting)
    _expand(g, st, table, expanded, loops, accepting, sid, max_items, max_nesting)
    return 0


@numba.njit(nogil=True, cache=True)
def expand_rows(g, st, table, expanded, loops, accepting, sids, max_items, max_nesting):
    """Build the rows of states `sids` not built yet. For compiled code that walks the
    table (`tokens._walk_building`): g, st are an automaton's IR and store arrays. A row
    that cannot be built fails the call (see M_FAILED): the caller returns at once, and
    its call is run again once the array is grown (`FlatDFA.run`)."""
    for sid in sids:
        if not expanded[sid]:
            _expand(g, st, table, expanded, loops, accepting, sid, max_items, max_nesting)
            if st[S_META][M_FAILED]:
                return


@numba.njit(nogil=True, cache=True, inline="always")
def _known_loops(g, st, accepting, loops, sid, max_items, max_nesting):
    """Set in `loops[sid]` the bytes that lead from `sid` back to itself, from its items,
    without its row: the bytes read only by items whose target is `sid`'s own state.
    (Bytes also read by an item leading elsewhere lead to a union, another state.)"""
    kind, a, data, bitsets = g[0], g[1], g[5], g[6]
    meta, item_rows, set_start, set_pool, state_set = (
        st[S_META], st[S_ITEMS], st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET])
    back = np.zeros(4, dtype=np.uint64)
    other = np.zeros(4, dtype=np.uint64)
    for it in _set_items(set_start, set_pool, state_set[sid]):
        if it == ACCEPT or item_rows[it, 0] < 0:
            continue  # reads nothing (a free-bytes marker)
        target = item_rows[it, ITEM_TARGET]
        if target < 0:
            target = _item_target(g, st, it, max_items, max_nesting)
            if meta[M_FAILED]:
                return
        if set_start[target + 1] == set_start[target]:
            continue  # leads nowhere
        state = item_rows[it, ITEM_TARGET_STATE]
        if state < 0:
            state = _state_of_set(meta, st[S_HASH], set_start, set_pool, state_set, st[S_STATE_NEXT], accepting,
                                  target)
            if meta[M_FAILED]:
                return
            item_rows[it, ITEM_TARGET_STATE] = state
        leaf, offset = item_rows[it, 0], item_rows[it, 1]
        into = back if state == sid else other
        if kind[leaf] == K_BYTES:
            byte = data[a[leaf] + offset]
            into[byte >> 6] |= np.uint64(1) << np.uint64(byte & 63)
        else:
            for w in range(4):
                into[w] |= bitsets[a[leaf], w]
    for w in range(4):
        loops[sid, w] |= back[w] & ~other[w]


@numba.njit(nogil=True, cache=True)
def _walk_entry(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free,
                s0, s1, s2, s3, s4, s5, s6, s7, table, expanded, loops, accepting, state, codes, path,
                max_items, max_nesting):
    """The state after the bytes `codes` from `state` (DEAD where they leave the
    language), in one call: through built rows, and by `_step` where a row is not built
    (the path of a token allowed unwalked, bytes forced ahead). Where `path` is as long
    as `codes`, it gets the state after each byte (DEAD from where they leave).

    Where a step leads back to its state, the bytes that do so are found from its items
    (`_known_loops`) and kept in the state's `loops` until its row is built: every token
    inside a string whose body state has no row (`_body_exit`) passes through that
    state, and the matcher follows those bytes in Python (under 0.5 us a byte) where a step
    here is ~2 us and a call ~5 us."""
    g = _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free)
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    table, expanded, loops, accepting = _rows_borrowed(table, expanded, loops, accepting)
    record = path.size == codes.size
    for i in range(codes.size):
        byte = codes[i]
        w, bit = byte >> 6, np.uint64(1) << np.uint64(byte & 63)
        if expanded[state]:
            state = table[state, byte]
        elif not loops[state, w] & bit:
            nxt = _step(g, st, accepting, state, byte, max_items, max_nesting)
            if nxt == state:  # remembered: see the docstring
                _known_loops(g, st, accepting, loops, state, max_items, max_nesting)
            state = nxt
        if state < 0:  # (also where the call failed)
            return DEAD
        if record:
            path[i] = state
    return state


@numba.njit(nogil=True, cache=True)
def _start_entry(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free,
                 s0, s1, s2, s3, s4, s5, s6, s7, accepting, root, max_items, max_nesting):
    g = _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free)
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    ref = _closure(g, st, root, DONE, max_items, max_nesting)
    return _state_of_set(st[S_META], st[S_HASH], st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET], st[S_STATE_NEXT],
                         accepting, ref)


@numba.njit(nogil=True, cache=True)
def _twin_entry(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free,
                s0, s1, s2, s3, s4, s5, s6, s7, g_counted, node_twin, accepting, sid, longest, max_items, max_nesting):
    g = _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free)
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    return _twin_of(g, st, _borrowed(g_counted), _borrowed(node_twin), _borrowed(accepting), sid, longest)


@numba.njit(nogil=True, cache=True)
def _free_entry(bitsets, loops, s0, s1, s2, s3, s4, s5, s6, s7, sid):
    """The free bytes of state `sid` (4 x u64): the union of its markers' byte sets;
    and whether any of them is not one of the state's loops."""
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    free = np.zeros(4, dtype=np.uint64)
    for it in _set_items(st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET][sid]):
        leaf = st[S_ITEMS][it, 0]
        if leaf < 0:
            for w in range(4):
                free[w] |= bitsets[-1 - leaf, w]
    beyond_loops = False
    for w in range(4):
        beyond_loops = beyond_loops or (free[w] & ~loops[sid, w]) != 0
    return free, beyond_loops


@numba.njit(nogil=True, cache=True)
def _items_entry(s0, s1, s2, s3, s4, s5, s6, s7, sid):
    st = _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7)
    return _set_items(st[S_SET_START], st[S_SET_ITEMS], st[S_STATE_SET][sid]).copy()


@numba.njit(nogil=True, cache=True)
def _body_exit_entry(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live,
                     g_free, s0, s1, s2, s3, s4, s5, s6, s7, accepting, sid, body, max_items, max_nesting):
    g = _ir_tuple(kind, a, b, c, kids, data, bitsets, nonempty, g_final, g_edge_start, g_dst, g_label, g_live, g_free)
    return _body_exit(g, _store_tuple(s0, s1, s2, s3, s4, s5, s6, s7), accepting, sid, body, max_items, max_nesting)


_NO_PATH = np.zeros(0, dtype=np.int64)  # `_walk_entry` records no path

_ERRORS = {
    FAILED_AMBIGUOUS: too_ambiguous,
    FAILED_NESTING: lambda: GrammarTooLargeError(
        f"a rule nests more than {MAX_RULE_NESTING} times without consuming input "
        "(left recursion through an optional prefix?)"),
}


class FlatDFA(TableDFA):
    """A lazily built DFA over a `FlatIR`, rows built in numba (see the module doc)."""

    def __init__(self, nfa: LazyNFA, *, max_states: int = 200_000):
        self._open(FlatIR(nfa.root), nfa.is_empty_language, max_states)
        self.nfa = nfa  # kept for what reads the IR in Python (covering examples)

    @classmethod
    def of_flat(cls, flat: FlatIR, empty: bool, *, max_states: int = 200_000) -> "FlatDFA":
        """The automaton of an IR flattened elsewhere (a compile worker process, which
        sends arrays rather than the IR's Python objects); it has no `nfa`."""
        dfa = cls.__new__(cls)
        dfa._open(flat, empty, max_states)
        dfa.nfa = None
        return dfa

    def _open(self, flat: FlatIR, empty: bool, max_states: int) -> None:
        # Room for 1,024 states from the start (most automata never need more): the
        # table is not written ahead, so the pages of rows never built cost nothing, and
        # no doubling copies it on a decoding step.
        super().__init__(max_states, initial_states=1024)
        self.flat = flat
        self._store = _new_store()
        self._free: dict[int, np.ndarray | None] = {}
        self.start = DEAD
        if not empty:
            with self._lock:
                self.start = self.run(_start_entry, lambda: (self.accepting, self.flat.root))

    @property
    def num_states(self) -> int:
        return int(self._store[S_META][M_STATES])

    def nbytes(self) -> int:
        """See TableDFA.nbytes: with the store (items, frames, sets) and the flat IR."""
        arrays = (*self._store, *self.flat.arrays, self.flat.g_counted, self.flat.node_twin)
        return super().nbytes() + sum(a.nbytes for a in arrays)

    def run(self, fn, args):
        """Run compiled code over this automaton: `fn(*IR arrays, *store arrays, *args(),
        max items, max nesting)`. Where it ran out of room in the store or the per-state
        arrays, grow that array and run it again (a call changes nothing it cannot redo);
        past the state budget, GrammarTooLargeError. Under the automaton's lock.

        Arrays grow only when full: a row adds two states on average but may add 256,
        and keeping room for that ahead doubled the table of many automata that never
        needed it -- each doubling on a decoding step is ~0.4 ms (1,024 rows) to ~5 ms
        (4,096, huge pages) of copying into fresh pages. The rare call that meets a
        full array runs twice instead."""
        meta = self._store[S_META]
        while True:
            self._reserve()
            result = fn(*self.flat.arrays, *self._store, *args(), MAX_STATE_ITEMS, MAX_RULE_NESTING)
            failed = int(meta[M_FAILED])
            if failed:
                meta[M_FAILED] = 0
                if failed in _ERRORS:
                    raise _ERRORS[failed]()
                if failed != GROW_STATES:  # those _reserve grows
                    _grown(self._store, failed - 1)
                continue
            if meta[M_STATES] > self.max_states:
                raise self.too_many_states()
            return result

    def _reserve(self) -> None:
        """Room in the per-state arrays for one more state (after a call failed on
        GROW_STATES, they are full)."""
        needed = int(self._store[S_META][M_STATES]) + 1  # (asked at every call: no property)
        while needed > self.table.shape[0]:
            self._grow()
        while needed > self._store[S_STATE_SET].size:
            _grown(self._store, M_STATES)

    def _build_row(self, sid: int) -> None:
        self.run(_expand_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid))

    def walk(self, sid: int, data: bytes) -> int:
        """See TableDFA.walk: in one compiled call, through built rows, and by `_step`
        where a row is not built (no row is built on the way)."""
        if sid < 0:
            return DEAD
        if not data:
            return sid
        codes = np.frombuffer(bytes(data), dtype=np.uint8)  # bytes or bytearray: one argument type
        with self._lock:
            return int(self.run(_walk_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid, codes,
                                                      _NO_PATH)))

    def path(self, sid: int, data: bytes) -> np.ndarray:
        """See TableDFA.path: in one compiled call, as `walk`."""
        path = np.full(len(data) + 1, DEAD, dtype=np.int64)
        path[0] = sid
        if sid >= 0 and data:
            codes = np.frombuffer(bytes(data), dtype=np.uint8)
            with self._lock:
                self.run(_walk_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid, codes,
                                               path[1:]))
        return path

    def free_bytes(self, sid: int) -> np.ndarray | None:
        """See TableDFA.free_bytes: from the markers the closures put in the state's set
        where they passed a graph state with free bytes (the trie of a StringExcept)."""
        free = self._free.get(sid, False)
        if free is False:
            self.expand(sid)  # its loops are known once its row is built
            free = None
            if self.flat.has_free:
                with self._lock:
                    free, beyond_loops = _free_entry(self.flat.arrays[6], self.loops, *self._store, sid)
                if not beyond_loops:
                    free = None  # no more than its loops: the LoopSlice path covers it
            self._free[sid] = free
        return free

    def twin_of(self, sid: int, longest: int) -> int:
        """A state whose mask is state `sid`'s, for tokens of at most `longest` bytes,
        or DEAD (`_twin_of`). Inside a string under a maxLength every count is a state
        of its own, and a mask's walk from one builds the rows of every count (and
        pattern state) its tokens reach -- ~1,800 states in MaskBench's word-count
        patterns, 10-130 ms in one step; ~700 in a plain string. Where the count cannot
        bind within a token, the state's twin, which counts no further than minLength,
        has the same mask: its walk builds the rows of the pattern's states only, and
        the states of every count share it. Such a mask comes without the rows of its
        tokens' paths."""
        if not self.flat.has_counted or sid < 0:
            return DEAD
        with self._lock:
            return int(self.run(_twin_entry, lambda: (self.flat.g_counted, self.flat.node_twin, self.accepting, sid,
                                                      longest)))

    def body_exit(self, sid: int) -> int:
        """The state after the closing quote of the JSON string body `sid` is in, or
        DEAD where it is not such a state (`_body_exit`; tests)."""
        with self._lock:
            return int(self.run(_body_exit_entry, lambda: (self.accepting, sid, self.flat.body_node)))

    def items_of(self, sid: int) -> np.ndarray:
        """The item ids of state `sid` (tests)."""
        return _items_entry(*self._store, sid)
