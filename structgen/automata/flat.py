"""A lazy DFA whose closures and rows are built in compiled code (flat_kernels.pyx).

Owns: the flattening of an `ir.Node` graph into arrays (`FlatIR`), and `FlatDFA`, a
lazily determinized automaton over it with the table interface of `dfa.LazyDFA`
(`table`, `expanded`, `loops`, `accepting`, `expand`). The semantics are those of
`nfa.LazyNFA`: an item is a leaf (a byte of a `Bytes`, a `ByteSet`) with an interned
continuation (a chain of frames: the rest of a Concat, its last item, the next
iteration of a Repeat, the next state of a Graph), `Ref`s are entered with the
continuation they were reached with (a pushdown automaton), and a DFA state is a set of
items. Only the representation differs: nodes, frames, items and item sets are
integers in arrays (a hash table among them), so building a row -- the closures of what
each byte leads to, their unions, interning them as states -- runs as machine code
instead of as Python objects (a first visit of a grammar state builds ~10 rows, ~100 us each in
Python: most of the time of the slowest mask steps).

`Members` (objects in any order) are entered like a Graph whose state -- the mask of
entries written and the member count -- is computed instead of listed (2^n of them):
it is the index of the frame. A mask too wide for that index (an object of more than
~60 properties) is interned instead, as a chain of frames holding its words
(`flat_kernels.wide_mask`). What it does not take: IRs past MAX_FLAT_NODES, and `Members` with a
count bound past 2^24; it says so (`FlatUnsupported`) and the compiler keeps the Python
automaton. A `Stepper` is flattened as its `plain()` Graph,
and lexemes as the basic nodes they are (the Python automaton's key-prefix rows and
shared lexeme DFA do not apply here). Free bytes do: where a closure passes a graph
state that declares some (`ir.Graph.free`, the trie of a StringExcept), it adds a marker
item (a negative leaf: the row of `bitsets` holding them), which reads no byte and
tells `FlatDFA.free_bytes` what the state takes unwalked. A bounded graph (`ir.Bound`:
a pattern under a maxLength) is flattened with its twin, which does not count; its
states (state, count) are made as the closures reach them -- its frames hold state +
states * count, and `g_room` bounds the count -- and `FlatDFA.twin_of` rewrites a state
whose count cannot bind within a token into the twin's state, whose mask it shares.

The compiler's default (STRUCTGEN_AUTOMATON=python selects the Python one). The IR is
flattened at compile time, by compiled code that walks its objects (flattener.pyx);
nodes that several grammars share are flattened once per process (`SHARED`). The
store is numpy arrays grown by the Python side between calls (`FlatDFA.run`); its hash
table grows without moving a key in the step: the larger table starts empty, and the
kernels drain the smaller one into it a few slots at a time (`_grown`). The
token walk drives the rows' builder from compiled code (token_kernels.pyx, through
flat_kernels.pxd). The kernels are C extensions built when the package is installed
(`kernels.require` says so where they are not).
Its states' token masks are `flat_tokens.FlatTokens`, mixed in; it must not know about
vocabularies or the engine.
"""

from __future__ import annotations

import math
import threading
from operator import itemgetter

import numpy as np

from structgen.automata import kernels
from structgen.automata.dfa import DEAD, TableDFA
from structgen.automata.flat_tokens import FlatTokens
from structgen.automata.item_sets import MAX_STATE_ITEMS, too_ambiguous
from structgen.automata.liveness import Liveness
from structgen.automata.nfa import MAX_RULE_NESTING, LazyNFA
from structgen.automata import spares as spare_module
from structgen.automata.spares import AHEAD_AT, HASH_AHEAD_AT, Spares, filled, zeroed
from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.charset import json_body_ir

