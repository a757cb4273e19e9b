# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The flattening of IR objects into the node arrays of the flat automaton (flat.py).

Owns: `Flattener`, which finds the `ir.Node`s reachable from a root that a base block
does not hold, gives them the next ids, and writes their fields into growable C
columns, then hands back the base's arrays with its own after them (`raw`); and
`children`, the nodes one node leads to. The layouts and their docs are flat.py's
(`FlatIR`); this is their writer, compiled because every compile flattens a few
hundred nodes and Python took a few us for each. Must not decide what is shared or
live (flat.py does), nor know vocabularies, tokens or the engine.
"""

from cpython.long cimport PyLong_FromVoidPtr
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

import numpy as np

cimport numpy as cnp

from structgen.automata.flat_kernels cimport (G_COUNTED_FIELDS, K_ALT, K_BYTES, K_BYTESET, K_CONCAT, K_GRAPH,
                                              K_MEMBERS, K_REF, K_REPEAT, MASK_BITS, NO_ROOM, UNBOUNDED)

from structgen.grammar import ir

cnp.import_array()

cdef enum:
    MAX_MEMBERS_CAP_BITS = 24  # a wide mask's handle (a frame id) times the count's cap stays in an int64

cdef object Bytes = ir.Bytes, ByteSet = ir.ByteSet, Concat = ir.Concat, Alt = ir.Alt, Repeat = ir.Repeat
cdef object Graph = ir.Graph, Ref = ir.Ref, Members = ir.Members, Stepper = ir.Stepper
# The kinds in the order a subclass of one is matched (isinstance), and their codes.
cdef tuple KINDS = ((Bytes, K_BYTES), (ByteSet, K_BYTESET), (Concat, K_CONCAT), (Alt, K_ALT), (Repeat, K_REPEAT),
                    (Graph, K_GRAPH), (Ref, K_REF), (Members, K_MEMBERS))
cdef uint64_t WORD_MASK = 0xFFFF_FFFF_FFFF_FFFF
cdef object MASK_WORD = (<object>1 << MASK_BITS) - 1  # one word of a Members mask (a Python int)


cdef struct Column:  # a growable array of int64 (or of bytes: `width` 1)
    char* data
    Py_ssize_t size  # elements written
    Py_ssize_t cap  # elements room was made for
    Py_ssize_t width  # bytes an element


cdef int reserve(Column* column, Py_ssize_t more) except -1:
    """Room for `more` elements past the size."""
    cdef Py_ssize_t cap = column.cap
    cdef char* grown
    if column.size + more <= cap:
        return 0
    cap = max(2 * cap, column.size + more, 64)
    grown = <char*>realloc(column.data, cap * column.width)
    if grown == NULL:
        raise MemoryError("out of memory while flattening a grammar")
    column.data, column.cap = grown, cap
    return 0


cdef inline int push(Column* column, int64_t value) except -1:
    if column.size == column.cap:
        reserve(column, 1)
    (<int64_t*>column.data)[column.size] = value
    column.size += 1
    return 0


cdef inline object key_of(object node):
    """The key of an IR object in the ids dicts: its id()."""
    return PyLong_FromVoidPtr(<void*>node)


# The columns, in the order of a block's `raw` (flat.py's `_Block`): width in bytes,
# numpy dtype, and the row length of the two-dimensional ones.
cdef enum:
    C_KIND, C_A, C_B, C_C, C_KIDS, C_DATA, C_BITSETS, C_G_FINAL, C_G_EDGE_END, C_G_DST, C_G_LABEL, C_G_FREE
    C_G_COUNTED, C_NODE_TWIN, C_G_ROOM, N_COLUMNS
cdef tuple ROW_LENGTHS = (1, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, G_COUNTED_FIELDS, 1, 1)


cdef class Flattener:
    """Flattens the nodes reachable from some roots that `base` (a flat.py `_Block`)
    does not hold, after it: their ids and pool offsets continue where the base's end.

    `ids`: id() of each IR object flattened here -> its node id (a Stepper has its
    plain form's); `bitset_of`: the rows of `bitsets` added here, by their byte ranges
    (or ("bits", n))."""

    cdef readonly dict ids, bitset_of
    cdef dict base_ids, base_bitset_of
    cdef tuple base_raw
    cdef Column columns[N_COLUMNS]
    cdef Py_ssize_t base_rows[N_COLUMNS]  # rows of each field in the base

    def __cinit__(self, base):
        cdef int i
        self.base_raw = base.raw
        self.base_ids, self.base_bitset_of = base.ids, base.bitset_of
        self.ids, self.bitset_of = {}, {}
        for i in range(N_COLUMNS):
            self.columns[i].data = NULL
            self.columns[i].size = self.columns[i].cap = 0
            self.columns[i].width = 1 if i == C_DATA or i == C_G_FINAL else 8
            self.base_rows[i] = (<cnp.ndarray>self.base_raw[i]).shape[0]

    def __dealloc__(self):
        cdef int i
        for i in range(N_COLUMNS):
            free(self.columns[i].data)

    # -- ids

    cpdef Py_ssize_t id_of(self, node) except -1:
        """The node id of an IR object flattened here or in the base."""
        key = key_of(node)
        got = self.ids.get(key)
        return self.base_ids[key] if got is None else got

    cdef int push_ids(self, items) except -1:
        """The ids of `items` (a sequence of IR objects) onto `kids`."""
        cdef Column* kids = &self.columns[C_KIDS]
        for item in items:
            push(kids, self.id_of(item))
        return 0

    cdef inline bint known(self, object key, set met):
        return key in self.ids or key in self.base_ids or key in met

    # -- the walk

    def new_nodes(self, root, Py_ssize_t limit):
        """The nodes reachable from `root` that have no id yet, parents first as a
        depth-first walk meets them, and the Steppers among them (kept apart: a Stepper
        takes the id of its plain() form)."""
        cdef list order = [], steppers = [], pending = [root]
        cdef set met = set()
        while pending:  # iteratively: IR trees nest deep
            node = pending.pop()
            key = key_of(node)
            if self.known(key, met):
                continue
            met.add(key)
            cls = type(node)
            if cls is not Concat and cls is not Alt and cls is not Bytes and cls is not ByteSet:
                if isinstance(node, Stepper):
                    steppers.append(node)
                    pending.append(node.plain())
                    continue
                check_members(node)
            if len(order) >= limit:
                unsupported(f"more than {limit:,} IR nodes")
            order.append(node)
            if cls is Concat or cls is Alt:
                pending.extend((<object>node).items)
            elif cls is Graph:
                pending.extend(graph_children(node))
            elif cls is not Bytes and cls is not ByteSet:
                pending.extend(children(node))
        return order, steppers

    def add(self, list nodes, list steppers):
        """Give `nodes` the next ids and `steppers` their plain forms' ids, then fill in
        the nodes' fields: rules may refer to themselves, so every id must exist before
        any node lists its children."""
        cdef Py_ssize_t first = self.base_rows[C_KIND] + self.columns[C_KIND].size, i
        cdef dict ids = self.ids
        for i in range(len(nodes)):
            ids[key_of(nodes[i])] = first + i
        for stepper in steppers:
            ids[key_of(stepper)] = self.id_of(stepper.plain())
        for node in nodes:
            self.fill(node, kind_of(node))

    # -- a node's fields

    cdef int node_fields(self, int64_t kind, int64_t a, int64_t b, int64_t c, int64_t twin) except -1:
        push(&self.columns[C_KIND], kind)
        push(&self.columns[C_A], a)
        push(&self.columns[C_B], b)
        push(&self.columns[C_C], c)
        push(&self.columns[C_NODE_TWIN], twin)
        return 0

    cdef int fill(self, node, int kind) except -1:
        cdef Py_ssize_t kids_at = self.base_rows[C_KIDS] + self.columns[C_KIDS].size
        cdef bytes data
        if kind == K_BYTES:
            data = node.data
            self.node_fields(K_BYTES, self.base_rows[C_DATA] + self.columns[C_DATA].size, len(data), -1, -1)
            reserve(&self.columns[C_DATA], len(data))
            memcpy(self.columns[C_DATA].data + self.columns[C_DATA].size, <char*>data, len(data))
            self.columns[C_DATA].size += len(data)
        elif kind == K_BYTESET:
            self.node_fields(K_BYTESET, self.bitset_row(node.ranges), 0, -1, -1)
        elif kind == K_CONCAT or kind == K_ALT:
            items = node.items
            self.node_fields(kind, kids_at, len(items), -1, -1)
            self.push_ids(items)
        elif kind == K_REPEAT:
            twin = node.twin
            high = node.max
            self.node_fields(K_REPEAT, self.id_of(node.item), node.min, -1 if high is None else high,
                             -1 if twin is None else self.id_of(twin))
        elif kind == K_REF:
            self.node_fields(K_REF, self.id_of(node.target), 0, -1, -1)
        elif kind == K_GRAPH:
            self.fill_graph(node)
        else:
            self.fill_members(node, kids_at)
        return 0

    cdef int fill_graph(self, node) except -1:
        """A Graph's states, each with its edges (in the graph's order) together."""
        cdef Py_ssize_t n = node.num_states, state, m, i, at, states_at
        cdef tuple edges = node.edges
        cdef Column* dst = &self.columns[C_G_DST]
        cdef Column* label = &self.columns[C_G_LABEL]
        cdef Column* ends = &self.columns[C_G_EDGE_END]
        cdef int64_t* starts
        cdef int64_t edges_before = self.base_rows[C_G_DST] + dst.size
        states_at = self.base_rows[C_G_FINAL] + self.columns[C_G_FINAL].size
        self.node_fields(K_GRAPH, states_at, node.start, n, -1)
        m = len(edges)
        # Each state's edges together, in the graph's order (a stable counting sort by
        # source): its end goes into `ends`, then serves as where its next edge goes.
        reserve(ends, n)
        starts = (<int64_t*>ends.data) + ends.size
        for state in range(n):
            starts[state] = 0
        for edge in edges:
            starts[<Py_ssize_t>(<tuple>edge)[0]] += 1
        at = edges_before
        for state in range(n):
            at += starts[state]
            starts[state] = at - starts[state]  # where the state's first edge goes
        reserve(dst, m)
        reserve(label, m)
        for edge in edges:
            state = (<tuple>edge)[0]
            i = starts[state] - edges_before
            starts[state] += 1
            (<int64_t*>dst.data)[dst.size + i] = (<tuple>edge)[1]
            target = (<tuple>edge)[2]
            (<int64_t*>label.data)[label.size + i] = -1 if target is None else self.id_of(target)
        dst.size += m
        label.size += m
        ends.size += n  # each start has become its state's end
        self.graph_states(node, n)
        return 0

    cdef int graph_states(self, node, Py_ssize_t n) except -1:
        """A Graph's per-state fields: final, free bytes, twin row and room."""
        cdef Column* final = &self.columns[C_G_FINAL]
        cdef Py_ssize_t state, base = final.size
        cdef int64_t twin, zone_top, top
        reserve(final, n)
        for state in range(n):
            (<uint8_t*>final.data)[base + state] = 0
        for state in node.finals:
            (<uint8_t*>final.data)[base + <Py_ssize_t>state] = 1
        final.size += n
        free_bytes = node.free
        for state in range(n):
            push(&self.columns[C_G_FREE], self.bits_row(free_bytes[state]) if free_bytes and free_bytes[state] else -1)
        bound = node.bound
        counted, room = &self.columns[C_G_COUNTED], &self.columns[C_G_ROOM]
        if bound is None:
            for state in range(n):
                push(counted, -1)
                push(counted, -1)
                push(counted, 0)
                push(room, UNBOUNDED)
            return 0
        twin, zone_top, top = self.id_of(bound.twin), bound.zone_top, bound.max
        for state in range(n):
            push(counted, twin)
            push(counted, state)
            push(counted, zone_top)
        for need in bound.need:
            push(room, top - need if need <= top else NO_ROOM)
        return 0

    cdef int fill_members(self, node, Py_ssize_t kids_at) except -1:
        cdef Column* kids = &self.columns[C_KIDS]
        cdef Py_ssize_t words, w
        self.node_fields(K_MEMBERS, kids_at, len(node.firsts), node.cap, -1)
        self.push_ids(node.firsts)
        self.push_ids(node.laters)
        push(kids, self.id_of(node.close_none))
        push(kids, self.id_of(node.close_some))
        for extra in (node.extra_first, node.extra_later):
            push(kids, -1 if extra is None else self.id_of(extra))
        push(kids, node.min_count)
        push(kids, -1 if node.max_count is None else node.max_count)
        words = (len(node.firsts) + MASK_BITS - 1) // MASK_BITS if wide(node) else 0
        push(kids, words)
        required = node.required_mask
        for w in range(max(words, 1)):
            push(kids, required >> (MASK_BITS * w) & MASK_WORD)
        return 0

    # -- byte sets

    cdef Py_ssize_t bitset_row(self, tuple ranges) except -1:
        """The row of `bitsets` holding the bytes of `ranges` (added if new)."""
        cdef uint64_t words[4]
        cdef int lo, hi, byte
        row = self.bitset_of.get(ranges)
        if row is None:
            row = self.base_bitset_of.get(ranges)
        if row is not None:
            return row
        words[0] = words[1] = words[2] = words[3] = 0
        for pair in ranges:
            lo, hi = pair
            for byte in range(lo, hi + 1):
                words[byte >> 6] |= (<uint64_t>1) << (byte & 63)
        return self.new_bits_row(ranges, words)

    cdef Py_ssize_t bits_row(self, bits) except -1:
        """The row of `bitsets` holding byte set `bits` (bit b for byte b), added if new."""
        cdef uint64_t words[4]
        cdef int w
        key = ("bits", bits)
        row = self.bitset_of.get(key)
        if row is None:
            row = self.base_bitset_of.get(key)
        if row is not None:
            return row
        for w in range(4):
            words[w] = (bits >> (64 * w)) & WORD_MASK
        return self.new_bits_row(key, words)

    cdef Py_ssize_t new_bits_row(self, key, uint64_t* words) except -1:
        cdef Column* bitsets = &self.columns[C_BITSETS]
        cdef Py_ssize_t row = self.base_rows[C_BITSETS] + bitsets.size // 4
        cdef int w
        for w in range(4):
            push(bitsets, <int64_t>words[w])
        self.bitset_of[key] = row
        return row

    # -- the arrays

    def raw(self):
        """The base's arrays with the nodes added here after them, in `_Block.raw`'s order."""
        cdef int i
        cdef Py_ssize_t row_length, base_bytes, own_bytes
        cdef cnp.ndarray base, contiguous, out
        arrays = []
        for i in range(N_COLUMNS):
            base = self.base_raw[i]
            if self.columns[i].size == 0:
                arrays.append(base)
                continue
            row_length = ROW_LENGTHS[i]
            rows = self.base_rows[i] + self.columns[i].size // row_length
            out = np.empty([rows, row_length] if base.ndim == 2 else [rows], dtype=base.dtype)
            base_bytes, own_bytes = base.nbytes, self.columns[i].size * self.columns[i].width
            contiguous = np.ascontiguousarray(base)
            memcpy(out.data, contiguous.data, base_bytes)
            memcpy(out.data + base_bytes, self.columns[i].data, own_bytes)
            arrays.append(out)
        return tuple(arrays)


