# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled kernels of the flat automaton (flat.py): liveness, closures, rows,
steps, twins and string-body exits over the flattened IR and the store.

Owns: the machine code of those algorithms only, compiled ahead of time. Must not
touch Python objects inside a kernel (each runs without the GIL, under its
automaton's lock on the Python side), raise from inside one, or grow an array: a
kernel that runs out of room records why in meta[M_FAILED] and returns, and flat.py
grows the array and calls again (`FlatDFA.run`). The array layouts and their docs are
flat.py's; the constants below must equal its own (tests/automata/test_flat.py checks them).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memmove, memset

import numpy as np

cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #define SG_MIX_1 0x9E3779B97F4A7C15ULL
    #define SG_MIX_2 0xBF58476D1CE4E5B9ULL
    #define SG_MIX_3 0x94D049BB133111EBULL
    #define SG_FNV_BASIS 14695981039346656037ULL
    #define SG_FNV_PRIME 1099511628211ULL
    #if defined(_MSC_VER)
      #include <intrin.h>
      static __inline int sg_ctz(unsigned __int64 x) { unsigned long i; _BitScanForward64(&i, x); return (int)i; }
      #define SG_CTZ(x) sg_ctz(x)
      #if defined(_M_ARM64)
        #define SG_RELEASE() __dmb(_ARM64_BARRIER_ISH)
      #else
        #define SG_RELEASE() _ReadWriteBarrier()
      #endif
    #else
      #define SG_CTZ(x) __builtin_ctzll(x)
      #define SG_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
    #endif
    """
    const uint64_t MIX_1 "SG_MIX_1"
    const uint64_t MIX_2 "SG_MIX_2"
    const uint64_t MIX_3 "SG_MIX_3"
    const uint64_t FNV_BASIS "SG_FNV_BASIS"
    const uint64_t FNV_PRIME "SG_FNV_PRIME"
    int ctz "SG_CTZ"(uint64_t x) noexcept nogil
    void release_fence "SG_RELEASE"() noexcept nogil

# For the test that these equal flat.py's.
LAYOUT = dict(
    K_BYTES=K_BYTES, K_BYTESET=K_BYTESET, K_CONCAT=K_CONCAT, K_ALT=K_ALT, K_REPEAT=K_REPEAT, K_GRAPH=K_GRAPH,
    K_REF=K_REF, K_MEMBERS=K_MEMBERS, F_C=F_C, F_L=F_L, F_R=F_R, F_G=F_G, F_M=F_M, F_W=F_W,
    OP_ENTER=OP_ENTER, OP_RESUME=OP_RESUME, OP_GRAPH=OP_GRAPH, OP_MEMBERS=OP_MEMBERS,
    R_CLOSE_NONE=R_CLOSE_NONE, R_CLOSE_SOME=R_CLOSE_SOME, R_EXTRA_FIRST=R_EXTRA_FIRST,
    R_EXTRA_LATER=R_EXTRA_LATER, R_MIN=R_MIN, R_MAX=R_MAX, R_WORDS=R_WORDS, R_REQUIRED=R_REQUIRED,
    MASK_BITS=MASK_BITS, DONE=DONE, ACCEPT=ACCEPT, DEAD=DEAD, G_TWIN_NODE=G_TWIN_NODE,
    G_TWIN_STATE=G_TWIN_STATE, G_ZONE_TOP=G_ZONE_TOP, G_COUNTED_FIELDS=G_COUNTED_FIELDS,
    UNBOUNDED=UNBOUNDED, NO_ROOM=NO_ROOM,
    M_FRAMES=M_FRAMES, M_ITEMS=M_ITEMS, M_SETS=M_SETS, M_SET_ITEMS=M_SET_ITEMS, M_STATES=M_STATES,
    M_HASHED=M_HASHED, M_FAILED=M_FAILED, GROW_HASH=GROW_HASH, GROW_SETS=GROW_SETS,
    GROW_SET_ITEMS=GROW_SET_ITEMS, GROW_STATES=GROW_STATES, FAILED_AMBIGUOUS=FAILED_AMBIGUOUS,
    FAILED_NESTING=FAILED_NESTING, FAILED_MEMORY=FAILED_MEMORY, T_FRAME=T_FRAME, T_ITEM=T_ITEM,
    T_CLOSURE=T_CLOSURE, T_SINGLE=T_SINGLE, T_STATE_OF_SET=T_STATE_OF_SET, T_STATE_HASH=T_STATE_HASH,
    FRAME_RESUMED=FRAME_RESUMED, ITEM_TARGET=ITEM_TARGET, ITEM_TARGET_STATE=ITEM_TARGET_STATE,
    HASH_VALUE=HASH_VALUE, QUOTE=QUOTE, BODY_FRAME_DEPTH=BODY_FRAME_DEPTH,
)


# ------------------------------------------------------------ from Python to C

cdef IR ir_of(tuple arrays) except *:
    cdef IR g
    if len(arrays) != 15:
        raise ValueError("FlatIR.arrays has 15 arrays")
    g.kind = <const int64_t*>buffer_of(arrays[0], 8, False)
    g.a = <const int64_t*>buffer_of(arrays[1], 8, False)
    g.b = <const int64_t*>buffer_of(arrays[2], 8, False)
    g.c = <const int64_t*>buffer_of(arrays[3], 8, False)
    g.kids = <const int64_t*>buffer_of(arrays[4], 8, False)
    g.data = <const uint8_t*>buffer_of(arrays[5], 1, False)
    g.bitsets = <const uint64_t*>buffer_of(arrays[6], 8, False)
    g.nonempty = <const uint8_t*>buffer_of(arrays[7], 1, False)
    g.g_final = <const uint8_t*>buffer_of(arrays[8], 1, False)
    g.g_edge_start = <const int64_t*>buffer_of(arrays[9], 8, False)
    g.g_dst = <const int64_t*>buffer_of(arrays[10], 8, False)
    g.g_label = <const int64_t*>buffer_of(arrays[11], 8, False)
    g.g_live = <const uint8_t*>buffer_of(arrays[12], 1, False)
    g.g_free = <const int64_t*>buffer_of(arrays[13], 8, False)
    g.g_room = <const int64_t*>buffer_of(arrays[14], 8, False)
    return g


cdef inline int64_t* store_array(list store, int i, int64_t* size) except? NULL:
    cdef object array = store[i]
    size[0] = (<cnp.ndarray?>array).shape[0]
    return <int64_t*>buffer_of(array, 8, True)


cdef Store store_of(list store) except *:
    cdef Store st
    cdef int64_t n_meta = 0, n_next = 0
    memset(&st, 0, sizeof(Store))
    if len(store) != 9:
        raise ValueError("a store has 9 arrays")
    st.meta = store_array(store, 0, &n_meta)
    st.frames = store_array(store, 1, &st.n_frames)
    st.items = store_array(store, 2, &st.n_items)
    st.set_start = store_array(store, 3, &st.n_set_start)
    st.set_pool = store_array(store, 4, &st.n_set_pool)
    st.state_set = store_array(store, 5, &st.n_state_set)
    st.state_next = store_array(store, 6, &n_next)
    st.slots = store_array(store, 7, &st.n_slots)
    st.old_slots = store_array(store, 8, &st.n_old_slots)
    if n_meta <= M_DRAINED or n_next < st.n_state_set or store[1].shape[1] != FRAME_COLS \
            or store[2].shape[1] != ITEM_COLS or store[7].shape[1] != SLOT_COLS or store[8].shape[1] != SLOT_COLS:
        raise ValueError("not a store of the layout flat._new_store makes")
    return st


cdef Rows rows_of(object table, object expanded, object loops, object accepting) except *:
    """The per-state arrays, each of which may be None (NULL)."""
    cdef Rows r
    r.table = NULL if table is None else <int32_t*>buffer_of(table, 4, True)
    r.expanded = NULL if expanded is None else <uint8_t*>buffer_of(expanded, 1, True)
    r.loops = NULL if loops is None else <uint64_t*>buffer_of(loops, 8, True)
    r.accepting = <uint8_t*>buffer_of(accepting, 1, True)
    r.n_states = (<cnp.ndarray?>accepting).shape[0]
    for array in (table, expanded, loops):
        if array is not None and (<cnp.ndarray?>array).shape[0] < r.n_states:
            raise ValueError("the per-state arrays have one length")
    return r


# ------------------------------------------------------------ liveness

cdef bint members_live(const int64_t* a, const int64_t* b, const int64_t* kids, const uint8_t* nonempty,
                       int64_t x, const int64_t* words, int64_t count) noexcept nogil:
    """Whether Members node `x` can still be closed from state (mask `words`, count)."""
    cdef int64_t n = b[x], record = a[x] + 2 * n, missing = 0, open_ = 0, i, w, bit, most, extra
    cdef bint has_value
    for i in range(n):
        w, bit = i // MASK_BITS, (<int64_t>1) << (i % MASK_BITS)
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


cdef bint graph_live(const int64_t* a, const int64_t* b, const int64_t* c, const uint8_t* g_final,
                     const int64_t* g_edge_start, const int64_t* g_dst, const int64_t* g_label,
                     const uint8_t* nonempty, uint8_t* g_live, int64_t x, bint* changed) noexcept nogil:
    """Settle the live states of graph `x` for the nonempty labels known; whether its
    start is live."""
    cdef int64_t base = a[x], s, g, e
    cdef bint grew = True, live
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
                grew = True
                changed[0] = True
    return g_live[base + b[x]]


def liveness(kind, a, b, c, kids, g_final, g_edge_start, g_dst, g_label, known_nonempty, known_g_live):
    """Which nodes have a non-empty language, and from which graph states an end can be
    reached (see flat._Block): a least fixpoint, children numbered after their parents,
    the first nodes and graph states settled already (`known_*`)."""
    cdef int64_t n = len(kind), n0 = len(known_nonempty), x, k, i, words
    nonempty_array = np.zeros(n, dtype=np.bool_)
    nonempty_array[:n0] = known_nonempty
    g_live_array = np.zeros(len(g_final), dtype=np.bool_)
    g_live_array[: len(known_g_live)] = known_g_live
    cdef const int64_t* kind_ = <const int64_t*>buffer_of(kind, 8, False)
    cdef const int64_t* a_ = <const int64_t*>buffer_of(a, 8, False)
    cdef const int64_t* b_ = <const int64_t*>buffer_of(b, 8, False)
    cdef const int64_t* c_ = <const int64_t*>buffer_of(c, 8, False)
    cdef const int64_t* kids_ = <const int64_t*>buffer_of(kids, 8, False)
    cdef const uint8_t* final_ = <const uint8_t*>buffer_of(g_final, 1, False)
    cdef const int64_t* edge_start_ = <const int64_t*>buffer_of(g_edge_start, 8, False)
    cdef const int64_t* dst_ = <const int64_t*>buffer_of(g_dst, 8, False)
    cdef const int64_t* label_ = <const int64_t*>buffer_of(g_label, 8, False)
    cdef uint8_t* nonempty = <uint8_t*>buffer_of(nonempty_array, 1, True)
    cdef uint8_t* g_live = <uint8_t*>buffer_of(g_live_array, 1, True)
    cdef bint changed = True, value
    cdef int64_t* no_member
    with nogil:
        while changed:
            changed = False
            for x in range(n - 1, n0 - 1, -1):
                k = kind_[x]
                if k == K_GRAPH:
                    value = graph_live(a_, b_, c_, final_, edge_start_, dst_, label_, nonempty, g_live, x, &changed)
                elif nonempty[x]:
                    continue
                elif k == K_BYTES or k == K_BYTESET:
                    value = True
                elif k == K_CONCAT:
                    value = True
                    for i in range(b_[x]):
                        value = value and nonempty[kids_[a_[x] + i]]
                elif k == K_ALT:
                    value = False
                    for i in range(b_[x]):
                        value = value or nonempty[kids_[a_[x] + i]]
                elif k == K_REPEAT:
                    value = b_[x] == 0 or nonempty[a_[x]]
                elif k == K_MEMBERS:
                    words = kids_[a_[x] + 2 * b_[x] + R_WORDS]
                    no_member = <int64_t*>calloc(words if words > 1 else 1, 8)
                    if no_member == NULL:
                        with gil:
                            raise MemoryError()
                    value = members_live(a_, b_, kids_, nonempty, x, no_member, 0)
                    free(no_member)
                else:  # K_REF
                    value = nonempty[a_[x]]
                if value and not nonempty[x]:
                    nonempty[x] = True
                    changed = True
    return nonempty_array, g_live_array


# ------------------------------------------------------------ the store's hash table

# A growth leaves the smaller table to be drained into the larger one a few slots at a
# time, where moving every key at once held one step for milliseconds (3.3 ms for 262,144
# slots; MaskBench's word lists met it in their slowest tokens).
cdef enum:
    DRAIN_STEP = 8  # slots of the smaller table moved at each `hroom`
    # A slot holds its value plus one, so that a table of zeros is empty: a larger table
    # is ready at once, its pages zeroed by the kernel as the keys first reach them.
    EMPTY_SLOT = 0

cdef inline void fail(int64_t* meta, int64_t code) noexcept nogil:
    """Stop the call (see flat.M_FAILED); the first reason stays."""
    if meta[M_FAILED] == 0:
        meta[M_FAILED] = code


cdef inline uint64_t mixed(uint64_t h, int64_t k) noexcept nogil:
    h = (h ^ <uint64_t>k) * MIX_2
    return h ^ (h >> 31)


cdef inline int64_t slot_of(const int64_t* slots, int64_t n_slots, int64_t tag, int64_t k1, int64_t k2, int64_t k3,
                            int64_t k4) noexcept nogil:
    """The slot of a key in the hash table, or of the empty slot where it would go."""
    cdef uint64_t h = <uint64_t>(tag + 1) * MIX_1
    h = mixed(mixed(mixed(mixed(h, k1), k2), k3), k4)
    cdef int64_t mask = n_slots - 1
    cdef int64_t i = <int64_t>(h & <uint64_t>mask)
    cdef const int64_t* row
    while True:
        row = slots + SLOT_COLS * i
        if row[HASH_VALUE] == EMPTY_SLOT:
            return i
        if row[0] == tag and row[1] == k1 and row[2] == k2 and row[3] == k3 and row[4] == k4:
            return i
        i = (i + 1) & mask


cdef inline bint draining(const Store* st) noexcept nogil:
    """Whether keys of the smaller table the last growth replaced are still to be moved."""
    return st.meta[M_DRAINED] < st.n_old_slots


cdef inline int64_t hget(const Store* st, int64_t tag, int64_t k1, int64_t k2, int64_t k3, int64_t k4) noexcept nogil:
    """The value of a key, or -1 (in the table being drained where not moved yet)."""
    cdef int64_t value = st.slots[SLOT_COLS * slot_of(st.slots, st.n_slots, tag, k1, k2, k3, k4) + HASH_VALUE] - 1
    if value < 0 and draining(st):
        value = st.old_slots[SLOT_COLS * slot_of(st.old_slots, st.n_old_slots, tag, k1, k2, k3, k4) + HASH_VALUE] - 1
    return value


cdef inline int64_t found_slot(Store* st, int64_t tag, int64_t k1, int64_t k2, int64_t k3, int64_t k4) noexcept nogil:
    """The slot of a key in the table, or of the empty slot where it would go; a key
    still only in the table being drained is moved there first, so that it is never
    added twice (after `hroom`)."""
    cdef int64_t i = slot_of(st.slots, st.n_slots, tag, k1, k2, k3, k4), j, value
    if st.slots[SLOT_COLS * i + HASH_VALUE] == EMPTY_SLOT and draining(st):
        j = slot_of(st.old_slots, st.n_old_slots, tag, k1, k2, k3, k4)
        value = st.old_slots[SLOT_COLS * j + HASH_VALUE] - 1
        if value >= 0:
            hset(st, i, tag, k1, k2, k3, k4, value)
    return i


cdef void drain(Store* st, int64_t n) noexcept nogil:
    """Move the keys of `n` more slots of the table being drained into the table, each
    unless it is there already (moved when it was looked up, and maybe set since)."""
    cdef int64_t i = st.meta[M_DRAINED], end = st.meta[M_DRAINED] + n, j
    cdef const int64_t* row
    if end > st.n_old_slots:
        end = st.n_old_slots
    while i < end:
        row = st.old_slots + SLOT_COLS * i
        if row[HASH_VALUE] != EMPTY_SLOT:
            j = slot_of(st.slots, st.n_slots, row[0], row[1], row[2], row[3], row[4])
            if st.slots[SLOT_COLS * j + HASH_VALUE] == EMPTY_SLOT:
                hset(st, j, row[0], row[1], row[2], row[3], row[4], row[HASH_VALUE] - 1)
        i += 1
    st.meta[M_DRAINED] = i


cdef inline bint hroom(Store* st) noexcept nogil:
    """Whether the call may add a key: it has not failed, and one more key fits below
    half load (else it fails, to have the table grown). While a growth's smaller table
    is drained, DRAIN_STEP more of its slots move first: the table takes at least a
    quarter of its slots in keys before it may grow again, by when all have moved."""
    if draining(st):
        drain(st, DRAIN_STEP)
    if 2 * (st.meta[M_HASHED] + 1) > st.n_slots:
        fail(st.meta, GROW_HASH)
    return st.meta[M_FAILED] == 0


cdef inline void hset(Store* st, int64_t i, int64_t tag, int64_t k1, int64_t k2, int64_t k3, int64_t k4,
                      int64_t value) noexcept nogil:
    """Give a key its value at the slot `slot_of` found for it (after `hroom`)."""
    cdef int64_t* row = st.slots + SLOT_COLS * i
    if row[HASH_VALUE] == EMPTY_SLOT:
        st.meta[M_HASHED] += 1
        row[0], row[1], row[2], row[3], row[4] = tag, k1, k2, k3, k4
    row[HASH_VALUE] = value + 1


cdef inline void hput(Store* st, int64_t tag, int64_t k1, int64_t k2, int64_t k3, int64_t k4,
                      int64_t value) noexcept nogil:
    """Set a key's value (after `hroom`)."""
    hset(st, found_slot(st, tag, k1, k2, k3, k4), tag, k1, k2, k3, k4, value)


def fill_bytes(array, int value):
    """Set every byte of a C-contiguous `array` to `value` without the interpreter lock
    (`spares.Spares` touches the pages of an array made ahead this way: numpy's fill
    holds the lock while the pages fault in, and the decoding thread waits on it)."""
    cdef char* data = <char*>buffer_of(array, array.itemsize, True)
    cdef size_t n = array.nbytes
    with nogil:
        memset(data, value, n)


def drain_entry(list store, int64_t n):
    """Move the keys of `n` more slots of the table being drained (`drain`): after a
    call that added none, and all of them before a growth makes the table itself the
    one to drain."""
    cdef Store st = store_of(store)
    with nogil:
        drain(&st, n)


cdef int64_t row_of(Store* st, int64_t tag, int64_t k1, int64_t k2, int64_t k3, int64_t k4) noexcept nogil:
    """The id of the frame (`tag` = T_FRAME: kind, node, index, parent) or the item
    (T_ITEM: leaf, offset, frame, 0) with these fields, added if new; 0 (a row that
    exists) once the call has failed."""
    cdef int64_t count = M_FRAMES if tag == T_FRAME else M_ITEMS
    cdef int64_t* rows = st.frames if tag == T_FRAME else st.items
    cdef int64_t n_rows = st.n_frames if tag == T_FRAME else st.n_items
    cdef int64_t cols = FRAME_COLS if tag == T_FRAME else ITEM_COLS
    if not hroom(st):  # before the slot is found: a growth moves the slots
        return 0
    cdef int64_t slot = found_slot(st, tag, k1, k2, k3, k4)
    cdef int64_t row = st.slots[SLOT_COLS * slot + HASH_VALUE] - 1
    if row < 0:
        row = st.meta[count]
        if row >= n_rows:
            fail(st.meta, 1 + count)
            return 0
        rows[cols * row], rows[cols * row + 1], rows[cols * row + 2], rows[cols * row + 3] = k1, k2, k3, k4
        st.meta[count] += 1
        hset(st, slot, tag, k1, k2, k3, k4, row)
    return row


cdef inline int64_t frame(Store* st, int64_t kind, int64_t node, int64_t index, int64_t parent) noexcept nogil:
    return row_of(st, T_FRAME, kind, node, index, parent)


cdef inline int64_t item(Store* st, int64_t leaf, int64_t offset, int64_t cont) noexcept nogil:
    return row_of(st, T_ITEM, leaf, offset, cont, 0)


# ------------------------------------------------------------ item sets

cdef int64_t pool(Store* st, const int64_t* items, int64_t n) noexcept nogil:
    """Store a sorted item array in the set pool; returns its set id (0 once the call
    has failed)."""
    cdef int64_t ref = st.meta[M_SETS], used = st.meta[M_SET_ITEMS]
    if ref + 1 >= st.n_set_start:
        fail(st.meta, GROW_SETS)
    elif used + n > st.n_set_pool:
        fail(st.meta, GROW_SET_ITEMS)
    if st.meta[M_FAILED]:
        return 0
    memmove(st.set_pool + used, items, n * 8)
    st.set_start[ref + 1] = used + n
    st.meta[M_SETS] += 1
    st.meta[M_SET_ITEMS] += n
    return ref


cdef inline const int64_t* set_items(const Store* st, int64_t ref, int64_t* n) noexcept nogil:
    """The items of pooled set `ref` (and their number in `n`): a pointer into the pool,
    which no kernel moves."""
    n[0] = st.set_start[ref + 1] - st.set_start[ref]
    return st.set_pool + st.set_start[ref]


cdef inline bint set_empty(const Store* st, int64_t ref) noexcept nogil:
    return st.set_start[ref + 1] == st.set_start[ref]


cdef int compare_int64(const void* x, const void* y) noexcept nogil:
    cdef int64_t p = (<const int64_t*>x)[0], q = (<const int64_t*>y)[0]
    return (p > q) - (p < q)


cdef void sort_items(int64_t* items, int64_t n) noexcept nogil:
    cdef int64_t i, j, v
    if n > 32:
        qsort(items, n, 8, compare_int64)
        return
    for i in range(1, n):  # (insertion: most sets are short)
        v = items[i]
        j = i - 1
        while j >= 0 and items[j] > v:
            items[j + 1] = items[j]
            j -= 1
        items[j + 1] = v


cdef int64_t sorted_unique(int64_t* items, int64_t size) noexcept nogil:
    """A sorted array without its repeats, in place: its new length."""
    cdef int64_t n = 0, i
    for i in range(size):
        if n == 0 or items[i] != items[n - 1]:
            items[n] = items[i]
            n += 1
    return n


# ------------------------------------------------------------ closures

cdef struct Work:
    # the closure's stack of work items: (op, node, graph state, continuation, rules entered)
    int64_t* rows
    int64_t top
    int64_t cap
    # the work items met: open addressing, 4 a row (op, x, y, cont), -2 empty
    int64_t* seen
    int64_t seen_cap
    int64_t seen_count
    # the items found
    int64_t* out
    int64_t n_out
    int64_t out_cap


cdef inline void push(Work* w, int64_t* meta, int64_t op, int64_t x, int64_t y, int64_t cont,
                      int64_t depth) noexcept nogil:
    """Push a work item (fails the call where memory runs out)."""
    cdef int64_t* bigger
    cdef int64_t* row
    if w.top == w.cap:
        bigger = <int64_t*>realloc(w.rows, 2 * w.cap * 5 * 8)
        if bigger == NULL:
            fail(meta, FAILED_MEMORY)
            return
        w.rows, w.cap = bigger, 2 * w.cap
    row = w.rows + 5 * w.top
    row[0], row[1], row[2], row[3], row[4] = op, x, y, cont, depth
    w.top += 1


cdef inline int64_t seen_slot(const int64_t* seen, int64_t cap, int64_t op, int64_t x, int64_t y,
                              int64_t cont) noexcept nogil:
    cdef uint64_t h = (<uint64_t>(op + 7) * MIX_1) ^ <uint64_t>x
    h = (h * MIX_2) ^ <uint64_t>y
    h = (h * MIX_3) ^ <uint64_t>cont
    h = (h ^ (h >> 29)) * MIX_2
    cdef int64_t mask = cap - 1
    cdef int64_t i = <int64_t>((h >> 17) & <uint64_t>mask)
    cdef const int64_t* row
    while True:
        row = seen + 4 * i
        if row[0] == -2 or (row[0] == op and row[1] == x and row[2] == y and row[3] == cont):
            return i
        i = (i + 1) & mask


cdef int first_time(Work* w, int64_t* meta, int64_t op, int64_t x, int64_t y, int64_t cont) noexcept nogil:
    """Add a work item's key to the set of those met: 1 where it is new, 0 where not, -1
    where memory ran out (the call failed). Grows the set past half load."""
    cdef int64_t cap = w.seen_cap, i, j
    cdef int64_t* bigger
    cdef int64_t* row
    if 2 * (w.seen_count + 1) > cap:
        bigger = <int64_t*>malloc(2 * cap * 4 * 8)
        if bigger == NULL:
            fail(meta, FAILED_MEMORY)
            return -1
        for i in range(2 * cap * 4):
            bigger[i] = -2
        for i in range(cap):
            row = w.seen + 4 * i
            if row[0] != -2:
                j = seen_slot(bigger, 2 * cap, row[0], row[1], row[2], row[3])
                memcpy(bigger + 4 * j, row, 4 * 8)
        free(w.seen)
        w.seen, w.seen_cap = bigger, 2 * cap
    j = seen_slot(w.seen, w.seen_cap, op, x, y, cont)
    row = w.seen + 4 * j
    if row[0] != -2:
        return 0
    row[0], row[1], row[2], row[3] = op, x, y, cont
    w.seen_count += 1
    return 1


cdef bint out_room(Work* w, int64_t needed, int64_t max_items, int64_t* meta) noexcept nogil:
    """Make room for `needed` items found, doubling; fails the call (too ambiguous) past
    twice the item budget (spliced sets may repeat items: the exact count is taken at
    the end)."""
    cdef int64_t* bigger
    while w.n_out + needed > w.out_cap:
        if w.n_out >= 2 * max_items:
            fail(meta, FAILED_AMBIGUOUS)
            return False
        bigger = <int64_t*>realloc(w.out, 2 * w.out_cap * 8)
        if bigger == NULL:
            fail(meta, FAILED_MEMORY)
            return False
        w.out, w.out_cap = bigger, 2 * w.out_cap
    return True


cdef inline int64_t then(const IR* g, Store* st, int64_t concat, int64_t index, int64_t parent) noexcept nogil:
    """The continuation after item `index - 1` of a Concat (see `LazyNFA._then`)."""
    cdef int64_t n = g.b[concat], last
    if index >= n:
        return parent
    if index == n - 1:
        last = g.kids[g.a[concat] + index]
        if g.kind[last] == K_REPEAT and g.b[last] == 0 and g.c[last] < 0:
            return frame(st, F_R, last, 0, parent)
        return frame(st, F_L, last, 0, parent)
    return frame(st, F_C, concat, index, parent)


cdef inline void repeat(const IR* g, Store* st, Work* w, int64_t x, int64_t done, int64_t cont,
                        int64_t depth) noexcept nogil:
    """Push the moves of Repeat `x` with `done` iterations complete (saturated at min
    when unbounded), then `cont`."""
    cdef int64_t it = g.a[x], least = g.b[x], most = g.c[x], nxt
    if (most < 0 or done < most) and g.nonempty[it]:
        if most < 0:
            nxt = done + 1 if done + 1 < least else least
        else:
            nxt = done + 1
        push(w, st.meta, OP_ENTER, it, 0, frame(st, F_R, x, nxt, cont), depth)
    if done >= least:
        push(w, st.meta, OP_RESUME, 0, 0, cont, depth)


cdef int64_t wide_mask(Store* st, int64_t x, const int64_t* words, int64_t n_words) noexcept nogil:
    """The handle of a wide mask of Members `x`: its words interned as a chain of F_W
    frames (node x, the word, the previous word's frame), the last word's frame. The
    empty mask is 0 (DONE): never interned, so each mask has one handle."""
    cdef int64_t handle = DONE, i
    for i in range(n_words):
        handle = frame(st, F_W, x, words[i], handle)
    return handle


cdef void wide_mask_words(const Store* st, int64_t n_words, int64_t handle, int64_t* words) noexcept nogil:
    """The words of the wide mask whose handle is `handle` (see `wide_mask`)."""
    cdef int64_t i = n_words - 1
    memset(words, 0, n_words * 8)
    while handle != DONE:
        words[i] = st.frames[FRAME_COLS * handle + 2]
        handle = st.frames[FRAME_COLS * handle + 3]
        i -= 1


cdef inline bint all_required(const int64_t* kids, int64_t record, int64_t n, const int64_t* words) noexcept nogil:
    """Whether mask `words` holds every required entry of a Members record."""
    cdef int64_t i, required
    for i in range((n + MASK_BITS - 1) // MASK_BITS):
        required = kids[record + R_REQUIRED + i]
        if words[i] & required != required:
            return False
    return True


cdef void members(const IR* g, Store* st, Work* w, int64_t x, int64_t code, int64_t cont,
                  int64_t depth) noexcept nogil:
    """Push the moves of Members `x` in state `code` (see FlatIR), then `cont`: each
    entry not written yet, the extra member, or the closing bracket once the required
    entries and the least count are in (`ir.Members.moves`)."""
    cdef int64_t n = g.b[x], cap = g.c[x]
    cdef int64_t record = g.a[x] + 2 * n
    cdef int64_t n_words = g.kids[record + R_WORDS]
    cdef int64_t mask = code // (cap + 1), count = code % (cap + 1)
    cdef int64_t* words = <int64_t*>malloc((n_words if n_words > 1 else 1) * 8)
    cdef int64_t most, nxt_count, labels, i, label, wi, bit, nxt_mask, extra, close
    if words == NULL:
        fail(st.meta, FAILED_MEMORY)
        return
    if n_words:
        wide_mask_words(st, n_words, mask, words)
    else:
        words[0] = mask
    most = g.kids[record + R_MAX]
    if most < 0 or count < most:
        nxt_count = count + 1 if count + 1 < cap else cap
        labels = g.a[x] if count == 0 else g.a[x] + n
        for i in range(n):
            label = g.kids[labels + i]
            wi, bit = i // MASK_BITS, (<int64_t>1) << (i % MASK_BITS)
            if words[wi] & bit or not g.nonempty[label]:
                continue
            words[wi] |= bit
            if members_live(g.a, g.b, g.kids, g.nonempty, x, words, nxt_count):
                nxt_mask = wide_mask(st, x, words, n_words) if n_words else words[0]
                if st.meta[M_FAILED]:
                    free(words)
                    return
                push(w, st.meta, OP_ENTER, label, 0, frame(st, F_M, x, nxt_mask * (cap + 1) + nxt_count, cont), depth)
            words[wi] ^= bit
        extra = g.kids[record + (R_EXTRA_FIRST if count == 0 else R_EXTRA_LATER)]
        if extra >= 0 and g.nonempty[extra] and members_live(g.a, g.b, g.kids, g.nonempty, x, words, nxt_count):
            push(w, st.meta, OP_ENTER, extra, 0, frame(st, F_M, x, mask * (cap + 1) + nxt_count, cont), depth)
    close = g.kids[record + (R_CLOSE_NONE if count == 0 else R_CLOSE_SOME)]
    if count >= g.kids[record + R_MIN] and g.nonempty[close] and all_required(g.kids, record, n, words):
        push(w, st.meta, OP_ENTER, close, 0, cont, depth)
    free(words)


cdef void resume(const IR* g, Store* st, Work* w, int64_t cont, int64_t depth) noexcept nogil:
    """Push what resuming the frame `cont` (not DONE, not worked out before) does."""
    cdef const int64_t* f = st.frames + FRAME_COLS * cont
    cdef int64_t fkind = f[0], fnode = f[1], findex = f[2], fparent = f[3]
    if fkind == F_C:
        if findex < g.b[fnode]:
            push(w, st.meta, OP_ENTER, g.kids[g.a[fnode] + findex], 0, then(g, st, fnode, findex + 1, fparent), depth)
        else:
            push(w, st.meta, OP_RESUME, 0, 0, fparent, depth)
    elif fkind == F_L:
        push(w, st.meta, OP_ENTER, fnode, 0, fparent, depth)
    elif fkind == F_R:
        repeat(g, st, w, fnode, findex, fparent, depth)
    elif fkind == F_M:
        push(w, st.meta, OP_MEMBERS, fnode, findex, fparent, depth)
    else:
        push(w, st.meta, OP_GRAPH, fnode, findex, fparent, depth)


cdef int64_t graph_state(const IR* g, Store* st, Work* w, int64_t x, int64_t y, int64_t cont,
                         int64_t depth) noexcept nogil:
    """Push the moves of state `y` of graph `x` (in a bounded graph, state y % states
    with y / states labels read: an edge goes on only where its target has room for
    them, a labelled one's label counted); returns its free-bytes marker item, or -1."""
    cdef int64_t n = g.c[x], base = g.a[x], found = -1, e, label, dst, count = 0, after, index
    cdef bint bounded = g.g_room[base] != UNBOUNDED
    if bounded:
        count, y = y // n, y % n
    cdef int64_t gs = base + y
    if g.g_free[gs] >= 0:  # a marker: the state's free bytes (see `free_entry`)
        found = item(st, -1 - g.g_free[gs], 0, cont)
    if g.g_final[gs]:
        push(w, st.meta, OP_RESUME, 0, 0, cont, depth)
    for e in range(g.g_edge_start[gs], g.g_edge_start[gs + 1]):
        label, dst = g.g_label[e], g.g_dst[e]
        if not g.g_live[base + dst] or (label >= 0 and not g.nonempty[label]):
            continue  # an edge through an empty label, or to a state with no way out
        index = dst
        if bounded:
            after = count + (1 if label >= 0 else 0)
            if after > g.g_room[base + dst]:
                continue  # no end within the bound from there
            index = dst + n * after
        if label < 0:
            push(w, st.meta, OP_GRAPH, x, index, cont, depth)
        else:
            push(w, st.meta, OP_ENTER, label, 0, frame(st, F_G, x, index, cont), depth)
    return found


cdef int64_t enter(const IR* g, Store* st, Work* w, int64_t x, int64_t cont, int64_t depth,
                   int64_t max_nesting) noexcept nogil:
    """Push the moves of entering node `x` then `cont`; returns the leaf item it is, or
    -1."""
    cdef int64_t k = g.kind[x], i
    if k == K_BYTES or k == K_BYTESET:
        return item(st, x, 0, cont)
    if k == K_CONCAT:
        if g.b[x] == 0:
            push(w, st.meta, OP_RESUME, 0, 0, cont, depth)
        else:
            push(w, st.meta, OP_ENTER, g.kids[g.a[x]], 0, then(g, st, x, 1, cont), depth)
    elif k == K_ALT:
        for i in range(g.b[x]):
            if g.nonempty[g.kids[g.a[x] + i]]:
                push(w, st.meta, OP_ENTER, g.kids[g.a[x] + i], 0, cont, depth)
    elif k == K_GRAPH:
        push(w, st.meta, OP_GRAPH, x, g.b[x], cont, depth)
    elif k == K_MEMBERS:
        push(w, st.meta, OP_MEMBERS, x, 0, cont, depth)
    elif k == K_REF:
        if g.nonempty[x]:
            if depth >= max_nesting:
                fail(st.meta, FAILED_NESTING)
            else:
                push(w, st.meta, OP_ENTER, g.a[x], 0, cont, depth + 1)
    else:  # K_REPEAT, entered afresh: no iteration done
        repeat(g, st, w, x, 0, cont, depth)
    return -1


cdef int64_t close_work(const IR* g, Store* st, Work* w, int64_t max_items, int64_t max_nesting) noexcept nogil:
    """Work the stack to its end, collecting the items found in `w.out`; whether any were
    spliced in from a known resumption (1), none (0), or the call failed (-1)."""
    cdef bint spliced = False
    cdef int64_t op, x, y, cont, depth, found, n_known, is_new
    cdef const int64_t* row
    cdef const int64_t* known
    while w.top:
        if st.meta[M_FAILED]:
            return -1
        w.top -= 1
        row = w.rows + 5 * w.top
        op, x, y, cont, depth = row[0], row[1], row[2], row[3], row[4]
        is_new = first_time(w, st.meta, op, x, y, cont)
        if is_new <= 0:
            if is_new < 0:
                return -1
            continue
        found = -1
        if op == OP_RESUME:
            if cont == DONE:
                found = ACCEPT
            elif st.frames[FRAME_COLS * cont + FRAME_RESUMED] >= 0:  # worked out before: its items, without the work
                # (that set passed the nesting bound when it was worked out, from its own depth)
                known = set_items(st, st.frames[FRAME_COLS * cont + FRAME_RESUMED], &n_known)
                if not out_room(w, n_known, max_items, st.meta):
                    return -1
                memcpy(w.out + w.n_out, known, n_known * 8)
                w.n_out += n_known
                spliced = True
            else:
                resume(g, st, w, cont, depth)
        elif op == OP_GRAPH:
            found = graph_state(g, st, w, x, y, cont, depth)
        elif op == OP_MEMBERS:
            members(g, st, w, x, y, cont, depth)
        else:
            found = enter(g, st, w, x, cont, depth, max_nesting)
            if st.meta[M_FAILED]:
                return -1
        if found >= 0:
            if not out_room(w, 1, max_items, st.meta):
                return -1
            w.out[w.n_out] = found
            w.n_out += 1
    return -1 if st.meta[M_FAILED] else spliced


cdef int64_t close(const IR* g, Store* st, int64_t op0, int64_t node0, int64_t cont0, int64_t max_items,
                   int64_t max_nesting) noexcept nogil:
    """The items reachable without a byte from one work item (enter `node0` then
    `cont0`, or resume `cont0`), pooled as a sorted set; returns its id (0 once the call
    has failed). A worklist version of `LazyNFA._enter` / `_resume`: each (op, node,
    state, continuation) is worked once, so each leaf item is met once -- but for the
    continuations whose resumption is known already, whose items are copied in instead
    of worked out again, so the result is made unique where one was."""
    cdef Work w
    cdef int64_t i, spliced, n, ref = 0
    w.rows = <int64_t*>malloc(64 * 5 * 8)
    w.top, w.cap = 0, 64
    w.seen = <int64_t*>malloc(128 * 4 * 8)
    w.seen_cap, w.seen_count = 128, 0
    w.out = <int64_t*>malloc(64 * 8)
    w.n_out, w.out_cap = 0, 64
    if w.rows == NULL or w.seen == NULL or w.out == NULL:
        fail(st.meta, FAILED_MEMORY)
    else:
        for i in range(128 * 4):
            w.seen[i] = -2
        push(&w, st.meta, op0, node0, 0, cont0, 0)
        spliced = close_work(g, st, &w, max_items, max_nesting)
        if spliced >= 0:
            sort_items(w.out, w.n_out)
            n = sorted_unique(w.out, w.n_out) if spliced else w.n_out  # a spliced set may repeat items
            if n > max_items:
                fail(st.meta, FAILED_AMBIGUOUS)
            else:
                ref = pool(st, w.out, n)
    free(w.rows)
    free(w.seen)
    free(w.out)
    return 0 if st.meta[M_FAILED] else ref


cdef inline int64_t resumed(const IR* g, Store* st, int64_t cont, int64_t max_items, int64_t max_nesting) noexcept nogil:
    """The items reachable from resuming continuation `cont` (memoized on its frame)."""
    cdef int64_t ref = st.frames[FRAME_COLS * cont + FRAME_RESUMED]
    if ref < 0:
        ref = close(g, st, OP_RESUME, 0, cont, max_items, max_nesting)
        if st.meta[M_FAILED]:
            return 0
        st.frames[FRAME_COLS * cont + FRAME_RESUMED] = ref
    return ref


cdef int64_t closure(const IR* g, Store* st, int64_t node, int64_t cont, int64_t max_items,
                     int64_t max_nesting) noexcept nogil:
    cdef int64_t ref = hget(st, T_CLOSURE, node, cont, 0, 0)
    if ref < 0:
        ref = close(g, st, OP_ENTER, node, cont, max_items, max_nesting)
        if not hroom(st):
            return 0
        hput(st, T_CLOSURE, node, cont, 0, 0, ref)
    return ref


cdef inline int64_t single(Store* st, int64_t it) noexcept nogil:
    """The pooled set {it} (memoized per item)."""
    cdef int64_t ref = hget(st, T_SINGLE, it, 0, 0, 0)
    if ref < 0:
        ref = pool(st, &it, 1)
        if not hroom(st):
            return 0
        hput(st, T_SINGLE, it, 0, 0, 0, ref)
    return ref


# ------------------------------------------------------------ states

cdef inline int64_t items_hash(const int64_t* items, int64_t n) noexcept nogil:
    cdef uint64_t h = FNV_BASIS
    cdef int64_t i
    for i in range(n):
        h = (h ^ <uint64_t>items[i]) * FNV_PRIME
    return <int64_t>(h >> 1)


cdef int64_t intern(Store* st, Rows* r, const int64_t* items, int64_t n) noexcept nogil:
    """The state of a sorted item set (a new one if unseen; 0 once the call has failed)."""
    cdef int64_t h = items_hash(items, n)
    cdef int64_t newest = hget(st, T_STATE_HASH, h, 0, 0, 0)
    cdef int64_t sid = newest, n_known, ref
    cdef const int64_t* known
    while sid >= 0:
        known = set_items(st, st.state_set[sid], &n_known)
        if n_known == n and memcmp(known, items, n * 8) == 0:
            return sid
        sid = st.state_next[sid]
    if not hroom(st):
        return 0
    sid = st.meta[M_STATES]
    if sid >= st.n_state_set or sid >= r.n_states:
        fail(st.meta, GROW_STATES)
        return 0
    ref = pool(st, items, n)
    if st.meta[M_FAILED]:
        return 0
    st.state_set[sid] = ref
    st.state_next[sid] = newest
    st.meta[M_STATES] += 1
    hput(st, T_STATE_HASH, h, 0, 0, 0, sid)
    r.accepting[sid] = n > 0 and items[0] == ACCEPT
    return sid


cdef int64_t state_of_set(Store* st, Rows* r, int64_t ref) noexcept nogil:
    cdef int64_t sid = hget(st, T_STATE_OF_SET, ref, 0, 0, 0), n
    cdef const int64_t* items
    if sid < 0:
        items = set_items(st, ref, &n)
        sid = intern(st, r, items, n)
        if not hroom(st):
            return 0
        hput(st, T_STATE_OF_SET, ref, 0, 0, 0, sid)
    return sid


cdef int64_t item_target(const IR* g, Store* st, int64_t it, int64_t max_items, int64_t max_nesting) noexcept nogil:
    """The set item `it` reaches once it has read its byte (memoized in its row)."""
    cdef int64_t* row = st.items + ITEM_COLS * it
    cdef int64_t target = row[ITEM_TARGET], leaf, offset, cont, nxt
    if target < 0:
        leaf, offset, cont = row[0], row[1], row[2]
        if g.kind[leaf] == K_BYTES and offset + 1 < g.b[leaf]:
            nxt = item(st, leaf, offset + 1, cont)
            target = single(st, nxt)
        else:
            target = resumed(g, st, cont, max_items, max_nesting)
        if st.meta[M_FAILED]:
            return 0
        st.items[ITEM_COLS * it + ITEM_TARGET] = target
    return target


cdef inline bint reads(const IR* g, const Store* st, int64_t it, int64_t byte) noexcept nogil:
    """Whether set item `it` reads `byte`: False for ACCEPT and a free-bytes marker."""
    if it == ACCEPT:
        return False
    cdef int64_t leaf = st.items[ITEM_COLS * it], offset = st.items[ITEM_COLS * it + 1]
    if leaf < 0:
        return False
    if g.kind[leaf] == K_BYTES:
        return g.data[g.a[leaf] + offset] == byte
    return (g.bitsets[4 * g.a[leaf] + (byte >> 6)] >> (byte & 63)) & 1 != 0


cdef inline void leaf_bytes(const IR* g, const Store* st, int64_t it, uint64_t* into) noexcept nogil:
    """Add the bytes item `it` (a leaf) reads to the 4-word set `into`."""
    cdef int64_t leaf = st.items[ITEM_COLS * it], offset = st.items[ITEM_COLS * it + 1], byte, w
    if g.kind[leaf] == K_BYTES:
        byte = g.data[g.a[leaf] + offset]
        into[byte >> 6] |= (<uint64_t>1) << (byte & 63)
    else:
        for w in range(4):
            into[w] |= g.bitsets[4 * g.a[leaf] + w]


cdef int64_t union_state(Store* st, Rows* r, const int64_t* refs, int64_t n_refs, int64_t max_items) noexcept nogil:
    """The state of the union of the pooled sets `refs` (two or more)."""
    cdef int64_t total = 0, q = 0, i, n, sid
    cdef const int64_t* part
    for i in range(n_refs):
        total += st.set_start[refs[i] + 1] - st.set_start[refs[i]]
    cdef int64_t* merged = <int64_t*>malloc((total if total else 1) * 8)
    if merged == NULL:
        fail(st.meta, FAILED_MEMORY)
        return 0
    for i in range(n_refs):
        part = set_items(st, refs[i], &n)
        memcpy(merged + q, part, n * 8)
        q += n
    sort_items(merged, total)
    n = sorted_unique(merged, total)
    if n > max_items:
        fail(st.meta, FAILED_AMBIGUOUS)
        sid = 0
    else:
        sid = intern(st, r, merged, n)
    free(merged)
    return sid


# ------------------------------------------------------------ rows

cdef void write_single_row(Rows* r, int64_t sid, int64_t state, const uint64_t* bits) noexcept nogil:
    """A row whose live bytes (`bits`, NULL: none) all lead to `state`."""
    cdef int32_t* row = r.table + 256 * sid
    cdef int64_t w
    cdef uint64_t x
    for w in range(256):
        row[w] = DEAD
    for w in range(4):
        r.loops[4 * sid + w] = 0
    if bits == NULL:
        return
    for w in range(4):
        x = bits[w]
        while x:
            row[w * 64 + ctz(x)] = <int32_t>state
            x &= x - 1
        if state == sid:
            r.loops[4 * sid + w] = bits[w]


cdef int64_t group_items(const IR* g, Store* st, const int64_t* items, int64_t n_items, int64_t* targets,
                         int64_t* single_state, int64_t* first_item, uint64_t* bits, int64_t max_items,
                         int64_t max_nesting) noexcept nogil:
    """Group a state's items by target: per group its target set, the state of that set
    alone where known (else -1), an item of it and the bytes its items read (4 words).
    Returns the number of groups (0 once the call has failed)."""
    cdef int64_t m = 0, i, it, target, group, w
    cdef const int64_t* row
    for i in range(n_items):
        it = items[i]
        row = st.items + ITEM_COLS * it
        if it == ACCEPT or row[0] < 0:
            continue  # reads nothing (a free-bytes marker)
        target = row[ITEM_TARGET]
        if target < 0:
            target = item_target(g, st, it, max_items, max_nesting)
            if st.meta[M_FAILED]:
                return 0
        if set_empty(st, target):
            continue  # leads nowhere
        group = 0
        while group < m and targets[group] != target:
            group += 1
        if group == m:
            targets[m], single_state[m], first_item[m] = target, st.items[ITEM_COLS * it + ITEM_TARGET_STATE], it
            for w in range(4):
                bits[4 * m + w] = 0
            m += 1
        leaf_bytes(g, st, it, bits + 4 * group)
    return m


cdef bint union_row(Store* st, Rows* r, int64_t m, const int64_t* targets, int64_t* single_state,
                    const int64_t* first_item, const uint64_t* bits, int32_t* row, int64_t max_items) noexcept nogil:
    """Fill `row` (256 states) from m >= 2 groups: per byte, the union of the targets of
    the groups that read it. Bytes with the same groups share one union. False where the
    call failed."""
    # Per byte, the groups that read it: readers[reader_start[b]:reader_start[b + 1]], in
    # group order, made from the bits set in each group's byte set.
    cdef int64_t reader_start[257]
    cdef int64_t filled[256]
    cdef uint64_t union_masks[256]  # masks of groups met (<= 64 groups) ...
    cdef int64_t union_states[256]  # ... and the state of each
    cdef int64_t n_unions = 0, group, w, byte, lo, hi, k, known, i
    cdef uint64_t x, mask
    memset(reader_start, 0, sizeof(reader_start))
    for group in range(m):
        for w in range(4):
            x = bits[4 * group + w]
            while x:
                reader_start[w * 64 + ctz(x) + 1] += 1
                x &= x - 1
    for byte in range(256):
        reader_start[byte + 1] += reader_start[byte]
    cdef int64_t* readers = <int64_t*>malloc((reader_start[256] + m + 1) * 8)
    if readers == NULL:
        fail(st.meta, FAILED_MEMORY)
        return False
    cdef int64_t* refs = readers + reader_start[256]  # room for one byte's targets
    memcpy(filled, reader_start, sizeof(filled))
    for group in range(m):
        for w in range(4):
            x = bits[4 * group + w]
            while x:
                byte = w * 64 + ctz(x)
                readers[filled[byte]] = group
                filled[byte] += 1
                x &= x - 1
    for byte in range(256):
        row[byte] = DEAD
        lo, hi = reader_start[byte], reader_start[byte + 1]
        if hi == lo:
            continue
        if hi - lo == 1:
            group = readers[lo]
            if single_state[group] < 0:
                single_state[group] = state_of_set(st, r, targets[group])
                if st.meta[M_FAILED]:
                    free(readers)
                    return False
                st.items[ITEM_COLS * first_item[group] + ITEM_TARGET_STATE] = single_state[group]
            row[byte] = <int32_t>single_state[group]
            continue
        mask = 0
        for k in range(lo, hi):
            if readers[k] < 64:
                mask |= (<uint64_t>1) << readers[k]
        known = -1
        if m <= 64:
            for i in range(n_unions):
                if union_masks[i] == mask:
                    known = union_states[i]
                    break
        if known >= 0:
            row[byte] = <int32_t>known
            continue
        for k in range(lo, hi):
            refs[k - lo] = targets[readers[k]]
        known = union_state(st, r, refs, hi - lo, max_items)
        if st.meta[M_FAILED]:
            free(readers)
            return False
        row[byte] = <int32_t>known
        if m <= 64:
            union_masks[n_unions], union_states[n_unions] = mask, known
            n_unions += 1
    free(readers)
    return True


cdef inline void mark_expanded(Rows* r, int64_t sid) noexcept nogil:
    """Publish a row: Python threads read the rows marked built without the automaton's
    lock (the kernel runs without the GIL), so the row's stores come first."""
    release_fence()
    r.expanded[sid] = True


cdef void expand(const IR* g, Store* st, Rows* r, int64_t sid, int64_t max_items, int64_t max_nesting) noexcept nogil:
    """Build the table row of state `sid`: per byte, the union of what its items reach.
    Items are grouped by target first (the characters of a string body all resume the
    same continuation), so a byte's targets are a bitmask over a few groups, and bytes
    with the same mask share one union. Writes nothing to the table until the row is
    complete, so a call that stops to have the store grown can be run again."""
    cdef int64_t n_items, m, state, byte, w
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    cdef int64_t size = n_items if n_items else 1
    cdef int64_t* work = <int64_t*>malloc(size * 7 * 8)
    if work == NULL:
        fail(st.meta, FAILED_MEMORY)
        return
    cdef int64_t* targets = work
    cdef int64_t* single_state = work + size  # the state of each group's target alone
    cdef int64_t* first_item = work + 2 * size  # an item of each group
    cdef uint64_t* bits = <uint64_t*>(work + 3 * size)
    cdef int32_t row[256]
    m = group_items(g, st, items, n_items, targets, single_state, first_item, bits, max_items, max_nesting)
    if st.meta[M_FAILED]:
        free(work)
        return
    if m <= 1:  # (most rows) one target at most: each byte read leads to its state
        state = DEAD
        if m == 1:
            state = single_state[0]
            if state < 0:
                state = state_of_set(st, r, targets[0])
                if st.meta[M_FAILED]:
                    free(work)
                    return
                st.items[ITEM_COLS * first_item[0] + ITEM_TARGET_STATE] = state
        write_single_row(r, sid, state, bits if m == 1 else NULL)
        mark_expanded(r, sid)
        free(work)
        return
    if not union_row(st, r, m, targets, single_state, first_item, bits, row, max_items):
        free(work)
        return
    free(work)
    memcpy(r.table + 256 * sid, row, sizeof(row))
    for w in range(4):
        r.loops[4 * sid + w] = 0
    for byte in range(256):
        if row[byte] == sid:
            r.loops[4 * sid + (byte >> 6)] |= (<uint64_t>1) << (byte & 63)
    mark_expanded(r, sid)


cdef void expand_rows(const IR* g, Store* st, Rows* r, const int64_t* sids, int64_t n, int64_t max_items,
                      int64_t max_nesting) noexcept nogil:
    """Build the rows of states `sids` not built yet (for the token walk). A row that
    cannot be built fails the call (see M_FAILED): the caller returns at once."""
    cdef int64_t i
    for i in range(n):
        if not r.expanded[sids[i]]:
            expand(g, st, r, sids[i], max_items, max_nesting)
            if st.meta[M_FAILED]:
                return


cdef int64_t step(const IR* g, Store* st, Rows* r, int64_t sid, int64_t byte, int64_t max_items,
                  int64_t max_nesting) noexcept nogil:
    """The state one byte leads to from `sid` (DEAD if none), without building `sid`'s
    row: the union of the targets of the items that read that byte."""
    cdef int64_t n_items, n = 0, first_item = -1, i, k, it, target, state
    cdef bint known
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    cdef int64_t* targets = <int64_t*>malloc((n_items if n_items else 1) * 8)
    if targets == NULL:
        fail(st.meta, FAILED_MEMORY)
        return DEAD
    for i in range(n_items):
        it = items[i]
        if not reads(g, st, it, byte):
            continue
        target = st.items[ITEM_COLS * it + ITEM_TARGET]
        if target < 0:
            target = item_target(g, st, it, max_items, max_nesting)
            if st.meta[M_FAILED]:
                free(targets)
                return DEAD
        if set_empty(st, target):
            continue  # leads nowhere
        known = False
        for k in range(n):
            known = known or targets[k] == target
        if not known:
            if n == 0:
                first_item = it
            targets[n] = target
            n += 1
    if n == 0 or st.meta[M_FAILED]:
        state = DEAD
    elif n == 1:
        state = st.items[ITEM_COLS * first_item + ITEM_TARGET_STATE]
        if state < 0:
            state = state_of_set(st, r, targets[0])
            if st.meta[M_FAILED]:
                state = DEAD
            else:
                st.items[ITEM_COLS * first_item + ITEM_TARGET_STATE] = state
    else:
        state = union_state(st, r, targets, n, max_items)
        if st.meta[M_FAILED]:
            state = DEAD
    free(targets)
    return state


cdef void known_loops(const IR* g, Store* st, Rows* r, int64_t sid, int64_t max_items,
                      int64_t max_nesting) noexcept nogil:
    """Set in `loops[sid]` the bytes that lead from `sid` back to itself, from its items,
    without its row: the bytes read only by items whose target is `sid`'s own state."""
    cdef uint64_t back[4]
    cdef uint64_t other[4]
    cdef int64_t n_items, i, it, target, state, w
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    memset(back, 0, sizeof(back))
    memset(other, 0, sizeof(other))
    for i in range(n_items):
        it = items[i]
        if it == ACCEPT or st.items[ITEM_COLS * it] < 0:
            continue  # reads nothing (a free-bytes marker)
        target = st.items[ITEM_COLS * it + ITEM_TARGET]
        if target < 0:
            target = item_target(g, st, it, max_items, max_nesting)
            if st.meta[M_FAILED]:
                return
        if set_empty(st, target):
            continue  # leads nowhere
        state = st.items[ITEM_COLS * it + ITEM_TARGET_STATE]
        if state < 0:
            state = state_of_set(st, r, target)
            if st.meta[M_FAILED]:
                return
            st.items[ITEM_COLS * it + ITEM_TARGET_STATE] = state
        leaf_bytes(g, st, it, &back[0] if state == sid else &other[0])
    for w in range(4):
        r.loops[4 * sid + w] |= back[w] & ~other[w]


cdef bint free_bits(const IR* g, const Store* st, const Rows* r, int64_t sid, uint64_t* free) noexcept nogil:
    """The free bytes of state `sid` in `free` (4 words): the union of its markers' byte
    sets; returns whether any of them is not one of the state's loops. (ACCEPT is no
    marker, though its row's leaf is -1 as a marker's is.)"""
    cdef int64_t n_items, i, leaf, w
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    cdef bint beyond_loops = False
    memset(free, 0, 4 * 8)
    for i in range(n_items):
        if items[i] == ACCEPT:
            continue
        leaf = st.items[ITEM_COLS * items[i]]
        if leaf < 0:
            for w in range(4):
                free[w] |= g.bitsets[4 * (-1 - leaf) + w]
    for w in range(4):
        beyond_loops = beyond_loops or (free[w] & ~r.loops[4 * sid + w]) != 0
    return beyond_loops


# ------------------------------------------------------------ string bodies and twins

cdef inline bint reads_quote(const IR* g, const Store* st, int64_t it, bint only) noexcept nogil:
    """Whether set item `it` is a leaf that reads the byte '"' (and, with `only`, no
    other byte)."""
    if it == ACCEPT or st.items[ITEM_COLS * it] < 0:
        return False
    cdef int64_t leaf = st.items[ITEM_COLS * it], offset = st.items[ITEM_COLS * it + 1]
    if g.kind[leaf] == K_BYTES:
        return g.data[g.a[leaf] + offset] == QUOTE
    cdef const uint64_t* row = g.bitsets + 4 * g.a[leaf]
    if only:
        return row[0] == (<uint64_t>1) << QUOTE and row[1] == 0 and row[2] == 0 and row[3] == 0
    return (row[0] >> QUOTE) & 1 != 0


cdef inline bint is_body_frame(const Store* st, int64_t cont, int64_t body) noexcept nogil:
    return st.frames[FRAME_COLS * cont] == F_R and st.frames[FRAME_COLS * cont + 1] == body


cdef bint contains(const int64_t* items, int64_t n, int64_t it) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if items[i] == it:
            return True
    return False


cdef int64_t body_exit(const IR* g, Store* st, Rows* r, int64_t sid, int64_t body, int64_t max_items,
                       int64_t max_nesting) noexcept nogil:
    """Where `sid` is a JSON string body's state -- exactly what resuming the Repeat
    `body` with some continuation P reaches, P reading a closing '"' and nothing else --
    the state after that quote; else DEAD (see flat.py, `flat_tokens.BodyExits`). Builds no
    row of `sid`; reads the items' continuations only."""
    cdef int64_t n_items, n_resumed, n_exits, i, k, it, cont, body_ref, exit_ref
    cdef int64_t fr = DONE
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    cdef const int64_t* resumed_items
    cdef const int64_t* exits
    for i in range(n_items):
        it = items[i]
        if it == ACCEPT or st.items[ITEM_COLS * it] < 0:
            return DEAD
        cont = st.items[ITEM_COLS * it + 2]
        for k in range(BODY_FRAME_DEPTH):
            if cont == DONE or is_body_frame(st, cont, body):
                break
            cont = st.frames[FRAME_COLS * cont + 3]
        if cont != DONE and is_body_frame(st, cont, body):
            fr = cont
            break
    if fr == DONE:
        return DEAD
    body_ref = resumed(g, st, fr, max_items, max_nesting)
    exit_ref = resumed(g, st, st.frames[FRAME_COLS * fr + 3], max_items, max_nesting)
    if st.meta[M_FAILED]:
        return DEAD
    resumed_items = set_items(st, body_ref, &n_resumed)
    if n_resumed != n_items or memcmp(resumed_items, items, n_items * 8) != 0:
        return DEAD  # more than the body (another branch), or less
    exits = set_items(st, exit_ref, &n_exits)
    if n_exits == 0:
        return DEAD
    for i in range(n_exits):
        if not reads_quote(g, st, exits[i], True):
            return DEAD
    for i in range(n_items):  # no character of the body reads a raw quote
        if reads_quote(g, st, items[i], False) and not contains(exits, n_exits, items[i]):
            return DEAD
    return step(g, st, r, sid, QUOTE, max_items, max_nesting)


cdef int64_t counted_frame(const IR* g, const Store* st, const int64_t* g_counted, const int64_t* node_twin,
                           int64_t fr, int64_t* depth) noexcept nogil:
    """The first frame up the chain from `fr` that counts characters -- a state of a
    bounded graph (`ir.Bound`), an iteration of a Repeat with a twin -- with how
    many frames lie below it in `depth`; -1 where none."""
    cdef int64_t fkind, fnode
    depth[0] = 0
    while fr != DONE:
        fkind, fnode = st.frames[FRAME_COLS * fr], st.frames[FRAME_COLS * fr + 1]
        if fkind == F_G and g_counted[G_COUNTED_FIELDS * (g.a[fnode] + st.frames[FRAME_COLS * fr + 2] % g.c[fnode])
                                      + G_TWIN_NODE] >= 0:
            return fr
        if fkind == F_R and node_twin[fnode] >= 0:
            return fr
        fr = st.frames[FRAME_COLS * fr + 3]
        depth[0] += 1
    depth[0] = 0
    return -1


cdef int64_t twinned_item(const IR* g, Store* st, const int64_t* g_counted, const int64_t* node_twin, int64_t it,
                          int64_t longest, int64_t* chain, bint* passed) noexcept nogil:
    """Item `it` continued from its counting frame's twin (the frames below remade over
    it; `passed` set); `it` itself where it passes no counting frame, DEAD where that
    frame is out of its zone, -2 where the call failed. `chain`: room for the frames
    below."""
    cdef int64_t fr = st.items[ITEM_COLS * it + 2], depth, fkind, fnode, findex, gs, count, twin_node, twin_index, d, f
    cdef int64_t new
    cdef int64_t found = counted_frame(g, st, g_counted, node_twin, fr, &depth)
    if found < 0:
        return it
    passed[0] = True
    fkind, fnode, findex = st.frames[FRAME_COLS * found], st.frames[FRAME_COLS * found + 1], st.frames[FRAME_COLS * found + 2]
    if fkind == F_G:
        gs = g.a[fnode] + findex % g.c[fnode]  # (a bounded graph's index: state + states * count)
        count = findex // g.c[fnode]
        if count + longest > g_counted[G_COUNTED_FIELDS * gs + G_ZONE_TOP]:
            return DEAD
        twin_node, twin_index = g_counted[G_COUNTED_FIELDS * gs + G_TWIN_NODE], g_counted[G_COUNTED_FIELDS * gs + G_TWIN_STATE]
    else:
        if findex + longest > g.c[fnode]:
            return DEAD
        twin_node, twin_index = node_twin[fnode], findex if findex < g.b[fnode] else g.b[fnode]
    for d in range(depth):  # the frames below `found`, innermost first
        chain[d] = fr
        fr = st.frames[FRAME_COLS * fr + 3]
    new = frame(st, fkind, twin_node, twin_index, st.frames[FRAME_COLS * found + 3])
    for d in range(depth - 1, -1, -1):
        f = chain[d]
        new = frame(st, st.frames[FRAME_COLS * f], st.frames[FRAME_COLS * f + 1], st.frames[FRAME_COLS * f + 2], new)
    new = item(st, st.items[ITEM_COLS * it], st.items[ITEM_COLS * it + 1], new)
    return -2 if st.meta[M_FAILED] else new


cdef int64_t chain_depth(const IR* g, const Store* st, const int64_t* g_counted, const int64_t* node_twin,
                         const int64_t* items, int64_t n_items) noexcept nogil:
    """The most frames below a counting frame among the items' continuations."""
    cdef int64_t most = 0, i, depth
    for i in range(n_items):
        if items[i] != ACCEPT and st.items[ITEM_COLS * items[i]] >= 0:
            counted_frame(g, st, g_counted, node_twin, st.items[ITEM_COLS * items[i] + 2], &depth)
            most = depth if depth > most else most
    return most


cdef int64_t twin_of(const IR* g, Store* st, Rows* r, const int64_t* g_counted, const int64_t* node_twin,
                     int64_t sid, int64_t longest) noexcept nogil:
    """The state that reads, for `longest` bytes, what state `sid` reads: each of its
    items whose continuation passes a counting frame in its zone continues from the
    twin's frame instead (see flat.FlatDFA.twin_of). DEAD where no item passes a
    counting frame, one passes one outside its zone, or the state holds ACCEPT or a
    free-bytes marker."""
    cdef int64_t n_items, i, it, got, n, twin = DEAD
    cdef bint twinned = False
    cdef const int64_t* items = set_items(st, st.state_set[sid], &n_items)
    for i in range(n_items):
        if items[i] == ACCEPT or st.items[ITEM_COLS * items[i]] < 0:
            return DEAD
    cdef int64_t depth = chain_depth(g, st, g_counted, node_twin, items, n_items)
    cdef int64_t* out = <int64_t*>malloc((n_items + depth + 1) * 8)
    if out == NULL:
        fail(st.meta, FAILED_MEMORY)
        return DEAD
    cdef int64_t* chain = out + n_items
    for i in range(n_items):
        it = items[i]
        got = twinned_item(g, st, g_counted, node_twin, it, longest, chain, &twinned)
        if got == DEAD or got == -2:
            free(out)
            return DEAD
        out[i] = got
    if twinned:
        sort_items(out, n_items)
        n = sorted_unique(out, n_items)
        twin = intern(st, r, out, n)
        if st.meta[M_FAILED]:
            twin = DEAD
    free(out)
    return twin


# ------------------------------------------------------------ entries from Python

def expand_entry(tuple ir_arrays, list store, table, expanded, loops, accepting, int64_t sid, int64_t max_items,
                 int64_t max_nesting):
    """Build state `sid`'s row (FlatDFA._build_row)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    with nogil:
        expand(&g, &st, &r, sid, max_items, max_nesting)
    return 0


def walk_entry(tuple ir_arrays, list store, table, expanded, loops, accepting, int64_t state, codes, path,
               int64_t max_items, int64_t max_nesting):
    """The state after the bytes `codes` from `state` (DEAD where they leave the
    language), in one call: through built rows, and by `step` where a row is not built.
    Where `path` is as long as `codes`, it gets the state after each byte. Where a step
    leads back to its state, the bytes that do so are found from its items
    (`known_loops`) and kept in the state's `loops` until its row is built (see
    FlatDFA.walk)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(table, expanded, loops, accepting)
    cdef const uint8_t* codes_ = <const uint8_t*>buffer_of(codes, 1, False)
    cdef int64_t n = len(codes), i, byte, nxt
    cdef bint record = len(path) == n
    cdef int64_t* path_ = <int64_t*>buffer_of(path, 8, True)
    cdef uint64_t bit
    with nogil:
        for i in range(n):
            byte = codes_[i]
            bit = (<uint64_t>1) << (byte & 63)
            if r.expanded[state]:
                state = r.table[256 * state + byte]
            elif not r.loops[4 * state + (byte >> 6)] & bit:
                nxt = step(&g, &st, &r, state, byte, max_items, max_nesting)
                if nxt == state:  # remembered: see the docstring
                    known_loops(&g, &st, &r, state, max_items, max_nesting)
                state = nxt
            if state < 0:  # (also where the call failed)
                state = DEAD
                break
            if record:
                path_[i] = state
    return state


def start_entry(tuple ir_arrays, list store, accepting, int64_t root, int64_t max_items, int64_t max_nesting):
    """The start state: the closure of the root."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(None, None, None, accepting)
    cdef int64_t ref, sid
    with nogil:
        ref = closure(&g, &st, root, DONE, max_items, max_nesting)
        sid = state_of_set(&st, &r, ref)
    return sid


def twin_entry(tuple ir_arrays, list store, g_counted, node_twin, accepting, int64_t sid, int64_t longest,
               int64_t max_items, int64_t max_nesting):
    """`twin_of` (FlatDFA.twin_of)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(None, None, None, accepting)
    cdef const int64_t* counted = <const int64_t*>buffer_of(g_counted, 8, False)
    cdef const int64_t* twins = <const int64_t*>buffer_of(node_twin, 8, False)
    with nogil:
        sid = twin_of(&g, &st, &r, counted, twins, sid, longest)
    return sid


def free_entry(tuple ir_arrays, list store, loops, accepting, int64_t sid):
    """The free bytes of state `sid` (4 x u64), and whether any is not one of its loops."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(None, None, loops, accepting)
    free_array = np.zeros(4, dtype=np.uint64)
    cdef uint64_t* free_ = <uint64_t*>buffer_of(free_array, 8, True)
    cdef bint beyond_loops
    with nogil:
        beyond_loops = free_bits(&g, &st, &r, sid, free_)
    return free_array, beyond_loops


def items_entry(list store, int64_t sid):
    """The item ids of state `sid` (a copy)."""
    cdef Store st = store_of(store)
    cdef int64_t n
    cdef const int64_t* items = set_items(&st, st.state_set[sid], &n)
    out = np.empty(n, dtype=np.int64)
    if n:
        memcpy(buffer_of(out, 8, True), items, n * 8)
    return out


def body_exit_entry(tuple ir_arrays, list store, accepting, int64_t sid, int64_t body, int64_t max_items,
                    int64_t max_nesting):
    """`body_exit` (FlatDFA.body_exit)."""
    cdef IR g = ir_of(ir_arrays)
    cdef Store st = store_of(store)
    cdef Rows r = rows_of(None, None, None, accepting)
    with nogil:
        sid = body_exit(&g, &st, &r, sid, body, max_items, max_nesting)
    return sid