K_BYTES, K_BYTESET, K_CONCAT, K_ALT, K_REPEAT, K_GRAPH, K_REF, K_MEMBERS = range(8)
F_C, F_L, F_R, F_G, F_M = 1, 2, 3, 4, 5  # frame kinds: rest of a Concat, last item, Repeat, Graph state, Members state
F_W = 6  # a word of a wide Members mask: never a continuation, only a mask's handle (`flat_kernels.wide_mask`)
OP_ENTER, OP_RESUME, OP_GRAPH, OP_MEMBERS = 0, 1, 2, 3  # closure work items
# A Members node's record in `kids`, after its entries' first and later forms (n each);
# R_WORDS is 0 where the mask fits the state's index, else its number of words, and the
# required entries' mask follows it, in one word or in R_WORDS of them:
R_CLOSE_NONE, R_CLOSE_SOME, R_EXTRA_FIRST, R_EXTRA_LATER, R_MIN, R_MAX, R_WORDS, R_REQUIRED = range(8)
MASK_BITS = 62  # entries per word of a Members mask (a narrow mask is one word)
DONE = 0  # the empty continuation (frame 0)
# Per graph state of a bounded graph (`ir.Bound`): its twin graph's node and the twin
# state (-1, -1 where it has none), and the zone's top (`Bound.zone_top`).
G_TWIN_NODE, G_TWIN_STATE, G_ZONE_TOP = range(3)
G_COUNTED_FIELDS = 3
UNBOUNDED, NO_ROOM = -1, -2  # `g_room` of a graph state without a bound, and of one no path may enter
ACCEPT = 0  # item 0: the whole input matched (the smallest id: first in a sorted set)
MAX_FLAT_NODES = 200_000  # past this the IR is flattened too slowly for a compile


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
        (kind, a, b, c, kids, data, bitsets, g_final, g_edge_end, g_dst, g_label, g_free, g_counted, node_twin,
         g_room) = raw
        self.num_nodes, self.num_graph_states = kind.size, g_final.size
        self.kind, self.a, self.b, self.c, self.kids = kind, a, b, c, kids
        self.node_twin = node_twin if node_twin.size else np.full(1, -1, np.int64)
        self.data = data if data.size else np.zeros(1, np.uint8)
        self.bitsets = bitsets if bitsets.shape[0] else np.zeros((1, 4), np.uint64)
        self.g_final, self.g_free, self.g_counted, self.g_room = g_final, g_free, g_counted, g_room
        self.g_edge_start = np.concatenate([np.zeros(1, dtype=np.int64), g_edge_end])
        if not g_final.size:
            self.g_final, self.g_free = np.zeros(1, np.bool_), np.full(1, -1, np.int64)
            self.g_room = np.full(1, UNBOUNDED, np.int64)
            self.g_counted = np.full((1, G_COUNTED_FIELDS), -1, np.int64)
            self.g_edge_start = np.zeros(2, np.int64)
        self.g_dst, self.g_label = (g_dst, g_label) if g_dst.size else (np.zeros(1, np.int64), np.zeros(1, np.int64))
        # Liveness: settled for the nodes of `known` (which this block starts with),
        # worked out here for the others only.
        if known is None or known.num_nodes == self.num_nodes:  # nothing to work out
            self.nonempty = known.nonempty if known is not None else np.zeros(0, np.bool_)
            self.g_live = known.g_live if known is not None else np.zeros(1, np.bool_)
        else:
            self.nonempty, self.g_live = kernels.flat_kernels.liveness(
                kind, a, b, c, kids, self.g_final, self.g_edge_start, self.g_dst, self.g_label,
                known.nonempty[: known.num_nodes], known.g_live[: known.num_graph_states])