cdef int kind_of(node) except -1:
    """The K_ code of an IR node's class (a subclass: that of the first kind it is)."""
    cls = type(node)
    for kind_class, code in KINDS:
        if cls is kind_class:
            return code
    for kind_class, code in KINDS:
        if isinstance(node, kind_class):
            return code
    unsupported(f"IR node {type(node).__name__}")


cdef unsupported(str why):
    from structgen.automata.flat import FlatUnsupported  # (flat.py imports this module)

    raise FlatUnsupported(why)


cdef check_members(node):
    """Refuse an object in any order whose wide mask's handle times its count's cap
    would not fit an int64."""
    if isinstance(node, Members) and wide(node) and (node.cap + 1).bit_length() > MAX_MEMBERS_CAP_BITS:
        unsupported(f"objects in any order with {len(node.firsts)} properties and up to {node.cap}")


cpdef bint wide(node):
    """Whether a Members node's states (mask, count) do not fit one int64 as
    mask * (cap + 1) + count: its mask is then interned (`flat_kernels.wide_mask`)."""
    return (len(node.firsts) + 1) + (node.cap + 1).bit_length() > 62


cpdef list graph_children(node):
    """A Graph's labels, each once (its last occurrence: a walk that pops them from a
    stack meets them in the order it met them listed in full), then its twin if bounded."""
    cdef dict labels = {}
    cdef tuple edges = node.edges
    cdef Py_ssize_t i
    for i in range(len(edges) - 1, -1, -1):
        label = (<tuple>edges[i])[2]
        if label is not None:
            labels[key_of(label)] = label
    out = list(labels.values())
    out.reverse()
    if node.bound is not None:
        out.append(node.bound.twin)
    return out


cpdef list children(node):
    """The nodes `node` leads to, in the order the automata list them."""
    if isinstance(node, (Concat, Alt)):
        return list(node.items)
    if isinstance(node, Repeat):
        return [node.item] if node.twin is None else [node.item, node.twin]
    if isinstance(node, Graph):
        return graph_children(node)
    if isinstance(node, Ref):
        return [node.target]
    if isinstance(node, Stepper):
        return [node.plain()]
    if isinstance(node, Members):
        return node.children()
    return []