_EMPTY_BLOCK = _Block({}, {}, (
    *(np.zeros(0, dtype=np.int64) for _ in range(5)), np.zeros(0, dtype=np.uint8), np.zeros((0, 4), dtype=np.uint64),
    np.zeros(0, dtype=np.bool_), *(np.zeros(0, dtype=np.int64) for _ in range(4)),
    np.zeros((0, G_COUNTED_FIELDS), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
), None)


def _block_of(flattener, base: _Block, with_ids: bool = True) -> _Block:
    """The base and the nodes a `flattener.Flattener` added, as one block. A block that
    no flattener will start from needs no ids (merging the shared block's is ~1 ms)."""
    if not with_ids:
        return _Block({}, {}, flattener.raw(), base)
    return _Block({**base.ids, **flattener.ids}, {**base.bitset_of, **flattener.bitset_of}, flattener.raw(), base)


_SOURCE = itemgetter(0)  # an edge's source state


class FlatIR:
    """An IR graph as arrays: per node id its kind and three ints (a, b, c), with pools.

    BYTES a = offset in `data`, b = length;  BYTESET a = row of `bitsets` (4 x u64);
    CONCAT a = offset in `kids`, b = count;  ALT the same;
    REPEAT a = item, b = min, c = max (-1: unbounded);  REF a = target;
    GRAPH a = offset of its states in the graph pools, b = start state, c = states. Graph
    state g (offset + state) is final when `g_final[g]`; its edges are
    `g_edge_start[g]:g_edge_start[g + 1]` into `g_dst`, `g_label` (-1: epsilon);
    `g_free[g]`: the row of `bitsets` of its free bytes, or -1. `g_room[g]`: UNBOUNDED in
    a graph without a bound; in a bounded one (`ir.Bound`), the most labels a path may
    have read on entering g and still reach an end within the bound (NO_ROOM: none).
    A bounded graph's frame index is state + states * labels read.
    MEMBERS a = offset in `kids` of its record, b = entries (n), c = cap on the count:
    the record is the n entries as first member, the n as later member, then the
    fields R_CLOSE_NONE ... R_REQUIRED (node ids, -1 for no extra member; min and max
    count, -1: no max; the mask's words and the required mask, see R_WORDS). Its state
    (mask, count) is mask * (cap + 1) + count, the mask its bits where they fit (entry i
    is bit i), else a handle (`flat_kernels.wide_mask`).
    `nonempty[n]`: the node's language has a string; `g_live[g]`: an end of the graph
    can be reached from state g. The automaton enters only such nodes and states, so
    every item can reach acceptance.

    The first ids are the nodes shared between grammars (`SHARED`), whether this one
    uses them or not; only the others are flattened here."""

    def __init__(self, root: ir.Node):
        kernels.require()
        base = SHARED.base()
        flattener = kernels.flattener.Flattener(base)
        nodes, steppers = flattener.new_nodes(root, MAX_FLAT_NODES)
        flattener.add(nodes, steppers)
        self.root = flattener.id_of(root)
        SHARED.met(nodes, steppers)
        block = _block_of(flattener, base, with_ids=False)
        self.num_nodes = block.num_nodes
        self.nonempty = block.nonempty
        self.has_free = bool((block.g_free >= 0).any())
        # (not in `arrays`: only the twin check reads them, `flat_kernels.twin_of` from
        # `FlatDFA.twin_of` and from a mask's call, `FlatTokens.state_tokens`)
        self.g_counted, self.node_twin = block.g_counted, block.node_twin
        self.has_counted = bool((block.g_counted[:, G_TWIN_NODE] >= 0).any() or (block.node_twin >= 0).any())
        # The node of any JSON string body, where this IR has it: a state in such a body
        # takes its mask from tables made once per vocabulary (`flat_kernels.body_exit`).
        body = id(json_body_ir())
        self.body_node = flattener.ids.get(body, base.ids.get(body, -1))
        self.arrays = (
            block.kind, block.a, block.b, block.c, block.kids, block.data, block.bitsets, block.nonempty,
            block.g_final, block.g_edge_start, block.g_dst, block.g_label, block.g_live, block.g_free,
            block.g_room,
        )
        # the ids of the IR's objects: those flattened here, and the shared nodes' block
        # (whose ids never change; read when asked, so that no old block is kept alive)
        self._node_ids: tuple[dict[int, int], _SharedNodes] | None = (flattener.ids, SHARED)

    def liveness(self) -> "FlatLiveness":
        """Which nodes of the flattened IR are non-empty, for the Python code that reads
        the IR's objects (`nfa.LazyNFA`, covering examples). Only in the process that
        flattened it, while the IR lives."""
        if self._node_ids is None:
            raise RuntimeError("a FlatIR sent from another process has no liveness of IR objects")
        own, shared = self._node_ids
        return FlatLiveness(own, shared, self.arrays)

    def __getstate__(self) -> dict:
        """Sent to another process without the ids of the IR's objects (meaningless there)."""
        return {**self.__dict__, "_node_ids": None}


class FlatLiveness(Liveness):
    """`liveness.Liveness` read from a FlatIR's arrays, which `flat_kernels.liveness`
    has worked out (`nonempty` per node, `g_live` per graph state)."""

    def __init__(self, own_ids: dict[int, int], shared: "_SharedNodes", arrays: tuple[np.ndarray, ...]):
        super().__init__()
        self._own_ids = own_ids
        self._shared = shared
        self._answers: dict[int, bool] = {}  # nonempty, by node id
        self._graph_offset = arrays[1]  # per node, where a Graph's states start
        self._nonempty = arrays[7].tobytes()
        self._edge_start, self._edge_label, self._g_live = arrays[9], arrays[11], arrays[12].tobytes()

    def _index(self, node: ir.Node) -> int:
        key = id(node)
        index = self._own_ids.get(key)
        return self._shared.base().ids[key] if index is None else index

    def nonempty(self, node: ir.Node) -> bool:
        answer = self._answers.get(id(node))
        if answer is None:
            answer = self._answers[id(node)] = self._nonempty[self._index(node)] != 0
        return answer

    def _states(self, graph: ir.Graph) -> tuple[int, bytes]:
        """Where a graph's states start in the flat arrays, and which are live."""
        offset = int(self._graph_offset[self._index(graph)])
        return offset, self._g_live[offset: offset + graph.num_states]

    def live_states(self, graph: ir.Graph) -> frozenset[int]:
        return frozenset(state for state, flag in enumerate(self._states(graph)[1]) if flag)

    def graph_live(self, graph: ir.Graph) -> tuple[frozenset[int], dict[int, list]]:
        """See Liveness.graph_live: the labels' liveness read from the flattened edges,
        which are the graph's grouped by source state (`flattener.Flattener`)."""
        cached = self._graph_live.get(id(graph))
        if cached is not None:
            return cached
        offset, live = self._states(graph)
        labels = self._edge_label[self._edge_start[offset]: self._edge_start[offset + graph.num_states]].tolist()
        nonempty = self._nonempty
        adjacency: dict[int, list] = {}
        for (s, d, label), label_id in zip(sorted(graph.edges, key=_SOURCE), labels):
            if live[s] and live[d] and (label_id < 0 or nonempty[label_id]):
                adjacency.setdefault(s, []).append((d, label))
        states = frozenset(state for state, flag in enumerate(live) if flag)
        result = self._graph_live[id(graph)] = (states, adjacency)
        return result


def _weight(node: ir.Node) -> int:
    """What a node met once holds in memory, in nodes: one, and a Graph's edges and
    states (a bounded graph keeps its twin rows and room per state) or a Stepper's states."""
    if isinstance(node, ir.Graph):
        return 1 + len(node.edges) + node.num_states
    return 1 + node.size() if isinstance(node, ir.Stepper) else 1


class _SharedNodes:
    """The IR nodes that more than one grammar holds (the same objects: a JSON string's
    characters, number lexemes, the rules of any JSON value, memoized by the grammar
    builders), flattened once per process into a block every FlatIR starts with: about
    70% of the nodes of a JSON schema's IR are shared.

    A node is shared the second time a FlatIR meets it. The nodes met once are held
    (their ids must not be reused by other objects while counted) up to MAX_SIGHTINGS,
    each counted with its graph edges and states (`_weight`: what it holds in memory; a
    pattern under a long maxLength is ~10,000 and ~1 MB), then forgotten. The shared
    block stops growing at MAX_NODES, since every FlatIR copies it (~50 bytes a node)
    into its own arrays."""

    MAX_SIGHTINGS = 100_000
    MAX_NODES = 10_000

    def __init__(self):
        self._lock = threading.Lock()
        self._block = _EMPTY_BLOCK
        self._met_once: dict[int, ir.Node] = {}
        self._met_weight = 0  # the `_weight`s of the nodes in _met_once
        self._alive: list[ir.Node] = []  # the nodes whose ids the block holds

    def base(self) -> _Block:
        return self._block

    def met(self, nodes: list[ir.Node], steppers: list[ir.Stepper]) -> None:
        """Count the new nodes of a FlatIR; add to the block those met before whose
        descendants are all shared."""
        with self._lock:
            if self._block.num_nodes >= self.MAX_NODES:
                return
            if self._met_weight > self.MAX_SIGHTINGS:
                self._met_once.clear()
                self._met_weight = 0
            again: dict[int, ir.Node] = {}
            for node in [*nodes, *steppers]:
                key = id(node)
                if key in self._block.ids:
                    continue
                weight = _weight(node)
                if self._met_once.pop(key, None) is node:
                    again[key] = node
                    self._met_weight -= weight
                else:
                    self._met_once[key] = node
                    self._met_weight += weight
            self._drop_unshared_below(again)
            if again:
                base = self._block
                flattener = kernels.flattener.Flattener(base)
                flattener.add([n for n in again.values() if not isinstance(n, ir.Stepper)],
                              [n for n in again.values() if isinstance(n, ir.Stepper)])
                self._alive += again.values()
                self._block = _block_of(flattener, base)  # a new block: FlatIRs being built hold the old

    def _drop_unshared_below(self, again: dict[int, ir.Node]) -> None:
        """Remove from `again` every node with a descendant that is neither in the block
        nor in `again`: one pass that drops the nodes with an unshared child, then their
        parents in `again`, and so on upwards."""
        known = self._block.ids
        parents: dict[int, list[int]] = {}
        dropped: list[int] = []
        for key, node in again.items():
            for child in kernels.flattener.children(node):
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


# ----------------------------------------------------------------- the mutable store

# The store: every table one automaton grows, as numpy arrays that the kernels index
# through raw pointers (flat_kernels.pyx takes them as `FlatIR.arrays` and this list).
# `meta` holds the counts; one open-addressing hash table maps keys (tag, k1, k2, k3,
# k4) to ints. The constants below are the kernels' too (flat_kernels.pxd; a test
# checks they are equal).
M_FRAMES, M_ITEMS, M_SETS, M_SET_ITEMS, M_STATES, M_HASHED, M_FAILED = range(7)
M_DRAINED = 7  # the slots of the table being drained (S_OLD_HASH) moved so far
# A call that cannot go on -- an array is full, the grammar is too ambiguous or nests
# too deep, or memory ran out -- records why in meta[M_FAILED], writes nothing more,
# and returns up the chain to `FlatDFA.run`, which grows the array and runs it again or
# raises the error. Kernels run without the GIL and grow no array: Python owns every
# array and its size. Growth codes are 1 + the count that is full.
GROW_FRAMES, GROW_ITEMS, GROW_SETS, GROW_SET_ITEMS, GROW_STATES, GROW_HASH = range(1, 7)
FAILED_AMBIGUOUS, FAILED_NESTING, FAILED_MEMORY = 7, 8, 9
(S_META, S_FRAMES, S_ITEMS, S_SET_START, S_SET_ITEMS, S_STATE_SET, S_STATE_NEXT, S_HASH, S_OLD_HASH) = range(9)
T_FRAME, T_ITEM, T_CLOSURE, T_SINGLE, T_STATE_OF_SET, T_STATE_HASH = range(6)
# Columns of a frame past its key (kind, node, index, parent), and of an item past its
# key (leaf, offset, frame, 0): what is worked out from them once (-1 until then).
FRAME_RESUMED = 4  # the set of items its resumption reaches
ITEM_TARGET, ITEM_TARGET_STATE = 4, 5  # the set the item's byte leads to, and its state
HASH_VALUE = 5  # a hash slot: tag, 4 keys, value + 1 (0: empty), in one row (one cache line)


def _new_store() -> list[np.ndarray]:
    """An empty store. Its hash table starts at 8,192 slots: starting at 2,048 saved a
    median compile ~17 us of filling, but the tables that then grew while decoding put
    MaskBench's TBM p99 up ~10% (56 against 50 us)."""
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
        np.zeros((8192, 6), dtype=np.int64),  # hash slots: tag, keys, value + 1
        _no_slots(),  # the table a growth replaced, drained into the one above while in use
    ]


def _no_slots() -> np.ndarray:
    return np.zeros((0, 6), dtype=np.int64)


# Each store array, and the count that says how full it is (the hash grows at half load).
_STORE_COUNTS = ((S_FRAMES, M_FRAMES, 1), (S_ITEMS, M_ITEMS, 1), (S_SET_START, M_SETS, 1), (S_SET_ITEMS, M_SET_ITEMS, 1),
                 (S_STATE_SET, M_STATES, 1), (S_STATE_NEXT, M_STATES, 1), (S_HASH, M_HASHED, 2))


def _doubled_shape(array: np.ndarray) -> tuple[int, ...]:
    return (2 * array.shape[0], *array.shape[1:])


def _grown(store: list[np.ndarray], what: int, spares: Spares) -> None:
    """Double the array a kernel ran out of (its count: `meta[what]`), in place in
    `store`, into the spare made ahead for it where there is one (all -1). The hash
    table's keys are not moved here: the larger table starts empty, and the kernels
    drain the smaller one into it as they go (`flat_kernels.hroom`), where moving them
    at once took one step 3.3 ms at 262,144 slots."""
    index = {M_FRAMES: S_FRAMES, M_ITEMS: S_ITEMS, M_SETS: S_SET_START, M_SET_ITEMS: S_SET_ITEMS,
             M_HASHED: S_HASH}.get(what)
    if index == S_HASH:
        _start_draining(store)
        store[S_HASH] = _larger_hash(store[S_HASH], spares)
        return
    for i in (index,) if index is not None else (S_STATE_SET, S_STATE_NEXT):
        old = store[i]
        new = spares.take(f"store{i}", _doubled_shape(old), np.int64)
        if new is None:  # not ready, or it filled in one call: have the next made at once
            new = filled(_doubled_shape(old), np.int64, ones=True)
            _ask_spare(spares, i, new)
        new[: old.shape[0]] = old
        store[i] = new


def _larger_hash(table: np.ndarray, spares: Spares) -> np.ndarray:
    """An empty hash table twice as large: the spare if it is made, else one of zero
    pages not yet touched (an empty table as it is), rather than wait for the spare."""
    shape = _doubled_shape(table)
    larger = spares.take(f"store{S_HASH}", shape, np.int64, wait_made=False)
    if larger is None:
        larger = zeroed(shape, np.int64)
        _ask_spare(spares, S_HASH, larger)
    return larger


def _start_draining(store: list[np.ndarray]) -> None:
    """Make the full hash table the one to drain into the larger one that replaces it,
    once the one drained before is all moved (it is, but for a table that filled in one
    call)."""
    meta = store[S_META]
    if meta[M_DRAINED] < store[S_OLD_HASH].shape[0]:
        kernels.flat_kernels.drain_entry(store, store[S_OLD_HASH].shape[0])
    store[S_OLD_HASH] = store[S_HASH]
    meta[M_HASHED] = 0
    meta[M_DRAINED] = 0


# Slots of a table being drained moved after each automaton call (~5 us), besides those
# the kernels move as they add keys: a walk over rows already built adds none.
DRAIN_PER_CALL = 1024


def _drain_some(store: list[np.ndarray]) -> None:
    """Drain DRAIN_PER_CALL more slots of the table being drained; let it go once done."""
    if store[S_META][M_DRAINED] < store[S_OLD_HASH].shape[0]:
        kernels.flat_kernels.drain_entry(store, DRAIN_PER_CALL)
    if store[S_META][M_DRAINED] >= store[S_OLD_HASH].shape[0]:
        store[S_OLD_HASH] = _no_slots()
        store[S_META][M_DRAINED] = 0


def _ask_spare(spares: Spares, i: int, array: np.ndarray) -> None:
    """Have the next size of store array `i` (now `array`) made in the background: -1
    throughout, or zeros for the hash table (its pages touched ahead)."""
    if i == S_HASH:
        spares.prepare(f"store{i}", _doubled_shape(array), np.int64, 2 * array.nbytes, touched_rows=2 * len(array))
    else:
        spares.prepare(f"store{i}", _doubled_shape(array), np.int64, 2 * array.nbytes, ones=True)


TABLE = -1  # in `_ahead_points`: the DFA table rather than a store array


def _ahead_points(table: np.ndarray, store: list[np.ndarray]) -> list[tuple[int, int, int]]:
    """(meta count, value, array): once the count reaches the value, the array (a store
    index, or TABLE) is most of the way to full (`AHEAD_AT`; the hash table half way,
    `HASH_AHEAD_AT`). Only arrays big enough for
    a spare have one, so that a small automaton, most of them, skips the check after
    each call (~2.6 us, against ~0.1 us for the empty list)."""
    points = []
    smallest = spare_module.MIN_SPARE_BYTES  # (read at each call: tests lower it)
    if 2 * table.nbytes >= smallest:
        points.append((M_STATES, math.ceil(AHEAD_AT * len(table)), TABLE))
    for i, count, per in _STORE_COUNTS:
        if 2 * store[i].nbytes >= smallest:
            share = HASH_AHEAD_AT if i == S_HASH else AHEAD_AT
            points.append((count, math.ceil(share * len(store[i]) / per), i))
    return points


QUOTE = 0x22
BODY_FRAME_DEPTH = 4  # how far up an item's continuation a body's Repeat frame may be

_NO_PATH = np.zeros(0, dtype=np.int64)  # `walk_entry` records no path

_ERRORS = {
    FAILED_AMBIGUOUS: too_ambiguous,
    FAILED_MEMORY: lambda: MemoryError("out of memory while building the grammar automaton's rows"),
    FAILED_NESTING: lambda: GrammarTooLargeError(
        f"a rule nests more than {MAX_RULE_NESTING} times without consuming input "
        "(left recursion through an optional prefix?)"),
}


class FlatDFA(FlatTokens, TableDFA):
    """A lazily built DFA over a `FlatIR`, rows built in compiled code (see the module
    doc); its states' token masks are `flat_tokens.FlatTokens`, mixed in."""

    def __init__(self, nfa: LazyNFA | None, *, max_states: int = 200_000, flat: FlatIR | None = None,
                 empty: bool = False):
        """The automaton of `nfa`'s IR, or, with nfa None, of an IR flattened elsewhere
        (`flat`, whose language has no string where `empty`: a compile worker process
        sends arrays rather than the IR's Python objects). The NFA is kept for what reads
        the IR in Python (covering examples)."""
        if nfa is not None:
            flat, empty = FlatIR(nfa.root), nfa.is_empty_language
        # Room for 1,024 states from the start (most automata never need more): the
        # table is not written ahead, so the pages of rows never built cost nothing, and
        # no doubling copies it on a decoding step.
        super().__init__(max_states, initial_states=1024)
        self.nfa = nfa
        self.flat = flat
        self._store = _new_store()
        self._free: dict[int, np.ndarray | None] = {}
        # (meta count, value, array): where an array is due a spare (`_ahead_points`);
        # None: to be worked out again (an array grew)
        self._ahead: list[tuple[int, int, int]] | None = None
        self.start = DEAD
        if not empty:
            with self.lock:
                self.start = self.run(kernels.flat_kernels.start_entry, lambda: (self.accepting, self.flat.root))

    def example_made(self) -> None:
        """Let the IR go: it was kept for the example only, and its objects (tens of
        thousands for a large schema) would be rescanned by every garbage collection
        while the grammar decodes."""
        self.nfa = None

    @classmethod
    def of_flat(cls, flat: FlatIR, empty: bool, *, max_states: int = 200_000) -> "FlatDFA":
        """The automaton of an IR flattened elsewhere; it has no `nfa`."""
        return cls(None, max_states=max_states, flat=flat, empty=empty)

    @property
    def num_states(self) -> int:
        return int(self._store[S_META][M_STATES])

    def nbytes(self) -> int:
        """See TableDFA.nbytes: with the store (items, frames, sets) and the flat IR."""
        arrays = (*self._store, *self.flat.arrays, self.flat.g_counted, self.flat.node_twin)
        return super().nbytes() + sum(a.nbytes for a in arrays) + self.spares.nbytes()

    def run(self, fn, args, max_items: int | None = None):
        """Run compiled code over this automaton: `fn(IR arrays, store, *args(), max
        items, max nesting)`. Where it ran out of room in the store or the per-state
        arrays, grow that array and run it again (a call changes nothing it cannot redo);
        past the state budget, or a state of more than `max_items` items (None:
        MAX_STATE_ITEMS), GrammarTooLargeError. Under the automaton's lock.

        Arrays grow only when full: a row adds two states on average but may add 256,
        and keeping room for that ahead doubled the table of many automata that never
        needed it -- each doubling on a decoding step is ~0.4 ms (1,024 rows) to ~5 ms
        (4,096, huge pages) of copying into fresh pages. The rare call that meets a
        full array runs twice instead. The next size of a big array is made ahead, off
        the step, once it is three quarters full (`spares.Spares`)."""
        meta = self._store[S_META]
        max_items = MAX_STATE_ITEMS if max_items is None else max_items
        while True:
            self._reserve()
            result = fn(self.flat.arrays, self._store, *args(), max_items, MAX_RULE_NESTING)
            failed = int(meta[M_FAILED])
            if failed:
                meta[M_FAILED] = 0
                if failed in _ERRORS:
                    raise _ERRORS[failed]()
                if failed != GROW_STATES:  # those _reserve grows
                    _grown(self._store, failed - 1, self.spares)
                    self._ahead = None
                continue
            if meta[M_STATES] > self.max_states:
                raise self.too_many_states()
            if len(self._store[S_OLD_HASH]):  # a hash table a growth replaced, still draining
                _drain_some(self._store)
            if self._ahead is None:
                self._ahead = _ahead_points(self.table, self._store)
            if self._ahead:  # (none in a small automaton: it checks nothing more)
                self._room_ahead_if_due(meta.tolist())
            return result

    def _room_ahead_if_due(self, counts: list[int]) -> None:
        """Have the next size of the arrays most of the way to full made ahead (once
        each until they grow)."""
        due = [point for point in self._ahead if counts[point[0]] >= point[1]]
        for _, _, array in due:
            if array == TABLE:
                self._room_ahead(counts[M_STATES])
            else:
                _ask_spare(self.spares, array, self._store[array])
        if due:
            self._ahead = [point for point in self._ahead if point not in due]

    def _reserve(self) -> None:
        """Room in the per-state arrays for one more state (after a call failed on
        GROW_STATES, they are full)."""
        needed = int(self._store[S_META][M_STATES]) + 1  # (asked at every call: no property)
        while needed > self.table.shape[0]:
            self._grow()
            self._ahead = None
        while needed > self._store[S_STATE_SET].size:
            _grown(self._store, M_STATES, self.spares)
            self._ahead = None

    def _build_row(self, sid: int) -> None:
        self.run(kernels.flat_kernels.expand_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid))

    def walk(self, sid: int, data: bytes) -> int:
        """See TableDFA.walk: in one compiled call, through built rows, and by `flat_kernels.step`
        where a row is not built (no row is built on the way)."""
        if sid < 0:
            return DEAD
        if not data:
            return sid
        codes = np.frombuffer(bytes(data), dtype=np.uint8)  # bytes or bytearray: one argument type
        with self.lock:
            return int(self.run(kernels.flat_kernels.walk_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid, codes,
                                                      _NO_PATH)))

    def path(self, sid: int, data: bytes, max_items: int | None = None) -> np.ndarray:
        """See TableDFA.path: in one compiled call, as `walk`."""
        path = np.full(len(data) + 1, DEAD, dtype=np.int64)
        path[0] = sid
        if sid >= 0 and data:
            codes = np.frombuffer(bytes(data), dtype=np.uint8)
            with self.lock:
                self.run(kernels.flat_kernels.walk_entry, lambda: (self.table, self.expanded, self.loops, self.accepting, sid, codes,
                                               path[1:]), max_items)
        return path

    def free_bytes(self, sid: int) -> np.ndarray | None:
        """See TableDFA.free_bytes: from the markers the closures put in the state's set
        where they passed a graph state with free bytes (the trie of a StringExcept)."""
        free = self._free.get(sid, False)
        if free is False:
            self.expand(sid)  # its loops are known once its row is built
            free = None
            if self.flat.has_free:
                with self.lock:
                    free, beyond_loops = kernels.flat_kernels.free_entry(self.flat.arrays, self._store, self.loops,
                                                                        self.accepting, sid)
                if not beyond_loops:
                    free = None  # no more than its loops: the LoopSlice path covers it
            self._free[sid] = free
        return free

    def twin_of(self, sid: int, longest: int) -> int:
        """A state whose mask is state `sid`'s, for tokens of at most `longest` bytes,
        or DEAD (`flat_kernels.twin_of`). Inside a string under a maxLength every count is a state
        of its own, and a mask's walk from one builds the rows of every count (and
        pattern state) its tokens reach -- ~1,800 states in MaskBench's word-count
        patterns, 10-130 ms in one step; ~700 in a plain string. Where the count cannot
        bind within a token, the state's twin, which counts no further than minLength,
        has the same mask: its walk builds the rows of the pattern's states only, and
        the states of every count share it. Such a mask comes without the rows of its
        tokens' paths."""
        if not self.flat.has_counted or sid < 0:
            return DEAD
        with self.lock:
            return int(self.run(kernels.flat_kernels.twin_entry, lambda: (self.flat.g_counted, self.flat.node_twin, self.accepting, sid,
                                                      longest)))

    def body_exit(self, sid: int) -> int:
        """The state after the closing quote of the JSON string body `sid` is in, or
        DEAD where it is not such a state (`flat_kernels.body_exit`; tests)."""
        with self.lock:
            return int(self.run(kernels.flat_kernels.body_exit_entry, lambda: (self.accepting, sid, self.flat.body_node)))

    def items_of(self, sid: int) -> np.ndarray:
        """The item ids of state `sid` (tests)."""
        return kernels.flat_kernels.items_entry(self._store, sid)
